//! What names one version of an opened array in caches: the store it is read from, the
//! key of its metadata and that metadata's version. An array opened again at the same
//! version gets the same id (its decoded units, shard indexes and spans are the same);
//! a new version of its metadata gets a new one, so nothing cached for the old version
//! is ever served for it. Metadata of unknown version gets a new id at every open.
//! A unit whose store names its bytes ([`Store::identity`]) is filed under that name and
//! the way the array decodes, instead: versions of an array that share a chunk object
//! share its decoded units.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};

use parking_lot::Mutex;

use crate::metadata::ArrayMetadata;
use crate::store::Store;

/// Ids remembered at most; the table starts over when full (an array opened again then
/// gets a new id: its units are decoded again, never mixed up).
const MAX_SCOPES: usize = 1 << 20;

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// What an id is for: (store address, metadata key, metadata version) for an array's
/// version; (0, how the array decodes, what the store names the bytes) for a unit named
/// by its bytes (no store lives at address 0).
type ScopeKey = (usize, String, String);

static SCOPES: LazyLock<Mutex<HashMap<ScopeKey, u64>>> = LazyLock::new(Default::default);

/// The id filed under `key`, made at first use.
fn id_of(key: ScopeKey) -> u64 {
    let mut scopes = SCOPES.lock();
    if scopes.len() >= MAX_SCOPES {
        scopes.clear();
    }
    *scopes
        .entry(key)
        .or_insert_with(|| NEXT_ID.fetch_add(1, Ordering::Relaxed))
}

/// The id of the units decoded the way `decoding` says (the array's data type, chunk
/// shape, fill value and codecs) from the bytes the store names `identity`.
pub fn content_id(decoding: &str, identity: String) -> u64 {
    id_of((0, decoding.to_string(), identity))
}

/// What decides how an array's stored bytes decode: two arrays alike in it decode the
/// same bytes to the same units (their shapes and attributes may differ).
pub fn decoding(meta: &ArrayMetadata) -> String {
    format!(
        "{:?} {:?} {} {} {:?}",
        meta.format, meta.chunk_shape, meta.dtype_json, meta.fill_json, meta.codecs
    )
}

/// The id of the array of `meta` read from `store`.
pub fn array_id(store: &Arc<dyn Store>, meta: &ArrayMetadata) -> u64 {
    if !meta.version.is_known() {
        return NEXT_ID.fetch_add(1, Ordering::Relaxed);
    }
    // The store's address tells two stores apart while both are alive, which is as long
    // as any cache holding their units.
    let store = Arc::as_ptr(store) as *const () as usize;
    id_of((store, meta.meta_key.clone(), meta.version.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hierarchy::Hierarchy;
    use crate::read::array::Array;
    use crate::store::{MemoryStore, Version};

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
        assert!(meta.version.is_known(), "{:?}", meta.version);
        let id = |meta: &Arc<ArrayMetadata>, store: &Arc<dyn Store>| {
            Array::open(meta.clone(), store.clone()).unwrap().id()
        };
        // Opened again at the same version: the same units.
        assert_eq!(id(&meta, &store), id(&meta, &store));
        // A new version of its metadata: new units.
        let mut changed = (*meta).clone();
        changed.version = Version::Label("rewritten".into());
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

    /// A store that names chunk `c/0`'s bytes (as an Icechunk repository names a chunk
    /// object), and no other key's.
    struct Named(Arc<dyn Store>);

    impl Store for Named {
        fn read(
            &self,
            key: &str,
            range: Option<crate::store::ByteRange>,
        ) -> crate::error::Result<Option<crate::store::Value>> {
            self.0.read(key, range)
        }
        fn list_dir(&self, prefix: &str) -> crate::error::Result<crate::store::Listing> {
            self.0.list_dir(prefix)
        }
        fn head(&self, key: &str) -> crate::error::Result<Option<crate::store::Head>> {
            self.0.head(key)
        }
        fn will_need(&self, key: &str) {
            self.0.will_need(key)
        }
        fn caps(&self) -> crate::store::Caps {
            self.0.caps()
        }
        fn identity(&self, key: &str) -> Option<String> {
            (key == "c/0").then(|| "chunk object 1".to_string())
        }
        fn names_bytes(&self) -> bool {
            true
        }
    }

    #[test]
    fn units_named_by_their_bytes_are_shared_by_versions_that_decode_alike() {
        let store: Arc<dyn Store> = Arc::new(Named(store()));
        let meta = Hierarchy::open(store.clone()).unwrap().array("").unwrap();
        let open = |meta: ArrayMetadata| Array::open(Arc::new(meta), store.clone()).unwrap();
        let a = open((*meta).clone());
        // Another version, grown: chunk 0 is the same object.
        let mut grown = (*meta).clone();
        grown.version = Version::Label("grown".into());
        grown.shape = vec![6];
        let b = open(grown);
        assert_ne!(a.id(), b.id());
        assert_eq!(a.unit_id(&[0]), b.unit_id(&[0]));
        assert!(a.shares_units());
        // Chunks the store does not name stay the array version's own.
        assert_eq!(a.unit_id(&[1]), a.id());
        assert_ne!(a.unit_id(&[1]), b.unit_id(&[1]));
        // The same object decoded another way (another data type): other units.
        let mut other = (*meta).clone();
        other.version = Version::Label("retyped".into());
        other.dtype_json = serde_json::json!("uint16");
        assert_ne!(open(other).unit_id(&[0]), a.unit_id(&[0]));
    }
}
