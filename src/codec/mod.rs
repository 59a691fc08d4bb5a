//! The codec chain: array->array, array->bytes and bytes->bytes codecs behind three small
//! traits, built from normalized `CodecSpec`s and run by one `CodecChain`.

mod blosc;
mod bytes;
pub use bytes::swap_elements;
pub use transpose::reverse_axes;
mod checksum;
mod compress;
mod filters;
pub mod num;
pub mod region;
pub mod sharding;
mod transpose;
mod vlen;

use crate::error::{corrupt, Error, Result};
use crate::metadata::{CodecSpec, DataType, FillValue};

use crate::limits::{MAX_BUFFER, MAX_VAR_ELEMENTS};

/// What a unit (a chunk, or a shard's inner chunk) looks like at one point of the chain:
/// shape, element type and fill (the spec's chunk representation).
#[derive(Debug, Clone, PartialEq)]
pub struct UnitRepr {
    pub shape: Vec<u64>,
    pub dtype: DataType,
    pub fill: FillValue,
}

impl UnitRepr {
    /// Elements of the chunk; saturates (and then fails every size check) on overflow.
    pub fn num_elements(&self) -> u64 {
        self.shape
            .iter()
            .try_fold(1u64, |acc, d| acc.checked_mul(*d))
            .unwrap_or(u64::MAX)
    }

    /// Bytes of a fixed-size chunk, checked against overflow and `MAX_BUFFER`.
    pub fn fixed_len(&self) -> Result<usize> {
        let size = self
            .dtype
            .size()
            .ok_or_else(|| Error::Internal("variable-length chunk has no fixed size".into()))?;
        self.num_elements()
            .checked_mul(size as u64)
            .filter(|n| *n <= MAX_BUFFER as u64)
            .map(|n| n as usize)
            .ok_or_else(|| Error::Internal(format!("chunk of shape {:?} is too large", self.shape)))
    }

    /// A chunk of fill value as [`UnitData::Fill`] (one element, nothing materialized)
    /// for fixed-size types; variable-length ones are materialized by [`Self::filled`].
    pub fn fill_marker(&self) -> Result<UnitData> {
        match &self.fill {
            FillValue::Fixed(one) => Ok(UnitData::Fill(one.clone())),
            FillValue::Var(_) => self.filled(),
        }
    }

    /// A chunk holding only the fill value, materialized (its memory is reserved
    /// fallibly: a chunk that does not fit fails, the process lives).
    pub fn filled(&self) -> Result<UnitData> {
        Ok(match &self.fill {
            FillValue::Fixed(one) => {
                let n = self.fixed_len()?;
                let mut out = Vec::new();
                out.try_reserve_exact(n).map_err(|_| {
                    Error::Internal(format!(
                        "chunk of shape {:?}: out of memory for {n} bytes",
                        self.shape
                    ))
                })?;
                if one.iter().all(|b| *b == 0) {
                    out.resize(n, 0);
                } else {
                    for _ in 0..self.num_elements() {
                        out.extend_from_slice(one);
                    }
                }
                UnitData::Fixed(out)
            }
            FillValue::Var(v) => {
                let n = usize::try_from(self.num_elements())
                    .ok()
                    .filter(|n| *n <= MAX_VAR_ELEMENTS)
                    .ok_or_else(|| {
                        Error::Internal(format!(
                            "variable-length chunk of shape {:?}: more than {MAX_VAR_ELEMENTS} elements",
                            self.shape
                        ))
                    })?;
                let mut out = Vec::new();
                out.try_reserve_exact(n).map_err(|_| {
                    Error::Internal(format!(
                        "variable-length chunk of shape {:?}: out of memory",
                        self.shape
                    ))
                })?;
                out.resize(n, v.clone());
                UnitData::Var(out)
            }
        })
    }
}

/// Decoded elements of one unit (a chunk, or a shard's inner chunk), C order,
/// little-endian.
#[derive(Debug, Clone, PartialEq)]
pub enum UnitData {
    Fixed(Vec<u8>),
    Var(Vec<Option<Vec<u8>>>),
    /// A fixed-size chunk every element of which is this one element: a chunk that was
    /// never written, served without being materialized. Codecs never produce it.
    Fill(Vec<u8>),
}

