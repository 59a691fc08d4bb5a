//! The geometry of one array's flat view: how file elements (in C or F order) map to the
//! array's read units and back. Every question the read path, `cat`'s stream, readahead
//! and the view formats ask of that mapping is answered here: the units a byte range
//! touches, the boxes and runs a range splits into, the unit a contiguous read lies in,
//! the slab a sequential reader cycles through, and the shape as the file lays it out.

use crate::error::Result;

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

/// The shape as the file lays it out, slowest axis first: the shape in C order, reversed
/// in F order.
pub fn file_shape(shape: &[u64], order: Order) -> Vec<u64> {
    let mut shape = shape.to_vec();
    if order == Order::F {
        shape.reverse();
    }
    shape
}

/// A flat view's mapping between file elements and read units.
#[derive(Debug, Clone)]
pub struct Geometry {
    shape: Vec<u64>,
    unit: Vec<u64>,
    order: Order,
    item: usize,
    /// Axes from slowest to fastest in file order.
    axes: Vec<usize>,
    /// The shape and the unit shape in file-axis order.
    shape_f: Vec<u64>,
    unit_f: Vec<u64>,
}

/// One run: `len` consecutive file elements, found in unit `unit` from element
/// `offset` on, `step` elements apart.
pub struct Run<'a> {
    pub len: u64,
    pub unit: &'a [u64],
    pub offset: usize,
    pub step: usize,
}

/// Axes from slowest to fastest in file order.
pub(super) fn file_axes(order: Order, n: usize) -> Vec<usize> {
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

/// Element strides of a unit stored in `order`.
fn unit_strides(unit: &[u64], order: Order) -> Vec<usize> {
    let mut strides = vec![1usize; unit.len()];
    let mut step = 1usize;
    for &d in file_axes(order, unit.len()).iter().rev() {
        strides[d] = step;
        step *= unit[d] as usize;
    }
    strides
}

/// Walk the elements `[start, end)` of `shape` in file `order`, one run per unit
/// crossing; offsets are into units stored in `unit_order`.
fn for_each_run(
    shape: &[u64],
    unit: &[u64],
    (order, unit_order): (Order, Order),
    start: u64,
    end: u64,
    mut f: impl FnMut(Run) -> Result<()>,
) -> Result<()> {
    let n = shape.len();
    let axes = file_axes(order, n);
    let unit_strides = unit_strides(unit, unit_order);
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
            len,
            unit: &unit_idx,
            offset,
            step,
        })?;
        e += len;
    }
    Ok(())
}

/// The units (read-unit grid indices) that file elements `[first, last)` touch, in file
/// order, at most `limit` of them.
fn units_touched(
    shape: &[u64],
    unit: &[u64],
    order: Order,
    first: u64,
    last: u64,
    limit: usize,
) -> Vec<Vec<u64>> {
    let axes = file_axes(order, shape.len());
    let (shape_f, unit_f) = (to_file_axes(&axes, shape), to_file_axes(&axes, unit));
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    let last = last.min(shape.iter().product());
    // The walk cannot fail: the closure never does.
    let _ = for_each_box_unit(&shape_f, &unit_f, first, last, |_, _, u| {
        let idx = from_file_axes(&axes, u);
        if seen.insert(idx.clone()) {
            out.push(idx);
        }
        Ok(out.len() < limit)
    });
    out
}

/// `v` (one value per array axis) in file-axis order.
fn to_file_axes(axes: &[usize], v: &[u64]) -> Vec<u64> {
    axes.iter().map(|&a| v[a]).collect()
}

/// `v` (one value per file axis) back in array-axis order.
fn from_file_axes(axes: &[usize], v: &[u64]) -> Vec<u64> {
    let mut out = vec![0; v.len()];
    for (k, &a) in axes.iter().enumerate() {
        out[a] = v[k];
    }
    out
}

/// Walk the boxes of file elements `[first, last)` (see [`range_boxes`]; all in file-axis
/// order) and, within each, the units it crosses, fastest file axis first: `f(lo, hi, u)`
/// with `u` the unit's grid index. Stops when `f` returns false.
fn for_each_box_unit(
    shape_f: &[u64],
    unit_f: &[u64],
    first: u64,
    last: u64,
    mut f: impl FnMut(&[u64], &[u64], &[u64]) -> Result<bool>,
) -> Result<()> {
    for (lo, hi) in range_boxes(shape_f, first, last) {
        let ulo: Vec<u64> = lo.iter().zip(unit_f).map(|(l, u)| l / u).collect();
        let uhi: Vec<u64> = hi.iter().zip(unit_f).map(|(h, u)| (h - 1) / u).collect();
        let mut u = ulo.clone();
        'units: loop {
            if !f(&lo, &hi, &u)? {
                return Ok(());
            }
            for k in (0..u.len()).rev() {
                if u[k] < uhi[k] {
                    u[k] += 1;
                    continue 'units;
                }
                u[k] = ulo[k];
            }
            break;
        }
    }
    Ok(())
}

