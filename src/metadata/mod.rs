//! Parse v2, v3 and 2020-draft metadata documents into one normalized model. Nothing
//! format-specific leaves this module: past it there is one `ArrayMetadata` per array.

pub mod draft;
pub mod dtype;
pub mod fill;
pub mod layout;
pub mod v2;
pub mod v3;

use serde_json::{Map, Value};

pub use dtype::{DataType, Field, SwapUnits, TimeUnit};
pub use fill::FillValue;

use crate::error::{Error, Result};
use crate::limits::MAX_RANK;

pub use layout::ROOT_MARKERS;

/// Which layout a node was stored in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    V2,
    V3,
    Draft,
}

impl Format {
    pub fn label(&self) -> &'static str {
        match self {
            Format::V2 => "2",
            Format::V3 => "3",
            Format::Draft => "3-draft-2020",
        }
    }
}

/// One codec of the normalized chain, in encode order: `{name, configuration}` as in v3.
/// v2 and draft codecs are translated to the equivalent v3 / `numcodecs.*` names.
#[derive(Debug, Clone, PartialEq)]
pub struct CodecSpec {
    pub name: String,
    pub config: Map<String, Value>,
}

impl CodecSpec {
    pub fn new(name: &str, config: Value) -> Self {
        CodecSpec {
            name: name.to_string(),
            config: match config {
                Value::Object(m) => m,
                _ => Map::new(),
            },
        }
    }

    /// Parse a v3 codec entry: a bare name or `{name, configuration}`.
    pub fn from_v3(value: &Value, at: &str) -> Result<Self> {
        match value {
            Value::String(s) => Ok(CodecSpec::new(s, Value::Null)),
            Value::Object(o) => {
                let name = o
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or_else(|| Error::metadata(at, format!("codec without a name: {value}")))?;
                Ok(CodecSpec::new(
                    name,
                    o.get("configuration").cloned().unwrap_or(Value::Null),
                ))
            }
            _ => Err(Error::metadata(at, format!("bad codec entry {value}"))),
        }
    }

    pub fn to_json(&self) -> Value {
        let mut o = Map::new();
        o.insert("name".into(), Value::from(self.name.clone()));
        if !self.config.is_empty() {
            o.insert("configuration".into(), Value::Object(self.config.clone()));
        }
        Value::Object(o)
    }
}

/// How chunk grid indices become store keys below the array's data prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChunkKeyEncoding {
    /// v3 `default`: `c/1/2` (or `c.1.2`); a 0-d chunk is `c`.
    Default(char),
    /// v3 `v2` and v2: `1.2` (or `1/2`); a 0-d chunk is `0`.
    V2(char),
    /// 2020 draft: `c1/2` (or `c1.2`); a 0-d chunk is `c0`.
    Draft(char),
}

impl ChunkKeyEncoding {
    /// The key of chunk `idx` below `prefix` (which ends with `/` unless empty).
    pub fn key(&self, prefix: &str, idx: &[u64]) -> String {
        let join = |sep: char| -> String {
            idx.iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(&sep.to_string())
        };
        match self {
            ChunkKeyEncoding::Default(_) if idx.is_empty() => format!("{prefix}c"),
            ChunkKeyEncoding::Default(sep) => format!("{prefix}c{sep}{}", join(*sep)),
            ChunkKeyEncoding::V2(_) if idx.is_empty() => format!("{prefix}0"),
            ChunkKeyEncoding::V2(sep) => format!("{prefix}{}", join(*sep)),
            ChunkKeyEncoding::Draft(_) if idx.is_empty() => format!("{prefix}c0"),
            ChunkKeyEncoding::Draft(sep) => format!("{prefix}c{}", join(*sep)),
        }
    }

    pub fn describe(&self) -> String {
        match self {
            ChunkKeyEncoding::Default(s) => format!("default({s})"),
            ChunkKeyEncoding::V2(s) => format!("v2({s})"),
            ChunkKeyEncoding::Draft(s) => format!("draft({s})"),
        }
    }
}

/// Everything needed to read one array, whatever layout it came from.
#[derive(Debug, Clone)]
pub struct ArrayMetadata {
    pub format: Format,
    /// The store key the metadata was read from (or the consolidated document).
    pub meta_key: String,
    pub shape: Vec<u64>,
    /// The stored chunk (for sharded arrays: the shard) shape.
    pub chunk_shape: Vec<u64>,
    pub dtype: DataType,
    pub fill: FillValue,
    /// The fill value as written in the metadata.
    pub fill_json: Value,
    /// Chunk keys are `data_prefix` + the encoded grid index.
    pub data_prefix: String,
    pub key_encoding: ChunkKeyEncoding,
    /// The codec chain in encode order.
    pub codecs: Vec<CodecSpec>,
    pub attributes: Map<String, Value>,
    pub dimension_names: Option<Vec<Value>>,
    /// The data type as written in the metadata.
    pub dtype_json: Value,
    /// The version of the documents it was read from (set by whoever read them): with
    /// the node's path, what names this version of the array in caches.
    pub version: crate::store::Version,
}

