//! Directories: the entries a directory shows (children, sidecars, views), names looked
//! up in them, listings, and the inodes the kernel holds.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use super::inode::{Entry, Node, Reading, Stamp};
use super::{sidecar_target, Attr, DirEntry, FileKind, Lookup, Named, ZarrFs, GROUP_SIDECAR};
use crate::formats::Placement;
use crate::hierarchy::{join, NodeKind};
use crate::{Error, Result};

impl ZarrFs {
    /// The entries of the directory at `dir`, with the node each name stands for.
    pub(super) fn entries(&self, dir: &str) -> Result<Vec<Named>> {
        self.entries_read(dir).map(|(names, _)| names)
    }

    /// [`ZarrFs::entries`], and when the hierarchy's listing they come from was read
    /// (`None`: the mount's one file, a root array, which has no listing).
    pub(super) fn entries_read(&self, dir: &str) -> Result<(Vec<Named>, Option<Instant>)> {
        if let (Some(name), true) = (&self.root_array, dir.is_empty()) {
            return Ok((self.array_entries(name, "", &HashSet::new()), None));
        }
        let mut names = vec![(
            GROUP_SIDECAR.to_string(),
            Node::GroupSidecar(dir.to_string()),
        )];
        let (children, listed) = self.hierarchy.listing(dir)?;
        let taken: HashSet<String> = children.iter().map(|(n, _)| n.clone()).collect();
        for (name, kind) in children {
            let path = join(dir, &name);
            if kind == NodeKind::Array {
                names.extend(self.array_entries(&name, &path, &taken));
            } else {
                names.extend(self.placed_views(&name, &path, Placement::Group, &taken));
                names.push((name, Node::Dir(path)));
            }
        }
        names.sort_by(|a, b| a.0.cmp(&b.0));
        // A node named like a sidecar (`.group.json`, `.NAME.json`) shows once.
        names.dedup_by(|later, first| {
            let same = later.0 == first.0;
            if same {
                log::warn!("/{dir}: left out a second entry named {:?}", later.0);
            }
            same
        });
        Ok((names, Some(listed)))
    }

    pub(super) fn entry(&self, ino: u64) -> Result<Arc<Entry>> {
        self.inodes
            .get(ino)
            .ok_or_else(|| Error::NotFound(format!("inode {ino}")))
    }

    pub(super) fn dir_path(&self, ino: u64) -> Result<String> {
        match &self.entry(ino)?.node {
            Node::Dir(path) => Ok(path.clone()),
            _ => Err(Error::Invalid(format!("inode {ino}: not a directory"))),
        }
    }

    /// The parent directory of `ino` (the root is its own parent).
    pub fn parent(&self, ino: u64) -> Result<u64> {
        Ok(self.entry(ino)?.parent)
    }

    /// Find `name` in directory `parent`: the kernel holds one more lookup of the inode
    /// it gets (see [`ZarrFs::forget`]). The lookup is counted as the inode is found, so
    /// that a `forget` of the same inode at that moment cannot drop it.
    pub fn lookup(&self, parent: u64, name: &str) -> Result<Attr> {
        self.lookup_entry(parent, name).map(|found| found.attr)
    }

    /// [`ZarrFs::lookup`], saying whether the inode's number was renewed: a new reading
    /// of a node whose metadata is unchanged keeps its number when no file is open on
    /// the older one (else it is another inode, and the older lives on for its files).
    pub fn lookup_entry(&self, parent: u64, name: &str) -> Result<Lookup> {
        let (name, node) = self.find(parent, name)?;
        let reading = self.reading(&node);
        let free = |ino| self.number_free(ino);
        let held = self.inodes.hold(parent, &name, node, reading, &free)?;
        let attr = self.getattr(held.ino).inspect_err(|_| {
            self.inodes.forget(held.ino, 1);
        })?;
        Ok(Lookup {
            attr,
            renewed: held.renewed,
        })
    }

    /// Take back the lookup of `ino` that [`ZarrFs::lookup_entry`] counted for an answer
    /// never sent (a listing's entry that did not fit the kernel's buffer). The inode
    /// stays, as a listing leaves it, even with no lookup left.
    pub fn unhold(&self, ino: u64) {
        self.inodes.unhold(ino);
    }

