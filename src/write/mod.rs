//! The write path of a writable mount (`--writable`): bytes written to an array's file
//! are staged on local disk ([`staged`]), read back over the store's bytes, and taken
//! into the store's chunks by a commit ([`commit`]) at each close or `fsync`, chunk by
//! chunk through the store's [`crate::store::write::Writer`] ([`patch`] maps the file's
//! bytes into a chunk). [`Writes`] keeps one staging per array being written.

pub mod commit;
pub mod patch;
pub mod reshape;
pub mod staged;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
pub use commit::{commit, encoder, Committed};
pub use staged::Staged;

/// The staged writes of one mount, by array node path.
pub struct Writes {
    dir: PathBuf,
    /// Each array's staging and how many handles write it.
    staged: Mutex<HashMap<String, (Arc<Staged>, usize)>>,
}

/// The staging folder of a daemon that was given none: private to it.
pub fn default_staging() -> PathBuf {
    std::env::temp_dir().join(format!("zarrfs-staging-{}", std::process::id()))
}

impl Writes {
    /// Staging in folder `dir` (made, private to its owner, when missing).
    pub fn new(dir: &Path) -> Result<Writes> {
        use std::os::unix::fs::DirBuilderExt;
        let made = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir);
        made.map_err(|source| Error::Io {
            key: dir.display().to_string(),
            source,
        })?;
        Ok(Writes {
            dir: dir.to_path_buf(),
            staged: Mutex::new(HashMap::new()),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A writer of the array at `path` (its file `size` bytes) opens: the array's
    /// staging, made at the first.
    pub fn open(&self, path: &str, size: u64) -> Result<Arc<Staged>> {
        let mut staged = self.staged.lock();
        if let Some((s, writers)) = staged.get_mut(path) {
            *writers += 1;
            return Ok(s.clone());
        }
        let name = hex(&Sha256::digest(path.as_bytes())[..12]);
        let at = self
            .dir
            .join(format!("{name}-{}.staged", std::process::id()));
        let s = Arc::new(Staged::create(path, size, at)?);
        staged.insert(path.to_string(), (s.clone(), 1));
        Ok(s)
    }

    /// A writer of the array at `path` is gone: its staging goes with the last one once
    /// nothing is left staged in it.
    pub fn close(&self, path: &str) {
        let mut staged = self.staged.lock();
        if let Some((s, writers)) = staged.get_mut(path) {
            *writers = writers.saturating_sub(1);
            if *writers == 0 && s.is_empty() {
                staged.remove(path);
            }
        }
    }

    /// The staging of the array at `path`, while it has one (reads lay it over the
    /// store's bytes).
    pub fn staged(&self, path: &str) -> Option<Arc<Staged>> {
        self.staged.lock().get(path).map(|(s, _)| s.clone())
    }

    /// Whether anything is being written.
    pub fn any(&self) -> bool {
        !self.staged.lock().is_empty()
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
