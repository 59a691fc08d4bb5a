//! A store held in memory: a map from key to bytes. For tests, property tests and fuzz
//! targets that build a store without touching the disk.

use std::collections::BTreeMap;
use std::ops::Bound;

use crate::error::Result;
use crate::store::{ByteRange, Caps, Head, Listing, Store, Value, Version};

/// A read-only store over an in-memory map (filled before it is shared). Each value's
/// version is the number of the `insert` that set it.
#[derive(Debug, Default, Clone)]
pub struct MemoryStore {
    values: BTreeMap<String, (Vec<u8>, u64)>,
    inserts: u64,
}

impl MemoryStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// Set `key` to `value`.
    pub fn insert(&mut self, key: impl Into<String>, value: impl Into<Vec<u8>>) {
        self.inserts += 1;
        self.values.insert(key.into(), (value.into(), self.inserts));
    }
}

fn version(generation: u64) -> Version {
    Version::Generation(generation)
}

impl Store for MemoryStore {
    fn read(&self, key: &str, range: Option<ByteRange>) -> Result<Option<Value>> {
        let Some((value, generation)) = self.values.get(key) else {
            return Ok(None);
        };
        let (start, len) = range.map_or((0, value.len() as u64), |r| r.clip(value.len() as u64));
        Ok(Some(Value {
            bytes: value[start as usize..(start + len) as usize].to_vec(),
            version: version(*generation),
        }))
    }

    fn head(&self, key: &str) -> Result<Option<Head>> {
        Ok(self.values.get(key).map(|(value, generation)| Head {
            size: value.len() as u64,
            version: version(*generation),
        }))
    }

    fn will_need(&self, _key: &str) {}

    fn caps(&self) -> Caps {
        Caps::local()
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
    use crate::store::StoreExt;

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
