//! A flat byte view of one array: the elements in C or F order, little- or big-endian.
//! A byte range maps to runs of elements that are contiguous in the file and lie in one
//! read unit; each run is copied out of the decoded unit (fill value for missing chunks,
//! edge units clipped). Variable-length arrays render as one JSON value per line.

use std::io::Write;
use std::sync::Arc;

use base64::Engine;
use parking_lot::Mutex;

use crate::array::Array;
use crate::cache::ChunkCache;
use crate::codec::ChunkData;
use crate::error::{Error, Result};
use crate::metadata::{DataType, SwapUnits};
use crate::prefetch::Prefetcher;

/// The readahead window starts here and doubles while reads stay sequential.
const MIN_WINDOW: u64 = 4 << 20;
/// Units queued for prefetch per read, at most.
const MAX_PREFETCH_UNITS: usize = 256;

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

/// Axes from slowest to fastest in file order.
fn file_axes(order: Order, n: usize) -> Vec<usize> {
    match order {
        Order::C => (0..n).collect(),
        Order::F => (0..n).rev().collect(),
    }
}

/// The multi-index of file element `e`.
fn unravel(mut e: u64, shape: &[u64], axes: &[usize], idx: &mut [u64]) {
    for &a in axes.iter().rev() {
        idx[a] = e % shape[a];
        e /= shape[a];
    }
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
    let axes = file_axes(order, n);
    let mut unit_strides = vec![1usize; n];
    for d in (0..n.saturating_sub(1)).rev() {
        unit_strides[d] = unit_strides[d + 1] * unit[d + 1] as usize;
    }
    let mut idx = vec![0u64; n];
    let mut unit_idx = vec![0u64; n];
    let mut e = start;
    while e < end {
        unravel(e, shape, &axes, &mut idx);
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

/// The units (read-unit grid indices) of the bounding box of file elements
/// `[first, last)`, in file order, at most `limit` of them.
fn units_in_box(
    shape: &[u64],
    unit: &[u64],
    order: Order,
    first: u64,
    last: u64,
    limit: usize,
) -> Vec<Vec<u64>> {
    let n = shape.len();
    if last <= first {
        return vec![];
    }
    if n == 0 {
        return vec![vec![]];
    }
    let axes = file_axes(order, n);
    let (mut a, mut b) = (vec![0; n], vec![0; n]);
    unravel(first, shape, &axes, &mut a);
    unravel(last - 1, shape, &axes, &mut b);
    // Once the two ends differ on an axis, every faster axis is covered whole.
    let (mut lo, mut hi) = (vec![0; n], vec![0; n]);
    let mut diverged = false;
    for &ax in &axes {
        if diverged {
            hi[ax] = (shape[ax] - 1) / unit[ax];
        } else {
            lo[ax] = a[ax] / unit[ax];
            hi[ax] = b[ax] / unit[ax];
            diverged = a[ax] != b[ax];
        }
    }
    let mut out = Vec::new();
    let mut idx = lo.clone();
    'outer: loop {
        out.push(idx.clone());
        if out.len() >= limit {
            break;
        }
        for &ax in axes.iter().rev() {
            if idx[ax] < hi[ax] {
                idx[ax] += 1;
                continue 'outer;
            }
            idx[ax] = lo[ax];
        }
        break;
    }
    out
}

/// Where sequential reading of one file has got to.
struct Readahead {
    end: u64,
    window: u64,
}

/// The flat file of a fixed-size array.
pub struct View {
    array: Arc<Array>,
    cache: Arc<ChunkCache>,
    layout: Layout,
    item: usize,
    swap: SwapUnits,
    elements: u64,
    prefetcher: Option<Arc<Prefetcher>>,
    readahead: Mutex<Readahead>,
    max_window: u64,
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
        let max_window = (cache.budget() as u64 / 4).clamp(MIN_WINDOW, 256 << 20);
        Ok(View {
            array,
            cache,
            layout,
            item,
            swap,
            elements,
            prefetcher: None,
            readahead: Mutex::new(Readahead {
                end: 0,
                window: MIN_WINDOW,
            }),
            max_window,
        })
    }

    /// Decode the units a read needs in parallel, and those ahead of sequential reads.
    pub fn with_prefetch(mut self, prefetcher: Arc<Prefetcher>) -> View {
        self.prefetcher = Some(prefetcher);
        self
    }

    fn units(&self, first: u64, last: u64, limit: usize) -> Vec<Vec<u64>> {
        let meta = &self.array.meta;
        units_in_box(
            &meta.shape,
            self.array.unit_shape(),
            self.layout.order,
            first,
            last,
            limit,
        )
    }

    /// Queue background decodes of `units` that are neither cached nor loading.
    fn prefetch(&self, prefetcher: &Prefetcher, units: Vec<Vec<u64>>) {
        for unit in units {
            let key = (self.array.id(), unit);
            if self.cache.is_present(&key) {
                continue;
            }
            let (array, cache) = (self.array.clone(), self.cache.clone());
            if !prefetcher.submit(move || cache.prefetch(&key, || array.read_unit(&key.1))) {
                break;
            }
        }
    }

    /// Before a read of `[offset, offset + len)`: start decoding what it needs (beyond the
    /// first unit, which the reader decodes itself) and, while reads stay sequential (in
    /// any order within the window, as kernel readahead sends them), what comes next.
    fn plan(&self, offset: u64, len: u64) {
        let Some(prefetcher) = &self.prefetcher else {
            return;
        };
        let item = self.item as u64;
        let mut needed = self.units(
            offset / item,
            (offset + len).div_ceil(item),
            MAX_PREFETCH_UNITS,
        );
        if needed.len() > 1 {
            needed.remove(0);
            self.prefetch(prefetcher, needed);
        }
        let ahead = {
            let mut ra = self.readahead.lock();
            let slack = ra.window.max(4 * len);
            let sequential = offset <= ra.end + slack && offset + len + slack >= ra.end;
            if sequential {
                ra.end = ra.end.max(offset + len);
                ra.window = (ra.window * 2).min(self.max_window);
            } else {
                ra.end = offset + len;
                ra.window = MIN_WINDOW;
            }
            sequential.then(|| (ra.end, (ra.end + ra.window).min(self.size())))
        };
        if let Some((from, to)) = ahead.filter(|(f, t)| f < t) {
            self.prefetch(
                prefetcher,
                self.units(from / item, to.div_ceil(item), MAX_PREFETCH_UNITS),
            );
        }
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
        self.plan(offset, len as u64);
        let item = self.item as u64;
        let first = offset / item;
        let last = (offset + len as u64).div_ceil(item);
        let mut scratch = Vec::new();
        let meta = &self.array.meta;
        let mut current: Option<(Vec<u64>, Arc<ChunkData>)> = None;
        for_each_run(
            &meta.shape,
            self.array.unit_shape(),
            self.layout.order,
            first,
            last,
            |run| {
                let chunk = match &current {
                    Some((idx, chunk)) if idx.as_slice() == run.unit => chunk.clone(),
                    _ => {
                        let chunk = self.unit(run.unit)?;
                        current = Some((run.unit.to_vec(), chunk.clone()));
                        chunk
                    }
                };
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
    fn unit_boxes_cover_the_units_a_range_touches() {
        let shape = [5u64, 3, 4];
        let unit = [2u64, 2, 3];
        for order in [Order::C, Order::F] {
            for (first, last) in [(0u64, 60u64), (7, 9), (13, 41), (59, 60)] {
                let boxed = units_in_box(&shape, &unit, order, first, last, 1000);
                let mut touched = Vec::new();
                for_each_run(&shape, &unit, order, first, last, |r| {
                    touched.push(r.unit.to_vec());
                    Ok(())
                })
                .unwrap();
                assert!(
                    touched.iter().all(|u| boxed.contains(u)),
                    "{order:?} {first}..{last}"
                );
            }
        }
        assert_eq!(
            units_in_box(&shape, &unit, Order::C, 0, 60, 1000).len(),
            3 * 2 * 2
        );
        assert_eq!(
            units_in_box(&[], &[], Order::C, 0, 1, 10),
            vec![Vec::<u64>::new()]
        );
    }

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
