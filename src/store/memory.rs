//! A store held in memory: a map from key to bytes. For tests, property tests and fuzz
//! targets that build a store without touching the disk.

use std::collections::BTreeMap;
use std::ops::Bound;

use super::{ByteRange, Listing, Store};
use crate::error::Result;

/// A read-only store over an in-memory map (filled before it is shared).
#[derive(Debug, Default, Clone)]
pub struct MemoryStore {
    values: BTreeMap<String, Vec<u8>>,
}

impl MemoryStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// Set `key` to `value`.
    pub fn insert(&mut self, key: impl Into<String>, value: impl Into<Vec<u8>>) {
        self.values.insert(key.into(), value.into());
    }
}

impl Store for MemoryStore {
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        Ok(self.values.get(key).cloned())
    }

    fn get_range(&self, key: &str, range: ByteRange) -> Result<Option<Vec<u8>>> {
        let Some(value) = self.values.get(key) else {
            return Ok(None);
        };
        let (start, len) = range.clip(value.len() as u64);
        Ok(Some(value[start as usize..(start + len) as usize].to_vec()))
    }

    fn list_dir(&self, prefix: &str) -> Result<Listing> {
        let prefix = match prefix.trim_end_matches('/') {
            "" => String::new(),
            p => format!("{p}/"),
        };
        let mut listing = Listing::default();
        // Walk the sorted keys, jumping over each sub-folder's keys at once.
        let mut from = prefix.clone();
        while let Some(key) = self
            .values
            .range::<str, _>((Bound::Included(from.as_str()), Bound::Unbounded))
            .next()
            .map(|e| e.0)
        {
            let Some(rest) = key.strip_prefix(&prefix) else {
                break;
            };
            match rest.split_once('/') {
                Some((dir, _)) => {
                    listing.prefixes.push(dir.to_string());
                    // '0' follows '/': past every key below `dir/`.
                    from = format!("{prefix}{dir}0");
                }
                None => {
                    if !rest.is_empty() {
                        listing.keys.push(rest.to_string());
                    }
                    from = format!("{key}\0");
                }
            }
        }
        Ok(listing)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gets_ranges_and_lists_like_a_folder() {
        let mut s = MemoryStore::new();
        s.insert("a/k", b"0123456789".to_vec());
        s.insert("a/b/c", b"x".to_vec());
        s.insert("top", b"t".to_vec());
        assert_eq!(s.get("a/k").unwrap().unwrap(), b"0123456789");
        assert_eq!(s.get("a").unwrap(), None);
        let span = ByteRange::Span { offset: 8, len: 5 };
        assert_eq!(s.get_range("a/k", span).unwrap().unwrap(), b"89");
        assert_eq!(
            s.get_range("a/k", ByteRange::Suffix(3)).unwrap().unwrap(),
            b"789"
        );
        let root = s.list_dir("").unwrap();
        assert_eq!(
            (root.keys, root.prefixes),
            (vec!["top".to_string()], vec!["a".to_string()])
        );
        let a = s.list_dir("a/").unwrap();
        assert_eq!(
            (a.keys, a.prefixes),
            (vec!["k".to_string()], vec!["b".to_string()])
        );
    }
}