impl UnitData {
    /// Size in memory, for cache accounting.
    pub fn mem_size(&self) -> usize {
        match self {
            UnitData::Fixed(b) | UnitData::Fill(b) => b.len(),
            UnitData::Var(v) => v.iter().map(|e| 24 + e.as_ref().map_or(0, Vec::len)).sum(),
        }
    }

    pub fn into_fixed(self) -> Result<Vec<u8>> {
        match self {
            UnitData::Fixed(b) => Ok(b),
            UnitData::Var(_) => Err(corrupt("expected fixed-size elements")),
            UnitData::Fill(_) => Err(corrupt("a chunk of fill value has no stored bytes")),
        }
    }
}

/// Array -> array: transpose, numeric filters.
pub trait ArrayToArray: Send + Sync {
    fn decode(&self, data: UnitData) -> Result<UnitData>;
    fn encode(&self, data: UnitData) -> Result<UnitData>;
}

/// Array -> bytes: bytes, vlen, sharding.
pub trait ArrayToBytes: Send + Sync {
    fn decode(&self, bytes: Vec<u8>) -> Result<UnitData>;
    fn encode(&self, data: UnitData) -> Result<Vec<u8>>;
    /// The largest encoded size, when it is bounded.
    fn max_encoded_len(&self) -> Option<usize>;
    fn as_sharding(&self) -> Option<&sharding::Sharding> {
        None
    }
}

/// Bytes -> bytes: compressors, checksums, byte-level filters.
pub trait BytesToBytes: Send + Sync {
    /// Decode; the result must not exceed `limit` bytes.
    fn decode(&self, bytes: Vec<u8>, limit: usize) -> Result<Vec<u8>>;
    fn encode(&self, bytes: Vec<u8>) -> Result<Vec<u8>>;
    /// The largest encoded size of `decoded` bytes.
    fn max_encoded_len(&self, decoded: usize) -> usize {
        decoded.saturating_add(decoded / 8).saturating_add(1024)
    }
}

/// A full chain for chunks of one representation.
pub struct CodecChain {
    a2a: Vec<Box<dyn ArrayToArray>>,
    a2b: Box<dyn ArrayToBytes>,
    b2b: Vec<Box<dyn BytesToBytes>>,
    /// Largest size at each bytes stage: `limits[0]` is the a2b output.
    limits: Vec<usize>,
    repr: UnitRepr,
}

impl std::fmt::Debug for CodecChain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CodecChain")
            .field("repr", &self.repr)
            .finish()
    }
}

/// Names of codecs that are array->bytes.
fn is_array_to_bytes(name: &str) -> bool {
    matches!(
        name,
        "bytes"
            | "endian"
            | "vlen-utf8"
            | "vlen-bytes"
            | "zarrs.vlen"
            | "vlen_utf8"
            | "vlen_bytes"
            | "sharding_indexed"
            | "numcodecs.vlen-utf8"
            | "numcodecs.vlen-bytes"
    )
}

impl CodecChain {
    /// Build the chain for decoded chunks of `repr` from specs in encode order.
    pub fn build(specs: &[CodecSpec], repr: &UnitRepr) -> Result<CodecChain> {
        let split = specs
            .iter()
            .position(|s| is_array_to_bytes(&s.name))
            .ok_or_else(|| Error::unsupported("", "codec chain without an array->bytes codec"))?;
        let mut current = repr.clone();
        let mut a2a: Vec<Box<dyn ArrayToArray>> = Vec::new();
        for spec in &specs[..split] {
            let (codec, next) = build_array_to_array(spec, &current)?;
            a2a.push(codec);
            current = next;
        }
        let a2b = build_array_to_bytes(&specs[split], &current)?;
        let mut limits = vec![a2b.max_encoded_len().unwrap_or(MAX_BUFFER)];
        let mut b2b: Vec<Box<dyn BytesToBytes>> = Vec::new();
        for spec in &specs[split + 1..] {
            if is_array_to_bytes(&spec.name) {
                return Err(Error::unsupported(
                    "",
                    format!("second array->bytes codec {}", spec.name),
                ));
            }
            let codec = build_bytes_to_bytes(spec, &current)?;
            let last = *limits.last().unwrap_or(&MAX_BUFFER);
            limits.push(codec.max_encoded_len(last).min(MAX_BUFFER));
            b2b.push(codec);
        }
        Ok(CodecChain {
            a2a,
            a2b,
            b2b,
            limits,
            repr: repr.clone(),
        })
    }

