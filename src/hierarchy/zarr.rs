//! The catalog of a Zarr store: nodes found by their metadata documents, in the layout
//! the root's documents name, from consolidated metadata when the store has it; groups
//! without metadata (implicit) found by looking below a folder for a node's documents.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::RwLock;

use super::{join, valid_name};
use crate::error::{Error, Result};
use crate::metadata::layout::{self, Consolidated, Doc, Layout};
use crate::metadata::{v3, NodeMetadata};
use crate::store::{ReadAgain, Store, Version};

/// How deep to look below a folder without metadata for a node that makes it a group.
const IMPLICIT_DEPTH: usize = 8;

/// How many store requests one such look may make: a folder tree that fans out (or links
/// back into itself) is given up on, not walked for ever.
pub(super) const IMPLICIT_BUDGET: usize = 1024;

/// A Zarr store read by its layout.
pub struct ZarrCatalog {
    store: Arc<dyn Store>,
    layout: Layout,
    /// The consolidated metadata, when the store had some at open (read again by
    /// [`ZarrCatalog::reload`]).
    consolidated: RwLock<Option<Arc<Consolidated>>>,
    /// When it was read (the start of the reading its nodes date from).
    read_at: ReadAgain,
}

impl ZarrCatalog {
    /// The catalog of `store`, its layout found from the root's documents; fails when the
    /// store holds no Zarr hierarchy.
    pub fn open(store: Arc<dyn Store>) -> Result<ZarrCatalog> {
        let started = Instant::now();
        if let Some(found) = layout::detect(&*store)? {
            return Ok(ZarrCatalog {
                store,
                layout: found.layout,
                consolidated: RwLock::new(found.consolidated.map(Arc::new)),
                read_at: ReadAgain::at(started),
            });
        }
        // No root document: an implicit root group (v2 and v3 nodes are both found).
        let catalog = ZarrCatalog {
            store,
            layout: Layout::V3,
            consolidated: RwLock::new(None),
            read_at: ReadAgain::at(started),
        };
        let store = catalog.store.clone();
        if catalog.contains_node(&*store, "", IMPLICIT_DEPTH, &mut { IMPLICIT_BUDGET })? {
            return Ok(catalog);
        }
        Err(Error::Invalid(
            "no Zarr hierarchy found in the store".into(),
        ))
    }

    fn consolidated(&self) -> Option<Arc<Consolidated>> {
        self.consolidated.read().clone()
    }

    /// The store as a reading that began at `since` reads it (see
    /// [`Store::learned_since`]); the store itself with no such time.
    fn reader(&self, since: Option<Instant>) -> Arc<dyn Store> {
        since
            .and_then(|at| self.store.learned_since(at))
            .unwrap_or_else(|| self.store.clone())
    }

    /// A document, from consolidated metadata when the store has it, else from `store`.
    fn doc(&self, store: &dyn Store, key: &str) -> Result<Option<Doc>> {
        let consolidated = self.consolidated();
        let covered = consolidated.as_ref().and_then(|c| {
            let value = self.layout.consolidated_doc(&c.docs, key)?;
            Some(value.map(|value| Doc {
                value: value.clone(),
                version: c.version.clone(),
            }))
        });
        match covered {
            Some(doc) => Ok(doc),
            None => layout::read_doc(store, key),
        }
    }

