//! An optional disk cache of fetched values, in front of a remote store and shared by
//! every mount of it: entries live under `DIR/<hash of the store URL>/` and are named by a
//! hash of the key, the range and the object's version (its ETag), so a changed object is
//! never served stale. An entry is filed under the version that came with its bytes (the
//! GET's own ETag), never under the one a HEAD gave before the GET. Writes go to a temporary file renamed into place (a crash leaves no
//! half entry); a hit refreshes the entry's time; past the size budget the oldest entries
//! go (LRU by modification time, across all stores in DIR).
//!
//! Any number of processes share one folder. A miss takes an exclusive lock on one of
//! [`STRIPES`] lock files of its store (chosen by the entry's name) before it fetches, and
//! looks again once it holds it: of the processes (and threads) that miss one entry at
//! once, one fetches and the others read what it kept. The budget is kept by whichever
//! process finds it exceeded, under the folder's `.evict.lock` (another process evicting
//! is left to it); an entry another process is reading stays readable after its removal
//! (POSIX keeps an open file). A process killed while writing leaves only its temporary
//! file, `.tmp-PID-N`, which the next cache opened on the folder removes once no process
//! PID runs.
//!
//! The version of each object is asked for once (a HEAD), and then remembered: for the
//! process's life, or with a refresh interval for that long. A reading of the hierarchy
//! (a node's metadata, an array's chunks) goes through [`Store::learned_since`]: a view
//! of the cache that asks again for what was learned before that reading began, so that
//! what it reads is as new as the reading, not up to an interval older.

use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use parking_lot::Mutex;
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::store::{ByteRange, Caps, Head, Listing, Store, Value, Version};

/// Versions remembered per process at most (the set starts over when full): a value read
/// again in the same mount is not asked about again (the store is taken as unchanged while
/// read), or, with a refresh interval, not again within the interval.
const MAX_KNOWN: usize = 1 << 20;
/// Eviction brings the cache down to this fraction of its budget (in percent).
const LOW_WATER: u64 = 90;
/// Lock files per store folder that misses of different entries take (by the entry's
/// name): few enough to keep, enough that unrelated fetches seldom wait on each other.
const STRIPES: usize = 1024;

/// A store whose fetched values are kept on disk.
pub struct DiskCache(Arc<Cache>);

/// The cache as seen by one reading of the hierarchy: versions learned before `since`
/// are asked for again (see [`Store::learned_since`]).
struct Since {
    cache: Arc<Cache>,
    since: Instant,
}

/// Views handed out at once, by the reading they serve: one reading's arrays share one
/// (a view names an array's decoded units in caches, by its address).
const KEPT_VIEWS: usize = 4096;

