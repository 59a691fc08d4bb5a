//! New arrays made through a writable mount: the metadata documents of an array from
//! what a `.npy` header or a new sidecar gives (shape and data type at least), with the
//! mount's defaults for the rest: chunks of about 4 MiB over the slowest axes and
//! `zstd` level 3 (`--new-chunks`, `--new-codecs`). Each document is read back by
//! zarrfs's own metadata parser, and its codecs must encode, before anything is put.

use serde_json::{json, Map, Value};

use crate::error::{Error, Result};
use crate::metadata::dtype::DataType;
use crate::metadata::v3::prefix_of;
use crate::metadata::{ArrayMetadata, NodeMetadata};

/// The bytes a new array's chunk holds by default.
pub const DEFAULT_CHUNK_BYTES: u64 = 4 << 20;

/// How a new array is chunked (`--new-chunks`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NewChunks {
    /// About this many bytes per chunk, over the slowest axes (the fastest whole).
    Bytes(u64),
    /// This chunk shape (its length the array's dimensions).
    Shape(Vec<u64>),
}

/// The compressor of a new array's chunks (`--new-codecs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compressor {
    None,
    Zstd(i32),
    Gzip(u32),
    /// Blosc with byte shuffle and this inner compressor (`lz4` or `zstd`).
    Blosc(&'static str),
}

/// The codecs of a new array (`--new-codecs`): a compressor, and inner chunks of about
/// this many bytes in shards of the chunk size (v3 only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewCodecs {
    pub compressor: Compressor,
    pub shard_inner_bytes: Option<u64>,
}

/// What a mount gives new arrays that their `.npy` header or sidecar leaves out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewDefaults {
    pub chunks: NewChunks,
    pub codecs: NewCodecs,
}

impl Default for NewDefaults {
    fn default() -> Self {
        NewDefaults {
            chunks: NewChunks::Bytes(DEFAULT_CHUNK_BYTES),
            codecs: NewCodecs {
                compressor: Compressor::Zstd(3),
                shard_inner_bytes: None,
            },
        }
    }
}

/// What is known of an array to be made: its shape and element type at least, and what
/// a sidecar gave beyond that (each `None` takes the mount's default).
#[derive(Debug, Clone, Default)]
pub struct Spec {
    pub shape: Vec<u64>,
    /// The element type (`None` only until it is known).
    pub dtype: Option<DataType>,
    /// The store's `data_type` (v3) or `dtype` (v2) as a sidecar gave it.
    pub data_type: Option<Value>,
    pub fill_value: Option<Value>,
    pub chunks: Option<Vec<u64>>,
    /// v3 codecs as a sidecar gave them.
    pub codecs: Option<Value>,
    /// v2 compressor and filters as a sidecar gave them.
    pub compressor: Option<Value>,
    pub filters: Option<Value>,
    pub attributes: Map<String, Value>,
    pub dimension_names: Option<Value>,
}

/// Documents to put: store key and bytes.
pub type Documents = Vec<(String, Vec<u8>)>;

/// The largest number of dimensions a new array may have.
const MAX_DIMS: usize = 32;

/// The chunk shape of `shape` (elements of `item` bytes) holding about `target` bytes:
/// the fastest axes whole, the first one that does not fit split, the slower ones 1.
pub fn chunk_shape(shape: &[u64], item: u64, target: u64) -> Vec<u64> {
    let mut chunks = vec![1u64; shape.len()];
    let mut elements = (target / item.max(1)).max(1);
    for (c, n) in chunks.iter_mut().zip(shape).rev() {
        let n = (*n).max(1);
        if n <= elements {
            *c = n;
            elements /= n;
        } else {
            *c = elements.max(1);
            break;
        }
    }
    chunks
}

fn bad(what: &str, why: impl std::fmt::Display) -> Error {
    Error::BadWrite(format!("{what}: {why}"))
}

