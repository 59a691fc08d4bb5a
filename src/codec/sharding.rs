//! `sharding_indexed`: a shard holds a grid of inner chunks, each encoded by the inner
//! chain, plus an index of (offset, nbytes) pairs at the start or end. The array layer
//! uses the index and inner chain directly for partial reads; this codec also decodes
//! and encodes whole shards.

use serde_json::{json, Value};

use super::{ArrayToBytes, CodecChain, UnitData, UnitRepr};
use crate::codec::region::Region;
use crate::error::{corrupt, Error, Result};
use crate::metadata::{CodecSpec, DataType, FillValue};

/// Offset and length of an inner chunk that was never written.
pub const EMPTY: u64 = u64::MAX;

pub struct Sharding {
    pub inner_shape: Vec<u64>,
    /// Inner chunks per shard along each axis.
    pub inner_grid: Vec<u64>,
    pub inner: CodecChain,
    index: CodecChain,
    pub index_len: usize,
    pub index_at_end: bool,
    repr: UnitRepr,
}

fn codec_list(value: Option<&Value>, default: Value) -> Result<Vec<CodecSpec>> {
    value
        .cloned()
        .unwrap_or(default)
        .as_array()
        .ok_or_else(|| Error::metadata("", "sharding codec lists must be arrays"))?
        .iter()
        .map(|c| CodecSpec::from_v3(c, ""))
        .collect()
}

impl Sharding {
    pub fn build(spec: &CodecSpec, repr: &UnitRepr) -> Result<Sharding> {
        let c = &spec.config;
        let inner_shape: Vec<u64> = c
            .get("chunk_shape")
            .and_then(Value::as_array)
            .and_then(|a| a.iter().map(Value::as_u64).collect())
            .ok_or_else(|| Error::metadata("", "sharding without chunk_shape"))?;
        if inner_shape.len() != repr.shape.len()
            || inner_shape
                .iter()
                .zip(&repr.shape)
                .any(|(i, s)| *i == 0 || s % i != 0)
        {
            return Err(Error::metadata(
                "",
                format!(
                    "inner chunks {inner_shape:?} do not divide shard {:?}",
                    repr.shape
                ),
            ));
        }
        let inner_grid: Vec<u64> = repr
            .shape
            .iter()
            .zip(&inner_shape)
            .map(|(s, i)| s / i)
            .collect();
        let inner_repr = UnitRepr {
            shape: inner_shape.clone(),
            ..repr.clone()
        };
        let inner = CodecChain::build(
            &codec_list(c.get("codecs"), json!([{"name": "bytes"}]))?,
            &inner_repr,
        )?;
        let mut index_shape = inner_grid.clone();
        index_shape.push(2);
        let index_repr = UnitRepr {
            shape: index_shape,
            dtype: DataType::UInt(8),
            fill: FillValue::Fixed(vec![0xff; 8]),
        };
        let default_index =
            json!([{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}]);
        let index = CodecChain::build(
            &codec_list(c.get("index_codecs"), default_index)?,
            &index_repr,
        )?;
        let index_len = index
            .max_encoded_len()
            .ok_or_else(|| Error::unsupported("", "shard index codecs without a fixed size"))?;
        let index_at_end = match c.get("index_location").and_then(Value::as_str) {
            None | Some("end") => true,
            Some("start") => false,
            Some(other) => {
                return Err(Error::metadata("", format!("bad index_location {other:?}")))
            }
        };
        Ok(Sharding {
            inner_shape,
            inner_grid,
            inner,
            index,
            index_len,
            index_at_end,
            repr: repr.clone(),
        })
    }

    pub fn inner_count(&self) -> usize {
        self.inner_grid.iter().product::<u64>() as usize
    }

    /// Decode an encoded index into (offset, nbytes) per inner chunk, C order.
    pub fn decode_index(&self, bytes: Vec<u8>) -> Result<Vec<(u64, u64)>> {
        let raw = self.index.decode(bytes)?.into_fixed()?;
        Ok(raw
            .chunks_exact(16)
            .map(|p| {
                let mut a = [0u8; 8];
                let mut b = [0u8; 8];
                a.copy_from_slice(&p[..8]);
                b.copy_from_slice(&p[8..]);
                (u64::from_le_bytes(a), u64::from_le_bytes(b))
            })
            .collect())
    }

    /// The index bytes of a whole encoded shard, and where inner offsets count from.
    fn split_index<'a>(&self, shard: &'a [u8]) -> Result<&'a [u8]> {
        if shard.len() < self.index_len {
            return Err(corrupt("shard shorter than its index"));
        }
        Ok(if self.index_at_end {
            &shard[shard.len() - self.index_len..]
        } else {
            &shard[..self.index_len]
        })
    }

    /// Position of inner chunk `i` (C order) within the shard, in elements.
    pub fn inner_origin(&self, mut i: usize) -> Vec<u64> {
        let mut at = vec![0u64; self.inner_grid.len()];
        for d in (0..at.len()).rev() {
            let g = self.inner_grid[d] as usize;
            at[d] = (i % g) as u64 * self.inner_shape[d];
            i /= g;
        }
        at
    }
}

