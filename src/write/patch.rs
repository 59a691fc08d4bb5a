//! One chunk patched with the bytes staged for it: the file's elements that fall in the
//! chunk (found by the array's [`Geometry`]) are copied from the staged bytes into the
//! decoded chunk (C order, little-endian), byte-swapped from a big-endian file, and an
//! element only partly written keeps its other bytes.

use std::ops::Range;

use crate::error::Result;
use crate::read::geometry::{Geometry, Order};

/// How the file lays out one element: its size and the units to reverse for a
/// big-endian file (empty: little-endian).
pub struct ElementLayout<'a> {
    pub item: usize,
    pub swap: &'a [(usize, usize)],
}

impl ElementLayout<'_> {
    /// Turn one element between the file's byte order and the chunk's (its own inverse).
    fn swap(&self, element: &mut [u8]) {
        for &(o, l) in self.swap {
            element[o..o + l].reverse();
        }
    }
}

/// Patch `chunk` (the decoded unit `u` of `geometry`, whose units are the array's
/// stored chunks) with the bytes of `written` (byte ranges of the file, sorted and
/// apart) that fall in it, read through `staged(offset, buf)`. Whether any did.
pub fn patch_chunk(
    geometry: &Geometry,
    u: &[u64],
    element: &ElementLayout,
    written: &[Range<u64>],
    staged: &dyn Fn(u64, &mut [u8]) -> Result<()>,
    chunk: &mut [u8],
) -> Result<bool> {
    let item = element.item as u64;
    let mut patched = false;
    let mut buf = Vec::new();
    geometry.unit_runs(u, Order::C, |e, run| {
        let (start, end) = (e * item, (e + run.len) * item);
        // The written ranges that meet this run (they are sorted).
        let first = written.partition_point(|r| r.end <= start);
        for r in written[first..].iter().take_while(|r| r.start < end) {
            let (a, b) = (r.start.max(start), r.end.min(end));
            buf.resize((b - a) as usize, 0);
            staged(a, &mut buf)?;
            copy_elements(element, (e, run.offset, run.step), (a, &buf), chunk);
            patched = true;
        }
        Ok(())
    })?;
    Ok(patched)
}

/// Copy the file bytes `bytes` (from file offset `at`) into `chunk`, for the run whose
/// first file element is `e`, found from element `offset` of the chunk on, `step` apart.
fn copy_elements(
    element: &ElementLayout,
    (e, offset, step): (u64, usize, usize),
    (at, bytes): (u64, &[u8]),
    chunk: &mut [u8],
) {
    let item = element.item;
    let end = at + bytes.len() as u64;
    let first = at / item as u64;
    let last = end.div_ceil(item as u64);
    // Whole elements laid one after another in the chunk: one copy, then the swaps.
    let (whole_first, whole_last) = (at.div_ceil(item as u64), end / item as u64);
    if step == 1 && whole_first < whole_last {
        let dst = (offset + (whole_first - e) as usize) * item;
        let src = (whole_first * item as u64 - at) as usize;
        let n = (whole_last - whole_first) as usize * item;
        let target = &mut chunk[dst..dst + n];
        target.copy_from_slice(&bytes[src..src + n]);
        if !element.swap.is_empty() {
            target.chunks_exact_mut(item).for_each(|t| element.swap(t));
        }
        for el in (first..whole_first).chain(whole_last..last) {
            copy_element(element, (e, offset, step), (at, bytes), chunk, el);
        }
        return;
    }
    for el in first..last {
        copy_element(element, (e, offset, step), (at, bytes), chunk, el);
    }
}

/// Copy the part of element `el` (of the file) that `bytes` (from file offset `at`)
/// holds into `chunk` (see [`copy_elements`]).
fn copy_element(
    element: &ElementLayout,
    (e, offset, step): (u64, usize, usize),
    (at, bytes): (u64, &[u8]),
    chunk: &mut [u8],
    el: u64,
) {
    let item = element.item;
    let end = at + bytes.len() as u64;
    {
        let dst = (offset + (el - e) as usize * step) * item;
        let target = &mut chunk[dst..dst + item];
        let el_start = el * item as u64;
        let (a, b) = (at.max(el_start), end.min(el_start + item as u64));
        let src = &bytes[(a - at) as usize..(b - at) as usize];
        if src.len() == item {
            target.copy_from_slice(src);
            element.swap(target);
        } else {
            // Part of an element: the rest keeps the chunk's bytes.
            element.swap(target);
            let within = (a - el_start) as usize;
            target[within..within + src.len()].copy_from_slice(src);
            element.swap(target);
        }
    }
}

