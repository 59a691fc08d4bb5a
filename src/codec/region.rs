//! Copies of n-dimensional boxes between C-order buffers: the one primitive behind shard
//! assembly, chunk-to-output copies and fill.

/// An n-d box copy: `region` elements starting at `src_at` in a `src_shape` buffer go to
/// `dst_at` in a `dst_shape` buffer. `item` is the element size in units of `T`; the
/// destination slice starts at element `dst_base` of the `dst_shape` buffer.
pub struct Region<'a> {
    pub src_shape: &'a [u64],
    pub src_at: &'a [u64],
    pub dst_shape: &'a [u64],
    pub dst_at: &'a [u64],
    pub region: &'a [u64],
    pub item: usize,
    pub dst_base: usize,
}

fn strides(shape: &[u64]) -> Vec<usize> {
    let mut s = vec![1usize; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1] as usize;
    }
    s
}

fn offset(at: &[u64], strides: &[usize]) -> usize {
    at.iter().zip(strides).map(|(a, s)| *a as usize * s).sum()
}

impl Region<'_> {
    /// Call `row(s, d, len)` for each row of the box along its last axis: `len` units of
    /// `T` at unit `s` of the source and unit `d` of the destination slice.
    fn for_each_row(&self, mut row: impl FnMut(usize, usize, usize)) {
        let n = self.region.len();
        if self.region.contains(&0) {
            return;
        }
        if n == 0 {
            return row(0, 0, self.item);
        }
        let base = self.dst_base * self.item;
        let ss = strides(self.src_shape);
        let ds = strides(self.dst_shape);
        let len = self.region[n - 1] as usize * self.item;
        // Offsets move by a stride per step of the walk, back by a side when it wraps.
        let mut idx = vec![0u64; n - 1];
        let mut s = offset(self.src_at, &ss) * self.item;
        let mut d = offset(self.dst_at, &ds) * self.item - base;
        loop {
            row(s, d, len);
            let mut dim = n - 1;
            loop {
                if dim == 0 {
                    return;
                }
                dim -= 1;
                idx[dim] += 1;
                s += ss[dim] * self.item;
                d += ds[dim] * self.item;
                if idx[dim] < self.region[dim] {
                    break;
                }
                s -= ss[dim] * self.item * self.region[dim] as usize;
                d -= ds[dim] * self.item * self.region[dim] as usize;
                idx[dim] = 0;
            }
        }
    }

    /// Copy the box; rows along the last axis are copied whole.
    pub fn copy<T: Clone>(&self, src: &[T], dst: &mut [T]) {
        self.for_each_row(|s, d, len| dst[d..d + len].clone_from_slice(&src[s..s + len]));
    }

    /// Set every element of the destination box to `one` (one element, `item` long);
    /// the source fields are not used.
    pub fn fill(&self, one: &[u8], dst: &mut [u8]) {
        let one = &one[..self.item];
        // The walk computes source offsets too: let them be the destination's.
        let rows = Region {
            src_shape: self.dst_shape,
            src_at: self.dst_at,
            ..*self
        };
        rows.for_each_row(|_, d, len| fill_row(&mut dst[d..d + len], one));
    }
}

/// Fill `row` with copies of `one`: one element, then doubling copies.
fn fill_row(row: &mut [u8], one: &[u8]) {
    if one.iter().all(|b| *b == one[0]) {
        row.fill(one[0]);
        return;
    }
    row[..one.len()].copy_from_slice(one);
    let mut done = one.len();
    while done < row.len() {
        let n = done.min(row.len() - done);
        row.copy_within(..n, done);
        done += n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_an_inner_box() {
        let src: Vec<u8> = (0..12).collect(); // 3 x 4
        let mut dst = vec![0u8; 9]; // 3 x 3
        Region {
            src_shape: &[3, 4],
            src_at: &[1, 1],
            dst_shape: &[3, 3],
            dst_at: &[0, 1],
            region: &[2, 2],
            item: 1,
            dst_base: 0,
        }
        .copy(&src, &mut dst);
        assert_eq!(dst, vec![0, 5, 6, 0, 9, 10, 0, 0, 0]);
    }

    #[test]
    fn fills_an_inner_box_with_one_element() {
        let mut dst = vec![0u8; 18]; // 3 x 3 of 2-byte elements
        Region {
            src_shape: &[],
            src_at: &[],
            dst_shape: &[3, 3],
            dst_at: &[1, 1],
            region: &[2, 2],
            item: 2,
            dst_base: 0,
        }
        .fill(&[7, 8], &mut dst);
        let mut want = vec![0u8; 18];
        for (i, j) in [(1, 1), (1, 2), (2, 1), (2, 2)] {
            want[(i * 3 + j) * 2] = 7;
            want[(i * 3 + j) * 2 + 1] = 8;
        }
        assert_eq!(dst, want);
    }
}
