//! Variable-length array->bytes codecs: `vlen-utf8` / `vlen-bytes` (numcodecs layout:
//! a u32 count, then a u32 length before each element) and `zarrs.vlen` (offsets and data
//! through their own codec chains, index at the start or end).

use serde_json::{json, Value};

use super::{ArrayToBytes, CodecChain, UnitData, UnitRepr};
use crate::error::{corrupt, Error, Result};
use crate::metadata::{CodecSpec, DataType, FillValue};

enum Layout {
    Interleaved,
    Zarrs {
        index_codecs: Vec<CodecSpec>,
        data_codecs: Vec<CodecSpec>,
        index_u64: bool,
        index_at_end: bool,
    },
}

pub struct Vlen {
    layout: Layout,
    elements: usize,
    utf8: bool,
}

fn specs(value: Option<&Value>, default: Value) -> Result<Vec<CodecSpec>> {
    let value = value.cloned().unwrap_or(default);
    value
        .as_array()
        .ok_or_else(|| Error::metadata("", "vlen codec lists must be arrays"))?
        .iter()
        .map(|c| CodecSpec::from_v3(c, ""))
        .collect()
}

impl Vlen {
    pub fn build(spec: &CodecSpec, repr: &UnitRepr) -> Result<Vlen> {
        let name = spec.name.trim_start_matches("numcodecs.");
        let utf8 = match (&repr.dtype, name) {
            (DataType::String, _) => true,
            (DataType::VarBytes, _) => false,
            _ => {
                return Err(Error::unsupported(
                    "",
                    format!("codec {} for data type {}", spec.name, repr.dtype.name()),
                ))
            }
        };
        let layout = match name {
            "vlen-utf8" | "vlen-bytes" | "vlen_utf8" | "vlen_bytes" => Layout::Interleaved,
            "zarrs.vlen" => {
                let c = &spec.config;
                Layout::Zarrs {
                    index_codecs: specs(
                        c.get("index_codecs"),
                        json!([{"name": "bytes", "configuration": {"endian": "little"}}]),
                    )?,
                    data_codecs: specs(c.get("data_codecs"), json!([{"name": "bytes"}]))?,
                    index_u64: c.get("index_data_type").and_then(Value::as_str) == Some("uint64"),
                    index_at_end: c.get("index_location").and_then(Value::as_str) != Some("start"),
                }
            }
            other => return Err(Error::unsupported("", format!("codec {other:?}"))),
        };
        let elements = usize::try_from(repr.num_elements())
            .map_err(|_| Error::Internal("chunk too large".into()))?;
        Ok(Vlen {
            layout,
            elements,
            utf8,
        })
    }

    fn element(&self, bytes: &[u8]) -> Result<Option<Vec<u8>>> {
        if self.utf8 && std::str::from_utf8(bytes).is_err() {
            return Err(corrupt("vlen-utf8 element is not valid UTF-8"));
        }
        Ok(Some(bytes.to_vec()))
    }

