//! The filesystem without FUSE: inodes, lookup, readdir, getattr, open, read and xattrs
//! over a Zarr hierarchy, and the serving core the fronts call ([`io`]: worker pools,
//! inline reads, materialized copies, io decisions). Every call returns
//! `Result<T, Error>`; a front (`fuse.rs`) turns that into replies and errnos, so this
//! core is tested without a mount.

mod content;
mod create;
pub mod describe;
mod handles;
mod inode;
pub mod io;
mod lookup;
mod open;
#[cfg(test)]
pub(crate) mod tests;
mod views;
mod write;
mod xattr;

use std::collections::HashMap;
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use parking_lot::Mutex;

use crate::formats::{FormatKind, FormatSet};
use crate::hierarchy::{Hierarchy, NodeKind};
use crate::read::cache::UnitCache;
use crate::read::prefetch::Prefetcher;
use crate::read::view::Layout;
pub use crate::read::view::{Now, Partial, UnitSlice};
use crate::Result;
use content::Content;
use handles::Handles;
use inode::{Inodes, Node, Reading, Stamp};
pub use inode::{TreeId, ROOT};

/// What kind of file an inode is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    Directory,
    File,
}

/// The attributes of an inode, free of any FUSE type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attr {
    pub ino: u64,
    /// The kernel's generation of the inode: with its number, it names one node's
    /// reading for good (see `inode.rs`).
    pub generation: u64,
    pub size: u64,
    pub kind: FileKind,
    pub perm: u16,
    pub nlink: u32,
}

/// What a lookup answers: the inode's attributes, and whether its number stood for an
/// older reading of the same node until now (`renewed`: the kernel is to drop the pages
/// it holds of the inode before it is answered).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lookup {
    pub attr: Attr,
    pub renewed: bool,
}

/// What a layer above the filesystem keeps per inode number (the serving core's
/// materialized copies): a number is given to another reading only once that layer has
/// let go of it.
pub trait PerInode: Send + Sync {
    /// Let go of what is kept of `ino` when nothing uses it now; whether nothing is kept
    /// of it.
    fn let_go(&self, ino: u64) -> bool;
}

/// One directory entry (without `.` and `..`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    pub ino: u64,
    pub name: String,
    pub kind: FileKind,
}

/// Settings of the file views.
#[derive(Debug, Clone)]
pub struct FsOptions {
    pub layout: Layout,
    pub cache_bytes: usize,
    /// Threads decoding ahead of sequential readers.
    pub prefetch_threads: usize,
    /// The files each array shows (`--views`).
    pub views: FormatSet,
    /// Where a writable mount stages writes (`--writable`); `None`: read-only.
    pub staging: Option<std::path::PathBuf>,
    /// How long an open for writing waits for another writer of the same array.
    pub write_wait: Duration,
    /// What each commit's message starts with (`--commit-message`; default `zarrfs`).
    pub commit_message: Option<String>,
    /// Chunks and codecs of arrays made through the mount (`--new-chunks`, `--new-codecs`).
    pub new_defaults: crate::write::new_array::NewDefaults,
}

/// A mounted hierarchy.
pub struct ZarrFs {
    hierarchy: Hierarchy,
    cache: Arc<UnitCache>,
    prefetcher: Arc<Prefetcher>,
    layout: Layout,
    inodes: Inodes,
    handles: Handles,
    /// When the store's root is an array: the name of its file in the mount's root.
    root_array: Option<String>,
    views: FormatSet,
    /// Each array's flat content, by node path: one per array, whichever of its files
    /// (raw, `.npy`, `.tif`) is read, so they share one view and its cached chunks; with
    /// the reading of the array it was made from.
    flats: Mutex<HashMap<String, (Stamp, Arc<Content>)>>,
    /// Why a view of an array has no file (`None`: it has one), by path and kind: its
    /// header is built once to find out, not at every listing, lookup and xattr read.
    absent: Mutex<HashMap<(String, FormatKind), Option<String>>>,
    /// What keeps things per inode number above the filesystem (see [`PerInode`]).
    per_inode: OnceLock<Weak<dyn PerInode>>,
    /// The staged writes of a writable mount.
    writes: Option<crate::write::Writes>,
    /// What writes the store, on a writable mount whose store takes writes (asked of the
    /// store once: `getattr` asks whether the mount is writable).
    writer: Option<Arc<dyn crate::store::write::Writer>>,
    /// What each commit's message starts with.
    commit_prefix: String,
    /// Encoded chunk bytes each array's commits put into the store since the mount
    /// (`user.zarrfs.bytes_written`).
    bytes_written: Mutex<HashMap<String, u64>>,
    /// Files being made (`NAME.npy`, `.NAME.json`), by path.
    creating: create::CreatingFiles,
    /// Chunks and codecs of arrays made through the mount.
    new_defaults: crate::write::new_array::NewDefaults,
}

