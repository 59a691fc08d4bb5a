//! The decoded-unit cache: an LRU with a byte budget. Concurrent misses of one unit
//! decode it once: the first caller loads, the others wait for its result. A unit whose
//! every byte has been handed out leaves the cache at once (readers keep what they
//! were given, the kernel's page cache for a mount), so streaming an array reuses a few
//! units' worth of memory instead of filling the budget. Prefetch requests are queued
//! once per key, and a queued prefetch of a unit that was served meanwhile is skipped.
//! A prefetch never pushes out a unit some reader used within the last [`IN_USE`]: when
//! the budget holds only units in use (several readers each working through a large
//! slab), prefetch stops and readers decode what they need themselves, instead of
//! prefetches and readers evicting each other's units over and over. A unit being loaded
//! holds its decoded size of the budget from the start of its load (its fetch and
//! decode), so that units cached and units in flight together stay within the budget.

use std::collections::{HashMap, HashSet};
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lru::LruCache;
use parking_lot::{Condvar, Mutex};

use crate::codec::UnitData;
use crate::error::Result;

/// Which unit: array id, layout tag (how the view stores it) and unit grid index.
pub type UnitKey = (u64, u8, Vec<u64>);

#[derive(Default)]
struct Pending {
    done: Mutex<Option<Option<Arc<UnitData>>>>,
    cv: Condvar,
}

struct Entry {
    unit: Arc<UnitData>,
    /// Bytes of the unit handed out so far.
    served: usize,
    /// When it was loaded or last read.
    used_at: Instant,
}

/// A unit read within this long is in use: no prefetch evicts it.
pub const IN_USE: Duration = Duration::from_secs(1);

/// Served units remembered so that stale prefetches skip them.
const SERVED_MEMORY: usize = 4096;

struct Inner {
    lru: LruCache<UnitKey, Entry>,
    used: usize,
    /// Prefetches queued and not yet started.
    queued: HashSet<UnitKey>,
    /// Units recently dropped because they were wholly served.
    served: LruCache<UnitKey, ()>,
}

pub struct UnitCache {
    budget: usize,
    /// Bytes held beside the cache for what it will hold (runs of stored chunks fetched
    /// ahead): the cache gives up as much of its budget, down to half of it.
    beside: Option<Box<dyn Fn() -> u64 + Send + Sync>>,
    /// Whether the units of a file that fits [`UnitCache::keeps`] stay once served.
    keep_fitting: AtomicBool,
    inner: Mutex<Inner>,
    loading: Mutex<HashMap<UnitKey, Arc<Pending>>>,
}

/// The load of one key in progress: when it ends (or unwinds), waiters get its unit, or
/// nothing and load for themselves, and the key is free to load again.
struct Leader<'a> {
    cache: &'a UnitCache,
    key: &'a UnitKey,
    pending: &'a Pending,
    unit: Option<Arc<UnitData>>,
    /// Bytes of the budget the load holds until its unit is cached.
    reserved: usize,
}

impl Drop for Leader<'_> {
    fn drop(&mut self) {
        if self.reserved > 0 {
            self.cache.inner.lock().used -= self.reserved;
        }
        *self.pending.done.lock() = Some(self.unit.take());
        self.pending.cv.notify_all();
        self.cache.loading.lock().remove(self.key);
    }
}

impl UnitCache {
    pub fn new(budget: usize) -> Self {
        UnitCache {
            budget,
            beside: None,
            keep_fitting: AtomicBool::new(false),
            inner: Mutex::new(Inner {
                lru: LruCache::unbounded(),
                used: 0,
                queued: HashSet::new(),
                served: LruCache::new(
                    NonZeroUsize::new(SERVED_MEMORY).unwrap_or(NonZeroUsize::MIN),
                ),
            }),
            loading: Mutex::new(HashMap::new()),
        }
    }

    /// Give up as much of the budget as `held` says is held beside the cache, down to
    /// half of it: the stored chunks fetched ahead of their decode (a store's runs, see
    /// [`crate::store::Spans`]) and the units decoded from them then stay within one
    /// budget together.
    pub fn beside(mut self, held: impl Fn() -> u64 + Send + Sync + 'static) -> Self {
        self.beside = Some(Box::new(held));
        self
    }

    pub fn budget(&self) -> usize {
        self.budget
    }

