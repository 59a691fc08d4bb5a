//! Tests of the disk cache: entries shared by caches of one folder (as processes), kept
//! under the version they came with, evicted within the budget, and versions asked again.

use super::folder::lock_file;
use super::*;
use crate::store::{MemoryStore, Version};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

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
