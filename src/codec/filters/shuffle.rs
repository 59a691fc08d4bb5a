//! numcodecs `shuffle`: the bytes of each element spread into byte planes (all first
//! bytes, then all second bytes, ...); trailing bytes that make no whole element stay put.

use serde_json::{Map, Value};

use super::Filter;
use crate::codec::num::Num;
use crate::codec::{check_len, ChunkRepr};
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
        let mut out = input.to_vec();
        for i in 0..count {
            for j in 0..self.size {
                let (a, b) = (i * self.size + j, j * count + i);
                if unshuffle {
                    out[a] = input[b];
                } else {
                    out[b] = input[a];
                }
            }
        }
        out
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

    fn encoded_repr(&self, decoded: &ChunkRepr) -> Result<ChunkRepr> {
        Ok(decoded.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
