//! The inode table: numbers handed out lazily on lookup / readdir. An inode names a node
//! of one tree (the mount's own hierarchy is tree 0) and what kind of file it shows; the
//! kernel's lookups of it are counted and `forget` drops it once the kernel holds none.
//! A file's inode stands for one reading of its node: a node read again after it changed
//! in the store gets a new inode, and the old one keeps its content for the files open on
//! it.
//!
//! Numbers are not counted up but derived from what the inode stands for: the tree, the
//! node and the version of the metadata it was read from, hashed with a fixed key, so
//! that an unchanged node has the same number at every lookup (after the kernel forgot
//! it, after the store was read again) and a changed one another. A number held by a live
//! inode is passed over for the next one; the kernel's generation of an inode counts the
//! numbers passed over, so that a number given to another node once the kernel forgot
//! it comes with another generation. The hash is std's `DefaultHasher` with its fixed
//! keys: the same numbers for the whole life of a daemon (and from every daemon of one
//! build; a zarrfs built with another Rust release may number differently).

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use super::content::Content;
use crate::formats::FormatKind;
use crate::store::Version;
use crate::{Error, Result};

/// The root directory's inode number.
pub const ROOT: u64 = 1;

/// The numbers inodes get: below 2^63, so that readers that keep them signed see them
/// as they are (0 and [`ROOT`] are never given).
const NUMBERS: u64 = (1 << 63) - 1;

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

/// The reading of a node a new inode of it stands for: when it was read (what the inode
/// shows is built from that reading) and the version of the metadata it read, which with
/// the tree and the node makes the inode's number.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Reading {
    pub stamp: Stamp,
    /// `None` for a directory, which stays one inode, and for a node whose metadata
    /// could not be read.
    pub version: Option<Version>,
}

/// What an inode stands for: a node path of its tree and the kind of file it shows.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
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
    /// A file being made in a group's directory (`NAME.npy`, `.NAME.json`) at this
    /// path, before it is an array (see [`crate::write::new_file`]).
    New(String),
}

impl Node {
    /// The node path the inode's file shows.
    pub fn path(&self) -> &str {
        match self {
            Node::Dir(p)
            | Node::Array(p)
            | Node::View(p, _)
            | Node::ArraySidecar(p)
            | Node::GroupSidecar(p)
            | Node::New(p) => p,
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
    /// The hash of the tree, the node and its metadata's version: where the search for
    /// a number starts.
    key: u64,
    /// The kernel's generation of the inode: how many numbers were passed over from
    /// `key` to find its own.
    pub generation: u64,
    /// Lookups the kernel holds (each answered lookup adds one, `forget` takes them back).
    lookups: AtomicU64,
    /// Files open on this reading (see [`Open`]).
    opens: AtomicU64,
    /// A directory's listing, sorted, built once (dropped when a child is forgotten;
    /// built again when the hierarchy's reading it came from is no longer good).
    pub listing: Mutex<Option<(Stamp, Arc<Vec<super::DirEntry>>)>>,
    /// A file's content, loaded once: the inode shows it for its whole life.
    pub content: Mutex<Option<Arc<Content>>>,
    /// A file's size, known before its content is loaded (a sidecar's, from its text
    /// made once and dropped); `u64::MAX` while not known.
    pub size: AtomicU64,
}

/// One open file of an inode's reading, counted until it is dropped: while any is, a
/// new reading of the node is another inode.
pub struct Open(Arc<Entry>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.opens.fetch_sub(1, Ordering::SeqCst);
    }
}

/// An inode answered to a lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Held {
    pub ino: u64,
    /// The number stood for an older reading of the same node, and stands for the new
    /// one now (nothing was open on the old one).
    pub renewed: bool,
}

pub struct Inodes {
    entries: RwLock<HashMap<u64, Arc<Entry>>>,
    by_name: RwLock<HashMap<(u64, String), u64>>,
    /// The numbers given are `key + generation` within this mask (smaller in tests, so
    /// that numbers meet).
    mask: u64,
}

