//! A map of the entries lately used, bounded by their count, whose table grows as it
//! fills: `lru::LruCache::new` allocates the whole table for its capacity at once, which
//! every array built to answer a `stat` paid three times over.

use std::hash::Hash;
use std::ops::{Deref, DerefMut};

use lru::LruCache;

/// An [`LruCache`] of at most `cap` entries that allocates only for those it holds.
/// Reads go to the cache itself; [`Recent::put`] drops the least recently used entry
/// when a new key would pass the bound.
pub struct Recent<K: Hash + Eq, V> {
    map: LruCache<K, V>,
    cap: usize,
}

impl<K: Hash + Eq, V> Recent<K, V> {
    pub fn new(cap: usize) -> Self {
        Recent {
            map: LruCache::unbounded(),
            cap: cap.max(1),
        }
    }

    /// Puts `v` under `k`, returning the value it replaced, if any.
    pub fn put(&mut self, k: K, v: V) -> Option<V> {
        if self.map.len() >= self.cap && !self.map.contains(&k) {
            self.map.pop_lru();
        }
        self.map.put(k, v)
    }
}

impl<K: Hash + Eq, V> Deref for Recent<K, V> {
    type Target = LruCache<K, V>;
    fn deref(&self) -> &Self::Target {
        &self.map
    }
}

impl<K: Hash + Eq, V> DerefMut for Recent<K, V> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.map
    }
}

#[cfg(test)]
mod tests {
    use super::Recent;

    #[test]
    fn holds_at_most_its_bound_dropping_the_least_recently_used() {
        let mut r = Recent::new(3);
        for k in 0..3 {
            assert_eq!(r.put(k, k * 10), None);
        }
        // 0 used last of all: 1 is now the least recently used.
        assert_eq!(r.get(&0), Some(&0));
        assert_eq!(r.put(3, 30), None);
        assert_eq!(r.len(), 3);
        assert_eq!(r.get(&1), None);
        assert_eq!(r.get(&0), Some(&0));
        // A key it holds is replaced, not counted twice.
        assert_eq!(r.put(0, 1), Some(0));
        assert_eq!(r.len(), 3);
        assert_eq!(r.get(&2), Some(&20));
        assert_eq!(r.get(&3), Some(&30));
    }

    #[test]
    fn a_bound_of_zero_holds_one() {
        let mut r = Recent::new(0);
        r.put("a", 1);
        r.put("b", 2);
        assert_eq!(r.len(), 1);
        assert_eq!(r.get("b"), Some(&2));
    }
}
