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
#[cfg(test)]
pub(crate) mod tests;
mod write;
mod xattr;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::formats::{self, Context, FormatKind, FormatSet, Placement, Segment};
use crate::hierarchy::{join, Hierarchy, NodeKind};
use crate::read::cache::UnitCache;
use crate::read::prefetch::Prefetcher;
use crate::read::readahead::Cursor;
use crate::read::view::Layout;
pub use crate::read::view::{Now, Partial, UnitSlice};
use crate::{Error, Result};
use content::{Content, Part};
use handles::{Handle, Handles};
use inode::{Entry, Inodes, Node, Reading, Stamp};
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

    /// The name of the raw file of the array at `path`.
    fn file_name(&self, path: &str) -> String {
        match (&self.root_array, path.is_empty()) {
            (Some(name), true) => name.clone(),
            _ => path.rsplit('/').next().unwrap_or(path).to_string(),
        }
    }

    /// The segments of view `kind` of the node at `path`, or why it has none.
    fn view_build(&self, path: &str, kind: FormatKind) -> Result<formats::Built> {
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
    fn array_bytes(&self, path: &str, limit: u64) -> Result<Vec<u8>> {
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
    fn view_absent(&self, path: &str, kind: FormatKind) -> Option<String> {
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
    fn array_entries(
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
    fn find_view(&self, dir: &str, name: &str) -> Option<Node> {
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
    fn placed_views(
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

    /// The entries of the directory at `dir`, with the node each name stands for.
    fn entries(&self, dir: &str) -> Result<Vec<Named>> {
        self.entries_read(dir).map(|(names, _)| names)
    }

    /// [`ZarrFs::entries`], and when the hierarchy's listing they come from was read
    /// (`None`: the mount's one file, a root array, which has no listing).
    fn entries_read(&self, dir: &str) -> Result<(Vec<Named>, Option<Instant>)> {
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

    fn entry(&self, ino: u64) -> Result<Arc<Entry>> {
        self.inodes
            .get(ino)
            .ok_or_else(|| Error::NotFound(format!("inode {ino}")))
    }

    fn dir_path(&self, ino: u64) -> Result<String> {
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
    fn find(&self, parent: u64, name: &str) -> Result<(String, Node)> {
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

    /// A file's content, loaded once per inode (each inode stands for one reading of its
    /// node); an array's raw file shares the array's flat content.
    fn content(&self, entry: &Entry) -> Result<Arc<Content>> {
        if let Some(c) = entry.content.lock().as_ref() {
            return Ok(c.clone());
        }
        let loaded = match &entry.node {
            Node::Array(path) => self.flat(path)?,
            node => Arc::new(self.load(node)?),
        };
        // The first one stored wins (two loads at once).
        Ok(entry.content.lock().get_or_insert(loaded).clone())
    }

    /// The raw content of the array at `path`, shared by all of its files. Loaded without
    /// the lock held (it may read the store); the first one stored wins.
    fn flat(&self, path: &str) -> Result<Arc<Content>> {
        let stamp = self.stamp(path);
        let refreshing = self.hierarchy.refresh_interval().is_some();
        if let Some((made, c)) = self.flats.lock().get(path) {
            // A node gone from the store keeps the content it had (its open files read
            // on; lookups no longer find it). With no refresh interval, a node is read
            // again only when forced (`zarrfs refresh`, a write that changed its shape).
            if *made == stamp || (refreshing && stamp.read_at.is_none()) {
                return Ok(c.clone());
            }
        }
        let loaded = Arc::new(content::array_file(
            &self.hierarchy,
            path,
            &self.cache,
            &self.prefetcher,
            self.layout,
        )?);
        let mut flats = self.flats.lock();
        let kept = match flats.get(path) {
            Some((made, c)) if *made == stamp => c.clone(),
            _ => {
                flats.insert(path.to_string(), (stamp, loaded.clone()));
                loaded
            }
        };
        drop(flats);
        Ok(kept)
    }

    /// The content of a file other than an array's raw file.
    fn load(&self, node: &Node) -> Result<Content> {
        Ok(match node {
            Node::Array(path) => return Err(Error::Internal(format!("/{path}: raw file"))),
            Node::View(path, kind) => {
                let mut segments = self.view_build(path, *kind)?.map_err(|why| {
                    Error::unsupported(format!("/{path}"), format!("{} view: {why}", kind.label()))
                })?;
                if let [Segment::Bytes(bytes)] = segments.as_mut_slice() {
                    return Ok(Content::Bytes(std::mem::take(bytes)));
                }
                let parts = segments
                    .into_iter()
                    .map(|segment| match segment {
                        Segment::Bytes(bytes) => Ok(Part::Bytes(bytes)),
                        Segment::Array { path, range } => Ok(Part::range(self.flat(&path)?, range)),
                        Segment::Tiles { path, grid } => Ok(Part::Tiles {
                            data: self.flat(&path)?,
                            grid,
                        }),
                    })
                    .collect::<Result<Vec<_>>>()?;
                Content::of_parts(parts)?
            }
            Node::ArraySidecar(path) => content::array_sidecar(&self.hierarchy, path, self.layout)?,
            Node::GroupSidecar(path) => content::group_sidecar(&self.hierarchy, path)?,
            Node::Dir(path) => return Err(Error::Invalid(format!("/{path}: is a directory"))),
            // Read and written only through the handle that made it.
            Node::New(path) => return Err(Error::Busy(format!("/{path}: being made"))),
        })
    }

    pub fn getattr(&self, ino: u64) -> Result<Attr> {
        let entry = self.entry(ino)?;
        Ok(match &entry.node {
            Node::Dir(_) => Attr {
                ino,
                generation: entry.generation,
                size: 0,
                kind: FileKind::Directory,
                // Groups are made and arrays saved into them on a writable mount.
                perm: if self.writable() { 0o755 } else { 0o555 },
                nlink: 2,
            },
            Node::New(path) => Attr {
                ino,
                generation: entry.generation,
                size: self
                    .new_file(path)
                    .ok_or_else(|| Error::NotFound(format!("/{path}")))?
                    .size(),
                kind: FileKind::File,
                perm: 0o644,
                nlink: 1,
            },
            _ => {
                // A node that fails to load is still listed; its reads fail with EIO.
                let size = match self.content(&entry) {
                    Ok(c) => self.staged_size(&entry.node).unwrap_or(c.size()),
                    Err(e) => {
                        log::debug!("{e}");
                        0
                    }
                };
                Attr {
                    ino,
                    generation: entry.generation,
                    size,
                    kind: FileKind::File,
                    perm: self.file_perm(&entry.node),
                    nlink: 1,
                }
            }
        })
    }

    /// Open a file: check that it can be read (its metadata and codecs load) and give the
    /// open a handle of its own (its content and readahead); the handle's number. The
    /// content is the inode's, the same at every open of it, so the kernel's cached pages
    /// of the inode stay good.
    pub fn open(&self, ino: u64) -> Result<u64> {
        let (entry, open) = self
            .inodes
            .open(ino)
            .ok_or_else(|| Error::NotFound(format!("inode {ino}")))?;
        let content = self.content(&entry)?;
        let array = match &entry.node {
            Node::Array(path) => Some(path.clone()),
            _ => None,
        };
        Ok(self.handles.open(content, open, array, None, None))
    }

    /// Close the open file `fh` (one opened for writing commits what it staged first,
    /// see [`ZarrFs::release_writer`]).
    pub fn release(&self, fh: u64) {
        if let Some(handle) = self.handles.release(fh) {
            self.release_writer(&handle);
        }
    }

    /// The open file `fh`.
    fn handle(&self, fh: u64) -> Result<Arc<Handle>> {
        self.handles
            .get(fh)
            .ok_or_else(|| Error::Invalid(format!("file handle {fh}: not open")))
    }

    /// How many files are open.
    pub fn open_count(&self) -> usize {
        self.handles.count()
    }

    /// Up to `size` bytes of open file `fh` from `offset`; short or empty at end of file.
    pub fn read(&self, fh: u64, offset: u64, size: usize) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; size];
        let n = self.read_into(fh, offset, &mut buf)?;
        buf.truncate(n);
        Ok(buf)
    }

    /// Fill `buf` from `offset` of open file `fh`; the bytes written (short or none at end
    /// of file). A read that runs into a unit that cannot be read fills the bytes before
    /// it (see [`Partial`]).
    pub fn read_into(
        &self,
        fh: u64,
        offset: u64,
        buf: &mut [u8],
    ) -> std::result::Result<usize, Partial> {
        let h = self.handle(fh)?;
        if let Some(edit) = &h.edit {
            return Ok(write::read_edit(&edit.text.lock(), offset, buf));
        }
        if let Some(new) = &h.new {
            return Ok(new.read(offset, buf)?);
        }
        let n = h.content.read_into(&h.cursor, offset, buf)?;
        match self.staged_of(&h) {
            Some(staged) => Ok(self.lay_over(&h, &staged, offset, buf, n)?),
            None => Ok(n),
        }
    }

    /// A read answered straight from a cached unit, when the file is an array view and
    /// the range lies contiguously in one unit (see
    /// [`crate::read::view::View::read_in_place`]).
    pub fn read_in_place(&self, fh: u64, offset: u64, size: usize) -> Result<Option<UnitSlice>> {
        let h = self.handle(fh)?;
        if self.staged_of(&h).is_some() || h.edit.is_some() || h.new.is_some() {
            return Ok(None);
        }
        h.content.read_in_place(&h.cursor, offset, size)
    }

    /// A read answered from what is in memory alone, with no store I/O and no decode
    /// (see [`crate::read::view::View::read_now`]).
    pub fn read_now(&self, fh: u64, offset: u64, buf: &mut [u8]) -> Result<Now> {
        let h = self.handle(fh)?;
        if self.staged_of(&h).is_some() || h.edit.is_some() || h.new.is_some() {
            return Ok(Now::Later);
        }
        h.content.read_now(&h.cursor, offset, buf)
    }

    /// Keep the decoded chunks of arrays that fit the cache once they are read, so a
    /// re-read decodes nothing (see [`UnitCache::keep_fitting`]).
    pub fn keep_read_arrays(&self, on: bool) {
        self.cache.keep_fitting(on);
    }

    /// The size of `ino` when it is an array's data file (raw, `.npy` or `.tif`; not a
    /// tiled one).
    pub fn array_file_size(&self, ino: u64) -> Option<u64> {
        let entry = self.entry(ino).ok()?;
        let content = self.content(&entry).ok()?;
        // A tiled file is read a tile at a time: a copy would decode every level.
        if content.tiled() {
            return None;
        }
        content.view().map(|_| content.size())
    }

    /// Whether open file `fh` is read a tile at a time (see [`Content::tiled`]).
    pub fn tiled(&self, fh: u64) -> bool {
        self.handle(fh).is_ok_and(|h| h.content.tiled())
    }

    /// Whether `n` bytes read at `offset` of open file `fh` reach its end.
    pub fn reaches_end(&self, fh: u64, offset: u64, n: usize) -> bool {
        let size = self.handle(fh).map(|h| match &h.new {
            Some(new) => new.size(),
            None => h.content.size(),
        });
        matches!(size, Ok(size) if n > 0 && offset + n as u64 >= size)
    }

    /// All extended attributes of `ino`.
    pub fn xattrs(&self, ino: u64) -> Result<Vec<(String, String)>> {
        let entry = self.entry(ino)?;
        match &entry.node {
            Node::Dir(path) => {
                let mut attrs = xattr::attributes(&self.hierarchy, path, self.layout)?;
                attrs.extend(self.snapshot_attribute(path));
                Ok(attrs)
            }
            Node::Array(path) | Node::View(path, _) => {
                let mut attrs = xattr::attributes(&self.hierarchy, path, self.layout)?;
                attrs.extend(self.snapshot_attribute(path));
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
            _ => Ok(vec![]),
        }
    }

    /// `user.zarrfs.snapshot`: the snapshot of a versioned repository that the node at
    /// `path` was read from.
    fn snapshot_attribute(&self, path: &str) -> Option<(String, String)> {
        let version = self.hierarchy.version(path).ok()?.0;
        let id = version.snapshot()?;
        Some(("user.zarrfs.snapshot".to_string(), id.to_string()))
    }

    /// `user.zarrfs.views`: for every view of the mount, its file or why there is none.
    fn views_report(&self, path: &str) -> String {
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

    pub fn getxattr(&self, ino: u64, name: &str) -> Result<Vec<u8>> {
        self.xattrs(ino)?
            .into_iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.into_bytes())
            .ok_or(Error::NoAttribute)
    }
}