struct Cache {
    inner: Arc<dyn Store>,
    dir: PathBuf,
    root: PathBuf,
    budget: u64,
    /// Bytes in the whole cache folder, as last counted plus what this process added.
    used: AtomicU64,
    /// Each key's size and version, and when they were asked for.
    known: Mutex<HashMap<String, (Instant, Option<Head>)>>,
    /// How long a version asked for holds (`None`: for the process's life).
    revalidate: Option<Duration>,
    evicting: Mutex<()>,
    /// The views handed out lately, by the start of their reading.
    views: Mutex<lru::LruCache<Instant, Arc<dyn Store>>>,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn io(path: &Path, source: std::io::Error) -> Error {
    Error::Io {
        key: path.display().to_string(),
        source,
    }
}

/// Every entry file under `root` with its size and modification time.
fn entries(root: &Path) -> Vec<(PathBuf, u64, SystemTime)> {
    let mut out = Vec::new();
    let Ok(stores) = std::fs::read_dir(root) else {
        return out;
    };
    for store in stores.flatten() {
        let Ok(files) = std::fs::read_dir(store.path()) else {
            continue;
        };
        for file in files.flatten() {
            let Ok(meta) = file.metadata() else { continue };
            if meta.is_file() && !file.file_name().to_string_lossy().starts_with(".tmp") {
                let time = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
                out.push((file.path(), meta.len(), time));
            }
        }
    }
    out
}

/// Remove the temporary files of processes that no longer run (killed while writing an
/// entry) from every store folder under `root`.
fn remove_orphans(root: &Path) {
    let Ok(stores) = std::fs::read_dir(root) else {
        return;
    };
    for store in stores.flatten() {
        let Ok(files) = std::fs::read_dir(store.path()) else {
            continue;
        };
        for file in files.flatten() {
            let name = file.file_name();
            let Some(pid) = name
                .to_str()
                .and_then(|n| n.strip_prefix(".tmp-"))
                .and_then(|rest| rest.split('-').next())
                .and_then(|pid| pid.parse::<u32>().ok())
            else {
                continue;
            };
            // This process has written none yet: one of its number is a dead one's.
            let gone = pid == std::process::id() || !Path::new(&format!("/proc/{pid}")).exists();
            if gone && std::fs::remove_file(file.path()).is_ok() {
                log::debug!(
                    "disk cache: removed {} of a process that ended",
                    file.path().display()
                );
            }
        }
    }
}

/// An exclusive lock on `path` (created), held until the file is dropped; `None` when it
/// cannot be taken (the caller goes on unlocked: at worst an entry is fetched twice).
fn lock_file(path: &Path, wait: bool) -> Option<File> {
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| log::debug!("disk cache lock {}: {e}", path.display()))
        .ok()?;
    let locked = if wait {
        file.lock().is_ok()
    } else {
        file.try_lock().is_ok()
    };
    locked.then_some(file)
}

