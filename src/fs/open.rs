//! Files: the content of each (loaded once per inode, an array's shared by its files),
//! their attributes, and opens, reads and closes of them.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::content::{self, Content, Part};
use super::handles::Handle;
use super::inode::{Entry, Node};
use super::write;
use super::{Attr, FileKind, Now, Partial, UnitSlice, ZarrFs};
use crate::formats::Segment;
use crate::{Error, Result};

impl ZarrFs {
    /// A file's content, loaded once per inode (each inode stands for one reading of its
    /// node); an array's raw file shares the array's flat content.
    pub(super) fn content(&self, entry: &Entry) -> Result<Arc<Content>> {
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
    pub(super) fn flat(&self, path: &str) -> Result<Arc<Content>> {
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
    pub(super) fn load(&self, node: &Node) -> Result<Content> {
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
                let size = match self.file_size(&entry) {
                    Ok(size) => self.staged_size(&entry.node).unwrap_or(size),
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

    /// The size of a file's content. On a mount with no refresh interval, an array's raw
    /// file not yet opened is sized from its metadata, and a sidecar from its text made
    /// and dropped, with nothing kept for either (a listing asks it of every array and
    /// sidecar; the view and its caches, or the text, are made at the first open). Any
    /// other file is loaded: under a refresh interval an inode's content is bound to the
    /// reading it was looked up at as soon as it is asked for.
    fn file_size(&self, entry: &Entry) -> Result<u64> {
        let unbound = self.hierarchy.refresh_interval().is_none();
        if unbound {
            let loaded = entry.content.lock().as_ref().map(|c| c.size());
            if let Some(size) = loaded {
                return Ok(size);
            }
            match &entry.node {
                Node::Array(path) => {
                    let meta = self.hierarchy.array(path)?;
                    if let Some(size) = crate::read::array::flat_size(&meta)? {
                        return Ok(size);
                    }
                }
                node @ (Node::ArraySidecar(_) | Node::GroupSidecar(_)) => {
                    let known = entry.size.load(Ordering::Relaxed);
                    if known != u64::MAX {
                        return Ok(known);
                    }
                    let size = self.load(node)?.size();
                    entry.size.store(size, Ordering::Relaxed);
                    return Ok(size);
                }
                _ => {}
            }
        }
        Ok(self.content(entry)?.size())
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
    pub(super) fn handle(&self, fh: u64) -> Result<Arc<Handle>> {
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
    /// re-read decodes nothing (see [`crate::read::cache::UnitCache::keep_fitting`]).
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
}
