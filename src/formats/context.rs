//! What a format may look at while it builds a file: the node it is built for, its
//! file name and layout, any node's attributes (the parents' conventions, such as a
//! group's `multiscales` or a CRS), sibling arrays' metadata, and the bytes of small
//! arrays (coordinates), read through the cache of the mount (or of `cat`).

use std::sync::Arc;

use serde_json::{Map, Value};

use super::{Absent, Built, Segment};
use crate::hierarchy::{Hierarchy, Node, NodeKind};
use crate::metadata::ArrayMetadata;
use crate::read::view::Layout;
use crate::{Error, Result};

/// Reads the flat view of the array at a node path, refusing one larger than the limit
/// given (bytes).
pub type ArrayReader<'a> = &'a dyn Fn(&str, u64) -> Result<Vec<u8>>;

/// The node a view is built for and what it may read.
pub struct Context<'a> {
    hierarchy: &'a Hierarchy,
    path: &'a str,
    file_name: &'a str,
    layout: Layout,
    read_array: ArrayReader<'a>,
}

impl<'a> Context<'a> {
    /// The context of the node at `path` whose own file is named `file_name`.
    pub fn new(
        hierarchy: &'a Hierarchy,
        path: &'a str,
        file_name: &'a str,
        layout: Layout,
        read_array: ArrayReader<'a>,
    ) -> Context<'a> {
        Context {
            hierarchy,
            path,
            file_name,
            layout,
            read_array,
        }
    }

    /// The node path the view is built for.
    pub fn path(&self) -> &str {
        self.path
    }

    /// The name of the node's own file (an array's raw file, a group's folder).
    pub fn file_name(&self) -> &str {
        self.file_name
    }

    /// How flat views are laid out.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// The metadata of the array at `path`.
    pub fn array(&self, path: &str) -> Result<Arc<ArrayMetadata>> {
        self.hierarchy.array(path)
    }

    /// The node's metadata when it is an array of fixed-size elements (one that has a
    /// flat view), or why the view is absent.
    pub fn flat_array(&self) -> Result<std::result::Result<Arc<ArrayMetadata>, Absent>> {
        let meta = self.array(self.path)?;
        Ok(if meta.dtype.is_var() {
            Err("variable-length elements have no flat view".into())
        } else {
            Ok(meta)
        })
    }

    /// The attributes of the node at `path` (none for an implicit group).
    pub fn attributes(&self, path: &str) -> Result<Map<String, Value>> {
        Ok(match self.hierarchy.node(path)? {
            Node::Array(meta) => meta.attributes.clone(),
            Node::Group(group) => group.attributes.clone(),
            Node::ImplicitGroup => Map::new(),
        })
    }

    /// The path of the group holding the node; `None` for the root.
    pub fn parent(&self) -> Option<&str> {
        if self.path.is_empty() {
            return None;
        }
        Some(self.path.rsplit_once('/').map_or("", |(parent, _)| parent))
    }

    /// The nodes directly in the group at `path`, sorted by name.
    pub fn children(&self, path: &str) -> Result<Vec<(String, NodeKind)>> {
        self.hierarchy.children(path)
    }

    /// The flat view of the array at `path` in the mount's layout, when it holds at most
    /// `limit` bytes (an error otherwise): for small arrays such as coordinates.
    pub fn array_bytes(&self, path: &str, limit: u64) -> Result<Vec<u8>> {
        (self.read_array)(path, limit)
    }

    /// A header in front of the node's flat view, made by `header` from its metadata.
    pub fn headed(
        &self,
        header: impl FnOnce(&ArrayMetadata, Layout) -> std::result::Result<Vec<u8>, Absent>,
    ) -> Result<Built> {
        Ok(self.flat_array()?.and_then(|meta| {
            let bytes = header(&meta, self.layout)?;
            Ok(vec![Segment::Bytes(bytes), Segment::array(self.path)])
        }))
    }

    /// A file of its own that names the raw file, made by `header` from the node's
    /// metadata, layout and raw file name.
    pub fn detached(
        &self,
        header: impl FnOnce(&ArrayMetadata, Layout, &str) -> std::result::Result<Vec<u8>, Absent>,
    ) -> Result<Built> {
        Ok(self.flat_array()?.and_then(|meta| {
            let bytes = header(&meta, self.layout, self.file_name)?;
            Ok(vec![Segment::Bytes(bytes)])
        }))
    }
}

/// The error for a flat view larger than a context may read whole.
pub fn too_large(path: &str, size: u64, limit: u64) -> Error {
    Error::unsupported(
        format!("/{path}"),
        format!("{size} bytes: more than the {limit} a view may read whole"),
    )
}
