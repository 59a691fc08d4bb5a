//! Zarr v3 (final spec): `zarr.json` documents for arrays and groups, including inline
//! consolidated metadata and `must_understand` extension points.

use serde_json::Value;

use super::{
    attributes_of, dtype, fill, u64_list, ArrayMetadata, ChunkKeyEncoding, CodecSpec, Format,
    GroupMetadata, NodeMetadata,
};
use crate::error::{Error, Result};

const ARRAY_KEYS: &[&str] = &[
    "zarr_format",
    "node_type",
    "shape",
    "data_type",
    "chunk_grid",
    "chunk_key_encoding",
    "fill_value",
    "codecs",
    "attributes",
    "dimension_names",
    "storage_transformers",
];

/// Parse a `zarr.json` document of the node at `path` (read from `key`).
pub fn parse_node(doc: &Value, path: &str, key: &str) -> Result<NodeMetadata> {
    if doc.get("zarr_format").and_then(Value::as_u64) != Some(3) {
        return Err(Error::metadata(key, "zarr_format is not 3"));
    }
    match doc.get("node_type").and_then(Value::as_str) {
        Some("group") => Ok(NodeMetadata::Group(GroupMetadata {
            attributes: attributes_of(doc),
            consolidated: doc
                .get("consolidated_metadata")
                .and_then(|c| c.get("metadata"))
                .and_then(Value::as_object)
                .cloned(),
        })),
        Some("array") => Ok(NodeMetadata::Array(Box::new(parse_array(doc, path, key)?))),
        other => Err(Error::metadata(key, format!("unknown node_type {other:?}"))),
    }
}

fn parse_array(doc: &Value, path: &str, key: &str) -> Result<ArrayMetadata> {
    let obj = doc
        .as_object()
        .ok_or_else(|| Error::metadata(key, "not an object"))?;
    for (k, v) in obj {
        if !ARRAY_KEYS.contains(&k.as_str()) && must_understand(v) {
            return Err(Error::unsupported(key, format!("extension {k:?}")));
        }
    }
    if let Some(t) = obj.get("storage_transformers").and_then(Value::as_array) {
        if let Some(first) = t.iter().find(|t| must_understand(t)) {
            return Err(Error::unsupported(
                key,
                format!("storage transformer {first}"),
            ));
        }
    }
    let shape = u64_list(obj.get("shape"), "shape", key)?;
    let grid = obj
        .get("chunk_grid")
        .ok_or_else(|| Error::metadata(key, "missing chunk_grid"))?;
    if grid.get("name").and_then(Value::as_str) != Some("regular") {
        return Err(Error::unsupported(key, format!("chunk grid {grid}")));
    }
    let chunk_shape = u64_list(
        grid.get("configuration").and_then(|c| c.get("chunk_shape")),
        "chunk_shape",
        key,
    )?;
    let dtype_json = obj.get("data_type").cloned().unwrap_or(Value::Null);
    let dtype = dtype::parse_v3(&dtype_json, key)?;
    let fill_json = obj.get("fill_value").cloned().unwrap_or(Value::Null);
    let fill = fill::parse_fill(&fill_json, &dtype, false, &[], key)?;
    let key_encoding = parse_key_encoding(obj.get("chunk_key_encoding"), key)?;
    let codecs = obj
        .get("codecs")
        .and_then(Value::as_array)
        .ok_or_else(|| Error::metadata(key, "missing codecs"))?
        .iter()
        .map(|c| CodecSpec::from_v3(c, key))
        .collect::<Result<Vec<_>>>()?;
    let meta = ArrayMetadata {
        format: Format::V3,
        meta_key: key.to_string(),
        shape,
        chunk_shape,
        dtype,
        fill,
        fill_json,
        data_prefix: prefix_of(path),
        key_encoding,
        codecs,
        attributes: attributes_of(doc),
        dimension_names: obj
            .get("dimension_names")
            .and_then(Value::as_array)
            .cloned(),
        dtype_json,
        version: crate::store::Version::Unknown,
    };
    meta.validate()?;
    Ok(meta)
}

/// An extension entry must be understood unless it says `"must_understand": false`.
fn must_understand(v: &Value) -> bool {
    v.get("must_understand").and_then(Value::as_bool) != Some(false)
}

fn parse_key_encoding(value: Option<&Value>, key: &str) -> Result<ChunkKeyEncoding> {
    let Some(value) = value else {
        return Ok(ChunkKeyEncoding::Default('/'));
    };
    let spec = CodecSpec::from_v3(value, key)?;
    let sep = spec.config.get("separator").and_then(Value::as_str);
    let sep = |default: char| -> Result<char> {
        match sep {
            None => Ok(default),
            Some("/") => Ok('/'),
            Some(".") => Ok('.'),
            Some(other) => Err(Error::metadata(key, format!("bad separator {other:?}"))),
        }
    };
    match spec.name.as_str() {
        "default" => Ok(ChunkKeyEncoding::Default(sep('/')?)),
        "v2" => Ok(ChunkKeyEncoding::V2(sep('.')?)),
        other => Err(Error::unsupported(
            key,
            format!("chunk key encoding {other:?}"),
        )),
    }
}

/// The data prefix of the node at `path`: `a/b/`, or "" for the root.
pub fn prefix_of(path: &str) -> String {
    if path.is_empty() {
        String::new()
    } else {
        format!("{path}/")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc(extra: Value) -> Value {
        let mut d = json!({
            "zarr_format": 3, "node_type": "array", "shape": [4], "data_type": "int16",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}},
            "chunk_key_encoding": {"name": "v2", "configuration": {"separator": "/"}},
            "fill_value": 7, "codecs": [{"name": "bytes", "configuration": {"endian": "big"}}],
        });
        if let (Some(o), Value::Object(e)) = (d.as_object_mut(), extra) {
            o.extend(e);
        }
        d
    }

    #[test]
    fn must_understand_extensions_fail_the_node_alone() {
        let ok = parse_node(
            &doc(json!({"my_ext": {"must_understand": false}})),
            "a",
            "a/zarr.json",
        );
        let NodeMetadata::Array(meta) = ok.unwrap() else {
            panic!("not an array")
        };
        assert_eq!(meta.chunk_key(&[1]), "a/1");
        let bad = parse_node(&doc(json!({"my_ext": {"x": 1}})), "a", "a/zarr.json");
        assert!(matches!(bad, Err(Error::Unsupported { .. })), "{bad:?}");
        let transformer = json!({"storage_transformers": [{"name": "t"}]});
        assert!(matches!(
            parse_node(&doc(transformer), "a", "k"),
            Err(Error::Unsupported { .. })
        ));
        let grid = json!({"chunk_grid": {"name": "rectilinear", "configuration": {}}});
        assert!(matches!(
            parse_node(&doc(grid), "a", "k"),
            Err(Error::Unsupported { .. })
        ));
        let bad_sep =
            json!({"chunk_key_encoding": {"name": "default", "configuration": {"separator": "-"}}});
        assert!(parse_node(&doc(bad_sep), "a", "k").is_err());
    }
}
