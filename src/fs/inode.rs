//! The inode table: numbers handed out lazily on lookup / readdir. An inode names a node
//! of one tree (the mount's own hierarchy is tree 0) and what kind of file it shows; the
//! kernel's lookups of it are counted and `forget` drops it once the kernel holds none.
//! A file's inode stands for one reading of its node: a node read again after it changed
//! in the store gets a new inode, and the old one keeps its content for the files open on
//! it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use super::content::Content;
use crate::formats::FormatKind;

/// The root directory's inode number.
pub const ROOT: u64 = 1;

/// Which hierarchy an inode's node belongs to: the mount's own is [`TreeId::MOUNT`]; more
/// trees (versions of a store) sit beside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TreeId(pub u32);

impl TreeId {
    /// The hierarchy the mount was made of.
    pub const MOUNT: TreeId = TreeId(0);
}

/// Which reading of the hierarchy something was built from: when its node was read (or
/// the listing made), and the forced refreshes until then.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stamp {
    pub read_at: Option<std::time::Instant>,
    pub refreshes: u64,
}

/// What an inode stands for: a node path of its tree and the kind of file it shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    /// A group (explicit or implicit) at this node path.
    Dir(String),
    /// The flat file of the array at this node path.
    Array(String),
    /// A header view of the array at this node path (`NAME.npy`, `NAME.hdr`, ...).
    View(String, FormatKind),
    /// `.NAME.json` beside an array.
    ArraySidecar(String),
    /// `.group.json` inside a group's directory.
    GroupSidecar(String),
}

impl Node {
    /// The node path the inode's file shows.
    pub fn path(&self) -> &str {
        match self {
            Node::Dir(p)
            | Node::Array(p)
            | Node::View(p, _)
            | Node::ArraySidecar(p)
            | Node::GroupSidecar(p) => p,
        }
    }
}

/// One inode: its tree, node, parent and name, the reading of its node it stands for,
/// and what has been loaded for it.
pub struct Entry {
    pub parent: u64,
    pub name: String,
    pub tree: TreeId,
    pub node: Node,
    /// The reading of the node a file inode shows: a file read again after its node
    /// changed in the store is another inode, so that the kernel never holds one file's
    /// size and pages from two readings (a directory stays one inode).
    pub stamp: Stamp,
    /// Lookups the kernel holds (each answered lookup adds one, `forget` takes them back).
    lookups: AtomicU64,
    /// A directory's listing, sorted, built once (dropped when a child is forgotten;
    /// built again when the hierarchy's reading it came from is no longer good).
    pub listing: Mutex<Option<(Stamp, Arc<Vec<super::DirEntry>>)>>,
    /// A file's content, loaded once: the inode shows it for its whole life.
    pub content: Mutex<Option<Arc<Content>>>,
}

pub struct Inodes {
    last: AtomicU64,
    entries: RwLock<HashMap<u64, Arc<Entry>>>,
    by_name: RwLock<HashMap<(u64, String), u64>>,
}

impl Inodes {
    pub fn new() -> Inodes {
        let root = Entry::new(
            ROOT,
            String::new(),
            TreeId::MOUNT,
            Node::Dir(String::new()),
            Stamp::default(),
        );
        Inodes {
            last: AtomicU64::new(ROOT),
            entries: RwLock::new(HashMap::from([(ROOT, Arc::new(root))])),
            by_name: RwLock::new(HashMap::new()),
        }
    }

    pub fn get(&self, ino: u64) -> Option<Arc<Entry>> {
        self.entries.read().get(&ino).cloned()
    }

    /// The inode already given to `name` in `parent`.
    pub fn find(&self, parent: u64, name: &str) -> Option<u64> {
        self.by_name
            .read()
            .get(&(parent, name.to_string()))
            .copied()
    }

    /// The inode of `name` in `parent`, created for `node` at reading `stamp` (of the
    /// parent's tree) when new, when the name stood for another node (an array that
    /// became a group) or for another reading of a file: the old inode then lives on,
    /// nameless, until the kernel forgets it (at once when the kernel holds none of it).
    pub fn insert(&self, parent: u64, name: &str, node: Node, stamp: Stamp) -> u64 {
        self.insert_locked(&mut self.by_name.write(), parent, name, node, stamp)
    }

    fn insert_locked(
        &self,
        by_name: &mut HashMap<(u64, String), u64>,
        parent: u64,
        name: &str,
        node: Node,
        stamp: Stamp,
    ) -> u64 {
        if let Some(&old) = by_name.get(&(parent, name.to_string())) {
            match self.get(old) {
                Some(e) if e.node == node && e.stamp == stamp => return old,
                Some(e) if e.lookups.load(Ordering::Relaxed) == 0 => {
                    self.entries.write().remove(&old);
                }
                _ => {}
            }
        }
        let tree = self
            .entries
            .read()
            .get(&parent)
            .map_or(TreeId::MOUNT, |p| p.tree);
        let ino = self.last.fetch_add(1, Ordering::Relaxed) + 1;
        let entry = Entry::new(parent, name.to_string(), tree, node, stamp);
        self.entries.write().insert(ino, Arc::new(entry));
        by_name.insert((parent, name.to_string()), ino);
        ino
    }

    /// [`Inodes::insert`], and one more lookup of the inode counted, under the same lock
    /// as [`Inodes::forget`]: the kernel is about to be answered with it.
    pub fn hold(&self, parent: u64, name: &str, node: Node, stamp: Stamp) -> u64 {
        let mut by_name = self.by_name.write();
        let ino = self.insert_locked(&mut by_name, parent, name, node, stamp);
        if let Some(entry) = self.get(ino) {
            entry.lookups.fetch_add(1, Ordering::Relaxed);
        }
        drop(by_name);
        ino
    }

    /// The kernel dropped `n` of its references to `ino`. With none left the inode goes
    /// (the root stays): a later lookup of its name makes a new one. Whether it went.
    pub fn forget(&self, ino: u64, n: u64) -> bool {
        if ino == ROOT {
            return false;
        }
        let mut by_name = self.by_name.write();
        let Some(entry) = self.get(ino) else {
            return false;
        };
        let left = entry
            .lookups
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |l| {
                Some(l.saturating_sub(n))
            })
            .map_or(0, |l| l.saturating_sub(n));
        if left > 0 {
            return false;
        }
        let key = (entry.parent, entry.name.clone());
        if by_name.get(&key) == Some(&ino) {
            by_name.remove(&key);
        }
        self.entries.write().remove(&ino);
        // The parent's listing named the inode: the next listing names its successor.
        if let Some(parent) = self.get(entry.parent) {
            parent.listing.lock().take();
        }
        true
    }

    /// The inodes whose node path is `path` or below it (every inode for "").
    pub fn under(&self, path: &str) -> Vec<u64> {
        self.entries
            .read()
            .iter()
            .filter(|(_, e)| crate::hierarchy::under(e.node.path(), path))
            .map(|(ino, _)| *ino)
            .collect()
    }

    /// How many inodes are known.
    pub fn len(&self) -> usize {
        self.entries.read().len()
    }
}

impl Entry {
    fn new(parent: u64, name: String, tree: TreeId, node: Node, stamp: Stamp) -> Entry {
        Entry {
            parent,
            name,
            tree,
            node,
            stamp,
            lookups: AtomicU64::new(0),
            listing: Mutex::new(None),
            content: Mutex::new(None),
        }
    }
}
