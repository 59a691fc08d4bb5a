//! Fuzz target: sharding indexes. The input is a v3 array document (the store's root
//! `zarr.json`, normally with a `sharding_indexed` codec), 0x1e, then the bytes of the
//! shard at grid index 0. Every inner chunk of that shard is read the way the mount reads
//! it (index first, then the inner chunk's byte range; never-written inner chunks as a
//! fill marker), and the whole shard is decoded
//! through the full chain. Errors are fine; panics and aborts are findings.

use std::sync::Arc;

use zarrfs::codec::{CodecChain, UnitRepr};
use zarrfs::hierarchy::{Hierarchy, Node};
use zarrfs::read::array::Array;
use zarrfs::store::{MemoryStore, Store};
use zarrfs_fuzz::{first_indices, CappedAlloc, RECORD};

#[global_allocator]
static ALLOC: CappedAlloc = CappedAlloc;

/// Inner chunks read per input, at most.
const MAX_UNITS: usize = 64;

fn run(data: &[u8]) {
    let (doc, shard) = match data.iter().position(|b| *b == RECORD) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let mut only_doc = MemoryStore::new();
    only_doc.insert("zarr.json", doc.to_vec());
    let Ok(h) = Hierarchy::open(Arc::new(only_doc.clone())) else {
        return;
    };
    let Ok(Node::Array(meta)) = h.node("") else {
        return;
    };
    let ndim = meta.shape.len();
    let mut store = only_doc;
    store.insert(meta.chunk_key(&vec![0; ndim]), shard.to_vec());
    let store: Arc<dyn Store> = Arc::new(store);
    let Ok(array) = Array::open(meta.clone(), store) else {
        return;
    };
    // The inner chunks of shard 0: unit indices below the shard's inner grid.
    let per_shard: Vec<u64> = meta
        .chunk_shape
        .iter()
        .zip(array.unit_shape())
        .map(|(c, u)| c / u)
        .zip(array.unit_grid())
        .map(|(n, g)| n.min(g))
        .collect();
    for idx in first_indices(&per_shard, MAX_UNITS) {
        let _ = array.read_unit_or_fill(&idx);
    }
    // The whole shard through the chain, as when sharding is not the only codec.
    let repr = UnitRepr {
        shape: meta.chunk_shape.clone(),
        dtype: meta.dtype.clone(),
        fill: meta.fill.clone(),
    };
    if let Ok(chain) = CodecChain::build(&meta.codecs, &repr) {
        let _ = chain.decode(shard.to_vec());
    }
}

fn main() {
    afl::fuzz!(|data: &[u8]| run(data));
}