impl ArrayMetadata {
    pub fn chunk_key(&self, idx: &[u64]) -> String {
        self.key_encoding.key(&self.data_prefix, idx)
    }

    /// The shape of the grid of chunks.
    pub fn grid_shape(&self) -> Vec<u64> {
        self.shape
            .iter()
            .zip(&self.chunk_shape)
            .map(|(s, c)| s.div_ceil(*c))
            .collect()
    }

    /// Fail unless shape and chunks agree in length and chunks are non-zero.
    fn validate(&self) -> Result<()> {
        if self.shape.len() != self.chunk_shape.len() {
            return Err(Error::metadata(
                &self.meta_key,
                "chunk shape and array shape differ in dimensions",
            ));
        }
        if self.shape.len() > MAX_RANK {
            return Err(Error::metadata(
                &self.meta_key,
                format!("{} dimensions: more than {MAX_RANK}", self.shape.len()),
            ));
        }
        if self.dtype.size() == Some(0) {
            return Err(Error::metadata(
                &self.meta_key,
                "a data type of zero-byte elements",
            ));
        }
        if self.chunk_shape.contains(&0) {
            return Err(Error::metadata(
                &self.meta_key,
                "zero-length chunk dimension",
            ));
        }
        // Sizes from metadata are checked before anything is allocated from them.
        let item = self.dtype.size().unwrap_or(8) as u64;
        let product = |dims: &[u64]| dims.iter().try_fold(item, |acc, d| acc.checked_mul(*d));
        if product(&self.shape).is_none() {
            return Err(Error::metadata(
                &self.meta_key,
                "array size overflows 64 bits",
            ));
        }
        // Chunks of fixed-size elements may be of any size that fits 64 bits: one never
        // written reads as fill value at no cost, one written fails alone if too large to
        // decode (see `Array`).
        match product(&self.chunk_shape) {
            Some(bytes) if !self.dtype.is_var() || bytes <= crate::limits::MAX_BUFFER as u64 => {
                Ok(())
            }
            _ => Err(Error::metadata(
                &self.meta_key,
                format!("chunks {:?} are too large", self.chunk_shape),
            )),
        }
    }
}

/// A group's own metadata.
#[derive(Debug, Clone, Default)]
pub struct GroupMetadata {
    pub attributes: Map<String, Value>,
    /// Consolidated metadata of all descendants, keyed by path relative to the group.
    pub consolidated: Option<Map<String, Value>>,
}

/// A parsed node document.
#[derive(Debug, Clone)]
pub enum NodeMetadata {
    Array(Box<ArrayMetadata>),
    Group(GroupMetadata),
}

/// Parse a JSON document, naming the key on failure. Bare `NaN`, `Infinity` and
/// `-Infinity` values, which Python, netCDF-C and GDAL write, read as those strings.
pub fn parse_json(bytes: &[u8], key: &str) -> Result<Value> {
    crate::json::parse(bytes).map_err(|e| Error::metadata(key, e.to_string()))
}

fn u64_list(value: Option<&Value>, what: &str, at: &str) -> Result<Vec<u64>> {
    value
        .and_then(Value::as_array)
        .and_then(|a| a.iter().map(Value::as_u64).collect::<Option<Vec<u64>>>())
        .ok_or_else(|| {
            Error::metadata(
                at,
                format!("{what} must be a list of non-negative integers"),
            )
        })
}

fn attributes_of(doc: &Value) -> Map<String, Value> {
    doc.get("attributes")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_keys_in_every_encoding() {
        let p = "a/b/";
        assert_eq!(ChunkKeyEncoding::Default('/').key(p, &[1, 2]), "a/b/c/1/2");
        assert_eq!(ChunkKeyEncoding::Default('.').key(p, &[1, 2]), "a/b/c.1.2");
        assert_eq!(ChunkKeyEncoding::Default('/').key(p, &[]), "a/b/c");
        assert_eq!(ChunkKeyEncoding::V2('.').key(p, &[1, 2]), "a/b/1.2");
        assert_eq!(ChunkKeyEncoding::V2('/').key("", &[3]), "3");
        assert_eq!(ChunkKeyEncoding::V2('.').key(p, &[]), "a/b/0");
        assert_eq!(
            ChunkKeyEncoding::Draft('/').key("data/root/x/", &[0, 1]),
            "data/root/x/c0/1"
        );
    }
}
