//! The decode limit of an array: every stored chunk is first read into memory, then all
//! of its read units are decoded on THREADS threads with nothing else to do (no store
//! I/O, no assembly, no FUSE), and the wall time is printed in seconds. `zarrfs cat` and
//! the mount are measured against it by `scripts/bench.sh`.
//!
//!     cargo run --release --example decode_limit -- STORE PATH [THREADS]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use zarrfs::hierarchy::{Hierarchy, Node};
use zarrfs::read::array::Array;
use zarrfs::store::{FolderStore, MemoryStore, Store, StoreExt};

fn grid_indexes(grid: &[u64]) -> Vec<Vec<u64>> {
    let mut out = vec![vec![]];
    for &n in grid {
        out = out
            .into_iter()
            .flat_map(|prefix| {
                (0..n).map(move |i| {
                    let mut idx = prefix.clone();
                    idx.push(i);
                    idx
                })
            })
            .collect();
    }
    out
}

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(store), Some(path)) = (args.first(), args.get(1)) else {
        return Err("usage: decode_limit STORE PATH [THREADS]".into());
    };
    let threads: usize = match args.get(2) {
        Some(t) => t.parse().map_err(|e| format!("threads: {e}"))?,
        None => std::thread::available_parallelism().map_or(1, usize::from),
    };
    let folder: Arc<dyn Store> = Arc::new(FolderStore::open(store).map_err(|e| e.to_string())?);
    let h = Hierarchy::open(folder.clone()).map_err(|e| e.to_string())?;
    let Node::Array(meta) = h.node(path).map_err(|e| e.to_string())? else {
        return Err(format!("{path}: not an array"));
    };
    // Every stored chunk (or shard) in memory first.
    let mut memory = MemoryStore::new();
    for idx in grid_indexes(&meta.grid_shape()) {
        let key = meta.chunk_key(&idx);
        if let Some(bytes) = folder.get(&key).map_err(|e| e.to_string())? {
            memory.insert(key, bytes);
        }
    }
    let array = Arc::new(Array::open(meta, Arc::new(memory)).map_err(|e| e.to_string())?);
    let units = Arc::new(grid_indexes(&array.unit_grid()));
    let next = AtomicU64::new(0);
    let started = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                let Some(idx) = units.get(i) else { break };
                if let Err(e) = array.read_unit_or_fill(idx) {
                    eprintln!("decode_limit: {e}");
                    std::process::exit(1);
                }
            });
        }
    });
    println!("{:.6}", started.elapsed().as_secs_f64());
    Ok(())
}
