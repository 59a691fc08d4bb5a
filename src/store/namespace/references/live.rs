//! A reference set rewritten while mounted (a kerchunk JSON republished with the day's
//! files appended, a Parquet folder flushed again): with a refresh interval, what the set
//! was read from is looked at once per interval, and the set read again when it changed.
//! What was read from one reading of the set goes on being read through that reading
//! ([`Store::at_version`]), so an open file never mixes two.
//!
//! What is looked at: a local JSON file's modification time and size; a JSON file at a
//! URL, its version (ETag); a Parquet folder, the version of its `.zmetadata` (kerchunk
//! writes it last, at every flush) and of each `refs.N.parq` file the reading holds (at
//! most a few: one request each), and whether a file the reading read again had changed.
//! A Parquet set is read lazily, a references file at a time: a reading that is no longer
//! the newest keeps every file it has read, for the files still open on it; a file it had
//! not read yet is read as it is then.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};

use super::{ReferenceStore, Refs};
use crate::error::{Error, Result};
use crate::store::location::Location;
use crate::store::{ByteRange, Caps, Head, Listing, ReadAgain, Store, StoreConfig, Value, Version};

/// Where a reference set is read from.
pub enum Origin {
    /// A local JSON file.
    File(PathBuf),
    /// A JSON file at a URL: `name` in the store of its folder.
    Object {
        folder: Arc<dyn Store>,
        name: String,
        location: Location,
    },
    /// A Parquet folder (local or at a URL), as a store.
    Parquet {
        folder: Arc<dyn Store>,
        location: Location,
    },
}

/// Readings of sets, each a version of its own: two readings of a Parquet folder may
/// share the version of their `.zmetadata`.
static READINGS: AtomicU64 = AtomicU64::new(1);

/// The set `set`, as one reading of its origin: its version is its own.
fn reading(mut set: ReferenceStore) -> Arc<ReferenceStore> {
    let n = READINGS.fetch_add(1, Ordering::Relaxed);
    set.version = Version::Reading(Box::new(set.version.clone()), n);
    Arc::new(set)
}

/// The version of what `set` was read from.
fn source_version(set: &ReferenceStore) -> &Version {
    match &set.version {
        Version::Reading(v, _) => v,
        v => v,
    }
}

impl Origin {
    /// The store to look at `folder` through, as new as a look begun at `since` (not
    /// what a cache learned before).
    fn fresh(folder: &Arc<dyn Store>, since: Instant) -> Arc<dyn Store> {
        folder
            .learned_since(since)
            .unwrap_or_else(|| folder.clone())
    }

    /// The set read now (a look begun at `since`); `None` when the origin no longer
    /// holds a reference set.
    fn read(&self, since: Instant, cfg: &StoreConfig) -> Result<Option<ReferenceStore>> {
        match self {
            Origin::File(path) => ReferenceStore::from_file(path, cfg),
            Origin::Object {
                folder,
                name,
                location,
            } => match Self::fresh(folder, since).read(name, None)? {
                Some(value) => {
                    ReferenceStore::parse(location, value.bytes, value.version, cfg).map(Some)
                }
                None => Ok(None),
            },
            Origin::Parquet { folder, location } => {
                ReferenceStore::parquet(Self::fresh(folder, since), location, cfg)
            }
        }
    }

    /// Whether what `set` was read from has changed (a look begun at `since`).
    fn changed(&self, set: &ReferenceStore, since: Instant) -> Result<bool> {
        let was = source_version(set);
        match self {
            Origin::File(path) => {
                let meta = std::fs::metadata(path).map_err(|source| Error::Io {
                    key: path.display().to_string(),
                    source,
                })?;
                Ok(&Version::of_file(&meta) != was)
            }
            Origin::Object { folder, name, .. } => {
                let now = Self::fresh(folder, since).head(name)?;
                Ok(now.is_none_or(|h| &h.version != was))
            }
            Origin::Parquet { folder, .. } => {
                let Refs::Parquet(refs) = &set.refs else {
                    return Ok(true);
                };
                if refs.changed() {
                    return Ok(true);
                }
                let store = Self::fresh(folder, since);
                let zmetadata = store.head(".zmetadata")?;
                if zmetadata.is_none_or(|h| &h.version != refs.zmetadata_version()) {
                    return Ok(true);
                }
                for (key, version) in refs.held() {
                    let now = store.head(&key)?.map_or(Version::Unknown, |h| h.version);
                    if now != version {
                        return Ok(true);
                    }
                }
                Ok(false)
            }
        }
    }

