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