    /// The largest encoded chunk, when bounded.
    pub fn max_encoded_len(&self) -> Option<usize> {
        let last = *self.limits.last()?;
        (last < MAX_BUFFER).then_some(last)
    }

    /// Whether decoding turns the stored bytes into another buffer (a bytes-to-bytes
    /// codec, such as a compressor, is in the chain): a decode then holds both at once.
    pub fn decodes_into_another_buffer(&self) -> bool {
        !self.b2b.is_empty()
    }

    /// The sharding codec, when it is the whole chain.
    pub fn sole_sharding(&self) -> Option<&sharding::Sharding> {
        if self.a2a.is_empty() && self.b2b.is_empty() {
            self.a2b.as_sharding()
        } else {
            None
        }
    }

    /// Decode one stored chunk.
    pub fn decode(&self, bytes: Vec<u8>) -> Result<UnitData> {
        let mut bytes = bytes;
        for (i, codec) in self.b2b.iter().enumerate().rev() {
            bytes = codec.decode(bytes, self.limits[i])?;
        }
        let mut data = self.a2b.decode(bytes)?;
        for codec in self.a2a.iter().rev() {
            data = codec.decode(data)?;
        }
        Ok(data)
    }

    /// Encode one chunk (used for round-trip tests and the demo writer).
    pub fn encode(&self, data: UnitData) -> Result<Vec<u8>> {
        let mut data = data;
        for codec in &self.a2a {
            data = codec.encode(data)?;
        }
        let mut bytes = self.a2b.encode(data)?;
        for codec in &self.b2b {
            bytes = codec.encode(bytes)?;
        }
        Ok(bytes)
    }
}

fn build_array_to_array(
    spec: &CodecSpec,
    repr: &UnitRepr,
) -> Result<(Box<dyn ArrayToArray>, UnitRepr)> {
    match spec.name.as_str() {
        "transpose" => transpose::Transpose::build(spec, repr),
        _ => filters::build_array_to_array(spec, repr),
    }
}

fn build_array_to_bytes(spec: &CodecSpec, repr: &UnitRepr) -> Result<Box<dyn ArrayToBytes>> {
    Ok(match spec.name.as_str() {
        "bytes" | "endian" => Box::new(bytes::Bytes::build(spec, repr)?),
        "sharding_indexed" => Box::new(sharding::Sharding::build(spec, repr)?),
        _ => Box::new(vlen::Vlen::build(spec, repr)?),
    })
}

fn build_bytes_to_bytes(spec: &CodecSpec, repr: &UnitRepr) -> Result<Box<dyn BytesToBytes>> {
    let name = spec.name.strip_prefix("numcodecs.").unwrap_or(&spec.name);
    Ok(match name {
        "gzip" | "zlib" | "zstd" | "bz2" | "lzma" | "lz4" => compress::build(name, spec)?,
        "blosc" => Box::new(blosc::Blosc::build(spec, repr)?),
        "crc32c" | "crc32" | "adler32" | "fletcher32" => checksum::build(name, spec)?,
        _ => filters::build_bytes_to_bytes(spec, repr)?,
    })
}

/// Fail unless `len` fits `limit`: every decoder checks sizes before allocating.
pub fn check_len(len: usize, limit: usize, what: &str) -> Result<()> {
    if len > limit {
        Err(corrupt(format!(
            "{what} decodes to {len} bytes, more than the {limit} expected"
        )))
    } else {
        Ok(())
    }
}
