//! The JSON description of one array's metadata: what `zarrfs inspect` prints for it and
//! what its sidecar file `.NAME.json` holds.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use crate::hierarchy::Hierarchy;
use crate::metadata::{ArrayMetadata, CodecSpec};
use crate::read::array::Array;

/// A JSON description of one array's metadata (also the mount's sidecar content).
pub fn array_json(meta: &ArrayMetadata, inner_chunks: Option<&[u64]>) -> Value {
    let mut o = Map::new();
    o.insert("zarr_format".into(), json!(meta.format.label()));
    o.insert("shape".into(), json!(meta.shape));
    o.insert("data_type".into(), meta.dtype_json.clone());
    o.insert("dtype".into(), json!(meta.dtype.typestr(false)));
    if matches!(meta.dtype, crate::metadata::DataType::Struct(_)) {
        o.insert("descr".into(), meta.dtype.descr(false));
    }
    o.insert("chunks".into(), json!(meta.chunk_shape));
    if let Some(inner) = inner_chunks.filter(|i| *i != meta.chunk_shape.as_slice()) {
        o.insert("inner_chunks".into(), json!(inner));
    }
    o.insert(
        "chunk_key_encoding".into(),
        json!(meta.key_encoding.describe()),
    );
    o.insert(
        "codecs".into(),
        Value::Array(meta.codecs.iter().map(CodecSpec::to_json).collect()),
    );
    o.insert("fill_value".into(), meta.fill_json.clone());
    o.insert("attributes".into(), Value::Object(meta.attributes.clone()));
    if let Some(d) = &meta.dimension_names {
        o.insert("dimension_names".into(), Value::Array(d.clone()));
    }
    Value::Object(o)
}

/// `array_json` of an opened array, with its inner chunks, or with the error that
/// opening it (building its codec chain) gave.
pub fn describe_array(h: &Hierarchy, meta: &Arc<ArrayMetadata>) -> Value {
    let opened = Array::open(meta.clone(), h.store().clone());
    let inner = opened.as_ref().ok().map(|a| a.unit_shape().to_vec());
    let mut doc = array_json(meta, inner.as_deref());
    if let Err(e) = opened {
        doc["error"] = json!(e.to_string());
    }
    doc
}