    /// Whether any node lies below the folder of `path` (within `depth` levels), spending
    /// at most `budget` store requests.
    fn contains_node(
        &self,
        store: &dyn Store,
        path: &str,
        depth: usize,
        budget: &mut usize,
    ) -> Result<bool> {
        if let Some(c) = self.consolidated() {
            let prefix = v3::prefix_of(path);
            return Ok(c.docs.keys().any(|k| k.starts_with(&prefix)));
        }
        if depth == 0 || *budget == 0 {
            return Ok(false);
        }
        *budget -= 1;
        let listing = store.list_dir(&self.layout.folder(path))?;
        let Some(markers) = self.layout.node_markers() else {
            return Ok(!listing.keys.is_empty() || !listing.prefixes.is_empty());
        };
        for sub in listing.prefixes.iter().filter(|s| valid_name(s)) {
            let child = join(path, sub);
            let child_prefix = v3::prefix_of(&child);
            for m in markers {
                if *budget == 0 {
                    return Ok(false);
                }
                *budget -= 1;
                // A marker that exists but cannot be read still marks a node.
                match store.read(&format!("{child_prefix}{m}"), None) {
                    Ok(None) | Err(Error::InvalidKey(_)) => {}
                    Ok(Some(_)) | Err(_) => return Ok(true),
                }
            }
            if self.contains_node(store, &child, depth - 1, budget)? {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

impl ZarrCatalog {
    /// The node with metadata of its own at `path`, and the version of the metadata it
    /// was read from; `None` when there is none (the path may still be an implicit group).
    /// Read as a reading that began at `since` reads the store (see
    /// [`Store::learned_since`]).
    pub fn node(
        &self,
        path: &str,
        since: Option<Instant>,
    ) -> Result<Option<(NodeMetadata, Version)>> {
        let store = self.reader(since);
        self.layout.read_node(path, &|key| self.doc(&*store, key))
    }

    /// The names that may be children of the group at `path`, in any order (each is
    /// checked with [`ZarrCatalog::node`] and [`ZarrCatalog::has_nodes_below`]).
    pub fn child_names(&self, path: &str) -> Result<Vec<String>> {
        let Some(c) = self.consolidated() else {
            let listing = self.store.list_dir(&self.layout.folder(path))?;
            return Ok(self.layout.child_names(&listing));
        };
        let prefix = v3::prefix_of(path);
        let mut names: Vec<String> = Vec::new();
        for key in c.docs.keys() {
            let node = self.layout.consolidated_node(key);
            if let Some(rest) = node.strip_prefix(&prefix).filter(|r| !r.is_empty()) {
                let name = rest.split('/').next().unwrap_or(rest);
                if (!path.is_empty() || !node.is_empty()) && !names.iter().any(|n| n == name) {
                    names.push(name.to_string());
                }
            }
        }
        Ok(names)
    }

    /// Whether any node lies below `path`, which then is an implicit group.
    pub fn has_nodes_below(&self, path: &str, since: Option<Instant>) -> Result<bool> {
        let mut budget = IMPLICIT_BUDGET;
        let store = self.reader(since);
        if self.contains_node(&*store, path, IMPLICIT_DEPTH, &mut budget)? {
            return Ok(true);
        }
        if budget == 0 {
            log::warn!(
                "/{path}: gave up looking for nodes below it after {IMPLICIT_BUDGET} store requests"
            );
        }
        Ok(false)
    }

    /// The format's name, as `inspect` prints it.
    pub fn format_label(&self) -> &'static str {
        self.layout.label()
    }

    /// Whether nodes are read from consolidated metadata.
    pub fn is_consolidated(&self) -> bool {
        self.consolidated().is_some()
    }

    /// The store chunks are read from.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// Read again what the catalog keeps of the store (consolidated metadata) when it is
    /// older than `max_age` (`None`: whatever its age).
    pub fn reload(&self, max_age: Option<Duration>) -> Result<()> {
        // A store that moves from version to version (an Icechunk branch) first.
        self.store.refresh(max_age)?;
        if self.consolidated().is_none() {
            return Ok(());
        }
        // One reader reloads; the others go on with what is there.
        let Some(started) = self.read_at.due(max_age) else {
            return Ok(());
        };
        let found = layout::detect(&*self.reader(Some(started)))?.and_then(|d| d.consolidated);
        match found {
            Some(c) => {
                *self.consolidated.write() = Some(Arc::new(c));
                self.read_at.read(started);
            }
            None => log::warn!(
                "refresh: the store's consolidated metadata is gone; kept as read before"
            ),
        }
        Ok(())
    }

    /// When what the catalog answers was read: its consolidated metadata's reading, or
    /// the store's own ([`Store::as_of`]); `None` when it reads the store as it is.
    /// A node or listing made from it dates from then, not from when it was made.
    pub fn as_of(&self) -> Option<Instant> {
        let consolidated = self.consolidated().is_some().then(|| self.read_at.as_of());
        match (consolidated, self.store.as_of()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}