    /// What units (cached and loading) may hold now: the budget, less what is held
    /// beside the cache, at least half of it.
    fn room(&self) -> usize {
        let Some(held) = &self.beside else {
            return self.budget;
        };
        let held = usize::try_from(held()).unwrap_or(usize::MAX);
        self.budget.saturating_sub(held).max(self.budget / 2)
    }

    /// Keep the units of files of at most half the budget once they are served, so a
    /// re-read right after a read decodes nothing (for a mount where nothing else keeps
    /// what was read, such as a materialized copy).
    pub fn keep_fitting(&self, on: bool) {
        self.keep_fitting.store(on, Ordering::Relaxed);
    }

    /// Whether served units of a file of `bytes` decoded bytes stay in the cache.
    pub fn keeps(&self, bytes: u64) -> bool {
        self.keep_fitting.load(Ordering::Relaxed) && self.fits(bytes)
    }

    /// Whether a file of `bytes` decoded bytes is small enough for its units to stay
    /// once served: at most half the budget.
    pub fn fits(&self, bytes: u64) -> bool {
        bytes <= (self.budget / 2) as u64
    }

    /// Bytes held now.
    pub fn used(&self) -> usize {
        self.inner.lock().used
    }

    /// Drop every cached unit filed under array id `id` (the array's chunks were
    /// rewritten, see [`crate::read::array::Array::rewritten`]): their memory is free.
    pub fn forget_array(&self, id: u64) {
        let mut inner = self.inner.lock();
        let keys: Vec<UnitKey> = inner
            .lru
            .iter()
            .filter(|(k, _)| k.0 == id)
            .map(|(k, _)| k.clone())
            .collect();
        for key in keys {
            if let Some(entry) = inner.lru.pop(&key) {
                inner.used -= entry.unit.mem_size();
            }
        }
    }

    /// The cached unit, without loading.
    pub fn peek(&self, key: &UnitKey) -> Option<Arc<UnitData>> {
        self.inner.lock().lru.get_mut(key).map(|e| {
            e.used_at = Instant::now();
            e.unit.clone()
        })
    }

    /// Note that `bytes` more of the unit at `key` were handed out; once all of it has
    /// been, drop it (its memory goes to the next unit).
    pub fn served(&self, key: &UnitKey, bytes: usize) {
        self.served_by(key, bytes, true)
    }

    /// [`UnitCache::served`]; with `drop_whole` false the unit stays until the LRU
    /// evicts it (another reader may still want it).
    pub fn served_by(&self, key: &UnitKey, bytes: usize, drop_whole: bool) {
        let mut inner = self.inner.lock();
        let Some(entry) = inner.lru.peek_mut(key) else {
            return;
        };
        entry.served += bytes;
        entry.used_at = Instant::now();
        let size = entry.unit.mem_size();
        // A unit of fill value is one element however much of it is read: it stays.
        if drop_whole && entry.served >= size && !matches!(entry.unit.as_ref(), UnitData::Fill(_)) {
            inner.lru.pop(key);
            inner.used -= size;
            if inner.queued.contains(key) {
                inner.served.put(key.clone(), ());
            }
        }
    }

    /// Claim a background load of `key`: false when it is cached, loading or already
    /// queued. A claim must be followed by [`UnitCache::prefetch`].
    pub fn claim_prefetch(&self, key: &UnitKey) -> bool {
        let loading = self.loading.lock().contains_key(key);
        let mut inner = self.inner.lock();
        if loading || inner.lru.contains(key) || inner.queued.contains(key) {
            return false;
        }
        inner.queued.insert(key.clone());
        true
    }

    /// Give up a claim that was never queued.
    pub fn unclaim_prefetch(&self, key: &UnitKey) {
        self.inner.lock().queued.remove(key);
    }

    /// Run a claimed background load of `key` (about `size` bytes decoded), unless the
    /// unit was served whole since it was claimed (a reader got there first), is
    /// present, is being loaded by a reader, or would need room that units in use hold.
    /// The checks and the load's registration happen under one lock, so a reader that
    /// decodes and serves the unit meanwhile either left its served record first or
    /// finds this load to wait for: a unit is never decoded twice for one read.
    pub fn prefetch(&self, key: &UnitKey, size: usize, load: impl FnOnce() -> Result<UnitData>) {
        let pending = {
            let mut loading = self.loading.lock();
            let mut inner = self.inner.lock();
            inner.queued.remove(key);
            if inner.served.pop(key).is_some()
                || inner.lru.contains(key)
                || loading.contains_key(key)
            {
                return;
            }
            if !Self::make_room(&mut inner, self.room(), size) {
                return;
            }
            inner.used += size;
            let pending = Arc::new(Pending::default());
            loading.insert(key.clone(), pending.clone());
            pending
        };
        // Errors surface when a reader asks for the unit.
        let _ = self.lead(key, &pending, size, load);
    }

