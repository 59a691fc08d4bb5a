//! The inode table: numbers handed out lazily on lookup / readdir and stable for the
//! life of the mount (nothing is ever forgotten: the store is immutable while mounted).

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use parking_lot::{Mutex, RwLock};

use super::content::Content;
use super::views::ViewKind;

/// The root directory's inode number.
pub const ROOT: u64 = 1;

/// What an inode stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    /// A group (explicit or implicit) at this node path.
    Dir(String),
    /// The flat file of the array at this node path.
    Array(String),
    /// A header view of the array at this node path (`NAME.npy`, `NAME.hdr`, ...).
    View(String, ViewKind),
    /// `.NAME.json` beside an array.
    ArraySidecar(String),
    /// `.group.json` inside a group's directory.
    GroupSidecar(String),
}

/// One inode: its node, its parent, and what has been loaded for it.
pub struct Entry {
    pub parent: u64,
    pub node: Node,
    /// A directory's listing, sorted, built once.
    pub listing: OnceLock<Arc<Vec<super::DirEntry>>>,
    /// A file's loaded content.
    pub content: Mutex<Option<Arc<Content>>>,
}

#[derive(Default)]
pub struct Inodes {
    entries: RwLock<Vec<Arc<Entry>>>,
    by_name: RwLock<HashMap<(u64, String), u64>>,
}

impl Inodes {
    pub fn new() -> Inodes {
        let inodes = Inodes::default();
        inodes
            .entries
            .write()
            .push(Arc::new(Entry::new(ROOT, Node::Dir(String::new()))));
        inodes
    }

    pub fn get(&self, ino: u64) -> Option<Arc<Entry>> {
        let index = usize::try_from(ino.checked_sub(1)?).ok()?;
        self.entries.read().get(index).cloned()
    }

    /// The inode already given to `name` in `parent`.
    pub fn find(&self, parent: u64, name: &str) -> Option<u64> {
        self.by_name
            .read()
            .get(&(parent, name.to_string()))
            .copied()
    }

    /// The inode of `name` in `parent`, created for `node` when new.
    pub fn insert(&self, parent: u64, name: &str, node: Node) -> u64 {
        let mut by_name = self.by_name.write();
        if let Some(ino) = by_name.get(&(parent, name.to_string())) {
            return *ino;
        }
        let mut entries = self.entries.write();
        entries.push(Arc::new(Entry::new(parent, node)));
        let ino = entries.len() as u64;
        by_name.insert((parent, name.to_string()), ino);
        ino
    }
}

impl Entry {
    fn new(parent: u64, node: Node) -> Entry {
        Entry {
            parent,
            node,
            listing: OnceLock::new(),
            content: Mutex::new(None),
        }
    }
}
