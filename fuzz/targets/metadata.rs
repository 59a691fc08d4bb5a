//! Fuzz target: metadata of every layout. The input is a small store in the container
//! format of `zarrfs_fuzz` (v2 `.zarray`/`.zgroup`/`.zattrs`/`.zmetadata`, v3 `zarr.json`
//! with consolidated metadata, the 2020 draft entry point with `meta/root` documents, and
//! chunks). The hierarchy is opened and walked as `inspect` does; every array found is
//! opened, its first read units are decoded and the start of its flat file is read.
//! Nothing may panic or abort, whatever the documents hold.

use std::sync::Arc;

use zarrfs::array::Array;
use zarrfs::cache::ChunkCache;
use zarrfs::hierarchy::{Hierarchy, Node};
use zarrfs::inspect;
use zarrfs::store::Store;
use zarrfs::view::{Layout, Order, View};
use zarrfs_fuzz::{first_indices, store_from, CappedAlloc};

#[global_allocator]
static ALLOC: CappedAlloc = CappedAlloc;

/// Arrays read per input, at most.
const MAX_ARRAYS: usize = 8;

fn read_array(h: &Hierarchy, path: &str, store: &Arc<dyn Store>) {
    let Ok(Node::Array(meta)) = h.node(path) else {
        return;
    };
    let Ok(array) = Array::open(meta, store.clone()) else {
        return;
    };
    for idx in first_indices(&array.unit_grid(), 2) {
        let _ = array.read_unit(&idx);
    }
    let array = Arc::new(array);
    for layout in [
        Layout::default(),
        Layout {
            order: Order::F,
            big_endian: true,
        },
    ] {
        if let Ok(view) = View::new(array.clone(), Arc::new(ChunkCache::new(1 << 20)), layout) {
            let mut buf = [0u8; 300];
            let _ = view.read_at(0, &mut buf);
            let _ = view.read_at(view.size().saturating_sub(7), &mut buf);
        }
    }
}

fn run(data: &[u8]) {
    let store: Arc<dyn Store> = Arc::new(store_from(data));
    let Ok(h) = Hierarchy::open(store.clone()) else {
        return;
    };
    let _ = h.format_label();
    let Ok(nodes) = inspect::tree(&h, "") else {
        return;
    };
    let mut arrays = 0;
    for node in &nodes {
        let _ = inspect::describe(node);
        if arrays < MAX_ARRAYS && node.get("kind").and_then(|k| k.as_str()) == Some("array") {
            if let Some(path) = node.get("path").and_then(|p| p.as_str()) {
                arrays += 1;
                read_array(&h, path, &store);
            }
        }
    }
}

fn main() {
    afl::fuzz!(|data: &[u8]| run(data));
}
