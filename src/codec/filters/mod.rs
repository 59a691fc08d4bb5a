//! numcodecs filters (delta, fixedscaleoffset, quantize, bitround, astype, packbits,
//! shuffle, categorize). Each works on a flat buffer of elements with explicit typestrings,
//! so one implementation serves both positions: a v2 filter between the bytes and the
//! compressor, and a v3 `numcodecs.*` array->array codec on little-endian chunks.

mod cast;
mod categorize;
mod delta;
mod packbits;
mod shuffle;

use super::num::Num;
use super::{ArrayToArray, BytesToBytes, UnitData, UnitRepr};
use crate::error::{Error, Result};
use crate::metadata::CodecSpec;

/// A filter over a flat element buffer.
pub trait Filter: Send + Sync {
    /// Decode; the output must not exceed `limit` bytes.
    fn decode(&self, input: Vec<u8>, limit: usize) -> Result<Vec<u8>>;
    fn encode(&self, input: Vec<u8>) -> Result<Vec<u8>>;
    /// Encoded size of `decoded` bytes (an upper bound).
    fn encoded_len(&self, decoded: usize) -> usize;
    /// The chunk as the next codec sees it, when the filter is array->array.
    fn encoded_repr(&self, decoded: &UnitRepr) -> Result<UnitRepr>;
}

/// Build a filter. `native` is the chunk's element type when the filter runs on
/// decoded chunks (v3); its typestring is the default for an absent `dtype`.
fn build(spec: &CodecSpec, native: Option<Num>) -> Result<Box<dyn Filter>> {
    let name = spec.name.strip_prefix("numcodecs.").unwrap_or(&spec.name);
    let c = &spec.config;
    Ok(match name {
        "delta" => Box::new(delta::Delta::build(c, native)?),
        "fixedscaleoffset" | "quantize" | "astype" | "bitround" => {
            Box::new(cast::Cast::build(name, c, native)?)
        }
        "packbits" => Box::new(packbits::PackBits),
        "shuffle" => Box::new(shuffle::Shuffle::build(c, native)?),
        "categorize" => Box::new(categorize::Categorize::build(c)?),
        _ => return Err(Error::unsupported("", format!("codec {:?}", spec.name))),
    })
}

struct AsArrayToArray {
    filter: Box<dyn Filter>,
    decoded_len: usize,
}

impl ArrayToArray for AsArrayToArray {
    fn decode(&self, data: UnitData) -> Result<UnitData> {
        let out = self.filter.decode(data.into_fixed()?, self.decoded_len)?;
        if out.len() != self.decoded_len {
            return Err(super::corrupt("filter output has the wrong size"));
        }
        Ok(UnitData::Fixed(out))
    }

    fn encode(&self, data: UnitData) -> Result<UnitData> {
        Ok(UnitData::Fixed(self.filter.encode(data.into_fixed()?)?))
    }
}

/// Decoded chunks are little-endian in memory whatever the bytes codec stores, so the
/// typestrings of a filter in array->array position are read as little-endian.
fn little_endian(spec: &CodecSpec) -> CodecSpec {
    let mut spec = spec.clone();
    for key in ["dtype", "astype", "encode_dtype", "decode_dtype"] {
        if let Some(serde_json::Value::String(s)) = spec.config.get_mut(key) {
            if let Some(rest) = s.strip_prefix('>') {
                *s = format!("<{rest}");
            }
        }
    }
    spec
}

pub fn build_array_to_array(
    spec: &CodecSpec,
    repr: &UnitRepr,
) -> Result<(Box<dyn ArrayToArray>, UnitRepr)> {
    let native = Num::of(&repr.dtype);
    let filter = build(&little_endian(spec), native)?;
    let encoded = filter.encoded_repr(repr)?;
    let codec = AsArrayToArray {
        filter,
        decoded_len: repr.fixed_len()?,
    };
    Ok((Box::new(codec), encoded))
}

struct AsBytesToBytes(Box<dyn Filter>);

impl BytesToBytes for AsBytesToBytes {
    fn decode(&self, bytes: Vec<u8>, limit: usize) -> Result<Vec<u8>> {
        self.0.decode(bytes, limit)
    }

    fn encode(&self, bytes: Vec<u8>) -> Result<Vec<u8>> {
        self.0.encode(bytes)
    }

    fn max_encoded_len(&self, decoded: usize) -> usize {
        self.0.encoded_len(decoded)
    }
}

pub fn build_bytes_to_bytes(spec: &CodecSpec, _repr: &UnitRepr) -> Result<Box<dyn BytesToBytes>> {
    Ok(Box::new(AsBytesToBytes(build(spec, None)?)))
}

/// The same chunk with another element type.
fn retyped(decoded: &UnitRepr, to: Num) -> UnitRepr {
    let size = to.size;
    UnitRepr {
        shape: decoded.shape.clone(),
        dtype: to.data_type(),
        fill: crate::metadata::FillValue::Fixed(vec![0; size]),
    }
}
