//! An Icechunk repository as a store, through the `icechunk` crate: it resolves a
//! version (a branch tip, a tag or a snapshot) to its nodes and chunk references, and
//! hands out the Zarr v3 documents and the stored chunk bytes; zarrfs decodes them with
//! its own codec chain. Every value carries the snapshot it was read from as its
//! version, so that caches keep two versions of a dataset apart. With `--versions`, the
//! root also holds `@branches/NAME/`, `@tags/NAME/` and `@snapshots/ID/`, each the tree of
//! that version, opened at first use. A chunk stored in the repository is read by
//! zarrfs from its chunk object (`chunks/ID`, a range of it) through the store of the
//! repository's folder or bucket, with that store's request limits, retries and disk
//! cache; the crate only looks up where it is. Virtual chunks (byte ranges of NetCDF/HDF5 files)
//! are read by zarrfs itself, as a reference set's chunks are ([`Targets`]): only under
//! the allowed prefixes (the repository's virtual chunk containers, narrowed or added to
//! with `--virtual-prefix`), neighbouring chunks of a remote file in one request. With
//! `--versions`, a chunk's identity (its chunk object and range, or its file, range and
//! checksum) names it in caches shared by versions, so a chunk two versions share is
//! decoded once.
//!
//! A branch moves: with a refresh interval its tip is read again once per interval (and
//! at `zarrfs refresh`), and the tree follows it. What was read at a snapshot goes on
//! being read at that snapshot ([`Store::at_version`]), so an open file never mixes two.

mod chunks;
mod storage;
mod versions;
mod write;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures::TryStreamExt;
use icechunk::repository::VersionInfo;
use icechunk::Repository;
use parking_lot::{Mutex, RwLock};

use chunks::{chunk_of, not_found, payload, virtual_targets, Repo};
use icechunk::format::manifest::ChunkPayload;
use versions::{
    checkout, reference_version, snapshot_version, Checkout, BRANCHES, SNAPSHOTS, TAGS,
};

use crate::error::{Error, Result};
use crate::store::source::folder::FolderStore;
use crate::store::source::remote::runtime::block_on;
use crate::store::{
    ByteRange, Caps, Head, Listing, ReadAgain, Store, StoreConfig, StoreError, Value, Version,
};

/// The metadata of a version that holds no root group.
pub(super) const EMPTY_GROUP: &[u8] = br#"{"zarr_format":3,"node_type":"group","attributes":{}}"#;

pub struct IcechunkStore {
    label: String,
    shared: Arc<Repo>,
    repo: Arc<Repository>,
    /// What writes the branch the tree follows (none for a tag or a snapshot).
    writer: Option<Arc<write::BranchWriter>>,
    /// The version the mount's own tree shows (the tip of `follows` when last read).
    default: RwLock<Arc<Checkout>>,
    /// The branch the default tree follows; none for a tag or a snapshot (they never
    /// move).
    follows: Option<String>,
    /// When the branches' tips were last read.
    tips_read: ReadAgain,
    all: bool,
    /// Versions opened so far under the version folders, by folder (`@tags/v1`).
    opened: Mutex<BTreeMap<String, Arc<Checkout>>>,
    /// Versions opened, by snapshot id (for [`Store::at_version`]).
    snapshots: Mutex<HashMap<String, Arc<Checkout>>>,
    caps: Caps,
}

/// A failure of the `icechunk` crate doing `what` for `label`.
fn failed(label: &str, what: &str, e: impl std::error::Error + Send + Sync + 'static) -> Error {
    StoreError::Icechunk {
        what: what.to_string(),
        source: Box::new(e),
    }
    .at(label)
}

impl IcechunkStore {
    /// The repository in local folder `dir`, at the version `cfg` chooses (default: the
    /// tip of branch `main`).
    pub fn open_local(dir: &Path, cfg: &StoreConfig) -> Result<IcechunkStore> {
        let label = dir.display().to_string();
        let path = dir.to_path_buf();
        let storage = block_on(async move { icechunk::new_local_filesystem_storage(&path).await })?
            .map_err(|e| failed(&label, "storage", e))?;
        let objects = Arc::new(FolderStore::open(dir)?);
        Self::open(label, storage, objects, cfg, Caps::local())
    }

    /// The repository at `url` (`s3://BUCKET/PREFIX`, `gs://BUCKET/PREFIX`,
    /// `az://CONTAINER/PREFIX`, or an
    /// `http(s)://` folder), with the store options of `cfg` (`endpoint`, `region`,
    /// `allow_http`, `account_name`, `use_emulator`, ..., and `--anonymous`); `objects` is
    /// the store of the same URL, which its chunk objects are read from.
    pub fn open_url(
        url: &url::Url,
        cfg: &StoreConfig,
        objects: Arc<dyn Store>,
    ) -> Result<IcechunkStore> {
        let label = url.to_string();
        let storage = storage::for_url(url, cfg, &label)?;
        let caps = Caps {
            concurrency: cfg.max_requests,
            // Inner chunks of a shard are read together, and readahead spans many
            // requests in flight.
            request_bytes: crate::store::REQUEST_BYTES,
            location: Some(label.clone()),
        };
        Self::open(label, storage, objects, cfg, caps)
    }

