//! A flat byte view of one array: the elements in C or F order, little- or big-endian.
//! A byte range maps to runs of elements that are contiguous in the file and lie in one
//! read unit; each run is copied out of the decoded unit (fill value for missing chunks,
//! edge units clipped). Variable-length arrays render as one JSON value per line.

use std::io::Write;
use std::sync::Arc;

use base64::Engine;

use crate::array::Array;
use crate::cache::ChunkCache;
use crate::codec::ChunkData;
use crate::error::{Error, Result};
use crate::metadata::{DataType, SwapUnits};

/// Element order of the flat file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Order {
    #[default]
    C,
    F,
}

/// How array elements are laid out in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Layout {
    pub order: Order,
    pub big_endian: bool,
}

/// One run: `len` elements starting at file element `start`, found in unit `unit` at C
/// offset `offset`, `step` elements apart.
struct Run<'a> {
    start: u64,
    len: u64,
    unit: &'a [u64],
    offset: usize,
    step: usize,
}

/// Walk the elements `[start, end)` of `shape` in `order`, one run per unit crossing.
fn for_each_run(
    shape: &[u64],
    unit: &[u64],
    order: Order,
    start: u64,
    end: u64,
    mut f: impl FnMut(Run) -> Result<()>,
) -> Result<()> {
    let n = shape.len();
    // Axes from slowest to fastest in file order.
    let axes: Vec<usize> = match order {
        Order::C => (0..n).collect(),
        Order::F => (0..n).rev().collect(),
    };
    let mut unit_strides = vec![1usize; n];
    for d in (0..n.saturating_sub(1)).rev() {
        unit_strides[d] = unit_strides[d + 1] * unit[d + 1] as usize;
    }
    let mut idx = vec![0u64; n];
    let mut unit_idx = vec![0u64; n];
    let mut e = start;
    while e < end {
        // Unravel e in file order.
        let mut rest = e;
        for &a in axes.iter().rev() {
            idx[a] = rest % shape[a];
            rest /= shape[a];
        }
        let (len, step) = match axes.last() {
            None => (1, 1),
            Some(&fast) => {
                let within = idx[fast] % unit[fast];
                let len = (unit[fast] - within)
                    .min(shape[fast] - idx[fast])
                    .min(end - e);
                (len, unit_strides[fast])
            }
        };
        let mut offset = 0usize;
        for d in 0..n {
            unit_idx[d] = idx[d] / unit[d];
            offset += (idx[d] % unit[d]) as usize * unit_strides[d];
        }
        f(Run {
            start: e,
            len,
            unit: &unit_idx,
            offset,
            step,
        })?;
        e += len;
    }
    Ok(())
}

/// The flat file of a fixed-size array.
pub struct View {
    array: Arc<Array>,
    cache: Arc<ChunkCache>,
    layout: Layout,
    item: usize,
    swap: SwapUnits,
    elements: u64,
}

impl View {
    pub fn new(array: Arc<Array>, cache: Arc<ChunkCache>, layout: Layout) -> Result<View> {
        let item = array.meta.dtype.size().ok_or_else(|| {
            Error::Invalid(format!(
                "{}: variable-length array has no flat view",
                array.meta.meta_key
            ))
        })?;
        let swap = if layout.big_endian {
            array.meta.dtype.swap_units()
        } else {
            vec![]
        };
        let elements = array.meta.shape.iter().product();
        Ok(View {
            array,
            cache,
            layout,
            item,
            swap,
            elements,
        })
    }

    /// The file size: prod(shape) × itemsize.
    pub fn size(&self) -> u64 {
        self.elements * self.item as u64
    }

    pub fn array(&self) -> &Arc<Array> {
        &self.array
    }

    fn unit(&self, idx: &[u64]) -> Result<Arc<ChunkData>> {
        let key = (self.array.id(), idx.to_vec());
        self.cache.get_or_load(&key, || self.array.read_unit(idx))
    }