    /// The unit at `key` (about `size` bytes decoded; 0 when not known), loading it with
    /// `load` on a miss (once, however many ask). The load makes room for its unit at
    /// once, pushing out the least recently used units as caching it would.
    pub fn get_or_load(
        &self,
        key: &UnitKey,
        size: usize,
        load: impl FnOnce() -> Result<UnitData>,
    ) -> Result<Arc<UnitData>> {
        if let Some(hit) = self.peek(key) {
            return Ok(hit);
        }
        let (pending, leader) = {
            let mut loading = self.loading.lock();
            // A load that ended since the look above left its unit in the cache before
            // leaving `loading`: look again under the lock, or that unit is decoded twice.
            if let Some(hit) = self.peek(key) {
                return Ok(hit);
            }
            match loading.get(key) {
                Some(p) => (p.clone(), false),
                None => {
                    let p = Arc::new(Pending::default());
                    loading.insert(key.clone(), p.clone());
                    (p, true)
                }
            }
        };
        if !leader {
            let mut done = pending.done.lock();
            while done.is_none() {
                pending.cv.wait(&mut done);
            }
            if let Some(Some(unit)) = done.as_ref() {
                return Ok(unit.clone());
            }
            drop(done);
            // The leader failed: report our own error.
            return load().map(Arc::new);
        }
        {
            let mut inner = self.inner.lock();
            Self::evict_for(&mut inner, self.room(), size);
            inner.used += size;
        }
        self.lead(key, &pending, size, load)
    }

    /// Load `key` as the leader registered with `pending` in `loading`, holding
    /// `reserved` bytes of the budget (counted in `used`): cache the unit in their place,
    /// then release the waiters.
    fn lead(
        &self,
        key: &UnitKey,
        pending: &Pending,
        reserved: usize,
        load: impl FnOnce() -> Result<UnitData>,
    ) -> Result<Arc<UnitData>> {
        // Waiters are released and the reservation given back however the load ends, a
        // panic included.
        let mut leader = Leader {
            cache: self,
            key,
            pending,
            unit: None,
            reserved,
        };
        let result = load().map(Arc::new);
        if let Ok(unit) = &result {
            self.insert(key.clone(), unit.clone(), reserved);
            leader.reserved = 0;
            leader.unit = Some(unit.clone());
        }
        drop(leader);
        result
    }

    /// Evict units not in use, least recently used first, until `size` more bytes fit;
    /// false when units in use are in the way.
    fn make_room(inner: &mut Inner, budget: usize, size: usize) -> bool {
        while inner.used.saturating_add(size) > budget {
            match inner.lru.peek_lru() {
                Some((_, e)) if e.used_at.elapsed() >= IN_USE => {
                    if let Some((_, old)) = inner.lru.pop_lru() {
                        inner.used -= old.unit.mem_size();
                    }
                }
                _ => return false,
            }
        }
        true
    }

    /// Evict units, least recently used first, in use or not, until `size` more bytes
    /// fit (or none is left).
    fn evict_for(inner: &mut Inner, budget: usize, size: usize) {
        while inner.used.saturating_add(size) > budget {
            match inner.lru.pop_lru() {
                Some((_, old)) => inner.used -= old.unit.mem_size(),
                None => break,
            }
        }
    }