impl DiskCache {
    /// Cache `inner` in `root` (created), with at most `budget` bytes in the folder.
    /// `None` when the store has no URL to share entries by (a local store needs none).
    pub fn new(inner: Arc<dyn Store>, root: &Path, budget: u64) -> Result<Option<DiskCache>> {
        let Some(location) = inner.caps().location else {
            return Ok(None);
        };
        let dir = root.join(hex(&Sha256::digest(location.as_bytes())[..16]));
        std::fs::create_dir_all(dir.join(".locks")).map_err(|e| io(&dir, e))?;
        remove_orphans(root);
        let used = entries(root).iter().map(|e| e.1).sum();
        let views = std::num::NonZeroUsize::new(KEPT_VIEWS).unwrap_or(std::num::NonZeroUsize::MIN);
        Ok(Some(DiskCache(Arc::new(Cache {
            inner,
            dir,
            root: root.to_path_buf(),
            budget,
            used: AtomicU64::new(used),
            known: Mutex::new(HashMap::new()),
            revalidate: None,
            evicting: Mutex::new(()),
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

impl Cache {
    /// The object's size and version as this process last asked of it: once for the
    /// process's life, or once per refresh interval, and not before `since` when given.
    fn head(&self, key: &str, since: Option<Instant>) -> Result<Option<Head>> {
        if let Some((asked, v)) = self.known.lock().get(key) {
            let fresh = self.revalidate.is_none_or(|d| asked.elapsed() < d)
                && since.is_none_or(|since| *asked >= since);
            if fresh {
                return Ok(v.clone());
            }
        }
        let asked = Instant::now();
        let v = self.inner.head(key)?;
        let mut known = self.known.lock();
        if known.len() >= MAX_KNOWN {
            known.clear();
        }
        known.insert(key.to_string(), (asked, v.clone()));
        Ok(v)
    }

    fn entry_path(&self, key: &str, range: Option<ByteRange>, version: &Version) -> PathBuf {
        let mut h = Sha256::new();
        h.update(key.as_bytes());
        h.update([0]);
        h.update(format!("{range:?}").as_bytes());
        h.update([0]);
        h.update(version.to_string().as_bytes());
        self.dir.join(hex(&h.finalize()[..20]))
    }

    /// The cached value, refreshed as recently used.
    fn hit(path: &Path) -> Option<Vec<u8>> {
        let bytes = std::fs::read(path).ok()?;
        if let Ok(f) = File::options().write(true).open(path) {
            let _ = f.set_modified(SystemTime::now());
        }
        Some(bytes)
    }

    /// Keep `bytes` at `path`: a temporary file renamed into place. Failures only cost
    /// the entry (a full disk must not fail the read).
    fn keep(&self, path: &Path, bytes: &[u8]) {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let tmp = self.dir.join(format!(
            ".tmp-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let written = File::create(&tmp)
            .and_then(|mut f| f.write_all(bytes))
            .and_then(|_| std::fs::rename(&tmp, path));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            log::warn!("disk cache {}: {e}", path.display());
            return;
        }
        let used = self.used.fetch_add(bytes.len() as u64, Ordering::Relaxed) + bytes.len() as u64;
        if used > self.budget {
            self.evict();
        }
    }

    /// The lock a miss of the entry at `path` holds while it fetches: one of the store's
    /// [`STRIPES`], by the entry's name.
    fn fetch_lock(&self, path: &Path) -> Option<File> {
        let name = path.file_name()?.to_str()?;
        let stripe = usize::from_str_radix(name.get(..4)?, 16).ok()? % STRIPES;
        lock_file(&self.dir.join(".locks").join(format!("{stripe:04}")), true)
    }

    /// Remove the oldest entries until the folder is under its low-water mark: in one
    /// thread of one process at a time (the others leave it to that one).
    fn evict(&self) {
        let Some(_one) = self.evicting.try_lock() else {
            return;
        };
        let Some(_only) = lock_file(&self.root.join(".evict.lock"), false) else {
            return;
        };
        let mut all = entries(&self.root);
        all.sort_by_key(|e| e.2);
        let mut used: u64 = all.iter().map(|e| e.1).sum();
        let target = self.budget / 100 * LOW_WATER;
        for (path, size, _) in all {
            if used <= target {
                break;
            }
            if std::fs::remove_file(&path).is_ok() {
                used = used.saturating_sub(size);
            }
        }
        self.used.store(used, Ordering::Relaxed);
    }

    fn cached(
        &self,
        key: &str,
        range: Option<ByteRange>,
        since: Option<Instant>,
    ) -> Result<Option<Value>> {
        let tag = match self.head(key, since)? {
            None => return Ok(None),
            Some(Head { version, .. }) if version.is_known() => version,
            Some(_) => return self.inner.read(key, range),
        };
        let path = self.entry_path(key, range, &tag);
        if let Some(bytes) = Self::hit(&path) {
            return Ok(Some(Value {
                bytes,
                version: tag,
            }));
        }
        // One fetch of the entry at a time, across processes: whoever waited here finds
        // what the one before it kept.
        let _fetching = self.fetch_lock(&path);
        if let Some(bytes) = Self::hit(&path) {
            return Ok(Some(Value {
                bytes,
                version: tag,
            }));
        }
        let got = self.inner.read(key, range)?;
        if let Some(Value {
            bytes,
            version: fetched,
        }) = got.as_ref().filter(|v| v.version.is_known())
        {
            // Filed under the version the bytes came with: when the object changed since
            // the HEAD, they are not the bytes of `tag`.
            if *fetched != tag {
                log::debug!("{key}: changed while read ({tag} before, {fetched} now)");
            }
            self.keep(&self.entry_path(key, range, fetched), bytes);
        }
        Ok(got)
    }
}

impl Store for DiskCache {
    fn read(&self, key: &str, range: Option<ByteRange>) -> Result<Option<Value>> {
        self.0.cached(key, range, None)
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

impl Cache {
    /// The view of `cache` for a reading that began at `at` (the same one for every
    /// array of that reading while kept); `None` without a refresh interval, when
    /// versions are remembered for the process's life.
    fn since(cache: &Arc<Cache>, at: Instant) -> Option<Arc<dyn Store>> {
        cache.revalidate?;
        let mut views = cache.views.lock();
        let view = views.get_or_insert(at, || {
            Arc::new(Since {
                cache: cache.clone(),
                since: at,
            })
        });
        Some(view.clone())
    }
}

impl Store for Since {
    fn read(&self, key: &str, range: Option<ByteRange>) -> Result<Option<Value>> {
        self.cache.cached(key, range, Some(self.since))
    }

    fn list_dir(&self, prefix: &str) -> Result<Listing> {
        self.cache.inner.list_dir(prefix)
    }

    fn head(&self, key: &str) -> Result<Option<Head>> {
        self.cache.head(key, Some(self.since))
    }

    fn will_need(&self, key: &str) {
        self.cache.inner.will_need(key)
    }

    fn caps(&self) -> Caps {
        self.cache.inner.caps()
    }

    fn refresh(&self, max_age: Option<std::time::Duration>) -> Result<()> {
        self.cache.inner.refresh(max_age)
    }

    fn as_of(&self) -> Option<Instant> {
        self.cache.inner.as_of()
    }

    fn learned_since(&self, at: Instant) -> Option<Arc<dyn Store>> {
        Cache::since(&self.cache, at)
    }

    fn identity(&self, key: &str) -> Option<String> {
        self.cache.inner.identity(key)
    }

    fn names_bytes(&self) -> bool {
        self.cache.inner.names_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemoryStore;
    use std::sync::atomic::AtomicUsize;

    use crate::store::StoreExt;

    /// A memory store with a URL, versions that the test sets (the one a HEAD answers and
    /// the one a GET answers, which differ while the object changes between the two),
    /// and a count of fetches.
    struct Versioned {
        inner: Mutex<MemoryStore>,
        tag: Mutex<String>,
        get_tag: Mutex<Option<String>>,
        fetches: AtomicUsize,
        /// How long each fetch takes (misses that overlap).
        delay: Mutex<Duration>,
    }

    impl Versioned {
        fn new(inner: MemoryStore) -> Versioned {
            Versioned {
                inner: Mutex::new(inner),
                tag: Mutex::new("v1".into()),
                get_tag: Mutex::new(None),
                fetches: AtomicUsize::new(0),
                delay: Mutex::new(Duration::ZERO),
            }
        }
    }

    impl Store for Versioned {
        fn read(&self, key: &str, range: Option<ByteRange>) -> Result<Option<Value>> {
            self.fetches.fetch_add(1, Ordering::Relaxed);
            let delay = *self.delay.lock();
            std::thread::sleep(delay);
            let tag = self.get_tag.lock().clone();
            let tag = tag.unwrap_or_else(|| self.tag.lock().clone());
            Ok(self.inner.lock().read(key, range)?.map(|v| Value {
                bytes: v.bytes,
                version: Version::Label(tag),
            }))
        }
        fn list_dir(&self, prefix: &str) -> Result<Listing> {
            self.inner.lock().list_dir(prefix)
        }
        fn head(&self, key: &str) -> Result<Option<Head>> {
            Ok(self.inner.lock().head(key)?.map(|h| Head {
                size: h.size,
                version: Version::Label(self.tag.lock().clone()),
            }))
        }
        fn will_need(&self, _key: &str) {}
        fn caps(&self) -> Caps {
            Caps {
                location: Some("mem://test".into()),
                ..Caps::local()
            }
        }
    }

    /// An empty scratch folder for a cache, and a store holding `values`.
    fn setup(label: &str, values: &[(&str, Vec<u8>)]) -> (PathBuf, Arc<Versioned>) {
        let root = std::env::temp_dir().join(format!("zarrfs-{label}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let mut mem = MemoryStore::new();
        for (key, value) in values {
            mem.insert(*key, value.clone());
        }
        (root, Arc::new(Versioned::new(mem)))
    }

    /// A cache of `store` in `root` with a 1 MiB budget (another mount of the store).
    fn cache_of(store: &Arc<Versioned>, root: &Path) -> DiskCache {
        DiskCache::new(store.clone(), root, 1 << 20)
            .unwrap()
            .unwrap()
    }

    /// Eight caches of one folder (as eight processes: each opens its own lock files)
    /// miss one entry at once: one fetches it, the others read what it kept.
    #[test]
    fn misses_of_one_entry_at_once_fetch_it_once() {
        let (root, store) = setup("diskcache-once", &[("c/0", vec![5u8; 4000])]);
        *store.delay.lock() = Duration::from_millis(100);
        let caches: Vec<DiskCache> = (0..8).map(|_| cache_of(&store, &root)).collect();
        let start = std::sync::Barrier::new(caches.len());
        std::thread::scope(|scope| {
            for cache in &caches {
                let start = &start;
                scope.spawn(move || {
                    start.wait();
                    assert_eq!(cache.get("c/0").unwrap().unwrap(), vec![5u8; 4000]);
                });
            }
        });
        assert_eq!(
            store.fetches.load(Ordering::Relaxed),
            1,
            "fetches of one entry"
        );
        let _ = std::fs::remove_dir_all(&root);
    }

    /// A temporary file of a process that ended (killed mid-write) goes when a cache is
    /// next opened on the folder; one of a running process stays.
    #[test]
    fn temporary_files_of_ended_processes_go_at_start() {
        let (root, store) = setup("diskcache-orphans", &[("c/0", vec![1u8; 10])]);
        let dir = cache_of(&store, &root).0.dir.clone();
        // A number no process has (above any pid_max), and init's.
        let dead = dir.join(".tmp-4194999-0");
        let running = dir.join(".tmp-1-0");
        std::fs::write(&dead, b"half an entry").unwrap();
        std::fs::write(&running, b"being written").unwrap();
        let _again = cache_of(&store, &root);
        assert!(!dead.exists(), "the ended process's file is left");
        assert!(running.exists(), "a running process's file was removed");
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn files_bytes_under_the_version_they_came_with() {
        let (root, store) = setup("diskcache-v", &[("c/0", vec![1u8; 100])]);
        let fetches = || store.fetches.load(Ordering::Relaxed);
        let open = || cache_of(&store, &root);
        // The object changes between the HEAD (v1) and the GET (v2, new bytes).
        store.inner.lock().insert("c/0", vec![2u8; 100]);
        *store.get_tag.lock() = Some("v2".into());
        assert_eq!(open().get("c/0").unwrap().unwrap(), vec![2u8; 100]);
        assert_eq!(fetches(), 1);
        // A mount that sees v1 (the old object, as the first HEAD did) is never served
        // the new bytes from the cache: it fetches.
        *store.get_tag.lock() = None;
        store.inner.lock().insert("c/0", vec![1u8; 100]);
        assert_eq!(open().get("c/0").unwrap().unwrap(), vec![1u8; 100]);
        assert_eq!(fetches(), 2);
        // A mount that sees v2 finds the new bytes on disk, with no fetch.
        store.inner.lock().insert("c/0", vec![9u8; 100]);
        *store.tag.lock() = "v2".into();
        assert_eq!(open().get("c/0").unwrap().unwrap(), vec![2u8; 100]);
        assert_eq!(fetches(), 2);
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn serves_again_from_disk_refetches_changed_objects_and_evicts() {
        let values = [("a/c/0", vec![7u8; 1000]), ("a/c/1", vec![8u8; 1000])];
        let (root, store) = setup("diskcache", &values);
        let fetches = || store.fetches.load(Ordering::Relaxed);
        let open = || cache_of(&store, &root);
        let first = open();
        assert_eq!(first.get("a/c/0").unwrap().unwrap(), vec![7u8; 1000]);
        assert_eq!(first.get("a/missing").unwrap(), None);
        let range = ByteRange::Span { offset: 10, len: 5 };
        assert_eq!(
            first.get_range("a/c/1", range).unwrap().unwrap(),
            vec![8u8; 5]
        );
        assert_eq!(fetches(), 2);
        // A second cache over the same store (another mount): no fetch.
        let second = open();
        assert_eq!(second.get("a/c/0").unwrap().unwrap(), vec![7u8; 1000]);
        assert_eq!(
            second.get_range("a/c/1", range).unwrap().unwrap(),
            vec![8u8; 5]
        );
        assert_eq!(fetches(), 2);
        // A new version is fetched again.
        *store.tag.lock() = "v2".into();
        let third = open();
        assert_eq!(third.get("a/c/0").unwrap().unwrap(), vec![7u8; 1000]);
        assert_eq!(fetches(), 3);
        // Over budget, the oldest entries go.
        let small = DiskCache::new(store.clone(), &root, 1500).unwrap().unwrap();
        small.get("a/c/1").unwrap();
        assert!(entries(&root).iter().map(|e| e.1).sum::<u64>() <= 1500);
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn a_refresh_interval_asks_for_the_version_again() {
        let (root, store) = setup("diskcache-r", &[("c/0", vec![1u8; 10])]);
        let fetches = || store.fetches.load(Ordering::Relaxed);
        let for_life = cache_of(&store, &root);
        let interval = Duration::from_millis(50);
        let refreshing = cache_of(&store, &root).revalidating(Some(interval));
        assert_eq!(for_life.get("c/0").unwrap().unwrap(), vec![1u8; 10]);
        assert_eq!(refreshing.get("c/0").unwrap().unwrap(), vec![1u8; 10]);
        assert_eq!(fetches(), 1);
        // The object is rewritten: within the interval both serve what they knew.
        store.inner.lock().insert("c/0", vec![2u8; 10]);
        *store.tag.lock() = "v2".into();
        assert_eq!(refreshing.get("c/0").unwrap().unwrap(), vec![1u8; 10]);
        std::thread::sleep(interval * 2);
        // Past it, the refreshing cache asks again and fetches the new version; the
        // other keeps the version it first saw for the process's life.
        assert_eq!(refreshing.get("c/0").unwrap().unwrap(), vec![2u8; 10]);
        assert_eq!(fetches(), 2);
        assert_eq!(for_life.get("c/0").unwrap().unwrap(), vec![1u8; 10]);
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn a_reading_asks_again_for_versions_learned_before_it_began() {
        let (root, store) = setup("diskcache-since", &[("c/0", vec![1u8; 10])]);
        let fetches = || store.fetches.load(Ordering::Relaxed);
        let hour = Duration::from_secs(3600);
        let cache = cache_of(&store, &root).revalidating(Some(hour));
        assert_eq!(cache.get("c/0").unwrap().unwrap(), vec![1u8; 10]);
        assert_eq!(cache.get("absent").unwrap(), None);
        // Rewritten and made: the cache serves what it learned, for the interval.
        store.inner.lock().insert("c/0", vec![2u8; 10]);
        store.inner.lock().insert("absent", vec![3u8; 2]);
        *store.tag.lock() = "v2".into();
        assert_eq!(cache.get("c/0").unwrap().unwrap(), vec![1u8; 10]);
        assert_eq!(cache.get("absent").unwrap(), None);
        // A reading begun now asks again, once; the same reading gets the same view.
        let began = Instant::now();
        let reading = cache.learned_since(began).unwrap();
        assert_eq!(reading.get("c/0").unwrap().unwrap(), vec![2u8; 10]);
        assert_eq!(reading.get("absent").unwrap().unwrap(), vec![3u8; 2]);
        let fetched = fetches();
        assert_eq!(reading.get("c/0").unwrap().unwrap(), vec![2u8; 10]);
        assert_eq!(fetches(), fetched);
        assert!(Arc::ptr_eq(&reading, &cache.learned_since(began).unwrap()));
        // Without an interval a version holds for the process's life: no view.
        assert!(cache_of(&store, &root).learned_since(began).is_none());
        let _ = std::fs::remove_dir_all(&root);
    }
}
