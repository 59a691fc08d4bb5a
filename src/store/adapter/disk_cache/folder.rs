//! The cache's folder on disk: the names of entries, the listing of what the folder
//! holds, the temporary files ended processes left, lock files, and the `.used` count of
//! the bytes the entries take.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use sha2::{Digest, Sha256};

use super::USED;
use crate::error::Error;

pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub(super) fn io(path: &Path, source: std::io::Error) -> Error {
    Error::Io {
        key: path.display().to_string(),
        source,
    }
}

/// Every file of an entry under `root`, temporary ones (being written) included, with its
/// size and modification time.
pub(super) fn entries(root: &Path) -> Vec<(PathBuf, u64, SystemTime)> {
    let mut out = Vec::new();
    let Ok(stores) = std::fs::read_dir(root) else {
        return out;
    };
    for store in stores.flatten() {
        let Ok(files) = std::fs::read_dir(store.path()) else {
            continue;
        };
        for file in files.flatten() {
            let Ok(meta) = file.metadata() else { continue };
            if meta.is_file() {
                let time = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
                out.push((file.path(), meta.len(), time));
            }
        }
    }
    out
}

/// Remove the temporary files of processes that no longer run (killed while writing an
/// entry) from every store folder under `root`.
pub(super) fn remove_orphans(root: &Path) {
    let Ok(stores) = std::fs::read_dir(root) else {
        return;
    };
    for store in stores.flatten() {
        let Ok(files) = std::fs::read_dir(store.path()) else {
            continue;
        };
        for file in files.flatten() {
            let name = file.file_name();
            let Some(pid) = name
                .to_str()
                .and_then(|n| n.strip_prefix(".tmp-"))
                .and_then(|rest| rest.split('-').next())
                .and_then(|pid| pid.parse::<u32>().ok())
            else {
                continue;
            };
            // This process has written none yet: one of its number is a dead one's.
            let gone = pid == std::process::id() || !Path::new(&format!("/proc/{pid}")).exists();
            if gone && std::fs::remove_file(file.path()).is_ok() {
                log::debug!(
                    "disk cache: removed {} of a process that ended",
                    file.path().display()
                );
            }
        }
    }
}

/// `path` (created) with an exclusive lock on it, held until the file is dropped; `None`
/// when it cannot be opened. Where the folder's file system has no locks, the file is
/// handed back unlocked (at worst an entry is fetched twice, or the count is off until
/// it is made again).
pub(super) fn lock_file(path: &Path) -> Option<File> {
    let file = File::options()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(path)
        .map_err(|e| log::debug!("disk cache lock {}: {e}", path.display()))
        .ok()?;
    if let Err(e) = file.lock() {
        log::debug!("disk cache lock {}: {e}", path.display());
    }
    Some(file)
}

/// The folder's count of the bytes its entries take (temporary files included), from its
/// `.used` file, locked while this lives.
pub(super) struct Count(File);

impl Count {
    /// The count of folder `root`, locked (waiting while another process holds it).
    pub(super) fn lock(root: &Path) -> Option<Count> {
        lock_file(&root.join(USED)).map(Count)
    }

    /// The count kept, or one made from the folder when none is.
    pub(super) fn get(&self, root: &Path) -> u64 {
        let mut bytes = [0u8; 8];
        match self.0.read_exact_at(&mut bytes, 0) {
            Ok(()) => u64::from_le_bytes(bytes),
            Err(_) => entries(root).iter().map(|e| e.1).sum(),
        }
    }

    pub(super) fn set(&self, used: u64) {
        if let Err(e) = self.0.write_all_at(&used.to_le_bytes(), 0) {
            log::debug!("disk cache count: {e}");
        }
    }
}

/// The name of the entry of `parts` (a key, a range, a version) in `dir`.
pub(super) fn entry_in(dir: &Path, parts: &[&str]) -> PathBuf {
    let mut h = Sha256::new();
    for part in parts {
        h.update(part.as_bytes());
        h.update([0]);
    }
    dir.join(hex(&h.finalize()[..20]))
}
