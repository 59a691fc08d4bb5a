//! `user.zarr.*` extended attributes: the metadata of each node, one value per name.

use serde_json::Value;

use super::content::file_json;
use crate::hierarchy::{Hierarchy, Node};
use crate::read::view::Layout;
use crate::Result;

fn list(values: &[u64]) -> String {
    values
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

fn compact(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// Every attribute of the node at `path` (an array file or a directory), name -> value.
pub fn attributes(h: &Hierarchy, path: &str, layout: Layout) -> Result<Vec<(String, String)>> {
    let format = (
        "user.zarr.zarr_format".to_string(),
        h.format_label().to_string(),
    );
    let node = h.node(path)?;
    let mut out = vec![(
        "user.zarr.kind".to_string(),
        node.kind().label().to_string(),
    )];
    match node {
        Node::Array(meta) => {
            let file = file_json(&meta, layout);
            let s = |k: &str| {
                file.get(k)
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string()
            };
            out.push(("user.zarr.shape".into(), list(&meta.shape)));
            out.push((
                "user.zarr.dtype".into(),
                if meta.dtype.is_var() {
                    "|O".into()
                } else {
                    s("dtype")
                },
            ));
            out.push(("user.zarr.data_type".into(), compact(&meta.dtype_json)));
            out.push(("user.zarr.chunks".into(), list(&meta.chunk_shape)));
            out.push(("user.zarr.order".into(), s("order")));
            out.push((
                "user.zarr.endian".into(),
                if meta.dtype.is_var() {
                    "none".into()
                } else {
                    s("endian")
                },
            ));
            out.push(("user.zarr.fill_value".into(), compact(&meta.fill_json)));
            let codecs: Vec<Value> = meta.codecs.iter().map(|c| c.to_json()).collect();
            out.push(("user.zarr.codecs".into(), compact(&Value::Array(codecs))));
            out.push((
                "user.zarr.attributes".into(),
                compact(&Value::Object(meta.attributes.clone())),
            ));
            if let Some(d) = &meta.dimension_names {
                out.push((
                    "user.zarr.dimension_names".into(),
                    compact(&Value::Array(d.clone())),
                ));
            }
        }
        Node::Group(g) => {
            out.push((
                "user.zarr.attributes".into(),
                compact(&Value::Object(g.attributes)),
            ));
        }
        Node::ImplicitGroup => {}
    }
    out.push(format);
    Ok(out)
}
