//! The folder store's root, held open: values are opened beneath its descriptor (see
//! `folder.rs`), so no open walks the root's own path again. The folder at the root's
//! path may be replaced while the store is open (a store written again from scratch):
//! the descriptor is checked against the path at most once a [`RECHECK`], and whenever
//! a key is missing beneath it, and opened again when they differ.

use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// How often the descriptor is checked against the root's path, at least.
const RECHECK: Duration = Duration::from_secs(1);

/// The root folder's descriptor, and when it was last found to be the folder at the
/// root's path.
#[derive(Debug)]
pub struct RootDir {
    path: PathBuf,
    held: Mutex<(Option<Arc<File>>, Instant)>,
}

/// A held descriptor of the root (see [`RootDir::get`]).
pub struct Root(Arc<File>);

impl AsFd for Root {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

impl Root {
    /// Whether both are the same descriptor.
    pub fn same(&self, other: &Root) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl RootDir {
    pub fn new(path: PathBuf) -> RootDir {
        RootDir {
            path,
            held: Mutex::new((None, Instant::now())),
        }
    }

    /// The root's descriptor; checked against the path first when `recheck` or when it
    /// was last checked a [`RECHECK`] ago. No lock is held while the path is looked at.
    pub fn get(&self, recheck: bool) -> std::io::Result<Root> {
        let (held, checked) = {
            let held = self.held.lock();
            (held.0.clone(), held.1)
        };
        if let Some(fd) = &held {
            if !recheck && checked.elapsed() < RECHECK {
                return Ok(Root(fd.clone()));
            }
            if same_folder(fd, &self.path) {
                *self.held.lock() = (Some(fd.clone()), Instant::now());
                return Ok(Root(fd.clone()));
            }
        }
        let fd = Arc::new(open_dir(&self.path)?);
        *self.held.lock() = (Some(fd.clone()), Instant::now());
        Ok(Root(fd))
    }
}

/// The folder at `path`, opened only to be resolved beneath (`O_PATH`).
fn open_dir(path: &Path) -> std::io::Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(path)
}

/// Whether `fd` is the folder now at `path`.
fn same_folder(fd: &File, path: &Path) -> bool {
    match (fd.metadata(), std::fs::metadata(path)) {
        (Ok(held), Ok(now)) => held.dev() == now.dev() && held.ino() == now.ino(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_root_replaced_under_its_path_is_opened_again() {
        let dir = std::env::temp_dir().join(format!("zarrfs-root-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("root")).unwrap();
        let root = RootDir::new(dir.join("root"));
        let first = root.get(false).unwrap();
        let ino = |r: &Root| r.0.metadata().unwrap().ino();
        assert_eq!(ino(&root.get(true).unwrap()), ino(&first));
        std::fs::rename(dir.join("root"), dir.join("old")).unwrap();
        std::fs::create_dir_all(dir.join("root")).unwrap();
        let again = root.get(true).unwrap();
        assert_ne!(ino(&again), ino(&first));
        assert_eq!(
            ino(&again),
            std::fs::metadata(dir.join("root")).unwrap().ino()
        );
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(root.get(true).is_err(), "no folder at the path any more");
    }
}
