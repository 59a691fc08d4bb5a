//! Taking an array's staged writes into its store: each chunk (each shard of a sharded
//! array) that the staged ranges touch is read (when it exists), decoded, patched,
//! encoded with the array's own codec chain and put back whole, conditional on the
//! version it was read at; a chunk that ends up all fill value is deleted instead, as
//! zarr-python does with `write_empty_chunks=False` (not where the fill value is `null`,
//! which zarr-python 2 reads as unset memory). Chunks untouched are left alone.

use std::collections::BTreeSet;

use crate::codec::{CodecChain, UnitData, UnitRepr};
use crate::error::{Error, Result};
use crate::metadata::{ArrayMetadata, FillValue};
use crate::read::geometry::{Geometry, Layout};
use crate::store::write::{Change, Expected};
use crate::store::Store;

use super::patch::{all_fill, patch_chunk, ElementLayout};
use super::reshape;
use super::staged::Staged;

/// What a commit did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Committed {
    /// Chunks written, and their encoded bytes.
    pub chunks_put: u64,
    pub bytes_put: u64,
    /// Chunks deleted (all fill value).
    pub chunks_deleted: u64,
    /// File bytes taken from the staging.
    pub staged_bytes: u64,
    /// The array's new shape, when the file changed size.
    pub shape: Option<Vec<u64>>,
}

/// Threads that prepare chunks of one commit, at most.
const MAX_WORKERS: usize = 8;

/// What preparing a chunk needs.
struct Prepare<'a> {
    meta: &'a ArrayMetadata,
    store: &'a dyn Store,
    chain: &'a CodecChain,
    repr: &'a UnitRepr,
    geometry: &'a Geometry,
    element: &'a ElementLayout<'a>,
    ranges: &'a [std::ops::Range<u64>],
    staged: &'a Staged,
    fill: &'a [u8],
}

/// A chunk ready to be written: its key, what the store is expected to hold there, and
/// its encoded bytes (`None`: it is all fill value, to be deleted).
struct Prepared {
    key: String,
    expected: Expected,
    encoded: Option<Vec<u8>>,
}

/// Prepare `chunks` on up to `workers` threads and apply each through `change` in their
/// order as soon as it and those before it are ready: the store writes (on this thread)
/// overlap the reads and encodes of the chunks after them, and at most `2 × workers`
/// prepared chunks wait in memory. The first failure stops the rest.
fn prepare_and_apply(
    ctx: &Prepare,
    chunks: &[Vec<u64>],
    workers: usize,
    change: &mut dyn Change,
    done: &mut Committed,
) -> Result<()> {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let prepare_one = |u: &[u64]| {
        // A panic in a codec fails its chunk (and so the commit), not the daemon.
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| prepare(ctx, u))).unwrap_or_else(
            |_| {
                Err(Error::Internal(format!(
                    "{}: preparing chunk {u:?} failed",
                    ctx.meta.meta_key
                )))
            },
        )
    };
    if workers <= 1 || chunks.len() <= 1 {
        for u in chunks {
            apply(prepare_one(u)?, change, done)?;
        }
        return Ok(());
    }
    let window = workers * 2;
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    // How many chunks were applied: a worker takes chunk i once i < applied + window.
    let applied = parking_lot::Mutex::new(0usize);
    let moved = parking_lot::Condvar::new();
    let (tx, rx) = std::sync::mpsc::channel::<(usize, Result<Prepared>)>();
    std::thread::scope(|scope| {
        for _ in 0..workers.min(chunks.len()) {
            let tx = tx.clone();
            let (next, stop, applied, moved) = (&next, &stop, &applied, &moved);
            scope.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= chunks.len() {
                    return;
                }
                {
                    let mut a = applied.lock();
                    while i >= *a + window && !stop.load(Ordering::SeqCst) {
                        moved.wait(&mut a);
                    }
                }
                if stop.load(Ordering::SeqCst) || tx.send((i, prepare_one(&chunks[i]))).is_err() {
                    return;
                }
            });
        }
        drop(tx);
        let mut ready = std::collections::BTreeMap::new();
        let mut want = 0;
        let mut result = Ok(());
        for (i, prepared) in rx {
            ready.insert(i, prepared);
            while let Some(prepared) = ready.remove(&want) {
                if result.is_ok() {
                    result = prepared.and_then(|p| apply(p, &mut *change, &mut *done));
                    if result.is_err() {
                        stop.store(true, Ordering::SeqCst);
                    }
                }
                want += 1;
                *applied.lock() = want;
                moved.notify_all();
            }
        }
        result
    })
}