    fn decode_interleaved(&self, bytes: &[u8]) -> Result<Vec<Option<Vec<u8>>>> {
        let mut pos = 0usize;
        let next_u32 = |pos: &mut usize| -> Result<usize> {
            let b = bytes
                .get(*pos..*pos + 4)
                .ok_or_else(|| corrupt("vlen: truncated"))?;
            *pos += 4;
            Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
        };
        let n = next_u32(&mut pos)?;
        if n != self.elements {
            return Err(corrupt(format!(
                "vlen: {n} elements, expected {}",
                self.elements
            )));
        }
        // Every element takes at least its 4-byte length: a count the chunk cannot hold
        // is refused before anything is reserved for it.
        if n > bytes.len().saturating_sub(4) / 4 {
            return Err(corrupt(format!(
                "vlen: {n} elements cannot fit in {} bytes",
                bytes.len()
            )));
        }
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let len = next_u32(&mut pos)?;
            let item = bytes
                .get(pos..pos.saturating_add(len))
                .ok_or_else(|| corrupt("vlen: element runs past the end"))?;
            pos += len;
            out.push(self.element(item)?);
        }
        Ok(out)
    }

    fn decode_zarrs(
        &self,
        bytes: &[u8],
        index_codecs: &[CodecSpec],
        data_codecs: &[CodecSpec],
        index_u64: bool,
        index_at_end: bool,
    ) -> Result<Vec<Option<Vec<u8>>>> {
        let len_field = if index_at_end {
            bytes.len().checked_sub(8).and_then(|s| bytes.get(s..))
        } else {
            bytes.get(..8)
        }
        .ok_or_else(|| corrupt("vlen: truncated"))?;
        let index_len =
            u64::from_le_bytes(len_field.try_into().map_err(|_| corrupt("vlen"))?) as usize;
        let body = if index_at_end {
            &bytes[..bytes.len() - 8]
        } else {
            &bytes[8..]
        };
        if index_len > body.len() {
            return Err(corrupt("vlen: index longer than the chunk"));
        }
        let (index_bytes, data_bytes) = if index_at_end {
            let split = body.len() - index_len;
            (&body[split..], &body[..split])
        } else {
            (&body[..index_len], &body[index_len..])
        };
        let index_dtype = if index_u64 {
            DataType::UInt(8)
        } else {
            DataType::UInt(4)
        };
        let size = index_dtype.size().unwrap_or(8);
        let index_repr = UnitRepr {
            shape: vec![self.elements as u64 + 1],
            fill: FillValue::Fixed(vec![0; size]),
            dtype: index_dtype,
        };
        let index = CodecChain::build(index_codecs, &index_repr)?
            .decode(index_bytes.to_vec())?
            .into_fixed()?;
        let offsets: Vec<usize> = index
            .chunks_exact(size)
            .map(|c| {
                let mut b = [0u8; 8];
                b[..size].copy_from_slice(c);
                u64::from_le_bytes(b) as usize
            })
            .collect();
        let total = *offsets.last().ok_or_else(|| corrupt("vlen: empty index"))?;
        let data_repr = UnitRepr {
            shape: vec![total as u64],
            dtype: DataType::UInt(1),
            fill: FillValue::Fixed(vec![0]),
        };
        let data = CodecChain::build(data_codecs, &data_repr)?
            .decode(data_bytes.to_vec())?
            .into_fixed()?;
        offsets
            .windows(2)
            .map(|w| {
                let item = data
                    .get(w[0]..w[1])
                    .ok_or_else(|| corrupt("vlen: offsets out of order or out of range"))?;
                self.element(item)
            })
            .collect()
    }
}

impl ArrayToBytes for Vlen {
    fn decode(&self, bytes: Vec<u8>) -> Result<UnitData> {
        Ok(UnitData::Var(match &self.layout {
            Layout::Interleaved => self.decode_interleaved(&bytes)?,
            Layout::Zarrs {
                index_codecs,
                data_codecs,
                index_u64,
                index_at_end,
            } => self.decode_zarrs(&bytes, index_codecs, data_codecs, *index_u64, *index_at_end)?,
        }))
    }