    /// The origin, for messages.
    fn label(&self) -> String {
        match self {
            Origin::File(path) => path.display().to_string(),
            Origin::Object { location, .. } | Origin::Parquet { location, .. } => {
                location.to_string()
            }
        }
    }
}

pub struct LiveReferences {
    origin: Origin,
    cfg: StoreConfig,
    current: RwLock<Arc<ReferenceStore>>,
    /// Readings by version: the current one and the one before it (an array opened
    /// from an earlier one holds it for as long as it lives).
    kept: Mutex<HashMap<Version, Arc<ReferenceStore>>>,
    /// When the origin was last looked at.
    checked: ReadAgain,
}

impl LiveReferences {
    /// The set read from `origin` as `first`, by a reading begun at `started`.
    pub fn new(
        origin: Origin,
        cfg: StoreConfig,
        first: ReferenceStore,
        started: Instant,
    ) -> LiveReferences {
        let first = reading(first);
        LiveReferences {
            origin,
            cfg,
            kept: Mutex::new(HashMap::from([(first.version().clone(), first.clone())])),
            current: RwLock::new(first),
            checked: ReadAgain::at(started),
        }
    }

    fn current(&self) -> Arc<ReferenceStore> {
        self.current.read().clone()
    }
}

impl Store for LiveReferences {
    fn read(&self, key: &str, range: Option<ByteRange>) -> Result<Option<Value>> {
        self.current().read(key, range)
    }

    fn list_dir(&self, prefix: &str) -> Result<Listing> {
        self.current().list_dir(prefix)
    }

    fn head(&self, key: &str) -> Result<Option<Head>> {
        self.current().head(key)
    }

    fn will_need(&self, key: &str) {
        self.current().will_need(key)
    }

    fn caps(&self) -> Caps {
        self.current().caps()
    }

    /// The set read again when its origin changed; an origin that cannot be read now, or
    /// no longer holds a reference set, leaves the reading there was (one log line).
    fn refresh(&self, max_age: Option<Duration>) -> Result<()> {
        let Some(started) = self.checked.due(max_age) else {
            return Ok(());
        };
        let label = self.origin.label();
        let current = self.current();
        if !self.origin.changed(&current, started)? {
            self.checked.read(started);
            return Ok(());
        }
        let next = match self.origin.read(started, &self.cfg) {
            Ok(Some(next)) => reading(next),
            Ok(None) => {
                log::warn!("refresh: {label}: no longer a reference set; kept as read before");
                return Ok(());
            }
            Err(e) => {
                log::warn!("refresh: {e}; kept as read before");
                return Ok(());
            }
        };
        log::info!("refresh: {label} read again ({})", source_version(&next));
        // The reading before keeps what it read, for the files open on it.
        if let Refs::Parquet(refs) = &current.refs {
            refs.keep_all();
        }
        {
            let mut kept = self.kept.lock();
            kept.retain(|_, r| Arc::ptr_eq(r, &current));
            kept.insert(next.version().clone(), next.clone());
        }
        *self.current.write() = next;
        self.checked.read(started);
        Ok(())
    }

    fn as_of(&self) -> Option<Instant> {
        Some(self.checked.as_of())
    }

    fn at_version(&self, version: &Version) -> Option<Arc<dyn Store>> {
        // A v2 node's version joins those of its documents (`.zarray`+`.zattrs`), all
        // inline values of one reading.
        let reading = self.kept.lock().get(version.first()).cloned()?;
        Some(reading)
    }
}
