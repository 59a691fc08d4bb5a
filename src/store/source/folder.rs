//! A store backed by a local folder. Every key is validated so that nothing outside the
//! root is ever opened: no `..`, no absolute paths, no NUL, no symlinks leading outside.
//! A value is opened by the kernel beneath the root's descriptor (`openat2` with
//! `RESOLVE_BENEATH`: one system call, however deep the key; `folder_root.rs` holds the
//! descriptor); only a path the kernel will not resolve that way (an absolute symlink,
//! one through `..`) is checked by resolving it in full.

use std::fs::{File, Metadata};
use std::io::{self, Seek, SeekFrom};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use nix::errno::Errno;
use nix::fcntl::{openat2, OFlag, OpenHow, ResolveFlag};

use crate::error::{Error, Result};
use crate::store::{read_value, ByteRange, Caps, Head, Listing, Store, Value, Version};

use super::folder_root::RootDir;

/// A store over a directory tree (written through [`crate::store::write::Writer`]).
#[derive(Debug, Clone)]
pub struct FolderStore {
    root: PathBuf,
    dir: Arc<RootDir>,
}

impl FolderStore {
    /// Open a folder; fails when it does not exist or is not a directory.
    pub fn open(root: impl AsRef<Path>) -> Result<Self> {
        let root = root.as_ref();
        let canonical = root.canonicalize().map_err(|source| Error::Io {
            key: root.display().to_string(),
            source,
        })?;
        if !canonical.is_dir() {
            return Err(Error::Invalid(format!(
                "{}: not a directory",
                root.display()
            )));
        }
        Ok(FolderStore {
            dir: Arc::new(RootDir::new(canonical.clone())),
            root: canonical,
        })
    }

    /// The folder's real path.
    pub(super) fn root(&self) -> &Path {
        &self.root
    }

    /// Map a key to a path inside the root, refusing anything that could leave it.
    pub(super) fn resolve(&self, key: &str) -> Result<PathBuf> {
        let path = self.root.join(relative(key)?);
        // Symlinks are allowed only when they stay inside the root.
        match path.canonicalize() {
            Ok(real) if !real.starts_with(&self.root) => Err(io_err(
                key,
                io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    "a symlink leads outside the store root",
                ),
            )),
            _ => Ok(path),
        }
    }

    /// The real paths of the folder at `prefix` and of every folder above it up to the root.
    fn ancestors(&self, prefix: &str) -> Vec<PathBuf> {
        let mut path = self.root.clone();
        let mut out = vec![self.root.clone()];
        for part in prefix.split('/').filter(|p| !p.is_empty()) {
            path.push(part);
            if let Ok(real) = path.canonicalize() {
                out.push(real);
            }
        }
        out
    }

    /// Open the regular file at `key` with its metadata; `None` when nothing is there.
    /// Anything else at the key (a directory, FIFO, socket or device) is an error, found
    /// without blocking: the open never waits for a FIFO's writer or a device.
    fn open_file(&self, key: &str) -> Result<Option<(File, Metadata)>> {
        let opened = match self.open_beneath(key)? {
            Some(opened) => opened,
            None => {
                let path = self.resolve(key)?;
                std::fs::OpenOptions::new()
                    .read(true)
                    .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
                    .open(&path)
            }
        };
        match opened {
            Ok(f) => {
                let meta = f.metadata().map_err(|source| io_err(key, source))?;
                if meta.is_file() {
                    Ok(Some((f, meta)))
                } else {
                    Err(io_err(
                        key,
                        io::Error::new(io::ErrorKind::InvalidInput, "not a regular file"),
                    ))
                }
            }
            Err(e) if is_missing(&e) => Ok(None),
            Err(source) => Err(io_err(key, source)),
        }
    }

    /// The open of `key` by the kernel beneath the root: every component, symlinks
    /// included, resolved without leaving it. `None` when the kernel would not resolve
    /// the key that way (an absolute symlink or a `..` in one, a kernel without
    /// `openat2`, a concurrent rename): then [`FolderStore::resolve`] decides.
    fn open_beneath(&self, key: &str) -> Result<Option<io::Result<File>>> {
        let rel = relative(key)?;
        let rel: &Path = if rel.as_os_str().is_empty() {
            Path::new(".")
        } else {
            &rel
        };
        let how = OpenHow::new()
            .flags(OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_NOCTTY | OFlag::O_CLOEXEC)
            .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_MAGICLINKS);
        let outcome = |opened: nix::Result<std::os::fd::OwnedFd>| match opened {
            Ok(fd) => Some(Ok(File::from(fd))),
            Err(Errno::EXDEV | Errno::ENOSYS | Errno::EPERM | Errno::EAGAIN | Errno::EINVAL) => {
                None
            }
            Err(errno) => Some(Err(io::Error::from(errno))),
        };
        let root = match self.dir.get(false) {
            Ok(root) => root,
            Err(source) => return Ok(Some(Err(source))),
        };
        match openat2(&root, rel, how) {
            // Missing beneath the folder held: once more beneath the one at the root's
            // path now, should that be another.
            Err(errno @ (Errno::ENOENT | Errno::ENOTDIR)) => match self.dir.get(true) {
                Ok(now) if !now.same(&root) => Ok(outcome(openat2(&now, rel, how))),
                _ => Ok(outcome(Err(errno))),
            },
            opened => Ok(outcome(opened)),
        }
    }
}

