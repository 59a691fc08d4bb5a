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

/// Put chunk `chunk` (decoded) at `key`, encoded, on the condition `expected`; or
/// delete it when it is all fill value (`fill`), unless the fill value is `null` (a v2
/// array with none: readers differ on what a missing chunk holds, so it is kept).
fn put_or_delete(
    chain: &CodecChain,
    change: &mut dyn Change,
    (key, expected): (&str, Expected),
    chunk: Vec<u8>,
    (fill, null_fill): (&[u8], bool),
    done: &mut Committed,
) -> Result<()> {
    if !null_fill && all_fill(&chunk, fill) {
        if expected != Expected::Absent {
            super::fault::before_put();
            change.delete(key, &expected)?;
            done.chunks_deleted += 1;
        }
        return Ok(());
    }
    let encoded = chain
        .encode(UnitData::Fixed(chunk))
        .map_err(|e| e.at_key(key))?;
    super::fault::before_put();
    change.put(key, &encoded, &expected)?;
    done.chunks_put += 1;
    done.bytes_put += encoded.len() as u64;
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
    let _turn = staged.turn();
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
    let read_staged = |at: u64, buf: &mut [u8]| staged.read_at(at, buf);
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
    for u in chunks {
        let key = meta.chunk_key(&u);
        // A chunk written whole is not read (only its version is asked for).
        if fully_written(&geometry, &u, item as u64, staged)? {
            let expected = match store.head(&key)? {
                Some(head) => Expected::At(head.version),
                None => Expected::Absent,
            };
            let mut chunk = repr.filled()?.into_fixed()?;
            patch_chunk(&geometry, &u, &element, &ranges, &read_staged, &mut chunk)?;
            put_or_delete(
                &chain,
                &mut *change,
                (&key, expected),
                chunk,
                (&fill, meta.fill_json.is_null()),
                &mut done,
            )?;
            continue;
        }
        let (mut chunk, expected) = match store.read(&key, None)? {
            Some(value) => {
                let data = chain.decode(value.bytes).map_err(|e| e.at_key(&key))?;
                let bytes = match data {
                    UnitData::Fill(_) => repr.filled()?.into_fixed()?,
                    data => data.into_fixed()?,
                };
                (bytes, Expected::At(value.version))
            }
            None => (repr.filled()?.into_fixed()?, Expected::Absent),
        };
        if chunk.len() != repr.fixed_len()? {
            return Err(Error::corrupt(&key, "decoded chunk has the wrong size"));
        }
        patch_chunk(&geometry, &u, &element, &ranges, &read_staged, &mut chunk)?;
        put_or_delete(
            &chain,
            &mut *change,
            (&key, expected),
            chunk,
            (&fill, meta.fill_json.is_null()),
            &mut done,
        )?;
    }
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
