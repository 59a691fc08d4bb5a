//! Shared pieces of the zarrfs fuzz targets: a global allocator with a hard limit on live
//! memory (an allocation that an infallible caller cannot get aborts the process, which
//! afl-fuzz records as a crash; `try_reserve` callers get an error), and the container
//! format of the targets whose input is several documents.
//!
//! Container format: records separated by [`RECORD`] (0x1e); a store record is
//! `key` [`KEY_END`] (0x1f) `value`. JSON never holds these bytes unescaped, so fixture
//! documents can be packed as seeds unchanged.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use zarrfs::store::MemoryStore;

/// Separates records.
pub const RECORD: u8 = 0x1e;
/// Ends the key of a store record.
pub const KEY_END: u8 = 0x1f;

/// Live heap bytes the fuzzed code may hold at once (1 GiB). zarrfs must handle sizes
/// beyond what the machine can give without aborting: sizes from the store are checked
/// before allocating, and legitimately large buffers are reserved fallibly.
pub const MEMORY_LIMIT: usize = 1 << 30;

/// The system allocator, refusing allocations that would exceed [`MEMORY_LIMIT`].
pub struct CappedAlloc;

static LIVE: AtomicUsize = AtomicUsize::new(0);

impl CappedAlloc {
    fn claim(size: usize) -> bool {
        let mut live = LIVE.load(Ordering::Relaxed);
        loop {
            let Some(next) = live.checked_add(size).filter(|n| *n <= MEMORY_LIMIT) else {
                return false;
            };
            match LIVE.compare_exchange_weak(live, next, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return true,
                Err(now) => live = now,
            }
        }
    }

    fn release(size: usize) {
        LIVE.fetch_sub(size, Ordering::Relaxed);
    }
}

// SAFETY: every call is forwarded to `System` unchanged; only the byte count is tracked.
unsafe impl GlobalAlloc for CappedAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !Self::claim(layout.size()) {
            return std::ptr::null_mut();
        }
        let p = System.alloc(layout);
        if p.is_null() {
            Self::release(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if !Self::claim(layout.size()) {
            return std::ptr::null_mut();
        }
        let p = System.alloc_zeroed(layout);
        if p.is_null() {
            Self::release(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        Self::release(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let old = layout.size();
        if new_size > old && !Self::claim(new_size - old) {
            return std::ptr::null_mut();
        }
        let p = System.realloc(ptr, layout, new_size);
        if p.is_null() {
            if new_size > old {
                Self::release(new_size - old);
            }
        } else if new_size < old {
            Self::release(old - new_size);
        }
        p
    }
}

/// The records of a container input.
pub fn records(data: &[u8]) -> impl Iterator<Item = &[u8]> {
    data.split(|b| *b == RECORD)
}

/// Split a store record into key and value (the whole record is the value of key "").
pub fn store_record(record: &[u8]) -> (String, &[u8]) {
    match record.iter().position(|b| *b == KEY_END) {
        Some(i) => (
            String::from_utf8_lossy(&record[..i]).into_owned(),
            &record[i + 1..],
        ),
        None => (String::new(), record),
    }
}

/// A store holding every store record of `data` (records with an empty key are dropped).
pub fn store_from(data: &[u8]) -> MemoryStore {
    let mut store = MemoryStore::new();
    for record in records(data) {
        let (key, value) = store_record(record);
        let key = key.trim_start_matches('/');
        if !key.is_empty() {
            store.insert(key, value.to_vec());
        }
    }
    store
}

/// Pack `(key, value)` pairs in the container format (for seeds and tests).
pub fn pack<'a>(entries: impl IntoIterator<Item = (&'a str, &'a [u8])>) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, (key, value)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push(RECORD);
        }
        out.extend_from_slice(key.as_bytes());
        out.push(KEY_END);
        out.extend_from_slice(value);
    }
    out
}

/// At most this many grid indices of `grid`, in C order from the origin.
pub fn first_indices(grid: &[u64], limit: usize) -> Vec<Vec<u64>> {
    let mut out = Vec::new();
    if grid.contains(&0) {
        return out;
    }
    let mut idx = vec![0u64; grid.len()];
    while out.len() < limit {
        out.push(idx.clone());
        // Odometer increment from the last axis.
        let mut axis = grid.len();
        loop {
            if axis == 0 {
                return out;
            }
            axis -= 1;
            idx[axis] += 1;
            if idx[axis] < grid[axis] {
                break;
            }
            idx[axis] = 0;
        }
    }
    out
}
