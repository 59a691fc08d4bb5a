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

use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
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
/// The folder of values kept by their own names ([`Store::read_named`]), shared by stores.
const NAMED: &str = "named";
/// The file counting the bytes of the entries in the folder, and its lock.
const USED: &str = ".used";
/// Lock files per store folder that misses of different entries take (by the entry's
/// name): few enough to keep, enough that unrelated fetches seldom wait on each other.
const STRIPES: usize = 1024;

/// A store whose fetched values are kept on disk.
pub struct DiskCache(Arc<Cache>);

/// A question for an object's version under way ([`Cache::head`]), and its answer
/// (`None`: it failed).
struct Asking {
    asked: Instant,
    answer: std::sync::OnceLock<Option<Option<Head>>>,
}

/// Ends a question when dropped (answered, failed, or unwound): threads waiting for it
/// are woken, and the next to ask asks anew.
struct Answered<'a> {
    cache: &'a Cache,
    key: &'a str,
    asking: &'a Arc<Asking>,
}

impl Drop for Answered<'_> {
    fn drop(&mut self) {
        let _ = self.asking.answer.set(None);
        let mut out = self.cache.asking.lock();
        if out
            .get(self.key)
            .is_some_and(|a| Arc::ptr_eq(a, self.asking))
        {
            out.remove(self.key);
        }
    }
}

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

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn io(path: &Path, source: std::io::Error) -> Error {
    Error::Io {
        key: path.display().to_string(),
        source,
    }
}