/// The v3 compressor codec of `c` for elements of `item` bytes.
fn v3_compressor(c: Compressor, item: u64) -> Option<Value> {
    match c {
        Compressor::None => None,
        Compressor::Zstd(level) => {
            Some(json!({"name": "zstd", "configuration": {"level": level, "checksum": false}}))
        }
        Compressor::Gzip(level) => Some(json!({"name": "gzip", "configuration": {"level": level}})),
        Compressor::Blosc(cname) => Some(json!({"name": "blosc", "configuration": {
            "cname": cname, "clevel": 5, "shuffle": "shuffle", "typesize": item, "blocksize": 0
        }})),
    }
}

/// The v2 compressor of `c`.
fn v2_compressor(c: Compressor) -> Value {
    match c {
        Compressor::None => Value::Null,
        Compressor::Zstd(level) => json!({"id": "zstd", "level": level}),
        Compressor::Gzip(level) => json!({"id": "gzip", "level": level}),
        Compressor::Blosc(cname) => {
            json!({"id": "blosc", "cname": cname, "clevel": 5, "shuffle": 1, "blocksize": 0})
        }
    }
}

/// The fill value of a new array of `dtype` when none is given: zero (`false`).
fn default_fill(dtype: &DataType, v2: bool) -> Option<Value> {
    Some(match dtype {
        DataType::Bool => json!(false),
        DataType::Int(_) | DataType::UInt(_) | DataType::DateTime(_) | DataType::TimeDelta(_) => {
            json!(0)
        }
        DataType::Float(_) => json!(0.0),
        DataType::Complex(_) => json!([0.0, 0.0]),
        _ if v2 => Value::Null,
        _ => return None,
    })
}

