//! Zarr v2: `.zarray`, `.zgroup`, `.zattrs` and consolidated `.zmetadata`. The dtype's
//! byte order, `order`, filters and compressor become one normalized codec chain.

use serde_json::{json, Map, Value};

use super::{
    dtype, fill, u64_list, v3::prefix_of, ArrayMetadata, ChunkKeyEncoding, CodecSpec, DataType,
    Format,
};
use crate::error::{Error, Result};

/// Object codecs that turn an object array into bytes.
const OBJECT_CODECS: &[&str] = &["vlen-utf8", "vlen-bytes"];

/// Parse a `.zarray` document (with the node's `.zattrs`, if any).
pub fn parse_array(
    doc: &Value,
    attrs: Option<&Value>,
    path: &str,
    key: &str,
) -> Result<ArrayMetadata> {
    if doc.get("zarr_format").and_then(Value::as_u64) != Some(2) {
        return Err(Error::metadata(key, "zarr_format is not 2"));
    }
    let shape = u64_list(doc.get("shape"), "shape", key)?;
    let chunk_shape = u64_list(doc.get("chunks"), "chunks", key)?;
    let dtype_json = doc.get("dtype").cloned().unwrap_or(Value::Null);
    let (mut dtype, stored_big) = dtype::parse_v2(&dtype_json, key)?;
    let filters: Vec<&Value> = match doc.get("filters") {
        None | Some(Value::Null) => vec![],
        Some(Value::Array(f)) => f.iter().collect(),
        Some(other) => return Err(Error::metadata(key, format!("bad filters {other}"))),
    };
    let order = doc.get("order").and_then(Value::as_str).unwrap_or("C");
    let mut codecs = Vec::new();
    match order {
        "C" => {}
        "F" if shape.len() > 1 => codecs.push(reverse_transpose(shape.len())),
        "F" => {}
        other => return Err(Error::metadata(key, format!("bad order {other:?}"))),
    }
    let mut rest = filters.as_slice();
    if dtype.is_var() {
        let first = rest
            .first()
            .ok_or_else(|| Error::unsupported(key, "object array without an object codec"))?;
        let id = codec_id(first, key)?;
        if !OBJECT_CODECS.contains(&id) {
            return Err(Error::unsupported(key, format!("object codec {id:?}")));
        }
        if id == "vlen-bytes" {
            dtype = DataType::VarBytes;
        }
        codecs.push(CodecSpec::new(id, Value::Null));
        rest = &rest[1..];
    } else {
        codecs.push(bytes_codec(&dtype, &stored_big));
    }
    for f in rest {
        codecs.push(numcodecs_spec(f, key)?);
    }
    match doc.get("compressor") {
        None | Some(Value::Null) => {}
        Some(c) => codecs.push(numcodecs_spec(c, key)?),
    }
    let sep = match doc.get("dimension_separator").and_then(Value::as_str) {
        None | Some(".") => '.',
        Some("/") => '/',
        Some(other) => return Err(Error::metadata(key, format!("bad separator {other:?}"))),
    };
    let fill_json = doc.get("fill_value").cloned().unwrap_or(Value::Null);
    let fill = fill::parse_fill(&fill_json, &dtype, true, &stored_big, key)?;
    let meta = ArrayMetadata {
        format: Format::V2,
        meta_key: key.to_string(),
        shape,
        chunk_shape,
        dtype,
        fill,
        fill_json,
        data_prefix: prefix_of(path),
        key_encoding: ChunkKeyEncoding::V2(sep),
        codecs,
        attributes: attrs
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default(),
        dimension_names: None,
        dtype_json,
        version: crate::store::Version::Unknown,
    };
    meta.validate()?;
    Ok(meta)
}

/// The transpose that turns a C-order chunk into the F-order bytes v2 stores.
pub fn reverse_transpose(ndim: usize) -> CodecSpec {
    let order: Vec<usize> = (0..ndim).rev().collect();
    CodecSpec::new("transpose", json!({ "order": order }))
}

/// The `bytes` codec for a typestring's stored byte order.
pub fn bytes_codec(dtype: &DataType, stored_big: &[(usize, usize)]) -> CodecSpec {
    if stored_big.is_empty() {
        CodecSpec::new("bytes", json!({"endian": "little"}))
    } else if stored_big == dtype.swap_units().as_slice() {
        CodecSpec::new("bytes", json!({"endian": "big"}))
    } else {
        // A structured type with mixed byte orders.
        CodecSpec::new("bytes", json!({ "swap_units": stored_big }))
    }
}

fn codec_id<'a>(v: &'a Value, key: &str) -> Result<&'a str> {
    v.get("id")
        .and_then(Value::as_str)
        .ok_or_else(|| Error::metadata(key, format!("codec without an id: {v}")))
}

/// A numcodecs `{id, ...}` entry as a `numcodecs.<id>` codec spec.
pub fn numcodecs_spec(v: &Value, key: &str) -> Result<CodecSpec> {
    let id = codec_id(v, key)?;
    let mut config: Map<String, Value> = v.as_object().cloned().unwrap_or_default();
    config.remove("id");
    Ok(CodecSpec {
        name: format!("numcodecs.{id}"),
        config,
    })
}
