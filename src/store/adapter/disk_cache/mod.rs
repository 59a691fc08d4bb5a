//! An optional disk cache of fetched values, in front of a remote store and shared by
//! every mount of it: entries live under `DIR/<hash of the store URL>/` and are named by a
//! hash of the key, the range and the object's version (its ETag), so a changed object is
//! never served stale. An entry is filed under the version that came with its bytes (the
//! GET's own ETag), never under the one a HEAD gave before the GET. Writes go to a
//! temporary file renamed into place (a crash leaves no half entry); a hit refreshes the
//! entry's time; past the size budget the oldest entries go (LRU by modification time,
//! across all stores in DIR).
//!
//! Any number of processes share one folder. A miss takes an exclusive lock on one of
//! [`STRIPES`] lock files of its store (chosen by the entry's name) before it fetches, and
//! looks again once it holds it: of the processes (and threads) that miss one entry at
//! once, one fetches and the others read what it kept. The bytes the folder's entries
//! take are counted in its `.used` file, under whose lock an entry takes its room before
//! it is written (its temporary file made at full length, the oldest entries removed
//! first when it would pass the budget) and is renamed into place, so the folder never
//! holds more than its budget, temporary files included. An entry
//! another process is reading stays readable after its removal (POSIX keeps an open
//! file). A process killed while writing leaves only its temporary file, `.tmp-PID-N`,
//! which the next cache opened on the folder removes once no process PID runs; the count
//! is made again from the folder then.
//!
//! A value that never changes and is known by one name wherever it is stored (an
//! Icechunk chunk object: [`Store::read_named`]) is kept in the folder's `named/` store
//! under that name, with no HEAD asked: every repository naming the object shares it.
//!
//! The version of each object is asked for once (a HEAD), and then remembered: for the
//! process's life, or with a refresh interval for that long. A reading of the hierarchy
//! (a node's metadata, an array's chunks) goes through [`Store::learned_since`]: a view
//! of the cache that asks again for what was learned before that reading began, so that
//! what it reads is as new as the reading, not up to an interval older.

mod entry;
mod folder;
mod head;
mod since;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use sha2::{Digest, Sha256};

use crate::error::Result;
use crate::store::{ByteRange, Caps, Head, Listing, Store, Value};
use folder::{entries, hex, io, remove_orphans, Count};
use head::Asking;

/// Versions remembered per process at most (the set starts over when full): a value read
/// again in the same mount is not asked about again (the store is taken as unchanged while
/// read), or, with a refresh interval, not again within the interval.
const MAX_KNOWN: usize = 1 << 20;
/// Eviction brings the cache down to this fraction of its budget (in percent).
const LOW_WATER: u64 = 90;
/// The folder of values kept by their own names ([`Store::read_named`]), shared by stores.
const NAMED: &str = "named";
/// The file counting the bytes of the entries in the folder, and its lock.
const USED: &str = ".used";
/// Lock files per store folder that misses of different entries take (by the entry's
/// name): few enough to keep, enough that unrelated fetches seldom wait on each other.
const STRIPES: usize = 1024;

/// A store whose fetched values are kept on disk.
pub struct DiskCache(Arc<Cache>);

/// Views handed out at once, by the reading they serve: one reading's arrays share one
/// (a view names an array's decoded units in caches, by its address).
const KEPT_VIEWS: usize = 4096;

struct Cache {
    inner: Arc<dyn Store>,
    /// The store's folder of entries.
    dir: PathBuf,
    root: PathBuf,
    budget: u64,
    /// Each key's size and version, and when they were asked for.
    known: Mutex<HashMap<String, (Instant, Option<Head>)>>,
    /// The questions for versions under way, by key.
    asking: Mutex<HashMap<String, Arc<Asking>>>,
    /// How long a version asked for holds (`None`: for the process's life).
    revalidate: Option<Duration>,
    /// The views handed out lately, by the start of their reading.
    views: Mutex<lru::LruCache<Instant, Arc<dyn Store>>>,
}

impl DiskCache {
    /// Cache `inner` in `root` (created), with at most `budget` bytes in the folder.
    /// `None` when the store has no URL to share entries by (a local store needs none).
    pub fn new(inner: Arc<dyn Store>, root: &Path, budget: u64) -> Result<Option<DiskCache>> {
        let Some(location) = inner.caps().location else {
            return Ok(None);
        };
        let dir = root.join(hex(&Sha256::digest(location.as_bytes())[..16]));
        for folder in [&dir, &root.join(NAMED)] {
            std::fs::create_dir_all(folder.join(".locks")).map_err(|e| io(folder, e))?;
        }
        {
            // Made again from the folder: what ended processes left is gone or counted.
            let count = Count::lock(root);
            remove_orphans(root);
            if let Some(count) = count {
                count.set(entries(root).iter().map(|e| e.1).sum());
            }
        }
        let views = std::num::NonZeroUsize::new(KEPT_VIEWS).unwrap_or(std::num::NonZeroUsize::MIN);
        Ok(Some(DiskCache(Arc::new(Cache {
            inner,
            dir,
            root: root.to_path_buf(),
            budget,
            known: Mutex::new(HashMap::new()),
            asking: Mutex::new(HashMap::new()),
            revalidate: None,
            views: Mutex::new(lru::LruCache::new(views)),
        }))))
    }

    /// Ask for an object's version again once `interval` has passed since it was last
    /// asked for (a mount's refresh interval), and for every reading that began after it
    /// was asked for ([`Store::learned_since`]).
    pub fn revalidating(mut self, interval: Option<Duration>) -> DiskCache {
        if let Some(cache) = Arc::get_mut(&mut self.0) {
            cache.revalidate = interval;
        }
        self
    }
}

impl Store for DiskCache {
    fn read(&self, key: &str, range: Option<ByteRange>) -> Result<Option<Value>> {
        self.0.cached(key, range, None)
    }

    fn read_named(&self, key: &str, range: Option<ByteRange>, name: &str) -> Result<Option<Value>> {
        self.0.named(key, range, name)
    }

    /// Writes go to the store beneath: entries are filed by the version they were read
    /// at, so a rewritten value is fetched again by the next reading that asks.
    fn writer(&self) -> Option<std::sync::Arc<dyn crate::store::write::Writer>> {
        self.0.inner.writer()
    }

    fn list_dir(&self, prefix: &str) -> Result<Listing> {
        self.0.inner.list_dir(prefix)
    }

    fn head(&self, key: &str) -> Result<Option<Head>> {
        self.0.head(key, None)
    }

    fn will_need(&self, key: &str) {
        self.0.inner.will_need(key)
    }

    fn caps(&self) -> Caps {
        self.0.inner.caps()
    }

    fn refresh(&self, max_age: Option<std::time::Duration>) -> Result<()> {
        self.0.inner.refresh(max_age)
    }

    fn as_of(&self) -> Option<Instant> {
        self.0.inner.as_of()
    }

    fn learned_since(&self, at: Instant) -> Option<Arc<dyn Store>> {
        Cache::since(&self.0, at)
    }

    fn identity(&self, key: &str) -> Option<String> {
        self.0.inner.identity(key)
    }

    fn names_bytes(&self) -> bool {
        self.0.inner.names_bytes()
    }
}
