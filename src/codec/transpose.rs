//! The v3 `transpose` codec: a permutation of the chunk's axes (v2 `order: F` and the
//! draft's `chunk_memory_layout: F` are the reversing permutation).

use serde_json::Value;

use super::{ArrayToArray, UnitData, UnitRepr};
use crate::error::{corrupt, Error, Result};
use crate::metadata::CodecSpec;

pub struct Transpose {
    /// `order[i]` is the decoded axis that becomes encoded axis `i`.
    order: Vec<usize>,
    decoded_shape: Vec<u64>,
    item: Option<usize>,
}

impl Transpose {
    pub fn build(spec: &CodecSpec, repr: &UnitRepr) -> Result<(Box<dyn ArrayToArray>, UnitRepr)> {
        let n = repr.shape.len();
        let order: Vec<usize> = match spec.config.get("order") {
            Some(Value::Array(o)) => o
                .iter()
                .map(|v| v.as_u64().map(|v| v as usize))
                .collect::<Option<_>>()
                .ok_or_else(|| Error::metadata("", "bad transpose order"))?,
            Some(Value::String(s)) if s == "C" => (0..n).collect(),
            Some(Value::String(s)) if s == "F" => (0..n).rev().collect(),
            _ => return Err(Error::metadata("", "transpose without an order")),
        };
        let mut seen = vec![false; n];
        if order.len() != n
            || order
                .iter()
                .any(|&a| a >= n || std::mem::replace(&mut seen[a], true))
        {
            return Err(Error::metadata(
                "",
                format!("transpose order {order:?} is not a permutation of {n} axes"),
            ));
        }
        let encoded = UnitRepr {
            shape: order.iter().map(|&a| repr.shape[a]).collect(),
            ..repr.clone()
        };
        let codec = Transpose {
            order,
            decoded_shape: repr.shape.clone(),
            item: repr.dtype.size(),
        };
        Ok((Box::new(codec), encoded))
    }
}

/// C-order strides (in elements) of `shape`.
pub fn strides(shape: &[u64]) -> Vec<usize> {
    let mut s = vec![1usize; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1] as usize;
    }
    s
}

/// Permute elements: `out` in C order of `dst_shape` where dst axis `i` is src axis `perm[i]`.
pub fn permute<T: Clone>(src: &[T], item: usize, src_shape: &[u64], perm: &[usize]) -> Vec<T> {
    let src_strides = strides(src_shape);
    let dst_shape: Vec<u64> = perm.iter().map(|&a| src_shape[a]).collect();
    let step: Vec<usize> = perm.iter().map(|&a| src_strides[a]).collect();
    let n: usize = dst_shape.iter().product::<u64>() as usize;
    let mut out = Vec::with_capacity(src.len());
    let mut idx = vec![0u64; dst_shape.len()];
    let mut offset = 0usize;
    for _ in 0..n {
        out.extend_from_slice(&src[offset * item..(offset + 1) * item]);
        for d in (0..idx.len()).rev() {
            idx[d] += 1;
            offset += step[d];
            if idx[d] < dst_shape[d] {
                break;
            }
            offset -= step[d] * dst_shape[d] as usize;
            idx[d] = 0;
        }
    }
    out
}

/// Edge of the square tiles `reverse_axes` copies through (elements).
const TILE: usize = 32;

/// Copy one element of `N` bytes (`N` = 0: any size, given by `item`).
#[inline(always)]
fn copy_element<const N: usize>(src: &[u8], s: usize, dst: &mut [u8], d: usize, item: usize) {
    if N == 0 {
        dst[d * item..(d + 1) * item].copy_from_slice(&src[s * item..(s + 1) * item]);
    } else {
        dst[d * N..(d + 1) * N].copy_from_slice(&src[s * N..(s + 1) * N]);
    }
}

fn reverse_tiles<const N: usize>(src: &[u8], item: usize, shape: &[u64], dst: &mut [u8]) {
    let n = shape.len();
    let src_strides = strides(shape);
    let reversed: Vec<u64> = shape.iter().rev().copied().collect();
    let dst_rev = strides(&reversed);
    // dst stride of source axis d.
    let dst_stride = |d: usize| dst_rev[n - 1 - d];
    let (outer, inner) = (shape[0] as usize, shape[n - 1] as usize);
    let (src_outer, dst_inner) = (src_strides[0], dst_stride(n - 1));
    let middle: Vec<usize> = (1..n - 1).collect();
    let mut m = vec![0u64; n];
    let size = if N == 0 { item } else { N };
    let mut tile = vec![0u8; TILE * TILE * size];
    loop {
        let src_base: usize = middle.iter().map(|&d| m[d] as usize * src_strides[d]).sum();
        let dst_base: usize = middle.iter().map(|&d| m[d] as usize * dst_stride(d)).sum();
        for i0 in (0..outer).step_by(TILE) {
            let rows = TILE.min(outer - i0);
            for k0 in (0..inner).step_by(TILE) {
                let cols = TILE.min(inner - k0);
                // The tile's rows into `tile`, each a contiguous run of the source.
                for i in 0..rows {
                    let s = (src_base + (i0 + i) * src_outer + k0) * size;
                    tile[i * TILE * size..(i * TILE + cols) * size]
                        .copy_from_slice(&src[s..s + cols * size]);
                }
                // Its columns out, each a contiguous run of the destination: one
                // destination line at a time, not a tile's width of lines that a
                // power-of-two stride maps to the same cache set.
                for k in 0..cols {
                    let d = (dst_base + (k0 + k) * dst_inner + i0) * size;
                    let out = &mut dst[d..d + rows * size];
                    for i in 0..rows {
                        copy_element::<N>(&tile, i * TILE + k, out, i, item);
                    }
                }
            }
        }
        // Next middle index, last middle axis fastest.
        let mut advanced = false;
        for &d in middle.iter().rev() {
            m[d] += 1;
            if m[d] < shape[d] {
                advanced = true;
                break;
            }
            m[d] = 0;
        }
        if !advanced {
            return;
        }
    }
}