/// Whether every element of `chunk` is `fill` (one element).
pub fn all_fill(chunk: &[u8], fill: &[u8]) -> bool {
    if fill.is_empty() {
        return true;
    }
    if fill.iter().all(|b| *b == 0) {
        return chunk.iter().all(|b| *b == 0);
    }
    chunk.chunks_exact(fill.len()).all(|e| e == fill)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The file of a 5 x 3 array of u16 (chunks 2 x 2) in `order`, elements numbered in
    /// array C order, bytes in the file's byte order.
    fn file_of(order: Order, big: bool) -> Vec<u8> {
        let mut out = Vec::new();
        let idx: Vec<(u64, u64)> = match order {
            Order::C => (0..5).flat_map(|i| (0..3).map(move |j| (i, j))).collect(),
            Order::F => (0..3).flat_map(|j| (0..5).map(move |i| (i, j))).collect(),
        };
        for (i, j) in idx {
            let v = (i * 3 + j) as u16 + 1000;
            out.extend(if big {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            });
        }
        out
    }

    #[test]
    fn a_chunk_takes_exactly_the_written_bytes_that_fall_in_it() {
        for order in [Order::C, Order::F] {
            for big in [false, true] {
                let g = Geometry::new(&[5, 3], &[2, 2], order, 2);
                let file = file_of(order, big);
                let swap = [(0usize, 2usize)];
                let element = ElementLayout {
                    item: 2,
                    swap: if big { &swap } else { &[] },
                };
                // Bytes 3..9 (a half element at each end) and 20..22 are written.
                let written = vec![3u64..9, 20..22];
                let staged = |at: u64, buf: &mut [u8]| {
                    buf.copy_from_slice(&file[at as usize..at as usize + buf.len()]);
                    Ok(())
                };
                for u in g.units(0, 15, usize::MAX) {
                    // The chunk as stored before: all zero (2 x 2, C order).
                    let mut chunk = vec![0u8; 8];
                    let touched =
                        patch_chunk(&g, &u, &element, &written, &staged, &mut chunk).unwrap();
                    let mut want = vec![0u8; 8];
                    let mut any = false;
                    for (k, pair) in want.chunks_exact_mut(2).enumerate() {
                        let (i, j) = (u[0] * 2 + k as u64 / 2, u[1] * 2 + k as u64 % 2);
                        if i >= 5 || j >= 3 {
                            continue;
                        }
                        let e = match order {
                            Order::C => i * 3 + j,
                            Order::F => j * 5 + i,
                        };
                        let v = (i * 3 + j) as u16 + 1000;
                        let file_bytes = if big {
                            v.to_be_bytes()
                        } else {
                            v.to_le_bytes()
                        };
                        for b in 0..2u64 {
                            let p = e * 2 + b;
                            if written.iter().any(|r| r.contains(&p)) {
                                // File byte b of the element is chunk byte b, or 1 - b
                                // when the file is big-endian.
                                let c = if big { 1 - b } else { b } as usize;
                                pair[c] = file_bytes[b as usize];
                                any = true;
                            }
                        }
                    }
                    assert_eq!(touched, any, "{order:?} {big} {u:?}");
                    assert_eq!(chunk, want, "{order:?} big {big} chunk {u:?}");
                }
            }
        }
    }

    #[test]
    fn fill_is_checked_element_by_element() {
        assert!(all_fill(&[0, 0, 0, 0], &[0, 0]));
        assert!(!all_fill(&[0, 0, 1, 0], &[0, 0]));
        assert!(all_fill(&[1, 2, 1, 2], &[1, 2]));
        assert!(!all_fill(&[1, 2, 2, 1], &[1, 2]));
    }
}