    fn open(
        label: String,
        storage: Arc<dyn icechunk::Storage + Send + Sync>,
        objects: Arc<dyn Store>,
        cfg: &StoreConfig,
        caps: Caps,
    ) -> Result<IcechunkStore> {
        // What the store answers dates from before the branch's tip is read.
        let started = std::time::Instant::now();
        let repo = block_on(async move { Repository::open(storage).execute().await })?
            .map_err(|e| failed(&label, "open", e))?;
        let shared = Arc::new(virtual_targets(&label, &repo, objects, cfg)?);
        let choice = &cfg.icechunk;
        let version = match (&choice.reference, &choice.snapshot) {
            (Some(_), Some(_)) => {
                return Err(Error::Invalid("--ref and --snapshot: give one".into()))
            }
            (None, Some(id)) => snapshot_version(&label, id)?,
            (Some(name), None) => reference_version(&label, &repo, name)?,
            (None, None) => VersionInfo::BranchTipRef("main".into()),
        };
        let follows = match &version {
            VersionInfo::BranchTipRef(name) => Some(name.clone()),
            _ => None,
        };
        let default = Arc::new(checkout(&label, &repo, version)?);
        let repo = Arc::new(repo);
        let writer = follows
            .as_deref()
            .map(|branch| Arc::new(write::BranchWriter::new(&label, repo.clone(), branch)));
        let store = IcechunkStore {
            label,
            shared,
            repo,
            writer,
            default: RwLock::new(default.clone()),
            follows,
            tips_read: ReadAgain::at(started),
            all: choice.all,
            opened: Mutex::new(BTreeMap::new()),
            snapshots: Mutex::new(HashMap::new()),
            caps,
        };
        store.keep(&default);
        Ok(store)
    }
}

/// The names below `prefix` at version `at` (as `inner` there), sorted.
fn list_at(label: &str, at: &Checkout, prefix: &str, inner: &str) -> Result<Listing> {
    let items: Vec<icechunk::store::ListDirItem> = match block_on(async {
        let stream = at.store.list_dir_items(inner).await?;
        stream.try_collect().await
    })? {
        Ok(items) => items,
        Err(e) if not_found(&e) => Vec::new(),
        Err(e) => return Err(failed(&format!("{label}/{prefix}"), "read", e)),
    };
    let mut listing = Listing::default();
    for item in items {
        match item {
            icechunk::store::ListDirItem::Key(k) => listing.keys.push(k),
            icechunk::store::ListDirItem::Prefix(p) => listing.prefixes.push(p),
        }
    }
    listing.keys.sort();
    listing.prefixes.sort();
    listing.prefixes.dedup();
    Ok(listing)
}

/// The size and version of `key` at version `at` (as `inner` there).
fn head_at(label: &str, at: &Checkout, key: &str, inner: &str) -> Result<Option<Head>> {
    // A chunk key: the size its manifest entry gives, none where the snapshot holds no
    // such chunk.
    if chunk_of(inner).is_some() {
        let size = match payload(at, inner) {
            None => return Ok(None),
            Some((_, _, ChunkPayload::Inline(bytes))) => Some(bytes.len() as u64),
            Some((_, _, ChunkPayload::Ref(chunk))) => Some(chunk.length),
            Some((_, _, ChunkPayload::Virtual(chunk))) => Some(chunk.length),
            // A kind of chunk this version does not know: the crate's own size.
            Some(_) => None,
        };
        if let Some(size) = size {
            return Ok(Some(Head {
                size,
                version: at.version.clone(),
            }));
        }
    }
    match block_on(at.store.getsize(inner))? {
        Ok(size) => Ok(Some(Head {
            size,
            version: at.version.clone(),
        })),
        Err(e) if not_found(&e) => Ok(None),
        Err(e) => Err(failed(&format!("{label}/{key}"), "read", e)),
    }
}

impl Store for IcechunkStore {
    fn read(&self, key: &str, range: Option<ByteRange>) -> Result<Option<Value>> {
        let Some((at, inner)) = self.route(key)? else {
            return Ok(None);
        };
        self.shared.read_at(&at, key, inner, range)
    }