/// The documents (store key, bytes) that make the array at `path` of `spec` in a store
/// of Zarr format `format` (`"2"` or `"3"`), and the array's metadata as zarrfs reads
/// them. Refused (`EINVAL`, naming the array) when they would not read back or when
/// zarrfs cannot encode their codecs.
pub fn documents(
    spec: &Spec,
    path: &str,
    format: &str,
    defaults: &NewDefaults,
) -> Result<(Documents, ArrayMetadata)> {
    let what = format!("/{path}");
    let dtype = spec
        .dtype
        .as_ref()
        .ok_or_else(|| bad(&what, "no data type"))?;
    let item = dtype
        .size()
        .ok_or_else(|| bad(&what, "variable-length elements are not written"))?
        as u64;
    if let DataType::Struct(fields) = dtype {
        let mut names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
        names.sort_unstable();
        if names.windows(2).any(|w| w[0] == w[1]) || names.iter().any(|n| n.is_empty()) {
            return Err(bad(&what, "fields without a name of their own"));
        }
    }
    if spec.shape.len() > MAX_DIMS {
        return Err(bad(&what, format!("more than {MAX_DIMS} dimensions")));
    }
    spec.shape
        .iter()
        .try_fold(item, |acc, n| acc.checked_mul(*n))
        .ok_or_else(|| bad(&what, "too large"))?;
    let chunks = match (&spec.chunks, &defaults.chunks) {
        (Some(c), _) | (None, NewChunks::Shape(c)) => c.clone(),
        (None, NewChunks::Bytes(b)) => chunk_shape(&spec.shape, item, *b),
    };
    if chunks.len() != spec.shape.len() || chunks.contains(&0) {
        return Err(bad(
            &what,
            format!("chunks {chunks:?} for shape {:?}", spec.shape),
        ));
    }
    let prefix = prefix_of(path);
    let v2 = format == "2";
    let fill = match &spec.fill_value {
        Some(f) => f.clone(),
        None => default_fill(dtype, v2).ok_or_else(|| {
            bad(
                &what,
                format!(
                    "no default fill value for {}: give fill_value",
                    dtype.name()
                ),
            )
        })?,
    };
    let mut docs = Vec::new();
    let meta = if v2 {
        if defaults.codecs.shard_inner_bytes.is_some() && spec.compressor.is_none() {
            return Err(bad(&what, "sharding needs Zarr v3 (this store is v2)"));
        }
        if spec.codecs.is_some() {
            return Err(bad(
                &what,
                "a v2 array takes \"compressor\" and \"filters\", not \"codecs\"",
            ));
        }
        let data_type = match &spec.data_type {
            Some(d) => d.clone(),
            None => dtype.descr(false),
        };
        let zarray = json!({
            "zarr_format": 2,
            "shape": spec.shape,
            "chunks": chunks,
            "dtype": data_type,
            "compressor": spec.compressor.clone().unwrap_or(v2_compressor(defaults.codecs.compressor)),
            "fill_value": fill,
            "order": "C",
            "filters": spec.filters.clone().unwrap_or(Value::Null),
            "dimension_separator": ".",
        });
        let mut attributes = spec.attributes.clone();
        if let Some(names) = &spec.dimension_names {
            attributes.insert("_ARRAY_DIMENSIONS".into(), names.clone());
        }
        let attrs = Value::Object(attributes);
        let key = format!("{prefix}.zarray");
        let meta = crate::metadata::v2::parse_array(&zarray, Some(&attrs), path, &key)
            .map_err(|e| bad(&what, e))?;
        if attrs.as_object().is_some_and(|a| !a.is_empty()) {
            docs.push((format!("{prefix}.zattrs"), pretty(&attrs)?));
        }
        docs.push((key, pretty(&zarray)?));
        meta
    } else {
        if spec.compressor.is_some() || spec.filters.is_some() {
            return Err(bad(
                &what,
                "a v3 array takes \"codecs\", not \"compressor\" or \"filters\"",
            ));
        }
        let data_type = match &spec.data_type {
            Some(d) => d.clone(),
            None => dtype
                .to_v3()
                .ok_or_else(|| bad(&what, format!("{} has no v3 data type", dtype.name())))?,
        };
        let (grid, codecs) = match &spec.codecs {
            Some(c) => (chunks.clone(), c.clone()),
            None => default_v3_codecs(&chunks, item, &defaults.codecs),
        };
        let mut doc = json!({
            "zarr_format": 3,
            "node_type": "array",
            "shape": spec.shape,
            "data_type": data_type,
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": grid}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "fill_value": fill,
            "codecs": codecs,
            "attributes": spec.attributes,
        });
        if let Some(names) = &spec.dimension_names {
            doc["dimension_names"] = names.clone();
        }
        let key = format!("{prefix}zarr.json");
        let meta = match crate::metadata::v3::parse_node(&doc, path, &key) {
            Ok(NodeMetadata::Array(meta)) => *meta,
            Ok(_) => return Err(bad(&what, "not an array")),
            Err(e) => return Err(bad(&what, e)),
        };
        docs.push((key, pretty(&doc)?));
        meta
    };
    if meta.dtype.size() != Some(item as usize) {
        return Err(bad(
            &what,
            format!("data type {} is not {}", meta.dtype.name(), dtype.name()),
        ));
    }
    super::encoder(&meta).map_err(|e| bad(&what, e))?;
    Ok((docs, meta))
}

/// The v3 chunk grid and codecs of a new array chunked `chunks` by default: the bytes
/// codec (little-endian) and the compressor, in shards of `chunks` with inner chunks of
/// about the shard size given.
fn default_v3_codecs(chunks: &[u64], item: u64, c: &NewCodecs) -> (Vec<u64>, Value) {
    let bytes = if item > 1 {
        json!({"name": "bytes", "configuration": {"endian": "little"}})
    } else {
        json!({"name": "bytes"})
    };
    let mut inner_codecs = vec![bytes];
    inner_codecs.extend(v3_compressor(c.compressor, item));
    let Some(inner_bytes) = c.shard_inner_bytes else {
        return (chunks.to_vec(), Value::Array(inner_codecs));
    };
    // Inner chunks divide the shard: each axis of the inner shape a divisor of the
    // shard's, taken from the shard's own split of about the inner size.
    let inner: Vec<u64> = chunk_shape(chunks, item, inner_bytes)
        .iter()
        .zip(chunks)
        .map(|(want, n)| largest_divisor_at_most(*n, *want))
        .collect();
    let sharding = json!({"name": "sharding_indexed", "configuration": {
        "chunk_shape": inner,
        "codecs": inner_codecs,
        "index_codecs": [
            {"name": "bytes", "configuration": {"endian": "little"}},
            {"name": "crc32c"}
        ],
        "index_location": "end"
    }});
    (chunks.to_vec(), json!([sharding]))
}