/// Chunk `u` as the staged bytes make it: read (unless written whole), patched, and
/// encoded, or marked for deletion when it is all fill value.
fn prepare(ctx: &Prepare, u: &[u64]) -> Result<Prepared> {
    let key = ctx.meta.chunk_key(u);
    let item = ctx.element.item as u64;
    let read_staged = |at: u64, buf: &mut [u8]| ctx.staged.read_at(at, buf);
    // A chunk written whole is not read (only its version is asked for).
    let (mut chunk, expected) = if fully_written(ctx.geometry, u, item, ctx.staged)? {
        let expected = match ctx.store.head(&key)? {
            Some(head) => Expected::At(head.version),
            None => Expected::Absent,
        };
        (ctx.repr.filled()?.into_fixed()?, expected)
    } else {
        match ctx.store.read(&key, None)? {
            Some(value) => {
                let data = ctx.chain.decode(value.bytes).map_err(|e| e.at_key(&key))?;
                let bytes = match data {
                    UnitData::Fill(_) => ctx.repr.filled()?.into_fixed()?,
                    data => data.into_fixed()?,
                };
                (bytes, Expected::At(value.version))
            }
            None => (ctx.repr.filled()?.into_fixed()?, Expected::Absent),
        }
    };
    if chunk.len() != ctx.repr.fixed_len()? {
        return Err(Error::corrupt(&key, "decoded chunk has the wrong size"));
    }
    patch_chunk(
        ctx.geometry,
        u,
        ctx.element,
        ctx.ranges,
        &read_staged,
        &mut chunk,
    )?;
    // A chunk of a v2 array with no fill value (`null`) is never deleted: readers
    // differ on what a missing one holds.
    if !ctx.meta.fill_json.is_null() && all_fill(&chunk, ctx.fill) {
        return Ok(Prepared {
            key,
            expected,
            encoded: None,
        });
    }
    let encoded = ctx
        .chain
        .encode(UnitData::Fixed(chunk))
        .map_err(|e| e.at_key(&key))?;
    Ok(Prepared {
        key,
        expected,
        encoded: Some(encoded),
    })
}

/// Write a prepared chunk through `change`: put it, or delete it (when it was there).
fn apply(p: Prepared, change: &mut dyn Change, done: &mut Committed) -> Result<()> {
    match p.encoded {
        None => {
            if p.expected != Expected::Absent {
                super::fault::before_put();
                change.delete(&p.key, &p.expected)?;
                done.chunks_deleted += 1;
            }
        }
        Some(encoded) => {
            super::fault::before_put();
            change.put(&p.key, &encoded, &p.expected)?;
            done.chunks_put += 1;
            done.bytes_put += encoded.len() as u64;
        }
    }
    Ok(())
}

/// Whether every file byte of chunk `u` inside the array was written (staged).
fn fully_written(geometry: &Geometry, u: &[u64], item: u64, staged: &Staged) -> Result<bool> {
    let mut whole = true;
    geometry.unit_runs(u, crate::read::geometry::Order::C, |e, run| {
        whole = whole && staged.covers(e * item..(e + run.len) * item);
        Ok(())
    })?;
    Ok(whole)
}

