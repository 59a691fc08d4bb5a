//! The 2020 Zarr v3 draft core protocol (as zarr-python 2.18 writes it): a root
//! `zarr.json` entry point, `meta/root/<path>.array.json` / `.group.json` documents,
//! compressor URIs, filters kept in attributes, `chunk_memory_layout`, and the sharding
//! storage transformer (index of (offset, nbytes) pairs at the end of each shard).

use serde_json::{json, Value};

use super::{
    dtype, fill, u64_list, v2, ArrayMetadata, ChunkKeyEncoding, CodecSpec, DataType, Format,
    GroupMetadata, NodeMetadata, SwapUnits,
};
use crate::error::{Error, Result};

/// The `zarr_format` of a draft entry point starts with this.
pub const PROTOCOL_PREFIX: &str = "https://purl.org/zarr/spec/protocol/core/3";

const SHARDING_URI: &str = "https://purl.org/zarr/spec/storage_transformers/sharding/1.0";

/// Settings from the entry point document.
#[derive(Debug, Clone)]
pub struct EntryPoint {
    pub suffix: String,
}

/// Parse the root `zarr.json` of a draft hierarchy.
pub fn parse_entry_point(doc: &Value, key: &str) -> Result<EntryPoint> {
    let format = doc.get("zarr_format").and_then(Value::as_str).unwrap_or("");
    if !format.starts_with(PROTOCOL_PREFIX) {
        return Err(Error::metadata(key, "not a v3 draft entry point"));
    }
    if let Some(ext) = doc.get("extensions").and_then(Value::as_array) {
        if let Some(e) = ext
            .iter()
            .find(|e| e.get("must_understand").and_then(Value::as_bool) != Some(false))
        {
            return Err(Error::unsupported(key, format!("extension {e}")));
        }
    }
    let suffix = doc
        .get("metadata_key_suffix")
        .and_then(Value::as_str)
        .unwrap_or(".json")
        .to_string();
    Ok(EntryPoint { suffix })
}

/// Meta key of the node at `path` of `kind` ("array" / "group").
pub fn meta_key(entry: &EntryPoint, path: &str, kind: &str) -> String {
    if path.is_empty() {
        format!("meta/root.{kind}{}", entry.suffix)
    } else {
        format!("meta/root/{path}.{kind}{}", entry.suffix)
    }
}

pub fn parse_group(doc: &Value) -> NodeMetadata {
    NodeMetadata::Group(GroupMetadata {
        attributes: super::attributes_of(doc),
        consolidated: None,
    })
}

/// A draft data type: a typestring (`bool`, `i1`, `<f8`, `r16`) or an extension object
/// with an optional fallback.
fn parse_data_type(value: &Value, key: &str) -> Result<(DataType, SwapUnits)> {
    match value {
        Value::String(s) if s == "bool" => Ok((DataType::Bool, vec![])),
        // `r<bits>` as in v3 (sizes bounded there).
        Value::String(s) if s.starts_with('r') => Ok((dtype::parse_v3(value, key)?, vec![])),
        Value::Object(o) => {
            let primary = o.get("type").map(|t| dtype::parse_v2(t, key));
            match (primary, o.get("fallback")) {
                (Some(Ok(t)), _) => Ok(t),
                (_, Some(fallback)) => parse_data_type(fallback, key),
                (Some(Err(e)), None) => Err(e),
                (None, None) => Err(Error::unsupported(key, format!("data type {value}"))),
            }
        }
        other => dtype::parse_v2(other, key),
    }
}

/// A compressor or filter `{codec: URI, configuration}` (or numcodecs `{id}`) as a spec.
fn codec_spec(value: &Value, key: &str) -> Result<CodecSpec> {
    if value.get("id").is_some() {
        return v2::numcodecs_spec(value, key);
    }
    let uri = value
        .get("codec")
        .and_then(Value::as_str)
        .ok_or_else(|| Error::metadata(key, format!("codec without a URI: {value}")))?;
    // https://purl.org/zarr/spec/codec/<id>/<version>
    let id = uri
        .trim_end_matches('/')
        .rsplit('/')
        .nth(1)
        .filter(|_| uri.contains("/codec/"))
        .ok_or_else(|| Error::unsupported(key, format!("codec {uri:?}")))?;
    let mut config = value.get("configuration").cloned().unwrap_or(json!({}));
    if let Some(o) = config.as_object_mut() {
        o.insert("id".into(), Value::from(id));
    }
    v2::numcodecs_spec(&config, key)
}