/// The path of `key` below the root, refusing anything that could leave it: `..`, `.`,
/// absolute paths, NUL and backslashes.
fn relative(key: &str) -> Result<PathBuf> {
    if key.contains('\0') || key.starts_with('/') || key.contains('\\') {
        return Err(Error::InvalidKey(key.to_string()));
    }
    let mut path = PathBuf::new();
    for part in key.split('/').filter(|p| !p.is_empty()) {
        match Path::new(part).components().next() {
            Some(Component::Normal(_)) if part != "." && part != ".." => path.push(part),
            _ => return Err(Error::InvalidKey(key.to_string())),
        }
    }
    Ok(path)
}

/// Whole values larger than this are announced to the kernel before they are read.
const FADVISE_ABOVE: u64 = 128 << 10;

fn io_err(key: &str, source: io::Error) -> Error {
    Error::Io {
        key: key.to_string(),
        source,
    }
}

fn is_missing(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
    )
}

impl Store for FolderStore {
    fn read(&self, key: &str, range: Option<ByteRange>) -> Result<Option<Value>> {
        let Some((mut f, meta)) = self.open_file(key)? else {
            return Ok(None);
        };
        let version = Version::of_file(&meta);
        let bytes = match range {
            None => {
                let size = meta.len();
                // Ask for the whole file at once: one large read from a cold disk, not a
                // readahead window that starts small (which a small file does not pass).
                if size > FADVISE_ABOVE {
                    // SAFETY: advice on a descriptor we own; failure only loses the hint.
                    unsafe {
                        libc::posix_fadvise(
                            f.as_raw_fd(),
                            0,
                            size as i64,
                            libc::POSIX_FADV_WILLNEED,
                        )
                    };
                }
                read_value(key, f, size)?
            }
            Some(range) => {
                let (offset, len) = range.clip(meta.len());
                f.seek(SeekFrom::Start(offset))
                    .map_err(|e| io_err(key, e))?;
                read_value(key, f, len)?
            }
        };
        Ok(Some(Value { bytes, version }))
    }

    fn head(&self, key: &str) -> Result<Option<Head>> {
        let Some((_, meta)) = self.open_file(key)? else {
            return Ok(None);
        };
        Ok(Some(Head {
            size: meta.len(),
            version: Version::of_file(&meta),
        }))
    }

