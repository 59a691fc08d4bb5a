//! Making and removing nodes through a writable mount: `mkdir` makes a group (with the
//! store's Zarr format), `rmdir` removes an empty group's documents, `rm` of an array's
//! file removes the array: its chunks first, then its documents, so a reader never finds
//! an array whose chunks are half gone.

use serde_json::json;

use crate::error::{Error, Result};
use crate::hierarchy::Hierarchy;
use crate::metadata::v3::prefix_of;
use crate::store::write::{Change, Expected};
use crate::store::Store;

/// Why nodes cannot be made or removed in `h`, when they cannot.
pub fn cannot_change_nodes(h: &Hierarchy) -> Option<&'static str> {
    if h.is_consolidated() {
        return Some("its nodes are read from consolidated metadata, which is not rewritten");
    }
    match h.format_label() {
        "3" | "2" => None,
        _ => Some("nodes of the 2020 draft layout are not made or removed"),
    }
}

/// Make the group at `path` (its parent exists): a v3 `zarr.json`, or a v2 `.zgroup`.
pub fn make_group(h: &Hierarchy, change: &mut dyn Change, path: &str) -> Result<()> {
    let (key, doc) = match h.format_label() {
        "2" => (
            format!("{}.zgroup", prefix_of(path)),
            json!({"zarr_format": 2}),
        ),
        _ => (
            format!("{}zarr.json", prefix_of(path)),
            json!({"zarr_format": 3, "node_type": "group", "attributes": {}}),
        ),
    };
    let mut text = serde_json::to_vec_pretty(&doc).map_err(|e| Error::Internal(e.to_string()))?;
    text.push(b'\n');
    super::fault::before_put();
    change.put(&key, &text, &Expected::Absent)
}

/// The node documents a group or array at `path` may have, metadata last.
fn documents(path: &str) -> Vec<String> {
    let prefix = prefix_of(path);
    [".zattrs", ".zarray", ".zgroup", "zarr.json"]
        .iter()
        .map(|name| format!("{prefix}{name}"))
        .collect()
}

/// Remove the documents of the group or array at `path` that are there.
fn remove_documents(store: &dyn Store, change: &mut dyn Change, path: &str) -> Result<()> {
    for key in documents(path) {
        if let Some(head) = store.head(&key)? {
            super::fault::before_put();
            change.delete(&key, &Expected::At(head.version))?;
        }
    }
    Ok(())
}

/// Remove the empty group at `path` (`ENOTEMPTY` when nodes are below it).
pub fn remove_group(h: &Hierarchy, change: &mut dyn Change, path: &str) -> Result<()> {
    if !h.children(path)?.is_empty() {
        return Err(Error::NotEmpty(format!("/{path}")));
    }
    remove_documents(h.store().as_ref(), change, path)
}

/// The most keys an array's removal deletes (a guard against a folder that is not one).
const MAX_KEYS: usize = 1 << 24;

/// Remove the array at `path`: every key in its folder (its chunks) but its documents,
/// then those. The number of keys deleted.
pub fn remove_array(h: &Hierarchy, change: &mut dyn Change, path: &str) -> Result<u64> {
    let store = h.store();
    let docs = documents(path);
    let mut keys = Vec::new();
    let mut folders = vec![prefix_of(path)];
    while let Some(folder) = folders.pop() {
        let listing = store.list_dir(&folder)?;
        for key in listing.keys {
            let key = format!("{folder}{key}");
            if !docs.contains(&key) {
                keys.push(key);
            }
        }
        folders.extend(
            listing
                .prefixes
                .into_iter()
                .map(|p| format!("{folder}{p}/")),
        );
        if keys.len() > MAX_KEYS {
            return Err(Error::Invalid(format!(
                "/{path}: more than {MAX_KEYS} keys in the array's folder; not removed"
            )));
        }
    }
    for key in &keys {
        if let Some(head) = store.head(key)? {
            super::fault::before_put();
            change.delete(key, &Expected::At(head.version))?;
        }
    }
    remove_documents(store.as_ref(), change, path)?;
    Ok(keys.len() as u64)
}