/// The array's codec chain for whole stored chunks, checked to encode: a chain with a
/// codec zarrfs cannot encode makes the array unwritable.
pub fn encoder(meta: &ArrayMetadata) -> Result<CodecChain> {
    let not_writable = |reason: String| Error::NotWritable {
        key: meta.meta_key.clone(),
        reason,
    };
    let one = match &meta.fill {
        FillValue::Fixed(one) if meta.dtype.size().is_some() => one.clone(),
        _ => return Err(not_writable("variable-length elements".into())),
    };
    let repr = repr_of(meta);
    let chain = CodecChain::build(&meta.codecs, &repr).map_err(|e| not_writable(e.to_string()))?;
    // An element's worth is enough to find a codec without an encoder.
    let probe = UnitRepr {
        shape: vec![1; meta.chunk_shape.len()],
        ..repr.clone()
    };
    if let Ok(small) = CodecChain::build(&meta.codecs, &probe) {
        // A codec's encoder meets a hostile document's parameters here first (`zarrfs
        // inspect` asks of every array): a panic in it makes the array unwritable.
        let encoded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            small.encode(UnitData::Fixed(one))
        }));
        match encoded {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Err(not_writable(e.to_string())),
            Err(_) => return Err(not_writable("its encoder fails on these parameters".into())),
        }
    }
    Ok(chain)
}

fn repr_of(meta: &ArrayMetadata) -> UnitRepr {
    UnitRepr {
        shape: meta.chunk_shape.clone(),
        dtype: meta.dtype.clone(),
        fill: meta.fill.clone(),
    }
}

/// Take what `staged` holds for the array of `meta` into `store` through `writer`, its
/// file laid out as `layout`. On failure the ranges stay staged (a later commit tries
/// again from the store as it is then); chunks put before the failure hold their bytes.
pub fn commit(
    staged: &Staged,
    meta: &ArrayMetadata,
    store: &dyn Store,
    change: &mut dyn Change,
    layout: Layout,
) -> Result<Committed> {
    staged.commit_in_turn(|| commit_held(staged, meta, store, change, layout))
}

