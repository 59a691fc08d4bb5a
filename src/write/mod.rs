//! The write path of a writable mount (`--writable`): bytes written to an array's file
//! are staged on local disk ([`staged`]), read back over the store's bytes, and taken
//! into the store's chunks by a commit ([`commit`]) at each close or `fsync`, chunk by
//! chunk through the store's [`crate::store::write::Writer`] ([`patch`] maps the file's
//! bytes into a chunk). [`Writes`] keeps one staging per array being written.

pub mod attributes;
pub mod commit;
pub mod fault;
pub mod new_array;
pub mod new_file;
pub mod nodes;
pub mod patch;
pub mod reshape;
pub mod staged;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
pub use commit::{commit, encoder, Committed};
pub use new_file::{NewFile, NewKind};
pub use staged::Staged;

/// The staged writes of one mount, by array node path.
pub struct Writes {
    dir: PathBuf,
    /// How long an open for writing waits for another writer of the same array.
    wait: Duration,
    /// Each array's staging and how many handles write it.
    staged: Mutex<HashMap<String, (Arc<Staged>, usize)>>,
    /// Told when a writer lets go of an array.
    released: Condvar,
    /// Stagings made so far.
    made: std::sync::atomic::AtomicU64,
}

/// The suffix of staging files, and of the note beside each naming its array.
const STAGED: &str = ".staged";
const NOTE: &str = ".array";

/// Whether a mount with `--writable` takes writes to the array of `meta` in `store`:
/// `Err` says why not (a store that takes no writes, variable-length elements, a codec
/// with no encoder).
pub fn writable(
    store: &dyn crate::store::Store,
    meta: &crate::metadata::ArrayMetadata,
) -> std::result::Result<(), String> {
    if store.writer().is_none() {
        return Err("the store takes no writes".into());
    }
    encoder(meta).map(|_| ()).map_err(|e| match e {
        Error::NotWritable { reason, .. } => reason,
        e => e.to_string(),
    })
}

/// The staging folder of a daemon that was given none: private to it.
pub fn default_staging() -> PathBuf {
    std::env::temp_dir().join(format!("zarrfs-staging-{}", std::process::id()))
}

impl Writes {
    /// Staging in folder `dir` (made, private to its owner, when missing); an open for
    /// writing waits up to `wait` for another writer of the same array. Staged writes
    /// left there by a daemon that ended without committing them are reported (once per
    /// mount, one line each) and left alone.
    pub fn new(dir: &Path, wait: Duration) -> Result<Writes> {
        use std::os::unix::fs::DirBuilderExt;
        let made = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir);
        made.map_err(|source| Error::Io {
            key: dir.display().to_string(),
            source,
        })?;
        for (file, array) in leftovers(dir) {
            log::warn!(
                "staged writes of an earlier daemon were never committed: {} (array /{array}); \
                 they are left as they are",
                file.display()
            );
        }
        Ok(Writes {
            dir: dir.to_path_buf(),
            wait,
            staged: Mutex::new(HashMap::new()),
            released: Condvar::new(),
            made: Default::default(),
        })
    }

    /// A writer of the array at `path` (its file `size` bytes) opens: the array's
    /// staging, made at the first. One writer at a time: another waits for it to close,
    /// up to the mount's wait, then fails with [`Error::Busy`].
    pub fn open(&self, path: &str, size: u64) -> Result<Arc<Staged>> {
        let deadline = Instant::now() + self.wait;
        let mut staged = self.staged.lock();
        loop {
            match staged.get_mut(path) {
                Some((s, writers)) if *writers == 0 => {
                    *writers = 1;
                    // A new writer carries on with what is staged, and commits it.
                    log::debug!("/{path}: a new writer carries on with its staged bytes");
                    s.set_conflicted(false);
                    return Ok(s.clone());
                }
                Some(_) => {
                    if self.released.wait_until(&mut staged, deadline).timed_out() {
                        return Err(Error::Busy(format!("/{path}")));
                    }
                }
                None => break,
            }
        }
        let stem = self.stem(path);
        let s = Arc::new(Staged::create(
            path,
            size,
            stem.with_extension(&STAGED[1..]),
        )?);
        staged.insert(path.to_string(), (s.clone(), 1));
        Ok(s)
    }

    /// Where the next staging of the array at `path` goes (without its extension), with
    /// a note of the array beside it for a report after a crash: named by the array, a
    /// count (a staging may outlive its entry here while its last handle goes) and the
    /// daemon's process id, last.
    fn stem(&self, path: &str) -> PathBuf {
        let name = hex(&Sha256::digest(path.as_bytes())[..12]);
        let n = self.made.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let stem = self.dir.join(format!("{name}-{n}-{}", std::process::id()));
        let note = stem.with_extension(&NOTE[1..]);
        if let Err(e) = std::fs::write(&note, path) {
            log::warn!("/{path}: staging note {}: {e}", note.display());
        }
        stem
    }

    /// A new file `name` that makes the array at `array` (see [`new_file`]), a `.npy`
    /// staged in this mount's staging folder.
    pub fn create(&self, array: &str, name: &str, kind: NewKind) -> Result<NewFile> {
        let at = self.stem(array).with_extension(&STAGED[1..]);
        NewFile::create(array, name, kind, at)
    }

    /// The note beside a staging file at `at` is no longer needed.
    pub fn forget_note(at: &Path) {
        let _ = std::fs::remove_file(at.with_extension(&NOTE[1..]));
    }

    /// A writer of the array at `path` is gone: its staging goes with it once nothing
    /// is left staged in it (what is left stays, for the next writer or commit).
    pub fn close(&self, path: &str) {
        let mut staged = self.staged.lock();
        if let Some((s, writers)) = staged.get_mut(path) {
            *writers = writers.saturating_sub(1);
            if *writers == 0 && s.is_empty() {
                let _ = std::fs::remove_file(s.file_path().with_extension(&NOTE[1..]));
                staged.remove(path);
            }
        }
        self.released.notify_all();
    }

    /// The staging of the array at `path`, while it has one (reads lay it over the
    /// store's bytes).
    pub fn staged(&self, path: &str) -> Option<Arc<Staged>> {
        self.staged.lock().get(path).map(|(s, _)| s.clone())
    }
}

/// Staging files in `dir` of daemons no longer running, with the array each names.
fn leftovers(dir: &Path) -> Vec<(PathBuf, String)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let file = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(stem) = name.strip_suffix(STAGED) else {
            continue;
        };
        let pid = stem.rsplit('-').next().and_then(|p| p.parse::<i32>().ok());
        // SAFETY: kill with signal 0 only asks whether the process exists.
        let running =
            pid.is_some_and(|p| p == std::process::id() as i32 || unsafe { libc::kill(p, 0) } == 0);
        if running {
            continue;
        }
        let array = std::fs::read_to_string(file.with_extension(&NOTE[1..]))
            .unwrap_or_else(|_| "(unknown)".into());
        out.push((file, array));
    }
    out.sort();
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