    /// Cache `unit` at `key` in place of the `reserved` bytes its load held.
    fn insert(&self, key: UnitKey, unit: Arc<UnitData>, reserved: usize) {
        let size = unit.mem_size();
        let mut inner = self.inner.lock();
        inner.used -= reserved;
        if size > self.budget {
            return;
        }
        let entry = Entry {
            unit,
            served: 0,
            used_at: Instant::now(),
        };
        if let Some(old) = inner.lru.put(key, entry) {
            inner.used -= old.unit.mem_size();
        }
        inner.used += size;
        let room = self.room();
        while inner.used > room {
            match inner.lru.pop_lru() {
                Some((_, old)) => inner.used -= old.unit.mem_size(),
                None => break,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn evicts_to_budget_and_decodes_concurrent_misses_once() {
        let cache = Arc::new(UnitCache::new(250));
        for i in 0..5u64 {
            cache
                .get_or_load(&(1, 0, vec![i]), 100, || Ok(UnitData::Fixed(vec![0; 100])))
                .unwrap();
        }
        assert!(cache.used() <= 250);
        assert!(cache.peek(&(1, 0, vec![4])).is_some());
        assert!(cache.peek(&(1, 0, vec![0])).is_none());

        let loads = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let cache = cache.clone();
                let loads = loads.clone();
                std::thread::spawn(move || {
                    cache
                        .get_or_load(&(2, 0, vec![0]), 10, || {
                            loads.fetch_add(1, Ordering::SeqCst);
                            std::thread::sleep(std::time::Duration::from_millis(50));
                            Ok(UnitData::Fixed(vec![7; 10]))
                        })
                        .unwrap()
                })
            })
            .collect();
        for t in threads {
            assert_eq!(*t.join().unwrap(), UnitData::Fixed(vec![7; 10]));
        }
        assert_eq!(loads.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_load_that_panics_releases_its_waiters() {
        let cache = Arc::new(UnitCache::new(1000));
        let key = (4, 0, vec![0]);
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        let leader = {
            let cache = cache.clone();
            let key = key.clone();
            std::thread::spawn(move || {
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    cache.get_or_load(&key, 10, || {
                        started_tx.send(()).unwrap();
                        std::thread::sleep(std::time::Duration::from_millis(100));
                        panic!("a bug in a decoder")
                    })
                }));
            })
        };
        started_rx.recv().unwrap();
        // A waiter behind the panicking leader gets an answer (its own load), not a hang.
        let got = cache.get_or_load(&key, 10, || Ok(UnitData::Fixed(vec![5; 10])));
        assert_eq!(*got.unwrap(), UnitData::Fixed(vec![5; 10]));
        leader.join().unwrap();
        assert!(cache.loading.lock().is_empty());
        assert_eq!(cache.used(), 0, "the failed load gave its room back");
    }

    #[test]
    fn served_units_leave_and_stale_prefetches_skip_them() {
        let cache = UnitCache::new(1000);
        let key = (3, 0, vec![0]);
        assert!(cache.claim_prefetch(&key));
        assert!(!cache.claim_prefetch(&key), "queued once");
        // A reader gets there first and is handed all 100 bytes in two parts.
        cache
            .get_or_load(&key, 100, || Ok(UnitData::Fixed(vec![1; 100])))
            .unwrap();
        cache.served(&key, 60);
        assert!(cache.peek(&key).is_some());
        cache.served(&key, 40);
        assert!(cache.peek(&key).is_none());
        assert_eq!(cache.used(), 0);
        // The queued prefetch then finds it served and does not decode it again.
        cache.prefetch(&key, 100, || panic!("served unit decoded again"));
        assert!(cache.peek(&key).is_none());
        // A later claim loads normally.
        assert!(cache.claim_prefetch(&key));
        cache.prefetch(&key, 100, || Ok(UnitData::Fixed(vec![2; 100])));
        assert!(cache.peek(&key).is_some());
    }

    #[test]
    fn prefetch_never_evicts_units_in_use() {
        let cache = UnitCache::new(300);
        for i in 0..3u64 {
            cache
                .get_or_load(&(5, 0, vec![i]), 100, || Ok(UnitData::Fixed(vec![0; 100])))
                .unwrap();
        }
        // The budget holds three units readers just used: a prefetch does not load.
        let key = (5, 0, vec![9]);
        assert!(cache.claim_prefetch(&key));
        cache.prefetch(&key, 100, || panic!("prefetch evicted units in use"));
        assert!(cache.peek(&key).is_none());
        assert_eq!(cache.used(), 300);
        // A reader's own load still makes room.
        cache
            .get_or_load(&key, 100, || Ok(UnitData::Fixed(vec![1; 100])))
            .unwrap();
        assert!(cache.peek(&key).is_some());
        assert_eq!(cache.used(), 300);
        // Once no reader has used a unit for a while, a prefetch may replace it.
        std::thread::sleep(IN_USE);
        let key = (5, 0, vec![10]);
        assert!(cache.claim_prefetch(&key));
        cache.prefetch(&key, 100, || Ok(UnitData::Fixed(vec![2; 100])));
        assert!(cache.peek(&key).is_some());
        assert_eq!(cache.used(), 300);
    }