    /// The kernel dropped `n` lookups of `ino`; with none left, the inode is forgotten
    /// (true: it is gone, and its number never comes back).
    pub fn forget(&self, ino: u64, n: u64) -> bool {
        self.inodes.forget(ino, n)
    }

    /// How many inodes the filesystem holds (the root included).
    pub fn inode_count(&self) -> usize {
        self.inodes.len()
    }

    /// What `name` in directory `parent` stands for: its name and node.
    pub(super) fn find(&self, parent: u64, name: &str) -> Result<(String, Node)> {
        // Under a refresh interval the name is looked up again (from what the hierarchy
        // holds while it is good): the node may be gone or another.
        if self.hierarchy.refresh_interval().is_none() {
            if let Some(entry) = self
                .inodes
                .find(parent, name)
                .and_then(|i| self.inodes.get(i))
            {
                return Ok((name.to_string(), entry.node.clone()));
            }
        }
        let dir = self.dir_path(parent)?;
        let missing = || Error::NotFound(join(&dir, name));
        if name.contains('/') || name == "." || name == ".." {
            return Err(missing());
        }
        // Only a name that makes an array can be a file being made.
        if crate::write::NewKind::of(name).is_some() {
            let path = join(&dir, name);
            if self.new_file(&path).is_some() {
                return Ok((name.to_string(), Node::New(path)));
            }
        }
        if self.root_array.is_some() && dir.is_empty() {
            return self
                .entries("")?
                .into_iter()
                .find(|(n, _)| n == name)
                .ok_or_else(missing);
        }
        let node = if name == GROUP_SIDECAR {
            Node::GroupSidecar(dir.clone())
        } else {
            match self.hierarchy.kind_of(&join(&dir, name)) {
                Some(NodeKind::Array) if self.views.shows_raw() => Node::Array(join(&dir, name)),
                Some(NodeKind::Array) => return Err(missing()),
                Some(_) => Node::Dir(join(&dir, name)),
                None => match sidecar_target(name) {
                    Some(array)
                        if self.hierarchy.kind_of(&join(&dir, array)) == Some(NodeKind::Array) =>
                    {
                        Node::ArraySidecar(join(&dir, array))
                    }
                    _ => self.find_view(&dir, name).ok_or_else(missing)?,
                },
            }
        };
        Ok((name.to_string(), node))
    }

    /// The entries of directory `ino`: children, `.group.json` and a `.NAME.json` per array.
    /// Built once and shared, so that a large directory read in many pieces is cheap.
    pub fn readdir(&self, ino: u64) -> Result<Arc<Vec<DirEntry>>> {
        let entry = self.entry(ino)?;
        let dir = self.dir_path(ino)?;
        let stamp = Stamp {
            read_at: None,
            refreshes: self.hierarchy.refreshes(),
        };
        if let Some((made, listing)) = entry.listing.lock().as_ref() {
            let stale = made.refreshes != stamp.refreshes
                || made.read_at.is_some_and(|at| self.hierarchy.is_stale(at));
            if !stale {
                return Ok(listing.clone());
            }
        }
        let (entries, listed) = self.entries_read(&dir)?;
        // Good for as long as the hierarchy's listing it was made of.
        let stamp = Stamp {
            read_at: Some(listed.unwrap_or_else(Instant::now)),
            ..stamp
        };
        let free = |ino| self.number_free(ino);
        // An array's files (raw, views, sidecar) are of one reading of it, looked up once.
        let mut readings: HashMap<(bool, String), Reading> = HashMap::new();
        let listing: Vec<DirEntry> = entries
            .into_iter()
            .map(|(name, node)| {
                let kind = match node {
                    Node::Dir(_) => FileKind::Directory,
                    _ => FileKind::File,
                };
                let reading = readings
                    .entry((kind == FileKind::Directory, node.path().to_string()))
                    .or_insert_with(|| self.reading(&node))
                    .clone();
                let ino = self.inodes.insert(ino, &name, node, reading, &free)?;
                Ok(DirEntry { ino, name, kind })
            })
            .collect::<Result<_>>()?;
        let listing = Arc::new(listing);
        *entry.listing.lock() = Some((stamp, listing.clone()));
        Ok(listing)
    }
}
