//! The v3 `bytes` codec (and v2's typestring byte order): fixed-size elements, little-
//! or big-endian, to and from the chunk's little-endian in-memory form.

use serde_json::Value;

use super::{ArrayToBytes, ChunkData, ChunkRepr};
use crate::error::{corrupt, Error, Result};
use crate::metadata::{CodecSpec, SwapUnits};

pub struct Bytes {
    /// Units to reverse in every element (empty for little-endian).
    swap: SwapUnits,
    item: usize,
    len: usize,
}

impl Bytes {
    pub fn build(spec: &CodecSpec, repr: &ChunkRepr) -> Result<Bytes> {
        let item = repr.dtype.size().ok_or_else(|| {
            Error::unsupported("", format!("bytes codec on {}", repr.dtype.name()))
        })?;
        let swap = match (spec.config.get("endian"), spec.config.get("swap_units")) {
            (_, Some(Value::Array(units))) => units
                .iter()
                .map(|u| {
                    let o = u.get(0)?.as_u64()? as usize;
                    let l = u.get(1)?.as_u64()? as usize;
                    (o + l <= item).then_some((o, l))
                })
                .collect::<Option<SwapUnits>>()
                .ok_or_else(|| Error::metadata("", "bad swap units"))?,
            (Some(Value::String(e)), _) if e == "big" => repr.dtype.swap_units(),
            (Some(Value::String(e)), _) if e == "little" => vec![],
            (None | Some(Value::Null), _) => vec![],
            (Some(other), _) => return Err(Error::metadata("", format!("bad endian {other}"))),
        };
        Ok(Bytes {
            swap,
            item,
            len: repr.fixed_len()?,
        })
    }
}

/// Reverse each swap unit of every element in `buf`.
pub fn swap_elements(buf: &mut [u8], item: usize, swap: &[(usize, usize)]) {
    if swap.is_empty() || item == 0 {
        return;
    }
    for element in buf.chunks_exact_mut(item) {
        for &(o, l) in swap {
            element[o..o + l].reverse();
        }
    }
}

impl ArrayToBytes for Bytes {
    fn decode(&self, mut bytes: Vec<u8>) -> Result<ChunkData> {
        if bytes.len() != self.len {
            return Err(corrupt(format!(
                "chunk has {} bytes, expected {}",
                bytes.len(),
                self.len
            )));
        }
        swap_elements(&mut bytes, self.item, &self.swap);
        Ok(ChunkData::Fixed(bytes))
    }

    fn encode(&self, data: ChunkData) -> Result<Vec<u8>> {
        let mut bytes = data.into_fixed()?;
        swap_elements(&mut bytes, self.item, &self.swap);
        Ok(bytes)
    }

    fn max_encoded_len(&self) -> Option<usize> {
        Some(self.len)
    }
}