/// Reverse the axes of a C-order buffer of `item`-byte elements (C order <-> F order),
/// copying through square tiles so that reads and writes both stay in cache.
pub fn reverse_axes(src: &[u8], item: usize, shape: &[u64]) -> Vec<u8> {
    if shape.len() < 2 || shape.contains(&0) {
        return src.to_vec();
    }
    let mut dst = vec![0u8; src.len()];
    match item {
        1 => reverse_tiles::<1>(src, item, shape, &mut dst),
        2 => reverse_tiles::<2>(src, item, shape, &mut dst),
        4 => reverse_tiles::<4>(src, item, shape, &mut dst),
        8 => reverse_tiles::<8>(src, item, shape, &mut dst),
        16 => reverse_tiles::<16>(src, item, shape, &mut dst),
        _ => reverse_tiles::<0>(src, item, shape, &mut dst),
    }
    dst
}

impl Transpose {
    fn apply(&self, data: UnitData, src_shape: &[u64], perm: &[usize]) -> Result<UnitData> {
        let n: u64 = src_shape.iter().product();
        Ok(match data {
            UnitData::Fixed(b) => {
                let item = self.item.unwrap_or(1);
                if b.len() as u64 != n * item as u64 {
                    return Err(corrupt("transpose input has the wrong size"));
                }
                let reversal = perm.iter().rev().enumerate().all(|(i, &a)| a == i);
                if reversal {
                    UnitData::Fixed(reverse_axes(&b, item, src_shape))
                } else {
                    UnitData::Fixed(permute(&b, item, src_shape, perm))
                }
            }
            UnitData::Var(v) => {
                if v.len() as u64 != n {
                    return Err(corrupt("transpose input has the wrong size"));
                }
                UnitData::Var(permute(&v, 1, src_shape, perm))
            }
            // Every element is the same: nothing moves.
            fill @ UnitData::Fill(_) => fill,
        })
    }

    fn inverse(&self) -> Vec<usize> {
        let mut inv = vec![0; self.order.len()];
        for (i, &a) in self.order.iter().enumerate() {
            inv[a] = i;
        }
        inv
    }
}

impl ArrayToArray for Transpose {
    fn decode(&self, data: UnitData) -> Result<UnitData> {
        let encoded_shape: Vec<u64> = self.order.iter().map(|&a| self.decoded_shape[a]).collect();
        self.apply(data, &encoded_shape, &self.inverse())
    }

    fn encode(&self, data: UnitData) -> Result<UnitData> {
        self.apply(data, &self.decoded_shape, &self.order)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::{DataType, FillValue};
    use serde_json::json;

    #[test]
    fn tiled_reversal_matches_the_general_permutation() {
        for shape in [
            vec![3u64, 70],
            vec![5, 4, 33],
            vec![2, 3, 4, 5],
            vec![40, 1, 37],
        ] {
            for item in [1usize, 2, 4, 8, 16, 3] {
                let n: u64 = shape.iter().product();
                let src: Vec<u8> = (0..n as usize * item)
                    .map(|i| (i * 7 % 251) as u8)
                    .collect();
                let perm: Vec<usize> = (0..shape.len()).rev().collect();
                assert_eq!(
                    reverse_axes(&src, item, &shape),
                    permute(&src, item, &shape, &perm),
                    "{shape:?} item {item}"
                );
            }
        }
    }

    #[test]
    fn transposes_and_round_trips_3d() {
        let repr = UnitRepr {
            shape: vec![2, 3, 4],
            dtype: DataType::UInt(1),
            fill: FillValue::Fixed(vec![0]),
        };
        let spec = CodecSpec::new("transpose", json!({"order": [2, 0, 1]}));
        let (codec, enc) = Transpose::build(&spec, &repr).unwrap();
        assert_eq!(enc.shape, vec![4, 2, 3]);
        let data: Vec<u8> = (0..24).collect();
        let encoded = codec
            .encode(UnitData::Fixed(data.clone()))
            .unwrap()
            .into_fixed()
            .unwrap();
        // encoded[k][i][j] = data[i][j][k]
        // encoded[1][1][2] (strides 6, 3, 1) is data[1][2][1] (strides 12, 4, 1).
        assert_eq!(encoded[6 + 3 + 2], data[12 + 2 * 4 + 1]);
        assert_eq!(
            codec.decode(UnitData::Fixed(encoded)).unwrap(),
            UnitData::Fixed(data)
        );
        let bad = CodecSpec::new("transpose", json!({"order": [0, 0, 1]}));
        assert!(Transpose::build(&bad, &repr).is_err());
    }
}
