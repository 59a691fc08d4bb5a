//! What names one version of an opened array in caches: the store it is read from, the
//! key of its metadata and that metadata's version. An array opened again at the same
//! version gets the same id (its decoded units, shard indexes and spans are the same);
//! a new version of its metadata gets a new one, so nothing cached for the old version
//! is ever served for it. Metadata of unknown version gets a new id at every open.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};

use parking_lot::Mutex;

use crate::metadata::ArrayMetadata;
use crate::store::{Store, Version};

/// Ids remembered at most; the table starts over when full (an array opened again then
/// gets a new id: its units are decoded again, never mixed up).
const MAX_SCOPES: usize = 1 << 20;

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

type ScopeKey = (usize, String, String);

static SCOPES: LazyLock<Mutex<HashMap<ScopeKey, u64>>> = LazyLock::new(Default::default);

/// The id of the array of `meta` read from `store`.
pub fn array_id(store: &Arc<dyn Store>, meta: &ArrayMetadata) -> u64 {
    let Version::Tag(tag) = &meta.version else {
        return NEXT_ID.fetch_add(1, Ordering::Relaxed);
    };
    // The store's address tells two stores apart while both are alive, which is as long
    // as any cache holding their units.
    let store = Arc::as_ptr(store) as *const () as usize;
    let key = (store, meta.meta_key.clone(), tag.clone());
    let mut scopes = SCOPES.lock();
    if scopes.len() >= MAX_SCOPES {
        scopes.clear();
    }
    *scopes
        .entry(key)
        .or_insert_with(|| NEXT_ID.fetch_add(1, Ordering::Relaxed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hierarchy::Hierarchy;
    use crate::read::array::Array;
    use crate::store::MemoryStore;

    fn store() -> Arc<dyn Store> {
        let mut store = MemoryStore::new();
        store.insert(
            "zarr.json",
            br#"{"zarr_format": 3, "node_type": "array", "shape": [4], "data_type": "int16",
                "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}},
                "chunk_key_encoding": {"name": "default"}, "fill_value": 0,
                "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}]}"#
                .to_vec(),
        );
        Arc::new(store)
    }

    #[test]
    fn an_array_is_named_by_its_store_metadata_key_and_metadata_version() {
        let store = store();
        let meta = Hierarchy::open(store.clone()).unwrap().array("").unwrap();
        assert!(
            matches!(meta.version, Version::Tag(_)),
            "{:?}",
            meta.version
        );
        let id = |meta: &Arc<ArrayMetadata>, store: &Arc<dyn Store>| {
            Array::open(meta.clone(), store.clone()).unwrap().id()
        };
        // Opened again at the same version: the same units.
        assert_eq!(id(&meta, &store), id(&meta, &store));
        // A new version of its metadata: new units.
        let mut changed = (*meta).clone();
        changed.version = Version::Tag("rewritten".into());
        assert_ne!(id(&Arc::new(changed), &store), id(&meta, &store));
        // Unknown versions never share.
        let mut unknown = (*meta).clone();
        unknown.version = Version::Unknown;
        let unknown = Arc::new(unknown);
        assert_ne!(id(&unknown, &store), id(&unknown, &store));
        // Another store with the same keys and versions: its own units.
        let other = self::store();
        let other_meta = Hierarchy::open(other.clone()).unwrap().array("").unwrap();
        assert_eq!(other_meta.version, meta.version);
        assert_ne!(id(&other_meta, &other), id(&meta, &store));
    }
}
