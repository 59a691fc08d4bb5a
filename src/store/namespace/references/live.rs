//! A local reference file that is rewritten while mounted (a kerchunk JSON republished
//! with the day's files appended): with a refresh interval the file's version (its
//! modification time and size) is looked at once per interval, and the set read again
//! when it changed. What was read from one reading of the set goes on being read through
//! that reading ([`Store::at_version`]), so an open file never mixes two.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};

use super::ReferenceStore;
use crate::error::{Error, Result};
use crate::store::{ByteRange, Caps, Head, Listing, ReadAgain, Store, StoreConfig, Value, Version};

pub struct LiveReferences {
    path: PathBuf,
    cfg: StoreConfig,
    current: RwLock<Arc<ReferenceStore>>,
    /// Readings by version: the current one and the one before it (an array opened
    /// from an earlier one holds it for as long as it lives).
    kept: Mutex<HashMap<Version, Arc<ReferenceStore>>>,
    /// When the file's version was last looked at.
    checked: ReadAgain,
}

impl LiveReferences {
    /// The reference file at `path`, first read as `first`.
    pub fn new(path: PathBuf, cfg: StoreConfig, first: ReferenceStore) -> LiveReferences {
        let first = Arc::new(first);
        LiveReferences {
            path,
            cfg,
            kept: Mutex::new(HashMap::from([(first.version().clone(), first.clone())])),
            current: RwLock::new(first),
            checked: ReadAgain::now(),
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

    /// The set read again when its file changed; a file that cannot be read now, or no
    /// longer holds a reference set, leaves the reading there was (one log line).
    fn refresh(&self, max_age: Option<Duration>) -> Result<()> {
        let Some(started) = self.checked.due(max_age) else {
            return Ok(());
        };
        let label = self.path.display().to_string();
        let meta = std::fs::metadata(&self.path).map_err(|source| Error::Io {
            key: label.clone(),
            source,
        })?;
        if &Version::of_file(&meta) == self.current().version() {
            self.checked.read(started);
            return Ok(());
        }
        let next = match ReferenceStore::from_file(&self.path, &self.cfg) {
            Ok(Some(next)) => Arc::new(next),
            Ok(None) => {
                log::warn!("refresh: {label}: no longer a reference set; kept as read before");
                return Ok(());
            }
            Err(e) => {
                log::warn!("refresh: {e}; kept as read before");
                return Ok(());
            }
        };
        log::info!("refresh: {label} read again ({:?})", next.version());
        {
            let mut kept = self.kept.lock();
            let current = self.current();
            kept.retain(|_, r| Arc::ptr_eq(r, &current));
            kept.insert(next.version().clone(), next.clone());
        }
        *self.current.write() = next;
        self.checked.read(started);
        Ok(())
    }

    fn as_of(&self) -> Option<std::time::Instant> {
        Some(self.checked.as_of())
    }

    fn at_version(&self, version: &Version) -> Option<Arc<dyn Store>> {
        // A v2 node's version joins those of its documents (`.zarray`+`.zattrs`), all
        // inline values of one reading.
        let reading = self.kept.lock().get(version.first()).cloned()?;
        Some(reading)
    }
}
