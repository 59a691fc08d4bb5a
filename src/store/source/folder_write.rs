//! Writing a local folder store: each value goes to a temporary file in its own folder,
//! is synced, then renamed over the key, so that a reader, and a crash at any moment,
//! finds the whole old value or the whole new one. The folders a change renamed into
//! are synced once each, before a metadata document is put and when the change ends,
//! so a document never outlives, in a crash, the chunks put before it. A value whose
//! file changed since it was read (another size or modification time) is left alone. A
//! delete removes the folders it leaves empty.

use std::io::{self, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use super::folder::FolderStore;
use crate::error::{Error, Result};
use crate::store::write::{Change, Expected, Writer};
use crate::store::{Store, Version};

/// Temporary files of one process are told apart by this count.
static NEXT_TEMP: AtomicU64 = AtomicU64::new(0);

/// The suffix of the temporary files a put writes (a crash may leave one behind).
const TEMP_SUFFIX: &str = ".zarrfs-tmp";

fn io_err(key: &str, source: io::Error) -> Error {
    if source.raw_os_error() == Some(libc::ENOSPC) {
        return Error::NoSpace {
            at: key.to_string(),
            source,
        };
    }
    Error::Io {
        key: key.to_string(),
        source,
    }
}

impl FolderStore {
    /// Fail unless the value at `key` is still what `expected` says.
    fn check(&self, key: &str, expected: &Expected) -> Result<()> {
        let now = self.head(key)?.map(|h| h.version);
        let same = match (expected, &now) {
            (Expected::Absent, None) => true,
            (Expected::At(v), Some(now)) => v == now || *v == Version::Unknown,
            _ => false,
        };
        if same {
            return Ok(());
        }
        Err(Error::Conflict {
            key: key.to_string(),
            reason: match now {
                None => "deleted".into(),
                Some(_) => "its file was rewritten".into(),
            },
        })
    }

    /// The folder a new value at `key` goes in, made when missing, checked to lie inside
    /// the root (a symlinked folder may lead out of it).
    fn folder_of(&self, key: &str, path: &Path) -> Result<std::path::PathBuf> {
        let parent = path
            .parent()
            .ok_or_else(|| Error::InvalidKey(key.to_string()))?;
        std::fs::create_dir_all(parent).map_err(|e| io_err(key, e))?;
        let real = parent.canonicalize().map_err(|e| io_err(key, e))?;
        if !real.starts_with(self.root()) {
            return Err(io_err(
                key,
                io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    "a symlink leads outside the store root",
                ),
            ));
        }
        Ok(real)
    }
}

/// Sync folder `dir`, so that a rename in it survives a crash.
fn sync_dir(key: &str, dir: &Path) -> Result<()> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io_err(key, e))
}

impl Writer for FolderStore {
    fn begin(&self) -> Result<Box<dyn Change + '_>> {
        Ok(Box::new(FolderChange {
            store: self,
            unsynced: Default::default(),
        }))
    }
}

/// A change of a folder store: each put and delete stands alone; the folders renamed
/// into wait for one sync each.
struct FolderChange<'a> {
    store: &'a FolderStore,
    /// Folders renamed into since they were last synced, with a key put there.
    unsynced: std::collections::BTreeMap<std::path::PathBuf, String>,
}

/// Whether `key` is a node's metadata document (put after the chunks it describes).
fn is_document(key: &str) -> bool {
    let name = key.rsplit('/').next().unwrap_or(key);
    matches!(name, "zarr.json" | ".zarray" | ".zattrs" | ".zgroup")
}

impl FolderChange<'_> {
    fn sync(&mut self) -> Result<()> {
        while let Some((dir, key)) = self.unsynced.pop_first() {
            sync_dir(&key, &dir)?;
        }
        Ok(())
    }
}

impl Change for FolderChange<'_> {
    fn put(&mut self, key: &str, bytes: &[u8], expected: &Expected) -> Result<()> {
        if is_document(key) {
            self.sync()?;
        }
        let dir = self.store.put_unsynced(key, bytes, expected)?;
        self.unsynced.entry(dir).or_insert_with(|| key.to_string());
        if is_document(key) {
            self.sync()?;
        }
        Ok(())
    }

    fn delete(&mut self, key: &str, expected: &Expected) -> Result<()> {
        self.store.delete(key, expected)
    }

    fn finish(mut self: Box<Self>, _message: &str) -> Result<()> {
        self.sync()
    }
}

impl Drop for FolderChange<'_> {
    fn drop(&mut self) {
        // A change dropped on a failure still syncs what it renamed.
        let _ = self.sync();
    }
}