/// Split elements `[first, last)` of a C-order `shape` into boxes (`[lo, hi)` per axis),
/// in order: a ragged head, whole slabs, a ragged tail, recursively.
fn range_boxes(shape: &[u64], first: u64, last: u64) -> Vec<(Vec<u64>, Vec<u64>)> {
    fn split(
        shape: &[u64],
        fixed: &mut Vec<u64>,
        start: u64,
        end: u64,
        out: &mut Vec<(Vec<u64>, Vec<u64>)>,
    ) {
        let k = fixed.len();
        if start >= end {
            return;
        }
        if k == shape.len() {
            out.push((fixed.clone(), fixed.iter().map(|i| i + 1).collect()));
            return;
        }
        let block: u64 = shape[k + 1..].iter().product();
        let (i0, r0, i1, r1) = (start / block, start % block, end / block, end % block);
        let sub = |fixed: &mut Vec<u64>, i: u64, s: u64, e: u64, out: &mut Vec<_>| {
            fixed.push(i);
            split(shape, fixed, s, e, out);
            fixed.pop();
        };
        if i0 == i1 {
            sub(fixed, i0, r0, r1, out);
            return;
        }
        let mut whole_from = i0;
        if r0 != 0 {
            sub(fixed, i0, r0, block, out);
            whole_from += 1;
        }
        if whole_from < i1 {
            let mut lo = fixed.clone();
            let mut hi: Vec<u64> = fixed.iter().map(|i| i + 1).collect();
            lo.push(whole_from);
            hi.push(i1);
            lo.extend(std::iter::repeat_n(0, shape.len() - k - 1));
            hi.extend(&shape[k + 1..]);
            out.push((lo, hi));
        }
        if r1 != 0 {
            sub(fixed, i1, 0, r1, out);
        }
    }
    let mut out = Vec::new();
    split(shape, &mut Vec::new(), first, last, &mut out);
    out
}

impl Geometry {
    /// The view of an array of `shape` read in units of `unit`, `item` bytes an element,
    /// laid out in `order`.
    pub fn new(shape: &[u64], unit: &[u64], order: Order, item: usize) -> Geometry {
        let axes = file_axes(order, shape.len());
        Geometry {
            shape_f: to_file_axes(&axes, shape),
            unit_f: to_file_axes(&axes, unit),
            shape: shape.to_vec(),
            unit: unit.to_vec(),
            order,
            item,
            axes,
        }
    }

    /// Elements in the file.
    pub fn elements(&self) -> u64 {
        self.shape.iter().product()
    }

    /// The shape and unit shape in file-axis order (slowest first).
    pub fn file_axes_shapes(&self) -> (&[u64], &[u64]) {
        (&self.shape_f, &self.unit_f)
    }

    /// A unit's grid index given in file-axis order, in array-axis order.
    pub fn unit_index(&self, u: &[u64]) -> Vec<u64> {
        from_file_axes(&self.axes, u)
    }

    /// The units (read-unit grid indices) that file elements `[first, last)` touch, in
    /// file order, at most `limit` of them.
    pub fn units(&self, first: u64, last: u64, limit: usize) -> Vec<Vec<u64>> {
        units_touched(&self.shape, &self.unit, self.order, first, last, limit)
    }

    /// Walk the boxes of file elements `[first, last)` and the units each crosses (all in
    /// file-axis order): `f(lo, hi, u)`; stops when `f` returns false.
    pub fn boxes(
        &self,
        first: u64,
        last: u64,
        f: impl FnMut(&[u64], &[u64], &[u64]) -> Result<bool>,
    ) -> Result<()> {
        for_each_box_unit(&self.shape_f, &self.unit_f, first, last, f)
    }

    /// Walk file elements `[first, last)` one run per unit crossing, with offsets into
    /// units stored in `unit_order`.
    pub fn runs(
        &self,
        unit_order: Order,
        first: u64,
        last: u64,
        f: impl FnMut(Run) -> Result<()>,
    ) -> Result<()> {
        for_each_run(
            &self.shape,
            &self.unit,
            (self.order, unit_order),
            first,
            last,
            f,
        )
    }

