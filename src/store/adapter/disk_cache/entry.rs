//! An entry's life: found on disk (a hit), fetched on a miss under its stripe's lock,
//! kept within the folder's budget (the oldest entries evicted first), and values kept
//! by their own names.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime};

use super::folder::{entries, entry_in, lock_file, Count};
use super::{Cache, LOW_WATER, NAMED, STRIPES};
use crate::error::Result;
use crate::store::{ByteRange, Head, Value, Version};

impl Cache {
    fn entry_path(&self, key: &str, range: Option<ByteRange>, version: &Version) -> PathBuf {
        let range = format!("{range:?}");
        entry_in(&self.dir, &[key, &range, &version.to_string()])
    }

    /// The cached value, refreshed as recently used. The whole file is asked of the
    /// disk at once, as a folder store reads a chunk: one large read, not a readahead
    /// window that starts small.
    fn hit(path: &Path) -> Option<Vec<u8>> {
        let f = File::open(path).ok()?;
        let len = f.metadata().ok()?.len();
        // SAFETY: advice on a descriptor we own; failure only loses the hint.
        unsafe {
            libc::posix_fadvise(
                std::os::fd::AsRawFd::as_raw_fd(&f),
                0,
                i64::try_from(len).unwrap_or(i64::MAX),
                libc::POSIX_FADV_WILLNEED,
            )
        };
        let bytes = crate::store::read_value(&path.to_string_lossy(), f, len).ok()?;
        if let Ok(f) = File::options().write(true).open(path) {
            let _ = f.set_modified(SystemTime::now());
        }
        Some(bytes)
    }

    /// Keep `bytes` at `path`: its temporary file made at its full length under the
    /// count's lock (old entries removed first when it would pass the budget), then
    /// written and renamed into place (a crash leaves no half entry). Failures only cost
    /// the entry (a full disk must not fail the read).
    fn keep(&self, path: &Path, bytes: &[u8]) {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let size = bytes.len() as u64;
        let Some(dir) = path.parent().filter(|_| size <= self.budget) else {
            return;
        };
        let tmp = dir.join(format!(
            ".tmp-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let make = || File::create(&tmp).and_then(|f| f.set_len(size).map(|_| f));
        let count = Count::lock(&self.root);
        let file = match &count {
            Some(count) => {
                let used = count.get(&self.root);
                let used = match used.checked_add(size) {
                    Some(after) if after <= self.budget => used,
                    _ => self.evict(size),
                };
                let file = make();
                count.set(used.saturating_add(if file.is_ok() { size } else { 0 }));
                file
            }
            None => make(),
        };
        let counted = count.is_some();
        drop(count);
        let written = file.and_then(|mut f| f.write_all(bytes));
        // Renamed under the count's lock too: a listing of the folder that meets a
        // rename may see neither name, and the count is made from such listings.
        let count = Count::lock(&self.root);
        if let Err(e) = written.and_then(|_| std::fs::rename(&tmp, path)) {
            let _ = std::fs::remove_file(&tmp);
            log::warn!("disk cache {}: {e}", path.display());
            if let Some(count) = count.filter(|_| counted) {
                count.set(count.get(&self.root).saturating_sub(size));
            }
        }
    }

    /// The lock a miss of the entry at `path` holds while it fetches: one of its store
    /// folder's [`STRIPES`], by the entry's name.
    fn fetch_lock(path: &Path) -> Option<File> {
        let name = path.file_name()?.to_str()?;
        let stripe = usize::from_str_radix(name.get(..4)?, 16).ok()? % STRIPES;
        let locks = path.parent()?.join(".locks");
        lock_file(&locks.join(format!("{stripe:04}")))
    }

    /// Remove the oldest entries until the folder has room for `room` more bytes under
    /// its low-water mark (the count's lock held): the bytes left in it. Temporary files
    /// (entries being written) are counted and left alone.
    fn evict(&self, room: u64) -> u64 {
        let mut all = entries(&self.root);
        all.sort_by_key(|e| e.2);
        let mut used: u64 = all.iter().map(|e| e.1).sum();
        let target = (self.budget / 100 * LOW_WATER).saturating_sub(room);
        for (path, size, _) in all {
            if used <= target {
                break;
            }
            let temporary = path
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(".tmp"));
            if !temporary && std::fs::remove_file(&path).is_ok() {
                used = used.saturating_sub(size);
            }
        }
        used
    }

    /// The value at `key` (or part of it), whose entry `path` (of version `version`)
    /// was missing: fetched under the entry's fetch lock unless another process kept it
    /// meanwhile, then kept at `file(version it came with)`, if any.
    fn fetch(
        &self,
        key: &str,
        range: Option<ByteRange>,
        (path, version): (&Path, &Version),
        file: impl Fn(&Version) -> Option<PathBuf>,
    ) -> Result<Option<Value>> {
        // One fetch of the entry at a time, across processes: whoever waited here finds
        // what the one before it kept.
        let _fetching = Self::fetch_lock(path);
        if let Some(bytes) = Self::hit(path) {
            return Ok(Some(Value {
                bytes,
                version: version.clone(),
            }));
        }
        let got = self.inner.read(key, range)?;
        if let Some(value) = &got {
            if let Some(to) = file(&value.version) {
                self.keep(&to, &value.bytes);
            }
        }
        Ok(got)
    }

    /// A value that never changes, known by `name` wherever it is stored: kept in the
    /// folder's named store under that name, with no version asked for.
    pub(super) fn named(
        &self,
        key: &str,
        range: Option<ByteRange>,
        name: &str,
    ) -> Result<Option<Value>> {
        let range_name = format!("{range:?}");
        let path = entry_in(&self.root.join(NAMED), &[name, &range_name]);
        if let Some(bytes) = Self::hit(&path) {
            return Ok(Some(Value {
                bytes,
                version: Version::Unknown,
            }));
        }
        self.fetch(key, range, (&path, &Version::Unknown), |_| {
            Some(path.clone())
        })
    }

    pub(super) fn cached(
        &self,
        key: &str,
        range: Option<ByteRange>,
        since: Option<Instant>,
    ) -> Result<Option<Value>> {
        let tag = match self.head(key, since)? {
            None => return Ok(None),
            Some(Head { version, .. }) if version.is_known() => version,
            Some(_) => return self.inner.read(key, range),
        };
        let path = self.entry_path(key, range, &tag);
        if let Some(bytes) = Self::hit(&path) {
            return Ok(Some(Value {
                bytes,
                version: tag,
            }));
        }
        self.fetch(key, range, (&path, &tag), |fetched| {
            // Filed under the version the bytes came with: when the object changed since
            // the HEAD, they are not the bytes of `tag`.
            if *fetched != tag {
                log::debug!("{key}: changed while read ({tag} before, {fetched} now)");
            }
            fetched
                .is_known()
                .then(|| self.entry_path(key, range, fetched))
        })
    }
}