/// The largest divisor of `n` that is at most `at_most` (at least 1).
fn largest_divisor_at_most(n: u64, at_most: u64) -> u64 {
    (1..=at_most.min(n).max(1))
        .rev()
        .find(|d| n.is_multiple_of(*d))
        .unwrap_or(1)
}

fn pretty(doc: &Value) -> Result<Vec<u8>> {
    let mut text = serde_json::to_vec_pretty(doc).map_err(|e| Error::Internal(e.to_string()))?;
    text.push(b'\n');
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_hold_about_the_target_over_the_slowest_axes() {
        assert_eq!(
            chunk_shape(&[1000, 512, 512], 4, 4 << 20),
            vec![4, 512, 512]
        );
        assert_eq!(chunk_shape(&[10, 20], 8, 4 << 20), vec![10, 20]);
        assert_eq!(chunk_shape(&[3, 1 << 30], 1, 1 << 20), vec![1, 1 << 20]);
        assert_eq!(chunk_shape(&[0, 5], 4, 100), vec![1, 5]);
        assert_eq!(chunk_shape(&[], 4, 100), Vec::<u64>::new());
        assert_eq!(largest_divisor_at_most(512, 100), 64);
        assert_eq!(largest_divisor_at_most(7, 3), 1);
    }

    #[test]
    fn documents_read_back_as_the_array_asked_for() {
        let spec = Spec {
            shape: vec![100, 30],
            dtype: Some(DataType::Float(4)),
            ..Spec::default()
        };
        let (docs, meta) = documents(&spec, "g/a", "3", &NewDefaults::default()).unwrap();
        assert_eq!(docs.len(), 1);
        assert_eq!(docs[0].0, "g/a/zarr.json");
        assert_eq!(meta.shape, vec![100, 30]);
        assert_eq!(meta.chunk_shape, vec![100, 30]);
        let (docs, meta) = documents(&spec, "a", "2", &NewDefaults::default()).unwrap();
        assert_eq!(docs.last().unwrap().0, "a/.zarray");
        assert_eq!(meta.dtype, DataType::Float(4));
        let sharded = NewDefaults {
            chunks: NewChunks::Shape(vec![50, 30]),
            codecs: NewCodecs {
                compressor: Compressor::Zstd(3),
                shard_inner_bytes: Some(600),
            },
        };
        let (docs, meta) = documents(&spec, "s", "3", &sharded).unwrap();
        let doc: Value = serde_json::from_slice(&docs[0].1).unwrap();
        assert_eq!(
            doc["codecs"][0]["configuration"]["chunk_shape"],
            json!([5, 30])
        );
        assert_eq!(meta.chunk_shape, vec![50, 30]);
        assert!(documents(&spec, "s", "2", &sharded).is_err());
        let strings = Spec {
            dtype: Some(DataType::String),
            ..spec.clone()
        };
        assert!(matches!(
            documents(&strings, "t", "3", &NewDefaults::default()),
            Err(Error::BadWrite(_))
        ));
        let field = |name: &str| crate::metadata::dtype::Field {
            name: name.into(),
            dtype: DataType::Int(4),
            offset: 0,
            shape: vec![],
        };
        let twice = Spec {
            dtype: Some(DataType::Struct(vec![field("a"), field("a")])),
            ..spec.clone()
        };
        assert!(matches!(
            documents(&twice, "t", "2", &NewDefaults::default()),
            Err(Error::BadWrite(_))
        ));
    }
}