const GROUP_SIDECAR: &str = ".group.json";

/// A directory entry's name and the node it stands for.
type Named = (String, Node);

/// Of `--cache-size`, what the cache takes no room from: what reads hold beside the
/// decoded and stored chunks the cache counts (transfer and request buffers, heap pages
/// between their reuse). Measured with 16 remote readers, that is about 100 MiB.
const OUTSIDE_CACHE: usize = 96 << 20;

/// Of the memory given to chunks (`--cache-size`), what decoded chunks may keep, those
/// being loaded included (see [`UnitCache`]): the rest (a sixteenth, at most
/// [`OUTSIDE_CACHE`]) is for what reads hold beside them.
fn cached_bytes(cache_size: usize) -> usize {
    cache_size - (cache_size / 16).min(OUTSIDE_CACHE)
}

/// A `--cache-size` whose decoded chunks may keep at least `kept` bytes.
pub(crate) fn cache_size_keeping(kept: u64) -> u64 {
    kept.saturating_add(OUTSIDE_CACHE as u64)
}

/// The array name of a sidecar file name `.NAME.json`.
fn sidecar_target(name: &str) -> Option<&str> {
    name.strip_prefix('.')?
        .strip_suffix(".json")
        .filter(|n| !n.is_empty())
}

impl ZarrFs {
    /// A filesystem over `hierarchy`. `store_name` names the one file shown when the
    /// store's root is an array (a trailing `.zarr` is dropped).
    pub fn new(hierarchy: Hierarchy, options: FsOptions, store_name: &str) -> ZarrFs {
        let root_array = (hierarchy.kind_of("") == Some(NodeKind::Array)).then(|| {
            let name = store_name.trim_end_matches(".zarr");
            if name.is_empty() || name.starts_with('.') {
                "array".to_string()
            } else {
                name.to_string()
            }
        });
        ZarrFs {
            cache: Arc::new(
                UnitCache::new(cached_bytes(options.cache_bytes))
                    .beside(hierarchy.spans().held_meter()),
            ),
            prefetcher: Prefetcher::new(options.prefetch_threads),
            layout: options.layout,
            inodes: Inodes::new(),
            handles: Handles::default(),
            root_array,
            views: options.views.clone(),
            flats: Mutex::new(HashMap::new()),
            absent: Mutex::new(HashMap::new()),
            per_inode: OnceLock::new(),
            writes: Self::writes_of(&options),
            writer: options
                .staging
                .as_ref()
                .and_then(|_| hierarchy.store().writer()),
            commit_prefix: options
                .commit_message
                .clone()
                .unwrap_or_else(|| "zarrfs".into()),
            bytes_written: Mutex::new(HashMap::new()),
            creating: Default::default(),
            new_defaults: options.new_defaults.clone(),
            hierarchy,
        }
    }

    /// Have `keeper` let go of an inode number before it goes to another reading (see
    /// [`PerInode`]); set once.
    pub fn keep_per_inode(&self, keeper: Weak<dyn PerInode>) {
        let _ = self.per_inode.set(keeper);
    }

    /// Whether inode number `ino`, which the inode table does not hold or holds for an
    /// older reading, is free above the filesystem too (what was kept of it is let go).
    fn number_free(&self, ino: u64) -> bool {
        let keeper = self.per_inode.get().and_then(Weak::upgrade);
        keeper.is_none_or(|k| k.let_go(ino))
    }