    /// Walk every file element of unit `u` (its grid index, array-axis order) that lies
    /// inside the array, one run per line along the file's fastest axis, in file order:
    /// `f(e, run)` with `e` the run's first file element and offsets into a unit stored
    /// in `unit_order` (how a write patches a unit from the file's bytes).
    pub fn unit_runs(
        &self,
        u: &[u64],
        unit_order: Order,
        mut f: impl FnMut(u64, Run) -> Result<()>,
    ) -> Result<()> {
        let n = self.shape.len();
        let strides = unit_strides(&self.unit, unit_order);
        let lo: Vec<u64> = (0..n).map(|d| u[d] * self.unit[d]).collect();
        let hi: Vec<u64> = (0..n)
            .map(|d| (lo[d] + self.unit[d]).min(self.shape[d]))
            .collect();
        if (0..n).any(|d| lo[d] >= hi[d]) {
            return Ok(());
        }
        let Some(&fast) = self.axes.last() else {
            return f(
                0,
                Run {
                    len: 1,
                    unit: u,
                    offset: 0,
                    step: 1,
                },
            );
        };
        let slow = &self.axes[..n - 1];
        let mut idx = lo.clone();
        loop {
            let e = self
                .axes
                .iter()
                .fold(0u64, |acc, &a| acc * self.shape[a] + idx[a]);
            let offset = (0..n).map(|d| (idx[d] - lo[d]) as usize * strides[d]).sum();
            f(
                e,
                Run {
                    len: hi[fast] - lo[fast],
                    unit: u,
                    offset,
                    step: strides[fast],
                },
            )?;
            // The next line: the slow axes counted like digits, fastest of them first.
            let mut carried = true;
            for &a in slow.iter().rev() {
                idx[a] += 1;
                if idx[a] < hi[a] {
                    carried = false;
                    break;
                }
                idx[a] = lo[a];
            }
            if carried {
                return Ok(());
            }
        }
    }

    /// The unit holding file elements `[first, last)` and the element offset of `first`
    /// in it (units stored in the file's order), when those elements are consecutive in
    /// the unit's memory.
    pub fn contiguous_unit(&self, first: u64, last: u64) -> Option<(Vec<u64>, usize)> {
        let (shape, unit, axes) = (&self.shape, &self.unit, &self.axes);
        let (mut a, mut b) = (vec![0; shape.len()], vec![0; shape.len()]);
        unravel(first, shape, axes, &mut a);
        unravel(last - 1, shape, axes, &mut b);
        if (0..shape.len()).any(|d| a[d] / unit[d] != b[d] / unit[d]) {
            return None;
        }
        let crossed = axes
            .iter()
            .position(|&d| a[d] != b[d])
            .unwrap_or(axes.len());
        if axes.iter().skip(crossed + 1).any(|&d| unit[d] != shape[d]) {
            return None;
        }
        let strides = unit_strides(unit, self.order);
        let start = (0..shape.len())
            .map(|d| (a[d] % unit[d]) as usize * strides[d])
            .sum();
        Some(((0..shape.len()).map(|d| a[d] / unit[d]).collect(), start))
    }

    /// What a front-to-back read cycles through, for units of `unit_bytes` each: the
    /// units of one layer along the slowest file axis that a unit spans more than one
    /// element of (their bytes), and that span.
    pub fn working_set(&self, unit_bytes: u64) -> (u64, u64) {
        let (shape, unit) = (&self.shape, &self.unit);
        let Some(k) = self.axes.iter().position(|&a| unit[a].min(shape[a]) > 1) else {
            return (unit_bytes, 1);
        };
        let units = self.axes[k + 1..]
            .iter()
            .fold(1u64, |n, &a| n.saturating_mul(shape[a].div_ceil(unit[a])));
        let span = unit[self.axes[k]].min(shape[self.axes[k]]);
        (units.saturating_mul(unit_bytes), span)
    }

    /// The bytes a unit contributes to the file in one run: its extent along the fastest
    /// file axis, times the next axes' while the unit spans the whole file extent there.
    pub fn run_bytes(&self) -> usize {
        let mut bytes = self.item as u64;
        for &d in self.axes.iter().rev() {
            bytes = bytes.saturating_mul(self.unit[d].min(self.shape[d]));
            if self.unit[d] != self.shape[d] {
                break;
            }
        }
        usize::try_from(bytes).unwrap_or(usize::MAX)
    }