impl FolderStore {
    /// Put `bytes` at `key` (see [`Change::put`]), its folder synced.
    pub fn put(&self, key: &str, bytes: &[u8], expected: &Expected) -> Result<()> {
        let dir = self.put_unsynced(key, bytes, expected)?;
        sync_dir(key, &dir)
    }

    /// Put `bytes` at `key`, the file synced before its rename; the folder it was renamed
    /// into (not synced).
    fn put_unsynced(
        &self,
        key: &str,
        bytes: &[u8],
        expected: &Expected,
    ) -> Result<std::path::PathBuf> {
        let path = self.resolve(key)?;
        let dir = self.folder_of(key, &path)?;
        let name = path
            .file_name()
            .ok_or_else(|| Error::InvalidKey(key.to_string()))?
            .to_string_lossy()
            .into_owned();
        let n = NEXT_TEMP.fetch_add(1, Ordering::Relaxed);
        let temp = dir.join(format!(".{name}.{}-{n}{TEMP_SUFFIX}", std::process::id()));
        let written = (|| -> io::Result<()> {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&temp)?;
            f.write_all(bytes)?;
            f.sync_all()
        })();
        let placed = written.map_err(|e| io_err(key, e)).and_then(|()| {
            self.check(key, expected)?;
            std::fs::rename(&temp, dir.join(&name)).map_err(|e| io_err(key, e))
        });
        if placed.is_err() {
            let _ = std::fs::remove_file(&temp);
        }
        placed?;
        Ok(dir)
    }

    /// Delete the value at `key` (see [`Change::delete`]).
    pub fn delete(&self, key: &str, expected: &Expected) -> Result<()> {
        let path = self.resolve(key)?;
        self.check(key, expected)?;
        match std::fs::remove_file(&path) {
            Ok(()) => {
                // Folders left empty go too (up to the root): a removed node leaves
                // nothing that would list as an implicit group.
                let mut dir = path.parent();
                while let Some(d) = dir.filter(|d| *d != self.root()) {
                    if std::fs::remove_dir(d).is_err() {
                        break;
                    }
                    dir = d.parent();
                }
                sync_dir(key, dir.unwrap_or(self.root()))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_err(key, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (std::path::PathBuf, FolderStore) {
        let dir = std::env::temp_dir().join(format!(
            "zarrfs-folder-write-{}-{}",
            std::process::id(),
            NEXT_TEMP.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let s = FolderStore::open(&dir).unwrap();
        (dir, s)
    }

    #[test]
    fn a_put_replaces_the_value_whole_and_leaves_no_temporary_file() {
        let (dir, s) = store();
        s.put("a/c/0/0", b"first", &Expected::Absent).unwrap();
        let v = s.read("a/c/0/0", None).unwrap().unwrap();
        assert_eq!(v.bytes, b"first");
        s.put("a/c/0/0", b"second!", &Expected::At(v.version))
            .unwrap();
        assert_eq!(s.read("a/c/0/0", None).unwrap().unwrap().bytes, b"second!");
        let names: Vec<_> = std::fs::read_dir(dir.join("a/c/0"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("0")]);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_value_changed_since_it_was_read_is_not_overwritten() {
        let (dir, s) = store();
        s.put("k", b"one", &Expected::Absent).unwrap();
        let read = s.read("k", None).unwrap().unwrap().version;
        std::fs::write(dir.join("k"), b"other writer").unwrap();
        let e = s
            .put("k", b"mine", &Expected::At(read.clone()))
            .unwrap_err();
        assert!(matches!(e, Error::Conflict { .. }), "{e}");
        assert_eq!(std::fs::read(dir.join("k")).unwrap(), b"other writer");
        let e = s.put("k", b"mine", &Expected::Absent).unwrap_err();
        assert!(matches!(e, Error::Conflict { .. }), "{e}");
        let e = s.delete("k", &Expected::At(read)).unwrap_err();
        assert!(matches!(e, Error::Conflict { .. }), "{e}");
        let now = s.head("k").unwrap().unwrap().version;
        s.delete("k", &Expected::At(now)).unwrap();
        assert!(s.head("k").unwrap().is_none());
        s.delete("k", &Expected::Absent).unwrap();
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_key_that_leaves_the_root_is_refused() {
        let (dir, s) = store();
        let outside = std::env::temp_dir().join(format!("zarrfs-outside-{}", std::process::id()));
        std::fs::create_dir_all(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, dir.join("out")).unwrap();
        assert!(s.put("out/k", b"x", &Expected::Absent).is_err());
        assert!(!outside.join("k").exists());
        assert!(s.put("../k", b"x", &Expected::Absent).is_err());
        std::fs::remove_dir_all(dir).unwrap();
        std::fs::remove_dir_all(outside).unwrap();
    }
}