    fn will_need(&self, key: &str) {
        if let Ok(Some((f, _))) = self.open_file(key) {
            // SAFETY: advice on a descriptor we own; failure only loses the hint.
            unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_WILLNEED) };
        }
    }

    fn caps(&self) -> Caps {
        Caps::local()
    }

    fn writer(&self) -> Option<std::sync::Arc<dyn crate::store::write::Writer>> {
        Some(std::sync::Arc::new(self.clone()))
    }

    fn list_dir(&self, prefix: &str) -> Result<Listing> {
        let path = self.resolve(prefix.trim_end_matches('/'))?;
        let entries = match std::fs::read_dir(&path) {
            Ok(e) => e,
            Err(e) if is_missing(&e) => return Ok(Listing::default()),
            Err(source) => return Err(io_err(prefix, source)),
        };
        let mut listing = Listing::default();
        let mut ancestors = None;
        for entry in entries {
            let entry = entry.map_err(|e| io_err(prefix, e))?;
            let Some(name) = entry.file_name().to_str().map(str::to_string) else {
                continue;
            };
            let file_type = entry.file_type().map_err(|e| io_err(prefix, e))?;
            let is_dir = if file_type.is_symlink() {
                // Followed for the kind. A folder outside the root, or one that leads
                // back to this folder or one above it (a loop), is left out; anything
                // else is listed and its reads say what is wrong with it.
                let Ok(real) = entry.path().canonicalize() else {
                    continue;
                };
                if real.is_dir() {
                    let ancestors = ancestors.get_or_insert_with(|| self.ancestors(prefix));
                    if !real.starts_with(&self.root) || ancestors.contains(&real) {
                        log::debug!("{prefix}{name}: a symlink out of the store or into a loop");
                        continue;
                    }
                    true
                } else {
                    false
                }
            } else {
                file_type.is_dir()
            };
            // Anything but a folder is a key: a FIFO or device where a document should be
            // is then found, and its read fails (without blocking).
            if is_dir {
                listing.prefixes.push(name);
            } else {
                listing.keys.push(name);
            }
        }
        listing.keys.sort();
        listing.prefixes.sort();
        Ok(listing)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::StoreExt;
    use std::os::unix::ffi::OsStringExt;

    fn tmp_store() -> (PathBuf, FolderStore) {
        let dir = std::env::temp_dir().join(format!(
            "zarrfs-store-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("root/a")).unwrap();
        std::fs::write(dir.join("root/a/k"), b"0123456789").unwrap();
        std::fs::write(dir.join("secret"), b"no").unwrap();
        let store = FolderStore::open(dir.join("root")).unwrap();
        (dir, store)
    }

    #[test]
    fn reads_keys_and_ranges() {
        let (_dir, s) = tmp_store();
        assert_eq!(s.get("a/k").unwrap().unwrap(), b"0123456789");
        assert_eq!(s.get("a/missing").unwrap(), None);
        assert!(
            matches!(s.get("a"), Err(Error::Io { .. })),
            "a folder is no value"
        );
        let span = ByteRange::Span { offset: 8, len: 5 };
        assert_eq!(s.get_range("a/k", span).unwrap().unwrap(), b"89");
        assert_eq!(
            s.get_range("a/k", ByteRange::Suffix(3)).unwrap().unwrap(),
            b"789"
        );
        let l = s.list_dir("").unwrap();
        assert_eq!(l.prefixes, vec!["a"]);
        assert_eq!(s.list_dir("a/").unwrap().keys, vec!["k"]);
    }

    #[test]
    fn refuses_fifos_without_blocking() {
        let (dir, s) = tmp_store();
        let fifo =
            std::ffi::CString::new(dir.join("root/a/fifo").into_os_string().into_vec()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
        let err = s.get("a/fifo").unwrap_err().to_string();
        assert!(
            err.contains("a/fifo") && err.contains("not a regular file"),
            "{err}"
        );
        assert!(s.get_range("a/fifo", ByteRange::Suffix(4)).is_err());
        assert!(s.list_dir("a/").unwrap().keys.contains(&"fifo".to_string()));
        // A read-ahead hint neither blocks on it nor fails.
        s.will_need("a/fifo");
        s.will_need("a/missing");
    }

    #[test]
    fn refuses_keys_leaving_the_root() {
        let (dir, s) = tmp_store();
        for bad in [
            "../secret",
            "a/../../secret",
            "/etc/passwd",
            "a/\0k",
            "a/./k",
        ] {
            assert!(matches!(s.get(bad), Err(Error::InvalidKey(_))), "{bad}");
        }
        std::os::unix::fs::symlink(dir.join("secret"), dir.join("root/link")).unwrap();
        let err = s.get("link").unwrap_err().to_string();
        assert!(
            err.contains("link") && err.contains("outside the store root"),
            "{err}"
        );
        // Listed, so that whatever expects it there reports the reason.
        assert!(s.list_dir("").unwrap().keys.contains(&"link".to_string()));
        // A folder linked back into itself or outside the root is not listed.
        std::os::unix::fs::symlink(dir.join("root"), dir.join("root/a/up")).unwrap();
        std::os::unix::fs::symlink(dir.join("root/a"), dir.join("root/a/me")).unwrap();
        std::os::unix::fs::symlink(&dir, dir.join("root/a/out")).unwrap();
        std::fs::create_dir_all(dir.join("root/b")).unwrap();
        std::os::unix::fs::symlink(dir.join("root/b"), dir.join("root/a/sib")).unwrap();
        assert_eq!(s.list_dir("a").unwrap().prefixes, vec!["sib"]);
        std::os::unix::fs::symlink(dir.join("root/a/k"), dir.join("root/inside")).unwrap();
        assert_eq!(s.get("inside").unwrap().unwrap(), b"0123456789");
        // Relative links: within the root (the kernel resolves them beneath it), out of
        // it and back in (refused by the kernel, then allowed by the full check), and out.
        std::os::unix::fs::symlink("a/k", dir.join("root/rel")).unwrap();
        std::os::unix::fs::symlink("../../root/a/k", dir.join("root/a/back")).unwrap();
        std::os::unix::fs::symlink("../../secret", dir.join("root/a/rel_out")).unwrap();
        assert_eq!(s.get("rel").unwrap().unwrap(), b"0123456789");
        assert_eq!(s.get("a/back").unwrap().unwrap(), b"0123456789");
        assert_eq!(s.head("a/back").unwrap().unwrap().size, 10);
        let err = s.get("a/rel_out").unwrap_err().to_string();
        assert!(err.contains("outside the store root"), "{err}");
        assert!(s.head("a/rel_out").is_err());
        // A link to a folder outside makes no key beneath it readable.
        std::os::unix::fs::symlink("../..", dir.join("root/a/top")).unwrap();
        assert!(s.get("a/top/secret").is_err());
    }
}