    /// Fill `buf` from file offset `offset`; returns the bytes written (short at EOF).
    pub fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize> {
        let size = self.size();
        if offset >= size || buf.is_empty() {
            return Ok(0);
        }
        let len = (buf.len() as u64).min(size - offset) as usize;
        let item = self.item as u64;
        let first = offset / item;
        let last = (offset + len as u64).div_ceil(item);
        let mut scratch = Vec::new();
        let meta = &self.array.meta;
        for_each_run(
            &meta.shape,
            self.array.unit_shape(),
            self.layout.order,
            first,
            last,
            |run| {
                let chunk = self.unit(run.unit)?;
                let ChunkData::Fixed(src) = chunk.as_ref() else {
                    return Err(Error::corrupt(
                        &meta.meta_key,
                        "variable-length chunk in a fixed view",
                    ));
                };
                // Byte span of this run in the file, clipped to the request.
                let run_start = run.start * item;
                let lo = run_start.max(offset);
                let hi = ((run.start + run.len) * item).min(offset + len as u64);
                let dst = &mut buf[(lo - offset) as usize..(hi - offset) as usize];
                let skip = (lo - run_start) as usize;
                let at = run.offset * self.item;
                if run.step == 1 && self.swap.is_empty() {
                    let s = src
                        .get(at + skip..at + skip + dst.len())
                        .ok_or_else(|| Error::corrupt(&meta.meta_key, "decoded chunk too small"))?;
                    dst.copy_from_slice(s);
                    return Ok(());
                }
                // Gather the whole elements of the run, swap, then copy the clipped part.
                let k0 = skip / self.item;
                let k1 = (skip + dst.len()).div_ceil(self.item);
                scratch.clear();
                for k in k0..k1 {
                    let p = at + k * run.step * self.item;
                    let e = src
                        .get(p..p + self.item)
                        .ok_or_else(|| Error::corrupt(&meta.meta_key, "decoded chunk too small"))?;
                    scratch.extend_from_slice(e);
                }
                crate::codec::swap_elements(&mut scratch, self.item, &self.swap);
                let from = skip - k0 * self.item;
                dst.copy_from_slice(&scratch[from..from + dst.len()]);
                Ok(())
            },
        )?;
        Ok(len)
    }

    /// Stream the whole file to `out` in blocks of `block` bytes.
    pub fn write_all(&self, out: &mut impl Write, block: usize) -> Result<()> {
        let mut buf = vec![0u8; block.max(self.item)];
        let mut offset = 0u64;
        while offset < self.size() {
            let n = self.read_at(offset, &mut buf)?;
            out.write_all(&buf[..n])
                .map_err(|e| Error::Invalid(format!("write: {e}")))?;
            offset += n as u64;
        }
        Ok(())
    }
}

/// One JSON value for a variable-length element: text as a string, bytes as base64.
pub fn json_value(dtype: &DataType, element: &Option<Vec<u8>>) -> String {
    match element {
        None => "null".into(),
        Some(b) if *dtype == DataType::String => {
            serde_json::to_string(&String::from_utf8_lossy(b)).unwrap_or_else(|_| "null".into())
        }
        Some(b) => format!(
            "\"{}\"",
            base64::engine::general_purpose::STANDARD.encode(b)
        ),
    }
}

/// Write a variable-length array as one JSON value per line, in `order`.
pub fn write_var_lines(
    array: &Array,
    cache: &ChunkCache,
    order: Order,
    out: &mut impl Write,
) -> Result<()> {
    let meta = &array.meta;
    let elements: u64 = meta.shape.iter().product();
    let mut line = String::new();
    for_each_run(&meta.shape, array.unit_shape(), order, 0, elements, |run| {
        let key = (array.id(), run.unit.to_vec());
        let chunk = cache.get_or_load(&key, || array.read_unit(run.unit))?;
        let ChunkData::Var(items) = chunk.as_ref() else {
            return Err(Error::corrupt(
                &meta.meta_key,
                "fixed-size chunk in a text view",
            ));
        };
        for k in 0..run.len as usize {
            let e = items
                .get(run.offset + k * run.step)
                .ok_or_else(|| Error::corrupt(&meta.meta_key, "decoded chunk too small"))?;
            line.clear();
            line.push_str(&json_value(&meta.dtype, e));
            line.push('\n');
            out.write_all(line.as_bytes())
                .map_err(|e| Error::Invalid(format!("write: {e}")))?;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_cover_every_element_once_in_both_orders() {
        let shape = [5u64, 3, 4];
        let unit = [2u64, 2, 3];
        for order in [Order::C, Order::F] {
            let mut seen = Vec::new();
            for_each_run(&shape, &unit, order, 0, 60, |r| {
                seen.push((r.start, r.len));
                Ok(())
            })
            .unwrap();
            let total: u64 = seen.iter().map(|(_, l)| l).sum();
            assert_eq!(total, 60);
            assert!(seen.windows(2).all(|w| w[0].0 + w[0].1 == w[1].0));
        }
        let mut n = 0;
        for_each_run(&[], &[], Order::C, 0, 1, |r| {
            n += r.len;
            Ok(())
        })
        .unwrap();
        assert_eq!(n, 1);
    }
}