    /// The file bytes one layer of units along the slowest file axis covers: a reader
    /// needs all of it before it leaves the slab's first element row.
    pub fn slab_bytes(&self) -> u64 {
        match self.axes.first() {
            Some(&slowest) => self
                .shape
                .iter()
                .enumerate()
                .map(|(a, &n)| if a == slowest { self.unit[a].min(n) } else { n })
                .fold(self.item as u64, u64::saturating_mul),
            None => self.item as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_boxes_tile_the_range_in_order() {
        let shape = [4u64, 3, 5];
        for (first, last) in [(0u64, 60u64), (7, 8), (7, 41), (14, 46), (15, 30), (59, 60)] {
            let mut covered = Vec::new();
            for (lo, hi) in range_boxes(&shape, first, last) {
                for i in lo[0]..hi[0] {
                    for j in lo[1]..hi[1] {
                        for k in lo[2]..hi[2] {
                            covered.push((i * 3 + j) * 5 + k);
                        }
                    }
                }
            }
            assert_eq!(
                covered,
                (first..last).collect::<Vec<_>>(),
                "{first}..{last}"
            );
        }
        assert_eq!(range_boxes(&[], 0, 1), vec![(vec![], vec![])]);
    }

    #[test]
    fn units_touched_are_exactly_those_a_range_crosses() {
        let shape = [5u64, 3, 4];
        let unit = [2u64, 2, 3];
        for order in [Order::C, Order::F] {
            for (first, last) in [(0u64, 60u64), (7, 9), (13, 41), (22, 47), (59, 60)] {
                let got = units_touched(&shape, &unit, order, first, last, 1000);
                let mut want: Vec<Vec<u64>> = Vec::new();
                for_each_run(&shape, &unit, (order, order), first, last, |r| {
                    if !want.contains(&r.unit.to_vec()) {
                        want.push(r.unit.to_vec());
                    }
                    Ok(())
                })
                .unwrap();
                let mut sorted = got.clone();
                sorted.sort();
                sorted.dedup();
                assert_eq!(
                    sorted.len(),
                    got.len(),
                    "{order:?} {first}..{last}: repeats"
                );
                want.sort();
                assert_eq!(sorted, want, "{order:?} {first}..{last}");
            }
        }
        assert_eq!(units_touched(&shape, &unit, Order::C, 0, 60, 5).len(), 5);
        assert_eq!(
            units_touched(&[], &[], Order::C, 0, 1, 10),
            vec![Vec::<u64>::new()]
        );
    }

    #[test]
    fn a_units_runs_are_the_runs_of_the_whole_file_that_fall_in_it() {
        let shape = [5u64, 3, 4];
        let unit = [2u64, 2, 3];
        for order in [Order::C, Order::F] {
            for unit_order in [Order::C, Order::F] {
                let g = Geometry::new(&shape, &unit, order, 4);
                // Every element of the file, as (unit, file element, offset in the unit).
                let mut want = std::collections::BTreeSet::new();
                let mut e = 0u64;
                for_each_run(&shape, &unit, (order, unit_order), 0, 60, |r| {
                    for k in 0..r.len {
                        want.insert((r.unit.to_vec(), e + k, r.offset + k as usize * r.step));
                    }
                    e += r.len;
                    Ok(())
                })
                .unwrap();
                let mut got = std::collections::BTreeSet::new();
                for u in g.units(0, 60, usize::MAX) {
                    g.unit_runs(&u, unit_order, |e, r| {
                        assert_eq!(r.unit, u.as_slice());
                        for k in 0..r.len {
                            assert!(got.insert((u.clone(), e + k, r.offset + k as usize * r.step)));
                        }
                        Ok(())
                    })
                    .unwrap();
                }
                assert_eq!(got, want, "{order:?} {unit_order:?}");
            }
        }
        let g = Geometry::new(&[], &[], Order::C, 1);
        let mut n = 0;
        g.unit_runs(&[], Order::C, |e, r| {
            assert_eq!((e, r.offset), (0, 0));
            n += r.len;
            Ok(())
        })
        .unwrap();
        assert_eq!(n, 1);
    }

    #[test]
    fn runs_cover_every_element_once_in_both_orders() {
        let shape = [5u64, 3, 4];
        let unit = [2u64, 2, 3];
        for order in [Order::C, Order::F] {
            let mut seen = std::collections::BTreeSet::new();
            for_each_run(&shape, &unit, (order, Order::C), 0, 60, |r| {
                for k in 0..r.len as usize {
                    assert!(seen.insert((r.unit.to_vec(), r.offset + k * r.step)));
                }
                Ok(())
            })
            .unwrap();
            assert_eq!(seen.len(), 60);
        }
        let mut n = 0;
        for_each_run(&[], &[], (Order::C, Order::C), 0, 1, |r| {
            n += r.len;
            Ok(())
        })
        .unwrap();
        assert_eq!(n, 1);
    }
}