    fn list_dir(&self, prefix: &str) -> Result<Listing> {
        let prefix = prefix.trim_end_matches('/');
        let mut listing = Listing::default();
        if self.all && [BRANCHES, TAGS, SNAPSHOTS].contains(&prefix) {
            listing.prefixes = self.names(prefix)?.into_iter().collect();
            return Ok(listing);
        }
        let Some((at, inner)) = self.route(prefix)? else {
            return Ok(listing);
        };
        let mut listing = list_at(&self.label, &at, prefix, inner)?;
        if self.all && prefix.is_empty() {
            listing
                .prefixes
                .extend([BRANCHES, TAGS, SNAPSHOTS].map(String::from));
            listing.prefixes.sort();
            listing.prefixes.dedup();
        }
        Ok(listing)
    }

    fn head(&self, key: &str) -> Result<Option<Head>> {
        let Some((at, inner)) = self.route(key)? else {
            return Ok(None);
        };
        head_at(&self.label, &at, key, inner)
    }

    fn will_need(&self, _key: &str) {}

    fn caps(&self) -> Caps {
        self.caps.clone()
    }

    /// The tip of the branch the tree follows read again, and the branch folders opened
    /// under `--versions` dropped where their branch moved or is gone (opened again at
    /// their next use).
    fn refresh(&self, max_age: Option<Duration>) -> Result<()> {
        // One reader reads the tips; the others go on with what is there.
        let Some(started) = self.tips_read.due(max_age) else {
            return Ok(());
        };
        if let Some(branch) = &self.follows {
            let tip = self.tip(branch)?;
            if tip != self.default.read().snapshot {
                let next = self.at_snapshot(&tip)?;
                log::info!(
                    "refresh: branch {branch} of {} moved to snapshot {tip}",
                    self.label
                );
                *self.default.write() = next;
            }
        }
        let branches: Vec<(String, String)> = self
            .opened
            .lock()
            .iter()
            .filter_map(|(folder, at)| {
                let name = folder.strip_prefix(BRANCHES)?.strip_prefix('/')?;
                Some((name.to_string(), at.snapshot.clone()))
            })
            .collect();
        for (name, snapshot) in branches {
            if self.tip(&name).ok().as_ref() != Some(&snapshot) {
                self.opened.lock().remove(&format!("{BRANCHES}/{name}"));
            }
        }
        self.tips_read.read(started);
        Ok(())
    }

    fn as_of(&self) -> Option<std::time::Instant> {
        Some(self.tips_read.as_of())
    }

    /// The branch the tree follows takes commits (a tag or a snapshot does not).
    fn writer(&self) -> Option<Arc<dyn crate::store::write::Writer>> {
        self.writer
            .clone()
            .map(|w| w as Arc<dyn crate::store::write::Writer>)
    }

    fn at_version(&self, version: &Version) -> Option<Arc<dyn Store>> {
        let id = version.snapshot()?;
        match self.at_snapshot(id) {
            Ok(at) => Some(Arc::new(AtSnapshot {
                shared: self.shared.clone(),
                at,
                all: self.all,
                caps: self.caps.clone(),
            })),
            Err(e) => {
                log::warn!("{e}");
                None
            }
        }
    }
}

/// The repository at one snapshot: what was read at it goes on being read there, the
/// branch it came from moving or not. Keys may name a version folder (`@tags/v1/...`):
/// the snapshot is that folder's.
struct AtSnapshot {
    shared: Arc<Repo>,
    at: Arc<Checkout>,
    all: bool,
    caps: Caps,
}

impl AtSnapshot {
    fn inner<'k>(&self, key: &'k str) -> &'k str {
        if self.all && key.starts_with('@') {
            key.splitn(3, '/').nth(2).unwrap_or("")
        } else {
            key
        }
    }
}

impl Store for AtSnapshot {
    fn read(&self, key: &str, range: Option<ByteRange>) -> Result<Option<Value>> {
        self.shared.read_at(&self.at, key, self.inner(key), range)
    }

    fn list_dir(&self, prefix: &str) -> Result<Listing> {
        let prefix = prefix.trim_end_matches('/');
        list_at(&self.shared.label, &self.at, prefix, self.inner(prefix))
    }

    fn head(&self, key: &str) -> Result<Option<Head>> {
        head_at(&self.shared.label, &self.at, key, self.inner(key))
    }

    fn identity(&self, key: &str) -> Option<String> {
        self.shared.identity(&self.at, self.inner(key))
    }

    /// With `--versions` only: there, another version's file may read a shared chunk
    /// next, so the cache names it by its identity and keeps it once served (see
    /// `read::view`). One version shown at a time has no such reader, and keeping
    /// what was served would hold a whole array read through in memory.
    fn names_bytes(&self) -> bool {
        self.all
    }

    fn will_need(&self, _key: &str) {}

    fn caps(&self) -> Caps {
        self.caps.clone()
    }
}