    /// A reader and a queued prefetch of the same unit race: whoever comes second never
    /// decodes the unit again, however their steps interleave (the reader decodes and
    /// serves it whole, dropping it; the prefetch must then find it served or loading).
    #[test]
    fn a_prefetch_racing_a_reader_never_decodes_a_served_unit_again() {
        let cache = Arc::new(UnitCache::new(1 << 20));
        let decodes = Arc::new(AtomicUsize::new(0));
        let rounds = 20_000u64;
        for round in 0..rounds {
            let key = (6, 0, vec![round]);
            assert!(cache.claim_prefetch(&key));
            let load = |decodes: &AtomicUsize| {
                decodes.fetch_add(1, Ordering::SeqCst);
                Ok(UnitData::Fixed(vec![1; 64]))
            };
            let prefetch = {
                let (cache, decodes, key) = (cache.clone(), decodes.clone(), key.clone());
                std::thread::spawn(move || cache.prefetch(&key, 64, || load(&decodes)))
            };
            let unit = cache.get_or_load(&key, 64, || load(&decodes)).unwrap();
            cache.served(&key, unit.mem_size());
            prefetch.join().unwrap();
            // A prefetch that lost the race may leave the unit cached; it is not read.
            cache.served(&key, unit.mem_size());
        }
        assert_eq!(decodes.load(Ordering::SeqCst), rounds as usize, "decodes");
    }

    #[test]
    fn units_being_loaded_hold_their_room_in_the_budget() {
        let cache = Arc::new(UnitCache::new(300));
        for i in 0..3u64 {
            cache
                .get_or_load(&(6, 0, vec![i]), 100, || Ok(UnitData::Fixed(vec![0; 100])))
                .unwrap();
        }
        // A reader's load of a fourth unit makes room for it as it starts: the least
        // recently used unit goes before the load ends, not after.
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        let (finish_tx, finish_rx) = std::sync::mpsc::channel::<()>();
        let reader = {
            let cache = cache.clone();
            std::thread::spawn(move || {
                cache
                    .get_or_load(&(6, 0, vec![3]), 100, || {
                        started_tx.send(()).unwrap();
                        finish_rx.recv().unwrap();
                        Ok(UnitData::Fixed(vec![3; 100]))
                    })
                    .unwrap();
            })
        };
        started_rx.recv().unwrap();
        assert!(
            cache.peek(&(6, 0, vec![0])).is_none(),
            "room made as the load starts"
        );
        assert_eq!(cache.used(), 300);
        // A prefetch finds no room while units in use and the load fill the budget.
        cache.prefetch(&(6, 0, vec![4]), 100, || {
            panic!("no room for this prefetch")
        });
        finish_tx.send(()).unwrap();
        reader.join().unwrap();
        assert_eq!(cache.used(), 300);
        assert!(cache.peek(&(6, 0, vec![3])).is_some());
    }

    #[test]
    fn runs_held_beside_take_their_room_down_to_half_the_budget() {
        let held = Arc::new(AtomicUsize::new(0));
        let meter = held.clone();
        let cache = UnitCache::new(400).beside(move || meter.load(Ordering::Relaxed) as u64);
        let load = |cache: &UnitCache, i: u64| {
            cache
                .get_or_load(&(7, 0, vec![i]), 100, || Ok(UnitData::Fixed(vec![0; 100])))
                .unwrap();
        };
        for i in 0..4 {
            load(&cache, i);
        }
        assert_eq!(cache.used(), 400);
        // Runs of 100 bytes fetched beside: the next unit takes the room of two.
        held.store(100, Ordering::Relaxed);
        load(&cache, 4);
        assert_eq!(cache.used(), 300);
        assert!(cache.peek(&(7, 0, vec![1])).is_none());
        // However much is held beside, units keep half the budget.
        held.store(1000, Ordering::Relaxed);
        load(&cache, 5);
        assert_eq!(cache.used(), 200);
        held.store(0, Ordering::Relaxed);
        load(&cache, 6);
        load(&cache, 7);
        assert_eq!(cache.used(), 400);
    }
}
