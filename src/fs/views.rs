//! The format views of arrays and groups (`.npy`, `.tif`, ...): built from a format's
//! context, whether each has a file (found once), placed beside their node in listings,
//! and found by name.

use std::collections::HashSet;

use super::inode::Node;
use super::ZarrFs;
use crate::formats::{self, Context, FormatKind, Placement};
use crate::hierarchy::{join, NodeKind};
use crate::read::readahead::Cursor;
use crate::Result;

impl ZarrFs {
    /// The name of the raw file of the array at `path`.
    pub(super) fn file_name(&self, path: &str) -> String {
        match (&self.root_array, path.is_empty()) {
            (Some(name), true) => name.clone(),
            _ => path.rsplit('/').next().unwrap_or(path).to_string(),
        }
    }

    /// The segments of view `kind` of the node at `path`, or why it has none.
    pub(super) fn view_build(&self, path: &str, kind: FormatKind) -> Result<formats::Built> {
        let name = match kind.placement() {
            Placement::Array => self.file_name(path),
            Placement::Group => path.rsplit('/').next().unwrap_or(path).to_string(),
        };
        let read = |array: &str, limit: u64| self.array_bytes(array, limit);
        let ctx = Context::new(&self.hierarchy, path, &name, self.layout, &read);
        kind.format().build(&ctx)
    }

    /// The whole file of the array at `path` when it holds at most `limit` bytes, read
    /// through the mount's cache (for view formats that look at small arrays).
    pub(super) fn array_bytes(&self, path: &str, limit: u64) -> Result<Vec<u8>> {
        let data = self.flat(path)?;
        let size = data.size();
        if size > limit {
            return Err(formats::too_large(path, size, limit));
        }
        let mut buf = crate::store::value_buffer(path, size)?;
        let n = data.read_into(&Cursor::default(), 0, &mut buf)?;
        buf.truncate(n);
        Ok(buf)
    }

    /// Why view `kind` of the array at `path` has no file; `None` when it has one. Not
    /// remembered when the array's metadata could not be had.
    pub(super) fn view_absent(&self, path: &str, kind: FormatKind) -> Option<String> {
        let key = (path.to_string(), kind);
        if let Some(absent) = self.absent.lock().get(&key) {
            return absent.clone();
        }
        let absent = match self.view_build(path, kind) {
            Ok(built) => built.err(),
            Err(e) => return Some(e.to_string()),
        };
        self.absent.lock().insert(key, absent.clone());
        absent
    }

    /// The files of the array at `path` named `name`: sidecar, raw file and views, with
    /// the names of real nodes (`taken`) left to them.
    pub(super) fn array_entries(
        &self,
        name: &str,
        path: &str,
        taken: &HashSet<String>,
    ) -> Vec<(String, Node)> {
        let mut out = vec![(
            format!(".{name}.json"),
            Node::ArraySidecar(path.to_string()),
        )];
        if self.views.shows_raw() {
            out.push((name.to_string(), Node::Array(path.to_string())));
        }
        out.extend(self.placed_views(name, path, Placement::Array, taken));
        out
    }

    /// The view file `name` in directory `dir`, if it names an available view of an array
    /// or a group there.
    pub(super) fn find_view(&self, dir: &str, name: &str) -> Option<Node> {
        self.views
            .kinds()
            .filter(|k| *k != FormatKind::RAW)
            .find_map(|kind| {
                let node = name.strip_suffix(kind.suffix())?;
                let path = join(dir, node);
                let placed = match (kind.placement(), self.hierarchy.kind_of(&path)) {
                    (Placement::Array, Some(NodeKind::Array)) => true,
                    (Placement::Group, Some(found)) => found.is_group(),
                    _ => false,
                };
                let found = !node.is_empty() && placed && self.view_absent(&path, kind).is_none();
                found.then_some(Node::View(path, kind))
            })
    }

    /// The view files placed as `placement` says of the node at `path` named `name`, with
    /// the names of real nodes (`taken`) left to them.
    pub(super) fn placed_views(
        &self,
        name: &str,
        path: &str,
        placement: Placement,
        taken: &HashSet<String>,
    ) -> Vec<(String, Node)> {
        let mut out = Vec::new();
        for kind in self.views.extra(placement) {
            let file = kind.file_name(name);
            if taken.contains(&file) {
                log::debug!("/{path}: view {file:?} left out: a node has that name");
                continue;
            }
            match self.view_absent(path, kind) {
                None => out.push((file, Node::View(path.to_string(), kind))),
                Some(why) => log::debug!("/{path}: no {} view: {why}", kind.label()),
            }
        }
        out
    }
}