    fn encode(&self, data: UnitData) -> Result<Vec<u8>> {
        let UnitData::Var(items) = data else {
            return Err(Error::Internal(
                "vlen codec needs variable-length elements".into(),
            ));
        };
        match &self.layout {
            Layout::Interleaved => {
                let mut out = (items.len() as u32).to_le_bytes().to_vec();
                for item in &items {
                    let item = item.as_deref().unwrap_or(&[]);
                    out.extend_from_slice(&(item.len() as u32).to_le_bytes());
                    out.extend_from_slice(item);
                }
                Ok(out)
            }
            Layout::Zarrs {
                index_codecs,
                data_codecs,
                index_u64,
                index_at_end,
            } => {
                let mut offsets = vec![0u64];
                let mut data = Vec::new();
                for item in &items {
                    data.extend_from_slice(item.as_deref().unwrap_or(&[]));
                    offsets.push(data.len() as u64);
                }
                let (dtype, index): (DataType, Vec<u8>) = if *index_u64 {
                    (
                        DataType::UInt(8),
                        offsets.iter().flat_map(|o| o.to_le_bytes()).collect(),
                    )
                } else {
                    (
                        DataType::UInt(4),
                        offsets
                            .iter()
                            .flat_map(|o| (*o as u32).to_le_bytes())
                            .collect(),
                    )
                };
                let size = dtype.size().unwrap_or(8);
                let index_repr = UnitRepr {
                    shape: vec![offsets.len() as u64],
                    dtype,
                    fill: FillValue::Fixed(vec![0; size]),
                };
                let data_repr = UnitRepr {
                    shape: vec![data.len() as u64],
                    dtype: DataType::UInt(1),
                    fill: FillValue::Fixed(vec![0]),
                };
                let index =
                    CodecChain::build(index_codecs, &index_repr)?.encode(UnitData::Fixed(index))?;
                let data =
                    CodecChain::build(data_codecs, &data_repr)?.encode(UnitData::Fixed(data))?;
                let len = (index.len() as u64).to_le_bytes();
                Ok(if *index_at_end {
                    [data, index, len.to_vec()].concat()
                } else {
                    [len.to_vec(), index, data].concat()
                })
            }
        }
    }

    fn max_encoded_len(&self) -> Option<usize> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repr(dtype: DataType, n: u64) -> UnitRepr {
        UnitRepr {
            shape: vec![n],
            dtype,
            fill: FillValue::Var(None),
        }
    }

    #[test]
    fn legacy_layout_matches_numcodecs() {
        let v = Vlen::build(
            &CodecSpec::new("vlen-utf8", Value::Null),
            &repr(DataType::String, 2),
        )
        .unwrap();
        // numcodecs.VLenUTF8().encode(np.array(["ab", "é"], dtype=object))
        let stored = b"\x02\x00\x00\x00\x02\x00\x00\x00ab\x02\x00\x00\x00\xc3\xa9".to_vec();
        let items = vec![Some(b"ab".to_vec()), Some("é".as_bytes().to_vec())];
        assert_eq!(
            v.decode(stored.clone()).unwrap(),
            UnitData::Var(items.clone())
        );
        assert_eq!(v.encode(UnitData::Var(items)).unwrap(), stored);
        assert!(v.decode(stored[..9].to_vec()).is_err());
        let bad = b"\x01\x00\x00\x00\x02\x00\x00\x00\xff\xfe".to_vec();
        let one = Vlen::build(
            &CodecSpec::new("vlen-utf8", Value::Null),
            &repr(DataType::String, 1),
        )
        .unwrap();
        assert!(one.decode(bad).is_err());
    }

    #[test]
    fn zarrs_vlen_round_trips_both_index_locations() {
        let items = vec![Some(b"x".to_vec()), Some(vec![]), Some(b"hello".to_vec())];
        for (loc, ty) in [("end", "uint32"), ("start", "uint64")] {
            let spec = CodecSpec::new(
                "zarrs.vlen",
                json!({"index_location": loc, "index_data_type": ty,
                       "data_codecs": [{"name": "bytes"}, {"name": "zstd", "configuration": {"level": 1}}],
                       "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}]}),
            );
            let v = Vlen::build(&spec, &repr(DataType::VarBytes, 3)).unwrap();
            let enc = v.encode(UnitData::Var(items.clone())).unwrap();
            assert_eq!(
                v.decode(enc).unwrap(),
                UnitData::Var(items.clone()),
                "{loc}"
            );
        }
        // A hand-built chunk: offsets [0, 1, 1, 6] as uint32 at the end.
        let mut stored = b"xhello".to_vec();
        for o in [0u32, 1, 1, 6] {
            stored.extend_from_slice(&o.to_le_bytes());
        }
        stored.extend_from_slice(&16u64.to_le_bytes());
        let v = Vlen::build(
            &CodecSpec::new("zarrs.vlen", json!({})),
            &repr(DataType::VarBytes, 3),
        )
        .unwrap();
        assert_eq!(v.decode(stored).unwrap(), UnitData::Var(items));
    }
}
