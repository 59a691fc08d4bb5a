//! The description of a hierarchy that `zarrfs inspect` prints: every node with its
//! kind and, for arrays, shape, data type, chunks, codecs, fill value, attributes and
//! whether a `--writable` mount takes writes to it.

use serde_json::{json, Map, Value};

use crate::fs::describe::describe_array;
use crate::hierarchy::{Hierarchy, Node, NodeKind};
use crate::Result;

/// One entry of the tree.
fn node_json(h: &Hierarchy, path: &str, kind: NodeKind) -> Value {
    let mut o = Map::new();
    o.insert("path".into(), json!(format!("/{path}")));
    o.insert("kind".into(), json!(kind.label()));
    match h.node(path) {
        Ok(Node::Array(meta)) => {
            if let Value::Object(a) = describe_array(h, &meta) {
                o.extend(a);
            }
            match crate::write::writable(h.store().as_ref(), &meta) {
                Ok(()) => o.insert("writable".into(), json!(true)),
                Err(why) => o.insert("writable".into(), json!(format!("no: {why}"))),
            };
        }
        Ok(Node::Group(g)) => {
            o.insert("attributes".into(), Value::Object(g.attributes));
        }
        Ok(Node::ImplicitGroup) => {}
        Err(e) => {
            o.insert("error".into(), json!(e.to_string()));
        }
    }
    Value::Object(o)
}

/// Every node at or below `path`, depth first, sorted by name.
pub fn tree(h: &Hierarchy, path: &str) -> Result<Vec<Value>> {
    let path = crate::hierarchy::normalize(path);
    let root = h.node(&path)?;
    let mut out = vec![node_json(h, &path, root.kind())];
    if root.kind().is_group() {
        walk(h, &path, &mut out, 0);
    }
    Ok(out)
}

/// How many levels below the starting node the tree goes, at most (a guard: stores never
/// show loops, see the folder store).
const MAX_DEPTH: usize = 1024;

/// The children of the group at `path` (the last entry of `out`), depth first. A group
/// whose children cannot be listed gets the error and the walk carries on.
fn walk(h: &Hierarchy, path: &str, out: &mut Vec<Value>, depth: usize) {
    let children = if depth >= MAX_DEPTH {
        Err(crate::Error::Invalid(format!(
            "/{path}: deeper than {MAX_DEPTH} levels, not listed"
        )))
    } else {
        h.children(path)
    };
    let children = match children {
        Ok(c) => c,
        Err(e) => {
            if let Some(Value::Object(node)) = out.last_mut() {
                node.insert("error".into(), json!(e.to_string()));
            }
            return;
        }
    };
    for (name, kind) in children {
        let child = if path.is_empty() {
            name
        } else {
            format!("{path}/{name}")
        };
        out.push(node_json(h, &child, kind));
        if kind.is_group() {
            walk(h, &child, out, depth + 1);
        }
    }
}

/// The human-readable form of one tree entry.
pub fn describe(node: &Value) -> String {
    let s = |k: &str| node.get(k).map(compact).unwrap_or_default();
    let mut line = format!(
        "{}  {}",
        s("path").trim_matches('"'),
        s("kind").trim_matches('"')
    );
    if node.get("shape").is_some() {
        line.push_str(&format!(
            "  shape={} dtype={} chunks={}",
            s("shape"),
            s("dtype").trim_matches('"'),
            s("chunks")
        ));
        if node.get("inner_chunks").is_some() {
            line.push_str(&format!(" inner_chunks={}", s("inner_chunks")));
        }
        line.push_str(&format!("\n    data_type: {}", s("data_type")));
        line.push_str(&format!("\n    codecs: {}", s("codecs")));
        line.push_str(&format!("\n    fill_value: {}", s("fill_value")));
        match node.get("writable") {
            Some(Value::Bool(true)) => line.push_str("\n    writable: yes (with --writable)"),
            Some(Value::String(why)) => line.push_str(&format!("\n    writable: {why}")),
            _ => {}
        }
    }
    if let Some(e) = node.get("error") {
        line.push_str(&format!("\n    error: {}", e.as_str().unwrap_or("")));
    }
    if node
        .get("attributes")
        .and_then(Value::as_object)
        .is_some_and(|a| !a.is_empty())
    {
        line.push_str(&format!("\n    attributes: {}", s("attributes")));
    }
    line
}

fn compact(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}