    /// The reading of the node at `path` that what is built of it now comes from.
    /// With no refresh interval a node is read once: its stamp never changes.
    fn stamp(&self, path: &str) -> Stamp {
        let refreshing = self.hierarchy.refresh_interval().is_some();
        let read_at = refreshing
            .then(|| self.hierarchy.version(path).ok().map(|(_, at)| at))
            .flatten();
        self.stamp_at(read_at)
    }

    /// The stamp of a reading made at `read_at` (`None`: with no refresh interval).
    fn stamp_at(&self, read_at: Option<std::time::Instant>) -> Stamp {
        Stamp {
            read_at,
            // A node read again after a forced refresh has a new reading time: only
            // what has none follows the count of forced refreshes.
            refreshes: if read_at.is_some() {
                0
            } else {
                self.hierarchy.refreshes()
            },
        }
    }

    /// The reading a new inode of `node` stands for: for a file, its stamp and the
    /// version of the metadata it was read from (both of one reading); none for a
    /// directory, which stays one inode.
    fn reading(&self, node: &Node) -> Reading {
        if let Node::Dir(_) = node {
            return Reading::default();
        }
        let read = self.hierarchy.version(node.path()).ok();
        let read_at = self
            .hierarchy
            .refresh_interval()
            .and(read.as_ref().map(|(_, at)| *at));
        Reading {
            stamp: self.stamp_at(read_at),
            version: read.map(|(version, _)| version),
        }
    }

    /// How long the kernel may keep attributes: the refresh interval (or, with none, a
    /// day: they never change). An inode's attributes never change (a node read again is
    /// another inode); its name is what [`ZarrFs::entry_ttl`] bounds.
    pub fn attr_ttl(&self) -> Duration {
        self.hierarchy
            .refresh_interval()
            .unwrap_or(Duration::from_secs(24 * 3600))
    }

    /// How long the kernel may keep the name of `ino`, just looked up: what is left of
    /// the refresh interval since the reading of its node that the inode stands for (a
    /// file's) or that was looked at (a directory's), so that the kernel never holds a
    /// name past the reading it came from, however long the answer took; with no
    /// interval, a day.
    pub fn entry_ttl(&self, ino: u64) -> Duration {
        let entry = self.entry(ino).ok();
        // A file being made stands for an array only once it is made: its name is
        // looked up again every time.
        if entry
            .as_ref()
            .is_some_and(|e| matches!(e.node, Node::New(_)))
        {
            return Duration::ZERO;
        }
        let Some(interval) = self.hierarchy.refresh_interval() else {
            return self.attr_ttl();
        };
        let Some(entry) = entry else {
            return Duration::ZERO;
        };
        let read_at = match &entry.node {
            Node::Dir(path) => self.hierarchy.version(path).ok().map(|(_, at)| at),
            _ => entry.stamp.read_at,
        };
        read_at.map_or(Duration::ZERO, |at| interval.saturating_sub(at.elapsed()))
    }

    /// The parent and name of each of `inodes` (the root has none).
    pub fn names_of(&self, inodes: &[u64]) -> Vec<(u64, String)> {
        inodes
            .iter()
            .filter(|&&ino| ino != ROOT)
            .filter_map(|&ino| self.inodes.get(ino))
            .map(|e| (e.parent, e.name.clone()))
            .collect()
    }

    /// Read `ino`'s node and everything below it from the store again now (`zarrfs
    /// refresh`, a `setxattr` of `user.zarrfs.refresh`): the inodes whose attributes and
    /// pages the kernel is to drop.
    pub fn refresh(&self, ino: u64) -> Result<Vec<u64>> {
        let entry = self.entry(ino)?;
        self.refresh_path(entry.node.path())
    }

    /// Read the node at `path` and everything below it from the store again now (a
    /// watched folder's metadata changed): the inodes whose attributes and pages the
    /// kernel is to drop.
    pub fn refresh_path(&self, path: &str) -> Result<Vec<u64>> {
        self.hierarchy.refresh(path)?;
        self.absent
            .lock()
            .retain(|(p, _), _| !crate::hierarchy::under(p, path));
        Ok(self.inodes.under(path))
    }
}