/// [`commit`], with the array's turn held.
fn commit_held(
    staged: &Staged,
    meta: &ArrayMetadata,
    store: &dyn Store,
    change: &mut dyn Change,
    layout: Layout,
) -> Result<Committed> {
    let ranges = staged.ranges();
    let chain = encoder(meta)?;
    let repr = repr_of(meta);
    let item = meta.dtype.size().unwrap_or(1).max(1);
    let old_size = meta
        .shape
        .iter()
        .try_fold(item as u64, |acc, n| acc.checked_mul(*n))
        .ok_or_else(|| Error::BadWrite(format!("{}: too large", meta.meta_key)))?;
    let size = staged.size();
    let shape = match size == old_size {
        true => meta.shape.clone(),
        false => {
            if let Some(why) = reshape::cannot_resize(meta) {
                return Err(Error::BadWrite(format!(
                    "{}: cannot change size: {why}",
                    meta.meta_key
                )));
            }
            reshape::shape_for(meta, layout, item, size)?
        }
    };
    let geometry = Geometry::new(&shape, &meta.chunk_shape, layout.order, item);
    let swap = if layout.big_endian {
        meta.dtype.swap_units()
    } else {
        Vec::new()
    };
    let element = ElementLayout { item, swap: &swap };
    let fill = match &meta.fill {
        FillValue::Fixed(one) => one.clone(),
        FillValue::Var(_) => Vec::new(),
    };
    let mut chunks = BTreeSet::new();
    for r in &ranges {
        let (first, last) = (r.start / item as u64, r.end.div_ceil(item as u64));
        chunks.extend(geometry.units(first, last, usize::MAX));
    }
    let mut done = Committed {
        staged_bytes: ranges.iter().map(|r| r.end - r.start).sum(),
        ..Committed::default()
    };
    if shape != meta.shape && change.all_or_nothing() {
        // Seen whole or not at all: the new shape first, which the store checks chunks
        // against (and which drops those past a shrunk end itself).
        super::fault::before_put();
        reshape::rewrite_shape(meta, store, change, &shape)?;
        done.shape = Some(shape.clone());
    }
    // Chunks are prepared (read, patched, encoded) on several threads and put one by
    // one in their order as they are ready, so a commit uses the cores as the libraries'
    // writers do, its store writes overlap the encodes, and its writes stay in order.
    let ctx = Prepare {
        meta,
        store,
        chain: &chain,
        repr: &repr,
        geometry: &geometry,
        element: &element,
        ranges: &ranges,
        staged,
        fill: &fill,
    };
    let chunks: Vec<Vec<u64>> = chunks.into_iter().collect();
    let workers = crate::pool::cores().clamp(1, MAX_WORKERS);
    prepare_and_apply(&ctx, &chunks, workers, change, &mut done)?;
    if shape != meta.shape && !change.all_or_nothing() {
        // A shrink drops the chunks wholly past the new end; the document follows the
        // chunks, so a reader never finds a shape whose chunks are not written yet.
        for key in reshape::chunks_past(meta, &shape) {
            if let Some(head) = store.head(&key)? {
                super::fault::before_put();
                change.delete(&key, &Expected::At(head.version))?;
                done.chunks_deleted += 1;
            }
        }
        super::fault::before_put();
        reshape::rewrite_shape(meta, store, change, &shape)?;
        done.shape = Some(shape);
    }
    staged.committed(&ranges);
    Ok(done)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::hierarchy::Hierarchy;
    use crate::read::view::Order;
    use crate::store::FolderStore;

    /// A change that fails every put as another writer's (`refuse`), or counts them.
    struct Puts {
        refuse: bool,
        made: usize,
    }

    impl Change for &mut Puts {
        fn put(&mut self, key: &str, _bytes: &[u8], _expected: &Expected) -> Result<()> {
            if self.refuse {
                return Err(Error::Conflict {
                    key: key.into(),
                    reason: "another writer".into(),
                });
            }
            self.made += 1;
            Ok(())
        }
        fn delete(&mut self, _key: &str, _expected: &Expected) -> Result<()> {
            self.made += 1;
            Ok(())
        }
        fn finish(self: Box<Self>, _message: &str) -> Result<()> {
            Ok(())
        }
    }

    /// A commit that started while an earlier one of the same writes was meeting
    /// another writer's change (a close racing an `fsync`) is refused once its turn
    /// comes, and puts nothing: it does not patch over the other writer's chunk.
    #[test]
    fn a_commit_after_one_that_met_another_writer_is_refused_until_a_new_writer() {
        let dir = crate::store::fixtures::v2_group_with_array_a("commit-turns");
        let store: Arc<dyn Store> = Arc::new(FolderStore::open(&dir).unwrap());
        let h = Hierarchy::open(store.clone()).unwrap();
        let (meta, _) = h.array_and_store("a").unwrap();
        let staged = Staged::create("a", 3, dir.join("a.staged")).unwrap();
        {
            let _turn = staged.turn();
            staged.write(0, &[9], false).unwrap();
        }
        let layout = Layout {
            order: Order::C,
            big_endian: false,
        };
        let mut refusing = Puts {
            refuse: true,
            made: 0,
        };
        let e = commit(&staged, &meta, store.as_ref(), &mut &mut refusing, layout);
        assert!(matches!(e, Err(Error::Conflict { .. })), "{e:?}");
        assert!(staged.conflicted());
        let mut counting = Puts {
            refuse: false,
            made: 0,
        };
        let e = commit(&staged, &meta, store.as_ref(), &mut &mut counting, layout);
        assert!(matches!(e, Err(Error::Conflict { .. })), "{e:?}");
        assert_eq!(counting.made, 0, "a refused commit put nothing");
        assert!(!staged.is_empty(), "the writes stay staged");
        // A new writer of the array carries on with them.
        staged.set_conflicted(false);
        let done = commit(&staged, &meta, store.as_ref(), &mut &mut counting, layout).unwrap();
        assert_eq!((done.chunks_put, counting.made), (1, 1));
        assert!(!staged.conflicted());
        let _ = std::fs::remove_dir_all(dir);
    }
}
