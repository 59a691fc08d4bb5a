//! Growing and shrinking an array through its file: the file's size, in whole rows of
//! the slowest axis (axis 0 in C order, the last in F order), gives the array's new
//! shape; its metadata document is rewritten with it (after the chunks), and on a shrink
//! the chunks wholly past the new end are deleted.

use serde_json::Value;

use crate::error::{Error, Result};
use crate::metadata::{ArrayMetadata, Format};
use crate::read::geometry::{Layout, Order};
use crate::store::write::{Change, Expected};
use crate::store::Store;

/// The axis a file's size changes: the slowest in the file's order.
fn slowest(meta: &ArrayMetadata, layout: Layout) -> usize {
    match layout.order {
        Order::C => 0,
        Order::F => meta.shape.len().saturating_sub(1),
    }
}

/// Why the array's file cannot change size, when it cannot.
pub fn cannot_resize(meta: &ArrayMetadata) -> Option<String> {
    if meta.shape.is_empty() {
        return Some("a zero-dimensional array has no rows".into());
    }
    if meta.format == Format::Draft {
        return Some("arrays of the 2020 draft layout are not resized".into());
    }
    if !is_node_document(meta) {
        return Some(format!(
            "its metadata is read from {} (consolidated), which is not rewritten",
            meta.meta_key
        ));
    }
    None
}

/// Whether the array's metadata was read from its own document (not a consolidated one).
fn is_node_document(meta: &ArrayMetadata) -> bool {
    let name = meta.meta_key.rsplit('/').next().unwrap_or("");
    match meta.format {
        Format::V3 => name == "zarr.json" && !meta.meta_key.is_empty(),
        Format::V2 => name == ".zarray",
        Format::Draft => false,
    }
}

/// The shape of the array whose file is `size` bytes (`item` bytes an element): only
/// the slowest axis changes, by whole rows.
pub fn shape_for(meta: &ArrayMetadata, layout: Layout, item: usize, size: u64) -> Result<Vec<u64>> {
    let axis = slowest(meta, layout);
    let row: u64 = meta
        .shape
        .iter()
        .enumerate()
        .filter(|(d, _)| *d != axis)
        .try_fold(item as u64, |acc, (_, n)| acc.checked_mul(*n))
        .unwrap_or(0);
    if row == 0 || !size.is_multiple_of(row) {
        return Err(Error::BadWrite(format!(
            "{}: a file of {size} bytes is not a whole number of rows of {row} bytes",
            meta.meta_key
        )));
    }
    let mut shape = meta.shape.clone();
    shape[axis] = size / row;
    Ok(shape)
}

/// The keys of the stored chunks of `meta` wholly past `shape` (a shrink: only one axis
/// is shorter, so these are the chunks from its new end on).
pub fn chunks_past(meta: &ArrayMetadata, shape: &[u64]) -> Vec<String> {
    let old = meta.grid_shape();
    let new: Vec<u64> = shape
        .iter()
        .zip(&meta.chunk_shape)
        .map(|(s, c)| s.div_ceil(*c))
        .collect();
    let Some(axis) = (0..old.len()).find(|&d| new[d] < old[d]) else {
        return Vec::new();
    };
    if old.contains(&0) {
        return Vec::new();
    }
    let first: Vec<u64> = (0..old.len())
        .map(|d| if d == axis { new[d] } else { 0 })
        .collect();
    let mut idx = first.clone();
    let mut out = Vec::new();
    loop {
        out.push(meta.chunk_key(&idx));
        let mut d = idx.len();
        loop {
            if d == 0 {
                return out;
            }
            d -= 1;
            idx[d] += 1;
            if idx[d] < old[d] {
                break;
            }
            idx[d] = first[d];
        }
    }
}

/// Rewrite the array's metadata document with `shape` (everything else as it is in the
/// store now), conditional on the version read.
pub fn rewrite_shape(
    meta: &ArrayMetadata,
    store: &dyn Store,
    change: &mut dyn Change,
    shape: &[u64],
) -> Result<()> {
    let key = &meta.meta_key;
    let value = store
        .read(key, None)?
        .ok_or_else(|| Error::NotFound(format!("{key}: metadata document gone")))?;
    let mut doc: Value = serde_json::from_slice(&value.bytes)
        .map_err(|e| Error::metadata(key, format!("not JSON: {e}")))?;
    let obj = doc
        .as_object_mut()
        .ok_or_else(|| Error::metadata(key, "not a JSON object"))?;
    obj.insert("shape".into(), Value::from(shape.to_vec()));
    let mut text =
        serde_json::to_vec_pretty(&doc).map_err(|e| Error::Internal(format!("{key}: {e}")))?;
    text.push(b'\n');
    change.put(key, &text, &Expected::At(value.version))
}