/// Where the search for the number of `node` of `tree` read at `version` starts.
fn key_of(tree: TreeId, node: &Node, version: Option<&Version>) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    (tree, node, version).hash(&mut h);
    h.finish()
}

impl Inodes {
    pub fn new() -> Inodes {
        Inodes::within(NUMBERS)
    }

    /// A table giving numbers within `mask` only.
    pub(super) fn within(mask: u64) -> Inodes {
        let root = Entry::new(
            ROOT,
            String::new(),
            TreeId::MOUNT,
            Node::Dir(String::new()),
            Stamp::default(),
            (0, 0),
        );
        Inodes {
            entries: RwLock::new(HashMap::from([(ROOT, Arc::new(root))])),
            by_name: RwLock::new(HashMap::new()),
            mask,
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

    /// `name` in `parent` stands for nothing now (its node was removed): its inode lives
    /// on, nameless, until the kernel forgets it.
    pub fn unname(&self, parent: u64, name: &str) {
        self.by_name.write().remove(&(parent, name.to_string()));
    }

    /// The inode of `name` in `parent`, created for `node` at `reading` (of the parent's
    /// tree) when new, when the name stood for another node (an array that became a
    /// group) or for another reading of a file: the old inode then lives on, nameless,
    /// until the kernel forgets it (at once when the kernel holds none of it). The
    /// kernel's inode of an older reading of the same node keeps standing for it (a
    /// lookup renews it, see [`Inodes::hold`]). `free` says whether a number the table
    /// does not hold is free above it too (see [`Inodes::hold`]).
    pub fn insert(
        &self,
        parent: u64,
        name: &str,
        node: Node,
        reading: Reading,
        free: &dyn Fn(u64) -> bool,
    ) -> Result<u64> {
        let mut by_name = self.by_name.write();
        let held = self.insert_locked(&mut by_name, parent, name, node, reading, free, false)?;
        Ok(held.ino)
    }

    /// [`Inodes::insert`], and one more lookup of the inode counted, under the same lock
    /// as [`Inodes::forget`]: the kernel is about to be answered with it. A new reading
    /// of a node whose metadata is unchanged keeps the number of the older one when no
    /// file is open on it and `free` lets go of what is kept of the number above (the
    /// kernel is then to drop what it cached of it); else it is another inode.
    pub fn hold(
        &self,
        parent: u64,
        name: &str,
        node: Node,
        reading: Reading,
        free: &dyn Fn(u64) -> bool,
    ) -> Result<Held> {
        let mut by_name = self.by_name.write();
        let held = self.insert_locked(&mut by_name, parent, name, node, reading, free, true)?;
        if let Some(entry) = self.get(held.ino) {
            entry.lookups.fetch_add(1, Ordering::SeqCst);
        }
        Ok(held)
    }

    #[allow(clippy::too_many_arguments)]
    fn insert_locked(
        &self,
        by_name: &mut HashMap<(u64, String), u64>,
        parent: u64,
        name: &str,
        node: Node,
        reading: Reading,
        free: &dyn Fn(u64) -> bool,
        renew: bool,
    ) -> Result<Held> {
        let mut entries = self.entries.write();
        let tree = entries.get(&parent).map_or(TreeId::MOUNT, |p| p.tree);
        let key = key_of(tree, &node, reading.version.as_ref());
        let stamp = reading.stamp;
        if let Some(&old) = by_name.get(&(parent, name.to_string())) {
            if let Some(e) = entries.get(&old).cloned() {
                let same_node = e.node == node && e.key == key;
                if same_node && e.stamp == stamp {
                    return Ok(Held {
                        ino: old,
                        renewed: false,
                    });
                }
                if e.lookups.load(Ordering::SeqCst) == 0 {
                    // The kernel holds nothing of it: the number is free again.
                    entries.remove(&old);
                } else if same_node && !renew {
                    return Ok(Held {
                        ino: old,
                        renewed: false,
                    });
                } else if same_node && e.opens.load(Ordering::SeqCst) == 0 && free(old) {
                    // Nothing reads the older reading: the number stands for this one.
                    let entry = Entry::new(
                        parent,
                        name.to_string(),
                        tree,
                        node,
                        stamp,
                        (key, e.generation),
                    );
                    entry
                        .lookups
                        .store(e.lookups.load(Ordering::SeqCst), Ordering::SeqCst);
                    entries.insert(old, Arc::new(entry));
                    return Ok(Held {
                        ino: old,
                        renewed: true,
                    });
                }
            }
        }
        let (ino, generation) = (0..=self.mask)
            .map(|g| (key.wrapping_add(g) & self.mask, g))
            .find(|(n, _)| *n > ROOT && !entries.contains_key(n) && free(*n))
            .ok_or_else(|| Error::Internal("every inode number is taken".into()))?;
        let entry = Entry::new(
            parent,
            name.to_string(),
            tree,
            node,
            stamp,
            (key, generation),
        );
        entries.insert(ino, Arc::new(entry));
        by_name.insert((parent, name.to_string()), ino);
        Ok(Held {
            ino,
            renewed: false,
        })
    }

    /// One more file open on the reading `ino` stands for: its entry, and the count
    /// (taken back when the [`Open`] is dropped). Counted before the entry is checked
    /// to be still the number's, so that a lookup renewing the number at that moment
    /// either sees the open or is seen.
    /// Take back one lookup of `ino` counted by [`Inodes::hold`] for an answer never
    /// sent: unlike [`Inodes::forget`], the inode stays (named, as a listing leaves it).
    pub fn unhold(&self, ino: u64) {
        if let Some(entry) = self.get(ino) {
            let _ = entry
                .lookups
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |l| l.checked_sub(1));
        }
    }

    pub fn open(&self, ino: u64) -> Option<(Arc<Entry>, Open)> {
        loop {
            let entry = self.get(ino)?;
            entry.opens.fetch_add(1, Ordering::SeqCst);
            let open = Open(entry.clone());
            if self.get(ino).is_some_and(|now| Arc::ptr_eq(&now, &entry)) {
                return Some((entry, open));
            }
        }
    }

    /// The kernel dropped `n` of its references to `ino`. With none left the inode goes
    /// (the root stays): a later lookup of its name makes it again, with the same number
    /// when its node is unchanged and the number free. Whether it went.
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
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |l| {
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
    /// `(key, generation)`: see the fields.
    fn new(
        parent: u64,
        name: String,
        tree: TreeId,
        node: Node,
        stamp: Stamp,
        (key, generation): (u64, u64),
    ) -> Entry {
        Entry {
            parent,
            name,
            tree,
            node,
            stamp,
            key,
            generation,
            lookups: AtomicU64::new(0),
            opens: AtomicU64::new(0),
            listing: Mutex::new(None),
            content: Mutex::new(None),
            size: AtomicU64::new(u64::MAX),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn array(path: &str) -> Node {
        Node::Array(path.to_string())
    }

    /// A reading of metadata version `version` made at stamp `at`.
    fn read(version: &str, at: u64) -> Reading {
        Reading {
            stamp: Stamp {
                read_at: None,
                refreshes: at,
            },
            version: Some(Version::Label(version.to_string())),
        }
    }

    const ANY: &dyn Fn(u64) -> bool = &|_| true;

    /// Hold `name` (node `name`, read as `reading`) in the root once more.
    fn hold(t: &Inodes, name: &str, reading: Reading) -> Held {
        t.hold(ROOT, name, array(name), reading, ANY).unwrap()
    }

    #[test]
    fn an_unchanged_node_gets_its_number_again_and_a_changed_one_another() {
        let t = Inodes::new();
        let a = hold(&t, "a", read("1", 0));
        let b = hold(&t, "b", read("1", 0));
        assert!(a.ino > ROOT && b.ino > ROOT && a.ino != b.ino);
        assert!(t.forget(a.ino, 1));
        assert!(t.get(a.ino).is_none());
        assert_eq!(hold(&t, "a", read("1", 0)).ino, a.ino, "after a forget");
        // Another table (another daemon of this build) numbers alike.
        assert_eq!(hold(&Inodes::new(), "a", read("1", 0)).ino, a.ino);
        // Read again, unchanged, nothing open: the number is renewed.
        let again = hold(&t, "a", read("1", 1));
        assert_eq!((again.ino, again.renewed), (a.ino, true));
        assert_eq!(t.get(a.ino).unwrap().stamp.refreshes, 1);
        assert_eq!(t.find(ROOT, "a"), Some(a.ino));
        // Changed: another number; the old inode lives on, nameless, until forgotten.
        let changed = hold(&t, "a", read("2", 2));
        assert_ne!(changed.ino, a.ino);
        assert!(!changed.renewed);
        assert_eq!(t.find(ROOT, "a"), Some(changed.ino));
        assert_eq!(t.get(a.ino).unwrap().stamp.refreshes, 1);
        assert!(!t.forget(a.ino, 1), "held twice");
        assert!(t.forget(a.ino, 1));
        assert!(t.get(a.ino).is_none());
        // The root keeps its number and never goes.
        assert!(!t.forget(ROOT, 5));
        assert_eq!(t.get(ROOT).unwrap().node, Node::Dir(String::new()));
    }

    #[test]
    fn a_new_reading_of_a_node_open_on_an_older_one_is_another_inode() {
        let t = Inodes::new();
        let a = hold(&t, "a", read("1", 0));
        let (_, open) = t.open(a.ino).unwrap();
        let next = hold(&t, "a", read("1", 1));
        assert_ne!(next.ino, a.ino);
        assert!(!next.renewed);
        assert_eq!(t.get(a.ino).unwrap().stamp.refreshes, 0, "the open reading");
        drop(open);
        // Nothing open on the newer one: the one after renews its number.
        let third = hold(&t, "a", read("1", 2));
        assert_eq!((third.ino, third.renewed), (next.ino, true));
        // A listing names the number it finds, and leaves the reading to the lookup.
        let listed = t.insert(ROOT, "a", array("a"), read("1", 3), ANY).unwrap();
        assert_eq!(listed, next.ino);
        assert_eq!(t.get(next.ino).unwrap().stamp.refreshes, 2);
        // Nor is a number renewed while what is kept of it above is in use.
        let busy = |n: u64| n != next.ino;
        let fourth = t.hold(ROOT, "a", array("a"), read("1", 4), &busy).unwrap();
        assert_ne!(fourth.ino, next.ino);
        assert!(!fourth.renewed);
    }

    #[test]
    fn numbers_taken_are_passed_over_and_the_generation_tells_a_number_given_again() {
        // Two numbers to give (2 and 3; 0 and the root's 1 never are).
        let t = Inodes::within(3);
        let a = hold(&t, "a", read("1", 0));
        let b = hold(&t, "b", read("1", 0));
        let mut given = [a.ino, b.ino];
        given.sort();
        assert_eq!(given, [2, 3], "two live nodes never share a number");
        assert!(t.hold(ROOT, "c", array("c"), read("1", 0), ANY).is_err());
        // A node whose search for a number starts elsewhere than a's.
        let other = (0..)
            .map(|i| format!("c{i}"))
            .find(|n| {
                let key =
                    |name: &str| key_of(TreeId::MOUNT, &array(name), read("1", 0).version.as_ref());
                key(n) & 3 != key("a") & 3
            })
            .unwrap();
        assert!(t.forget(a.ino, 1));
        let c = hold(&t, &other, read("1", 0));
        assert_eq!(c.ino, a.ino, "the one number free");
        let generation = |ino| t.get(ino).unwrap().generation;
        let c_generation = generation(c.ino);
        assert!(t.forget(c.ino, 1));
        let a_again = hold(&t, "a", read("1", 0));
        assert_eq!(a_again.ino, a.ino);
        assert_ne!(generation(a_again.ino), c_generation);
        // A number that what is kept above will not let go of is passed over.
        assert!(t.forget(a_again.ino, 1));
        let kept = |n: u64| n != a.ino;
        assert!(t.hold(ROOT, "a", array("a"), read("1", 0), &kept).is_err());
    }
}
