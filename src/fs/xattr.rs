//! Extended attributes: `user.zarr.*`, the metadata of each node, one value per name;
//! and `user.zarrfs.*`, what the mount knows of it (bytes fetched and written, its
//! views, the snapshot it was read from).

use serde_json::Value;

use super::content::{file_json, Content};
use super::inode::Node as FileNode;
use super::ZarrFs;
use crate::formats::Placement;
use crate::hierarchy::{Hierarchy, Node};
use crate::read::view::Layout;
use crate::{Error, Result};

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

impl ZarrFs {
    /// All extended attributes of `ino`.
    pub fn xattrs(&self, ino: u64) -> Result<Vec<(String, String)>> {
        let mut attrs = self.zarr_attributes(ino)?;
        attrs.extend(self.mount_attributes(ino)?);
        Ok(attrs)
    }

    /// The `user.zarr.*` attributes of `ino` (its node's metadata), and the snapshot it
    /// was read from.
    fn zarr_attributes(&self, ino: u64) -> Result<Vec<(String, String)>> {
        let entry = self.entry(ino)?;
        match &entry.node {
            FileNode::Dir(path) | FileNode::Array(path) | FileNode::View(path, _) => {
                let mut attrs = attributes(&self.hierarchy, path, self.layout)?;
                attrs.extend(self.snapshot_attribute(path));
                Ok(attrs)
            }
            _ => Ok(vec![]),
        }
    }

    /// What the mount knows of an array's file `ino` (`user.zarrfs.*` but the snapshot):
    /// the bytes fetched for it (its view is loaded to tell), its views, the bytes
    /// written.
    fn mount_attributes(&self, ino: u64) -> Result<Vec<(String, String)>> {
        let entry = self.entry(ino)?;
        let (FileNode::Array(path) | FileNode::View(path, _)) = &entry.node else {
            return Ok(vec![]);
        };
        let mut attrs = Vec::new();
        // Bytes read from the store for this array since the mount.
        if let Some(view) = self.content(&entry).ok().as_deref().and_then(Content::view) {
            let fetched = view.array().bytes_fetched().to_string();
            attrs.push(("user.zarrfs.bytes_fetched".into(), fetched));
        }
        attrs.push(("user.zarrfs.views".into(), self.views_report(path)));
        // Chunk bytes this mount's commits put into the store for the array.
        if self.writes.is_some() {
            let written = self.bytes_written.lock().get(path).copied().unwrap_or(0);
            attrs.push(("user.zarrfs.bytes_written".into(), written.to_string()));
        }
        Ok(attrs)
    }

    /// `user.zarrfs.snapshot`: the snapshot of a versioned repository that the node at
    /// `path` was read from.
    pub(super) fn snapshot_attribute(&self, path: &str) -> Option<(String, String)> {
        let version = self.hierarchy.version(path).ok()?.0;
        let id = version.snapshot()?;
        Some(("user.zarrfs.snapshot".to_string(), id.to_string()))
    }

    /// `user.zarrfs.views`: for every view of the mount, its file or why there is none.
    pub(super) fn views_report(&self, path: &str) -> String {
        let name = self.file_name(path);
        let mut lines = Vec::new();
        if self.views.shows_raw() {
            lines.push(format!("raw: {name}"));
        }
        for kind in self.views.extra(Placement::Array) {
            let state = match self.view_absent(path, kind) {
                None => kind.file_name(&name),
                Some(why) => format!("absent ({why})"),
            };
            lines.push(format!("{}: {state}", kind.label()));
        }
        lines.join("\n")
    }

    /// The extended attribute `name` of `ino`: only its own kind is made (the metadata's,
    /// or what the mount knows, which loads an array's view).
    pub fn getxattr(&self, ino: u64, name: &str) -> Result<Vec<u8>> {
        // Every attribute is a `user.` one: the security and ACL attributes that `ls -l`
        // asks of each file are answered at once.
        if !name.starts_with("user.") {
            return Err(Error::NoAttribute);
        }
        let of_mount = name.starts_with("user.zarrfs.") && name != "user.zarrfs.snapshot";
        let attrs = if of_mount {
            self.mount_attributes(ino)?
        } else {
            self.zarr_attributes(ino)?
        };
        attrs
            .into_iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.into_bytes())
            .ok_or(Error::NoAttribute)
    }
}
