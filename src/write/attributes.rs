//! Editing attributes through a sidecar: a `.NAME.json` (or `.group.json`) written back
//! whole with only its `attributes` changed rewrites the node's attributes (a v3
//! `zarr.json`'s `attributes`, a v2 `.zattrs`); anything else changed fails (`EINVAL`).

use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::hierarchy::Hierarchy;
use crate::metadata::v3::prefix_of;
use crate::store::write::{Change, Expected};

/// The largest sidecar a write may leave (a guard on the buffer it is edited in).
pub const MAX_SIDECAR: usize = 4 << 20;

/// The attributes of `edited` (a sidecar's text as written) when everything else in it
/// is as in `current` (the sidecar the mount shows).
pub fn edited_attributes(node: &str, current: &[u8], edited: &[u8]) -> Result<Map<String, Value>> {
    let bad = |why: String| Error::BadWrite(format!("{node}: {why}"));
    let current: Value =
        serde_json::from_slice(current).map_err(|e| bad(format!("the sidecar shown: {e}")))?;
    let edited: Value =
        serde_json::from_slice(edited).map_err(|e| bad(format!("not JSON: {e}")))?;
    let (Some(now), Some(new)) = (current.as_object(), edited.as_object()) else {
        return Err(bad("not a JSON object".into()));
    };
    for key in now.keys().chain(new.keys()) {
        if key != "attributes" && now.get(key) != new.get(key) {
            return Err(bad(format!(
                "only \"attributes\" changes through a sidecar (\"{key}\" differs)"
            )));
        }
    }
    match new.get("attributes") {
        Some(Value::Object(attributes)) => Ok(attributes.clone()),
        _ => Err(bad("\"attributes\" is not a JSON object".into())),
    }
}

/// Rewrite the attributes of the node at `path` of `h` (its other metadata as the store
/// holds it now).
pub fn rewrite(
    h: &Hierarchy,
    change: &mut dyn Change,
    path: &str,
    attributes: Map<String, Value>,
) -> Result<()> {
    let store = h.store();
    let prefix = prefix_of(path);
    let v3 = format!("{prefix}zarr.json");
    let (key, doc, expected) = match store.read(&v3, None)? {
        Some(value) => {
            let mut doc: Value = serde_json::from_slice(&value.bytes)
                .map_err(|e| Error::metadata(&v3, format!("not JSON: {e}")))?;
            let obj = doc
                .as_object_mut()
                .ok_or_else(|| Error::metadata(&v3, "not a JSON object"))?;
            obj.insert("attributes".into(), Value::Object(attributes));
            (v3, doc, Expected::At(value.version))
        }
        None => {
            let key = format!("{prefix}.zattrs");
            let expected = match store.head(&key)? {
                Some(head) => Expected::At(head.version),
                None => Expected::Absent,
            };
            (key, Value::Object(attributes), expected)
        }
    };
    let mut text = serde_json::to_vec_pretty(&doc).map_err(|e| Error::Internal(e.to_string()))?;
    text.push(b'\n');
    super::fault::before_put();
    change.put(&key, &text, &expected)
}
