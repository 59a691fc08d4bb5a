//! The served tree: the filesystem core's calls (lookups, listings, attributes, opens,
//! reads) made from async request handlers. Lookups and listings run on the core's pool
//! of metadata threads and reads on its read workers, exactly as for the FUSE mount; a
//! handler waits for their answer without holding a runtime thread. What a request looked
//! up is forgotten, and what it opened released, when the request is done with it.

use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;
use tokio::sync::oneshot;

use crate::fs::io::{Opening, Serving};
use crate::fs::{Attr, DirEntry, ROOT};
use crate::{Error, Result};

/// The serving core with no kernel behind it (`()`: no backing files are handed out).
pub type Core = Serving<()>;

/// The served tree and when it was first served (every node's `Last-Modified`, as the
/// mount's files show the time of the mount).
#[derive(Clone)]
pub struct Tree {
    core: Arc<Core>,
    pub since: SystemTime,
}

/// A node a request found: its attributes, and the lookups that found it (forgotten
/// when this is dropped).
pub struct Found {
    pub attr: Attr,
    _held: Held,
}

/// Lookups a request holds.
struct Held {
    core: Arc<Core>,
    inos: Vec<u64>,
}

impl Drop for Held {
    fn drop(&mut self) {
        for &ino in &self.inos {
            self.core.forget(ino, 1);
        }
    }
}

/// An open file: released when dropped (a body that ends early included).
pub struct OpenFile {
    core: Arc<Core>,
    pub ino: u64,
    fh: u64,
    _found: Found,
}

impl Drop for OpenFile {
    fn drop(&mut self) {
        self.core.release(self.ino, self.fh);
    }
}

/// A failure inside zarrfs that ended a job without an answer (a panic, logged where it
/// happened).
fn dropped() -> Error {
    Error::Internal("the request failed inside zarrfs (see the log)".into())
}

impl Tree {
    pub fn new(core: Arc<Core>) -> Tree {
        Tree {
            core,
            since: SystemTime::now(),
        }
    }

    /// Run `job` on the core's metadata pool and wait for its answer.
    async fn meta<T: Send + 'static>(
        &self,
        job: impl FnOnce(&Core) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let (tx, rx) = oneshot::channel();
        self.core.meta(move |core| {
            let _ = tx.send(job(core));
        });
        rx.await.unwrap_or_else(|_| Err(dropped()))
    }

    /// The node at `names` from the root.
    pub async fn find(&self, names: Vec<String>) -> Result<Found> {
        let core = self.core.clone();
        self.meta(move |c| {
            let fs = c.fs();
            let mut held = Held {
                core,
                inos: Vec::with_capacity(names.len()),
            };
            let mut attr = fs.getattr(ROOT)?;
            for name in &names {
                if attr.kind != crate::fs::FileKind::Directory {
                    return Err(Error::NotFound(format!("/{}", names.join("/"))));
                }
                attr = fs.lookup(attr.ino, name)?;
                held.inos.push(attr.ino);
            }
            Ok(Found { attr, _held: held })
        })
        .await
    }

    /// The entries of directory `dir`, each with its attributes and, with `xattrs`, the
    /// extended attributes of its files (`user.zarr.*`: an array's shape, data type,
    /// chunks).
    pub async fn list(&self, dir: &Found, xattrs: bool) -> Result<Vec<Listed>> {
        let ino = dir.attr.ino;
        self.meta(move |c| {
            let fs = c.fs();
            let entries = fs.readdir(ino)?;
            let mut out = Vec::with_capacity(entries.len());
            for DirEntry { name, .. } in entries.iter() {
                // A name gone since the listing was made is left out.
                let Ok(attr) = fs.lookup(ino, name) else {
                    continue;
                };
                let xattrs = match attr.kind {
                    crate::fs::FileKind::File if xattrs => fs.xattrs(attr.ino).unwrap_or_default(),
                    _ => Vec::new(),
                };
                c.forget(attr.ino, 1);
                out.push(Listed {
                    name: name.clone(),
                    attr,
                    xattrs,
                });
            }
            Ok(out)
        })
        .await
    }

    /// Open file `found` for reading.
    pub async fn open(&self, found: Found) -> Result<OpenFile> {
        let ino = found.attr.ino;
        let core = self.core.clone();
        let fh = self
            .meta(move |c| {
                // No backing file is handed to anyone: the copy is never passed through.
                match c.open(ino, |_| Err(std::io::Error::other("served over HTTP")))? {
                    Opening::Daemon { fh, .. } => Ok(fh),
                    Opening::Passthrough { .. } => Err(Error::Internal(
                        "a passthrough open without a kernel".into(),
                    )),
                }
            })
            .await?;
        Ok(OpenFile {
            core,
            ino,
            fh,
            _found: found,
        })
    }

    /// Up to `size` bytes of `file` at `offset` (short only at the end of the file, or
    /// before bytes that cannot be read: the next read fails there).
    pub async fn read(&self, file: &OpenFile, offset: u64, size: usize) -> Result<Bytes> {
        let (tx, rx) = oneshot::channel();
        let buf = super::pieces::buffer(size);
        self.core
            .read_owned(file.ino, file.fh, offset, size, buf, move |result| {
                let _ = tx.send(result.map(super::pieces::bytes));
            });
        rx.await.unwrap_or_else(|_| Err(dropped()))
    }
}

/// One entry of a listing.
pub struct Listed {
    pub name: String,
    pub attr: Attr,
    pub xattrs: Vec<(String, String)>,
}

impl Listed {
    pub fn xattr(&self, name: &str) -> Option<&str> {
        self.xattrs
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}
