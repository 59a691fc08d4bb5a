//! numcodecs `shuffle`: the bytes of each element spread into byte planes (all first
//! bytes, then all second bytes, ...); trailing bytes that make no whole element stay put.

use serde_json::{Map, Value};

use super::Filter;
use crate::codec::num::Num;
use crate::codec::{check_len, UnitRepr};
use crate::error::{Error, Result};

pub struct Shuffle {
    size: usize,
}

impl Shuffle {
    pub fn build(c: &Map<String, Value>, native: Option<Num>) -> Result<Shuffle> {
        let size = c
            .get("elementsize")
            .and_then(Value::as_u64)
            .map(|s| s as usize)
            .or(native.map(|n| n.size))
            .unwrap_or(4);
        if size == 0 {
            return Err(Error::metadata("", "shuffle elementsize 0"));
        }
        Ok(Shuffle { size })
    }

    fn planes(&self, input: &[u8], unshuffle: bool) -> Vec<u8> {
        let count = input.len() / self.size;
        let whole = count * self.size;
        let mut out = vec![0u8; input.len()];
        out[whole..].copy_from_slice(&input[whole..]);
        let (from, to) = (&input[..whole], &mut out[..whole]);
        // The common sizes get copies of the loop with the size a constant.
        match self.size {
            2 => transpose(from, to, 2, count, unshuffle),
            4 => transpose(from, to, 4, count, unshuffle),
            8 => transpose(from, to, 8, count, unshuffle),
            size => transpose(from, to, size, count, unshuffle),
        }
        out
    }
}

/// Elements handled per block: a block's elements (at most 16 KiB of them for 16-byte
/// elements) stay in the first-level cache while each byte plane's run of them is read
/// or written in turn.
const BLOCK: usize = 1024;

/// Byte planes (`count` bytes each) to `size`-byte elements (`unshuffle`), or back.
#[inline(always)]
fn transpose(from: &[u8], to: &mut [u8], size: usize, count: usize, unshuffle: bool) {
    for first in (0..count).step_by(BLOCK) {
        let n = BLOCK.min(count - first);
        let elements = first * size..(first + n) * size;
        for j in 0..size {
            let plane = j * count + first..j * count + first + n;
            if unshuffle {
                let runs = to[elements.clone()].chunks_exact_mut(size);
                for (element, &byte) in runs.zip(&from[plane]) {
                    element[j] = byte;
                }
            } else {
                let runs = from[elements.clone()].chunks_exact(size);
                for (byte, element) in to[plane].iter_mut().zip(runs) {
                    *byte = element[j];
                }
            }
        }
    }
}

impl Filter for Shuffle {
    fn decode(&self, input: Vec<u8>, limit: usize) -> Result<Vec<u8>> {
        check_len(input.len(), limit, "shuffle")?;
        Ok(self.planes(&input, true))
    }

    fn encode(&self, input: Vec<u8>) -> Result<Vec<u8>> {
        Ok(self.planes(&input, false))
    }

    fn encoded_len(&self, decoded: usize) -> usize {
        decoded
    }

    fn encoded_repr(&self, decoded: &UnitRepr) -> Result<UnitRepr> {
        Ok(decoded.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Byte `j` of element `i` is byte `i` of plane `j`, for every size and length
    /// (several blocks, a partial block, trailing bytes).
    #[test]
    fn planes_match_their_definition_for_every_size() {
        for size in 1..=17 {
            for len in [
                0,
                1,
                size,
                size * 1000 + 3,
                size * 2500,
                size * 2500 + size - 1,
            ] {
                let input: Vec<u8> = (0..len).map(|i| (i * 7 + i / 251) as u8).collect();
                let count = len / size;
                let mut expect = input.clone();
                for i in 0..count {
                    for j in 0..size {
                        expect[j * count + i] = input[i * size + j];
                    }
                }
                let s = Shuffle { size };
                let shuffled = s.encode(input.clone()).unwrap();
                assert_eq!(shuffled, expect, "size {size} len {len}");
                assert_eq!(
                    s.decode(shuffled, len).unwrap(),
                    input,
                    "size {size} len {len}"
                );
            }
        }
    }

    #[test]
    fn byte_planes() {
        let s = Shuffle { size: 2 };
        assert_eq!(s.encode(vec![1, 2, 3, 4, 5]).unwrap(), vec![1, 3, 2, 4, 5]);
        assert_eq!(
            s.decode(vec![1, 3, 2, 4, 5], 5).unwrap(),
            vec![1, 2, 3, 4, 5]
        );
    }
}