impl ArrayToBytes for Sharding {
    fn decode(&self, bytes: Vec<u8>) -> Result<UnitData> {
        let index = self.decode_index(self.split_index(&bytes)?.to_vec())?;
        let mut shard = self.repr.filled()?;
        let item = self.repr.dtype.size().unwrap_or(1);
        for (i, &(offset, nbytes)) in index.iter().enumerate() {
            if offset == EMPTY && nbytes == EMPTY {
                continue;
            }
            let end = offset
                .checked_add(nbytes)
                .filter(|e| *e <= bytes.len() as u64);
            let end =
                end.ok_or_else(|| corrupt(format!("inner chunk {i} lies outside the shard")))?;
            let chunk = self
                .inner
                .decode(bytes[offset as usize..end as usize].to_vec())?;
            let at = self.inner_origin(i);
            let region = Region {
                src_shape: &self.inner_shape,
                src_at: &vec![0; at.len()],
                dst_shape: &self.repr.shape,
                dst_at: &at,
                region: &self.inner_shape,
                item,
                dst_base: 0,
            };
            match (&chunk, &mut shard) {
                (UnitData::Fixed(s), UnitData::Fixed(d)) => region.copy(s, d),
                (UnitData::Var(s), UnitData::Var(d)) => Region { item: 1, ..region }.copy(s, d),
                _ => return Err(corrupt("inner chunk of the wrong kind")),
            }
        }
        Ok(shard)
    }

    fn encode(&self, data: UnitData) -> Result<Vec<u8>> {
        let item = self.repr.dtype.size().unwrap_or(1);
        let fill = UnitRepr {
            shape: self.inner_shape.clone(),
            ..self.repr.clone()
        }
        .filled()?;
        let mut body = Vec::new();
        let mut index = Vec::with_capacity(self.inner_count() * 16);
        for i in 0..self.inner_count() {
            let at = self.inner_origin(i);
            let mut inner = fill.clone();
            let region = Region {
                src_shape: &self.repr.shape,
                src_at: &at,
                dst_shape: &self.inner_shape,
                dst_at: &vec![0; at.len()],
                region: &self.inner_shape,
                item,
                dst_base: 0,
            };
            match (&data, &mut inner) {
                (UnitData::Fixed(s), UnitData::Fixed(d)) => region.copy(s, d),
                (UnitData::Var(s), UnitData::Var(d)) => Region { item: 1, ..region }.copy(s, d),
                _ => return Err(Error::Internal("shard data of the wrong kind".into())),
            }
            if inner == fill {
                index.extend_from_slice(&EMPTY.to_le_bytes());
                index.extend_from_slice(&EMPTY.to_le_bytes());
                continue;
            }
            let enc = self.inner.encode(inner)?;
            let base = if self.index_at_end { 0 } else { self.index_len };
            index.extend_from_slice(&((base + body.len()) as u64).to_le_bytes());
            index.extend_from_slice(&(enc.len() as u64).to_le_bytes());
            body.extend(enc);
        }
        let index = self.index.encode(UnitData::Fixed(index))?;
        Ok(if self.index_at_end {
            [body, index].concat()
        } else {
            [index, body].concat()
        })
    }

    fn max_encoded_len(&self) -> Option<usize> {
        let inner = self.inner.max_encoded_len()?;
        inner
            .checked_mul(self.inner_count())?
            .checked_add(self.index_len)
    }

    fn as_sharding(&self) -> Option<&Sharding> {
        Some(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_round_trip_with_empty_inner_chunks_and_nesting() {
        let repr = UnitRepr {
            shape: vec![4, 6],
            dtype: DataType::Int(2),
            fill: FillValue::Fixed(vec![7, 0]),
        };
        let nested = json!({"chunk_shape": [1, 3], "codecs": [{"name": "bytes", "configuration": {"endian": "big"}}]});
        for (loc, inner) in [
            (
                "end",
                json!([{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "gzip"}]),
            ),
            (
                "start",
                json!([{"name": "sharding_indexed", "configuration": nested}]),
            ),
        ] {
            let spec = CodecSpec::new(
                "sharding_indexed",
                json!({"chunk_shape": [2, 3], "codecs": inner, "index_location": loc}),
            );
            let s = Sharding::build(&spec, &repr).unwrap();
            let mut data: Vec<u8> = (0..24i16).flat_map(|v| v.to_le_bytes()).collect();
            // The top-right inner chunk holds only the fill value: it must be left out.
            for r in 0..2 {
                for c in 3..6 {
                    data[(r * 6 + c) * 2..(r * 6 + c) * 2 + 2].copy_from_slice(&7i16.to_le_bytes());
                }
            }
            let enc = s.encode(UnitData::Fixed(data.clone())).unwrap();
            let idx_bytes = s.split_index(&enc).unwrap().to_vec();
            let index = s.decode_index(idx_bytes).unwrap();
            assert_eq!(index[1], (EMPTY, EMPTY), "{loc}");
            assert_eq!(
                s.decode(enc.clone()).unwrap(),
                UnitData::Fixed(data),
                "{loc}"
            );
            let mut bad = enc.clone();
            let n = bad.len();
            bad[if loc == "end" { n - 1 } else { 0 }] ^= 0xff;
            assert!(s.decode(bad).is_err(), "{loc}: index checksum");
        }
    }
}