/// Every file of an entry under `root`, temporary ones (being written) included, with its
/// size and modification time.
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
            if meta.is_file() {
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

/// `path` (created) with an exclusive lock on it, held until the file is dropped; `None`
/// when it cannot be opened. Where the folder's file system has no locks, the file is
/// handed back unlocked (at worst an entry is fetched twice, or the count is off until
/// it is made again).
fn lock_file(path: &Path) -> Option<File> {
    let file = File::options()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(path)
        .map_err(|e| log::debug!("disk cache lock {}: {e}", path.display()))
        .ok()?;
    if let Err(e) = file.lock() {
        log::debug!("disk cache lock {}: {e}", path.display());
    }
    Some(file)
}

/// The folder's count of the bytes its entries take (temporary files included), from its
/// `.used` file, locked while this lives.
struct Count(File);

impl Count {
    /// The count of folder `root`, locked (waiting while another process holds it).
    fn lock(root: &Path) -> Option<Count> {
        lock_file(&root.join(USED)).map(Count)
    }

    /// The count kept, or one made from the folder when none is.
    fn get(&self, root: &Path) -> u64 {
        let mut bytes = [0u8; 8];
        match self.0.read_exact_at(&mut bytes, 0) {
            Ok(()) => u64::from_le_bytes(bytes),
            Err(_) => entries(root).iter().map(|e| e.1).sum(),
        }
    }

    fn set(&self, used: u64) {
        if let Err(e) = self.0.write_all_at(&used.to_le_bytes(), 0) {
            log::debug!("disk cache count: {e}");
        }
    }
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

/// The name of the entry of `parts` (a key, a range, a version) in `dir`.
fn entry_in(dir: &Path, parts: &[&str]) -> PathBuf {
    let mut h = Sha256::new();
    for part in parts {
        h.update(part.as_bytes());
        h.update([0]);
    }
    dir.join(hex(&h.finalize()[..20]))
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
        // One question per key at a time: a shard's inner chunks are read by many
        // threads at once, and each would ask.
        let (asking, first) = {
            let mut out = self.asking.lock();
            match out.get(key) {
                Some(a) if since.is_none_or(|since| a.asked >= since) => (a.clone(), false),
                _ => {
                    let a = Arc::new(Asking {
                        asked: Instant::now(),
                        answer: std::sync::OnceLock::new(),
                    });
                    out.insert(key.to_string(), a.clone());
                    (a, true)
                }
            }
        };
        if !first {
            return match asking.answer.wait() {
                Some(v) => Ok(v.clone()),
                // It failed: ask again, to report the error of this read.
                None => self.inner.head(key),
            };
        }
        let _done = Answered {
            cache: self,
            key,
            asking: &asking,
        };
        let got = self.inner.head(key);
        if let Ok(v) = &got {
            let mut known = self.known.lock();
            if known.len() >= MAX_KNOWN {
                known.clear();
            }
            known.insert(key.to_string(), (asking.asked, v.clone()));
            let _ = asking.answer.set(Some(v.clone()));
        }
        got
    }

    fn entry_path(&self, key: &str, range: Option<ByteRange>, version: &Version) -> PathBuf {
        let range = format!("{range:?}");
        entry_in(&self.dir, &[key, &range, &version.to_string()])
    }

    /// The cached value, refreshed as recently used. The whole file is asked of the
    /// disk at once, as a folder store reads a chunk: one large read, not a readahead
    /// window that starts small.
    fn hit(path: &Path) -> Option<Vec<u8>> {
        let f = File::open(path).ok()?;
        let len = f.metadata().ok()?.len();
        // SAFETY: advice on a descriptor we own; failure only loses the hint.
        unsafe {
            libc::posix_fadvise(
                std::os::fd::AsRawFd::as_raw_fd(&f),
                0,
                i64::try_from(len).unwrap_or(i64::MAX),
                libc::POSIX_FADV_WILLNEED,
            )
        };
        let bytes = crate::store::read_value(&path.to_string_lossy(), f, len).ok()?;
        if let Ok(f) = File::options().write(true).open(path) {
            let _ = f.set_modified(SystemTime::now());
        }
        Some(bytes)
    }

    /// Keep `bytes` at `path`: its temporary file made at its full length under the
    /// count's lock (old entries removed first when it would pass the budget), then
    /// written and renamed into place (a crash leaves no half entry). Failures only cost
    /// the entry (a full disk must not fail the read).
    fn keep(&self, path: &Path, bytes: &[u8]) {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let size = bytes.len() as u64;
        let Some(dir) = path.parent().filter(|_| size <= self.budget) else {
            return;
        };
        let tmp = dir.join(format!(
            ".tmp-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let make = || File::create(&tmp).and_then(|f| f.set_len(size).map(|_| f));
        let count = Count::lock(&self.root);
        let file = match &count {
            Some(count) => {
                let used = count.get(&self.root);
                let used = match used.checked_add(size) {
                    Some(after) if after <= self.budget => used,
                    _ => self.evict(size),
                };
                let file = make();
                count.set(used.saturating_add(if file.is_ok() { size } else { 0 }));
                file
            }
            None => make(),
        };
        let counted = count.is_some();
        drop(count);
        let written = file.and_then(|mut f| f.write_all(bytes));
        // Renamed under the count's lock too: a listing of the folder that meets a
        // rename may see neither name, and the count is made from such listings.
        let count = Count::lock(&self.root);
        if let Err(e) = written.and_then(|_| std::fs::rename(&tmp, path)) {
            let _ = std::fs::remove_file(&tmp);
            log::warn!("disk cache {}: {e}", path.display());
            if let Some(count) = count.filter(|_| counted) {
                count.set(count.get(&self.root).saturating_sub(size));
            }
        }
    }

    /// The lock a miss of the entry at `path` holds while it fetches: one of its store
    /// folder's [`STRIPES`], by the entry's name.
    fn fetch_lock(path: &Path) -> Option<File> {
        let name = path.file_name()?.to_str()?;
        let stripe = usize::from_str_radix(name.get(..4)?, 16).ok()? % STRIPES;
        let locks = path.parent()?.join(".locks");
        lock_file(&locks.join(format!("{stripe:04}")))
    }

    /// Remove the oldest entries until the folder has room for `room` more bytes under
    /// its low-water mark (the count's lock held): the bytes left in it. Temporary files
    /// (entries being written) are counted and left alone.
    fn evict(&self, room: u64) -> u64 {
        let mut all = entries(&self.root);
        all.sort_by_key(|e| e.2);
        let mut used: u64 = all.iter().map(|e| e.1).sum();
        let target = (self.budget / 100 * LOW_WATER).saturating_sub(room);
        for (path, size, _) in all {
            if used <= target {
                break;
            }
            let temporary = path
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(".tmp"));
            if !temporary && std::fs::remove_file(&path).is_ok() {
                used = used.saturating_sub(size);
            }
        }
        used
    }

    /// The value at `key` (or part of it), whose entry `path` (of version `version`)
    /// was missing: fetched under the entry's fetch lock unless another process kept it
    /// meanwhile, then kept at `file(version it came with)`, if any.
    fn fetch(
        &self,
        key: &str,
        range: Option<ByteRange>,
        (path, version): (&Path, &Version),
        file: impl Fn(&Version) -> Option<PathBuf>,
    ) -> Result<Option<Value>> {
        // One fetch of the entry at a time, across processes: whoever waited here finds
        // what the one before it kept.
        let _fetching = Self::fetch_lock(path);
        if let Some(bytes) = Self::hit(path) {
            return Ok(Some(Value {
                bytes,
                version: version.clone(),
            }));
        }
        let got = self.inner.read(key, range)?;
        if let Some(value) = &got {
            if let Some(to) = file(&value.version) {
                self.keep(&to, &value.bytes);
            }
        }
        Ok(got)
    }

    /// A value that never changes, known by `name` wherever it is stored: kept in the
    /// folder's named store under that name, with no version asked for.
    fn named(&self, key: &str, range: Option<ByteRange>, name: &str) -> Result<Option<Value>> {
        let range_name = format!("{range:?}");
        let path = entry_in(&self.root.join(NAMED), &[name, &range_name]);
        if let Some(bytes) = Self::hit(&path) {
            return Ok(Some(Value {
                bytes,
                version: Version::Unknown,
            }));
        }
        self.fetch(key, range, (&path, &Version::Unknown), |_| {
            Some(path.clone())
        })
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
        self.fetch(key, range, (&path, &tag), |fetched| {
            // Filed under the version the bytes came with: when the object changed since
            // the HEAD, they are not the bytes of `tag`.
            if *fetched != tag {
                log::debug!("{key}: changed while read ({tag} before, {fetched} now)");
            }
            fetched
                .is_known()
                .then(|| self.entry_path(key, range, fetched))
        })
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

    fn read_named(&self, key: &str, range: Option<ByteRange>, name: &str) -> Result<Option<Value>> {
        self.cache.named(key, range, name)
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
        heads: AtomicUsize,
        /// How long each fetch takes (misses that overlap).
        delay: Mutex<Duration>,
        /// How long each HEAD takes.
        head_delay: Mutex<Duration>,
        location: String,
    }

    impl Versioned {
        fn new(inner: MemoryStore) -> Versioned {
            Versioned {
                inner: Mutex::new(inner),
                tag: Mutex::new("v1".into()),
                get_tag: Mutex::new(None),
                fetches: AtomicUsize::new(0),
                heads: AtomicUsize::new(0),
                delay: Mutex::new(Duration::ZERO),
                head_delay: Mutex::new(Duration::ZERO),
                location: "mem://test".into(),
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
            self.heads.fetch_add(1, Ordering::Relaxed);
            let delay = *self.head_delay.lock();
            std::thread::sleep(delay);
            Ok(self.inner.lock().head(key)?.map(|h| Head {
                size: h.size,
                version: Version::Label(self.tag.lock().clone()),
            }))
        }
        fn will_need(&self, _key: &str) {}
        fn caps(&self) -> Caps {
            Caps {
                location: Some(self.location.clone()),
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

    /// A value read by its own name is kept with no HEAD, and a store at another URL
    /// naming it so is served it from the folder with no fetch.
    #[test]
    fn named_values_are_shared_by_every_store_naming_them() {
        let chunk = vec![4u8; 300];
        let (root, first) = setup("diskcache-named", &[("chunks/AB", chunk.clone())]);
        let mut other = Versioned::new(MemoryStore::new());
        other.location = "mem://another-repository".into();
        other.inner.lock().insert("chunks/AB", chunk.clone());
        let other = Arc::new(other);
        let span = Some(ByteRange::Span {
            offset: 100,
            len: 50,
        });
        let read = |store: &Arc<Versioned>| {
            let cache = cache_of(store, &root);
            let value = cache.read_named("chunks/AB", span, "icechunk/chunks/AB");
            value.unwrap().unwrap().bytes
        };
        assert_eq!(read(&first), vec![4u8; 50]);
        assert_eq!(read(&other), vec![4u8; 50]);
        assert_eq!(first.fetches.load(Ordering::Relaxed), 1);
        assert_eq!(other.fetches.load(Ordering::Relaxed), 0);
        assert_eq!(
            first.heads.load(Ordering::Relaxed),
            0,
            "a named value's HEAD"
        );
        let _ = std::fs::remove_dir_all(&root);
    }

    /// Four caches of one folder (four processes) keep entries at once under a budget a
    /// tenth of what they read: the folder, temporary files included, never holds more.
    #[test]
    fn caches_sharing_a_folder_keep_it_within_its_budget() {
        let values: Vec<(String, Vec<u8>)> = (0..200)
            .map(|i| (format!("c/{i}"), vec![(i % 251) as u8; 1000 + i * 7]))
            .collect();
        let refs: Vec<(&str, Vec<u8>)> = values
            .iter()
            .map(|(k, v)| (k.as_str(), v.clone()))
            .collect();
        let (root, store) = setup("diskcache-budget", &refs);
        let total: usize = values.iter().map(|v| v.1.len()).sum();
        let budget = (total / 10) as u64;
        let caches: Vec<DiskCache> = (0..4)
            .map(|_| {
                DiskCache::new(store.clone(), &root, budget)
                    .unwrap()
                    .unwrap()
            })
            .collect();
        let done = std::sync::atomic::AtomicBool::new(false);
        let most = AtomicU64::new(0);
        // The folder's files, each once (a file being renamed may be listed twice),
        // counted while the count is locked: no entry takes room or is removed meanwhile.
        let held = || -> u64 {
            let _count = lock_file(&root.join(USED));
            let mut files = HashMap::new();
            for store in std::fs::read_dir(&root).into_iter().flatten().flatten() {
                for file in std::fs::read_dir(store.path())
                    .into_iter()
                    .flatten()
                    .flatten()
                {
                    if let Some(meta) = file.metadata().ok().filter(|m| m.is_file()) {
                        files.insert(std::os::unix::fs::MetadataExt::ino(&meta), meta.len());
                    }
                }
            }
            files.values().sum()
        };
        std::thread::scope(|scope| {
            scope.spawn(|| {
                while !done.load(Ordering::Relaxed) {
                    most.fetch_max(held(), Ordering::Relaxed);
                }
            });
            let readers: Vec<_> = caches
                .iter()
                .enumerate()
                .map(|(n, cache)| {
                    let values = &values;
                    scope.spawn(move || {
                        for i in 0..values.len() {
                            let (key, bytes) = &values[(i * 7 + n * 50) % values.len()];
                            assert_eq!(&cache.get(key).unwrap().unwrap(), bytes, "{key}");
                        }
                    })
                })
                .collect();
            for reader in readers {
                reader.join().unwrap();
            }
            done.store(true, Ordering::Relaxed);
        });
        let most = most.load(Ordering::Relaxed);
        assert!(
            most > budget / 2,
            "the folder never filled ({most} of {budget} B)"
        );
        assert!(
            most <= budget,
            "the folder held {most} B, over its budget of {budget} B"
        );
        let _ = std::fs::remove_dir_all(&root);
    }

    /// Threads asking for one object's version at once (a shard's inner chunks) send one
    /// HEAD between them.
    #[test]
    fn threads_asking_for_one_version_at_once_ask_once() {
        let (root, store) = setup("diskcache-asking", &[("shard", vec![3u8; 64])]);
        *store.head_delay.lock() = Duration::from_millis(100);
        let cache = cache_of(&store, &root);
        let start = std::sync::Barrier::new(8);
        std::thread::scope(|scope| {
            for _ in 0..8 {
                let (cache, start) = (&cache, &start);
                scope.spawn(move || {
                    start.wait();
                    let head = cache.head("shard").unwrap().unwrap();
                    assert_eq!(head.size, 64);
                });
            }
        });
        assert_eq!(
            store.heads.load(Ordering::Relaxed),
            1,
            "HEADs of one object"
        );
        let _ = std::fs::remove_dir_all(&root);
    }
}