/// Parse a draft array document of the node at `path`.
pub fn parse_array(doc: &Value, path: &str, key: &str) -> Result<NodeMetadata> {
    let shape = u64_list(doc.get("shape"), "shape", key)?;
    let grid = doc
        .get("chunk_grid")
        .ok_or_else(|| Error::metadata(key, "missing chunk_grid"))?;
    if grid.get("type").and_then(Value::as_str) != Some("regular") {
        return Err(Error::unsupported(key, format!("chunk grid {grid}")));
    }
    let chunk_shape = u64_list(grid.get("chunk_shape"), "chunk_shape", key)?;
    let sep = match grid.get("separator").and_then(Value::as_str) {
        None | Some("/") => '/',
        Some(".") => '.',
        Some(other) => return Err(Error::metadata(key, format!("bad separator {other:?}"))),
    };
    let dtype_json = doc.get("data_type").cloned().unwrap_or(Value::Null);
    let (mut dtype, stored_big) = parse_data_type(&dtype_json, key)?;
    let mut attributes = super::attributes_of(doc);
    // zarr-python 2.18 keeps filters in the attributes.
    let filters: Vec<Value> = match attributes.remove("filters") {
        Some(Value::Array(f)) => f,
        _ => vec![],
    };
    let mut codecs = Vec::new();
    match doc.get("chunk_memory_layout").and_then(Value::as_str) {
        None | Some("C") => {}
        Some("F") if shape.len() > 1 => codecs.push(v2::reverse_transpose(shape.len())),
        Some("F") => {}
        Some(other) => {
            return Err(Error::unsupported(
                key,
                format!("chunk_memory_layout {other:?}"),
            ))
        }
    }
    let mut filter_specs = filters
        .iter()
        .map(|f| codec_spec(f, key))
        .collect::<Result<Vec<_>>>()?;
    if dtype.is_var() {
        if filter_specs.is_empty() {
            return Err(Error::unsupported(
                key,
                "object array without an object codec",
            ));
        }
        let object = filter_specs.remove(0);
        match object.name.as_str() {
            "numcodecs.vlen-utf8" => {}
            "numcodecs.vlen-bytes" => dtype = DataType::VarBytes,
            other => return Err(Error::unsupported(key, format!("object codec {other:?}"))),
        }
        codecs.push(CodecSpec::new(
            object.name.trim_start_matches("numcodecs."),
            Value::Null,
        ));
    } else {
        codecs.push(v2::bytes_codec(&dtype, &stored_big));
    }
    codecs.extend(filter_specs);
    if let Some(c) = doc.get("compressor").filter(|c| !c.is_null()) {
        codecs.push(codec_spec(c, key)?);
    }
    let mut chunk_shape = chunk_shape;
    for t in doc
        .get("storage_transformers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let ext = t.get("extension").and_then(Value::as_str).unwrap_or("");
        if ext != SHARDING_URI {
            return Err(Error::unsupported(key, format!("storage transformer {t}")));
        }
        let per_shard = u64_list(
            t.get("configuration")
                .and_then(|c| c.get("chunks_per_shard")),
            "chunks_per_shard",
            key,
        )?;
        // zarr-python 2.18 records [1] for a 0-d array.
        let per_shard = if chunk_shape.is_empty() && per_shard == [1] {
            vec![]
        } else {
            per_shard
        };
        if per_shard.len() != chunk_shape.len() || per_shard.contains(&0) {
            return Err(Error::metadata(
                key,
                "chunks_per_shard does not match the chunks",
            ));
        }
        let inner: Vec<Value> = codecs.iter().map(CodecSpec::to_json).collect();
        codecs = vec![CodecSpec::new(
            "sharding_indexed",
            json!({"chunk_shape": chunk_shape, "codecs": inner, "index_location": "end",
                   "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}]}),
        )];
        chunk_shape = chunk_shape
            .iter()
            .zip(&per_shard)
            .map(|(c, n)| c * n)
            .collect();
    }
    let fill_json = doc.get("fill_value").cloned().unwrap_or(Value::Null);
    let fill = fill::parse_fill(&fill_json, &dtype, true, &stored_big, key)?;
    let meta = ArrayMetadata {
        format: Format::Draft,
        meta_key: key.to_string(),
        shape,
        chunk_shape,
        dtype,
        fill,
        fill_json,
        data_prefix: if path.is_empty() {
            "data/root/".to_string()
        } else {
            format!("data/root/{path}/")
        },
        key_encoding: ChunkKeyEncoding::Draft(sep),
        codecs,
        attributes,
        dimension_names: None,
        dtype_json,
        version: crate::store::Version::Unknown,
    };
    meta.validate()?;
    Ok(NodeMetadata::Array(Box::new(meta)))
}
