//! Fuzz target: metadata of every layout. The input is a small store in the container
//! format of `zarrfs_fuzz` (v2 `.zarray`/`.zgroup`/`.zattrs`/`.zmetadata`, v3 `zarr.json`
//! with consolidated metadata, the 2020 draft entry point with `meta/root` documents, and
//! chunks). The hierarchy is opened and walked as `inspect` does; every array found is
//! opened, its first read units are decoded and the start of its flat file is read.
//! Then the same store is walked through the filesystem core the mount serves
//! (readdir, lookup, getattr, open, read, xattrs of every entry, sidecars included).
//! Nothing may panic or abort, whatever the documents hold; a hierarchy that opens lists
//! its root, and every listed name can be looked up.

use std::sync::Arc;

use zarrfs::cli::inspect;
use zarrfs::fs::{FileKind, FsOptions, ZarrFs, ROOT};
use zarrfs::hierarchy::{Hierarchy, Node};
use zarrfs::read::array::Array;
use zarrfs::read::cache::UnitCache;
use zarrfs::read::readahead::Cursor;
use zarrfs::read::view::{Layout, Order, View};
use zarrfs::store::Store;
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
        let _ = array.read_unit_or_fill(&idx);
    }
    let array = Arc::new(array);
    for layout in [
        Layout::default(),
        Layout {
            order: Order::F,
            big_endian: true,
        },
    ] {
        if let Ok(view) = View::new(array.clone(), Arc::new(UnitCache::new(1 << 20)), layout) {
            let mut buf = [0u8; 300];
            let _ = view.read_at(&Cursor::default(), 0, &mut buf);
            let _ = view.read_at(&Cursor::default(), view.size().saturating_sub(7), &mut buf);
        }
    }
}

/// Filesystem entries visited per input, at most.
const MAX_ENTRIES: usize = 48;

/// Walk the mount's view of `h`: every directory listed, every entry looked up, stat'ed,
/// opened and read.
fn walk_fs(h: Hierarchy) {
    let options = FsOptions {
        layout: Layout::default(),
        cache_bytes: 1 << 20,
        prefetch_threads: 1,
        views: "all".parse().unwrap_or_default(),
        staging: None,
        write_wait: Default::default(),
        commit_message: None,
        new_defaults: Default::default(),
    };
    let fs = ZarrFs::new(h, options, "store.zarr");
    let _ = fs.getattr(ROOT);
    let mut dirs = vec![(ROOT, 0usize)];
    let mut seen = 0;
    while let Some((dir, depth)) = dirs.pop() {
        let listing = fs.readdir(dir);
        if dir == ROOT {
            if let Err(e) = &listing {
                panic!("the root of an open hierarchy does not list: {e}");
            }
        }
        let Ok(listing) = listing else {
            continue;
        };
        for entry in listing.iter() {
            if seen >= MAX_ENTRIES {
                return;
            }
            seen += 1;
            if let Err(e) = fs.lookup(dir, &entry.name) {
                panic!("listed entry {:?} does not look up: {e}", entry.name);
            }
            let _ = fs.getattr(entry.ino);
            let _ = fs.xattrs(entry.ino);
            match entry.kind {
                FileKind::Directory if depth < 4 => dirs.push((entry.ino, depth + 1)),
                FileKind::Directory => {}
                FileKind::File => {
                    if let Ok(fh) = fs.open(entry.ino) {
                        let _ = fs.read(fh, 0, 512);
                        let _ = fs.read_in_place(fh, 0, 64);
                        fs.release(fh);
                    }
                }
            }
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
    walk_fs(h);
}

fn main() {
    afl::fuzz!(|data: &[u8]| run(data));
}
