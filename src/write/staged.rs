//! The bytes written to one array's file and not yet in its store: a sparse file in the
//! staging folder at the offsets they were written at, and the ranges written. Reads of
//! the file lay them over what the store holds; a commit takes them into the store's
//! chunks and then drops the ranges it took. Writes and commits of one array take turns
//! ([`Staged::turn`]); reads never wait for a commit.

use std::fs::File;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use parking_lot::{Mutex, MutexGuard};
use rangemap::RangeSet;

use crate::error::{Error, Result};

/// One array's staged writes.
pub struct Staged {
    /// The array's node path.
    path: String,
    /// The staging file and where it is; the array file's bytes start at `base` in it.
    file: File,
    at: PathBuf,
    base: u64,
    /// Whether the staging file is this staging's own (removed, and emptied once all is
    /// committed); a file it reads only (`zarrfs write --from FILE`) is left as it is.
    owned: bool,
    /// The file's size now: a write past the end or a truncate changes it.
    size: Mutex<u64>,
    /// The size the store's array has (at the start, and after each commit).
    stored_size: Mutex<u64>,
    written: Mutex<RangeSet<u64>>,
    /// Held by a write or a commit of this array.
    turn: Mutex<()>,
    /// The last commit found a value another writer changed: the last close does not
    /// try again on its own (a close or fsync that the writer makes does).
    conflicted: std::sync::atomic::AtomicBool,
}

/// The largest file an array may grow to through writes (1 PiB).
pub(super) const MAX_FILE: u64 = 1 << 50;

/// A staging file's I/O error: `ENOSPC` as [`Error::NoSpace`], naming where it is.
pub(super) fn staging_error(at: &Path, source: std::io::Error) -> Error {
    let at = at.display().to_string();
    if source.raw_os_error() == Some(libc::ENOSPC) {
        Error::NoSpace { at, source }
    } else {
        Error::Io { key: at, source }
    }
}

impl Staged {
    /// Staging for the file of the array at `path`, `size` bytes, in a new file `at`.
    pub fn create(path: &str, size: u64, at: PathBuf) -> Result<Staged> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&at)
            .map_err(|e| staging_error(&at, e))?;
        Ok(Staged::adopt(path, file, at, 0, size, RangeSet::new()))
    }

    /// Staging over `file` (at `at`), whose bytes from `base` on are the file of the
    /// array at `path`, `size` bytes, of which `written` were written (a new array's
    /// `.npy`, its header before `base`).
    pub fn adopt(
        path: &str,
        file: File,
        at: PathBuf,
        base: u64,
        size: u64,
        written: RangeSet<u64>,
    ) -> Staged {
        Staged {
            path: path.to_string(),
            file,
            at,
            base,
            owned: true,
            size: Mutex::new(size),
            stored_size: Mutex::new(size),
            written: Mutex::new(written),
            turn: Mutex::new(()),
            conflicted: Default::default(),
        }
    }

    /// Staging that reads a whole array file from `file` (at `at`), `size` bytes, all of
    /// them written, and never changes or removes it.
    pub fn reading(path: &str, file: File, at: PathBuf, size: u64) -> Staged {
        let mut written = RangeSet::new();
        if size > 0 {
            written.insert(0..size);
        }
        let mut staged = Staged::adopt(path, file, at, 0, size, written);
        staged.owned = false;
        staged
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    /// Whether the last commit found a value another writer changed (see
    /// [`Staged::set_conflicted`]).
    pub fn conflicted(&self) -> bool {
        self.conflicted.load(std::sync::atomic::Ordering::Acquire)
    }

    pub fn set_conflicted(&self, on: bool) {
        self.conflicted
            .store(on, std::sync::atomic::Ordering::Release)
    }

    /// Run `commit` of these writes in the array's turn. Commits take turns (a close
    /// races an `fsync`, or the flush of a descriptor a forked child closed): each one
    /// is refused (see [`Staged::refusal`]) when the one before met another writer's
    /// change, and says whether it met one before the next one starts.
    pub fn commit_in_turn<T>(&self, commit: impl FnOnce() -> Result<T>) -> Result<T> {
        let _turn = self.turn();
        if let Some(refused) = self.refusal() {
            return Err(refused);
        }
        let result = commit();
        match &result {
            Ok(_) => self.set_conflicted(false),
            Err(Error::Conflict { .. }) => self.set_conflicted(true),
            Err(_) => {}
        }
        result
    }

    /// The refusal of a commit of these writes after an earlier one met another
    /// writer's change: not tried again through the file that was told (another
    /// writer's value is not patched over unasked); an open for writing of the array
    /// tries again.
    pub fn refusal(&self) -> Option<Error> {
        self.conflicted().then(|| Error::Conflict {
            key: format!("/{}", self.path),
            reason: format!(
                "an earlier commit of these writes met another writer's change; they stay \
                 in {} until the array is opened for writing again",
                self.at.display()
            ),
        })
    }

    /// The file's size now.
    pub fn size(&self) -> u64 {
        *self.size.lock()
    }

    /// Make the file `size` bytes (the caller holds the turn): bytes past a smaller size
    /// are gone, a larger one reads as fill value until written.
    pub fn set_size(&self, size: u64) -> Result<()> {
        if !self.owned && size != self.size() {
            return Err(Error::ReadOnly);
        }
        if size > MAX_FILE {
            return Err(Error::BadWrite(format!(
                "/{}: {size} bytes is larger than an array file can grow",
                self.path
            )));
        }
        let mut now = self.size.lock();
        if size < *now {
            self.written.lock().remove(size..u64::MAX);
            self.file
                .set_len(self.base + size)
                .map_err(|e| staging_error(&self.at, e))?;
        }
        *now = size;
        Ok(())
    }

    /// Where the staged bytes are (named in the log when a commit fails).
    pub fn file_path(&self) -> &Path {
        &self.at
    }

    /// Wait for the array's writes and commits to take turns with this one.
    pub fn turn(&self) -> MutexGuard<'_, ()> {
        self.turn.lock()
    }

    /// Stage `data` at `offset` (the caller holds the turn). With `grow`, a write past
    /// the end makes the file longer; without, it fails whole.
    pub fn write(&self, offset: u64, data: &[u8], grow: bool) -> Result<()> {
        if !self.owned {
            return Err(Error::ReadOnly);
        }
        let size = self.size();
        let end = offset
            .checked_add(data.len() as u64)
            .filter(|end| *end <= size || (grow && *end <= MAX_FILE))
            .ok_or_else(|| {
                Error::BadWrite(format!(
                    "/{}: a write of {} bytes at {offset} passes the end of the file ({size} bytes)",
                    self.path,
                    data.len(),
                ))
            })?;
        if data.is_empty() {
            return Ok(());
        }
        self.file
            .write_all_at(data, self.base + offset)
            .map_err(|e| staging_error(&self.at, e))?;
        self.written.lock().insert(offset..end);
        let mut size = self.size.lock();
        *size = (*size).max(end);
        Ok(())
    }

    /// The ranges written and not yet committed.
    pub fn ranges(&self) -> Vec<Range<u64>> {
        self.written.lock().iter().cloned().collect()
    }

    /// Whether anything is staged: bytes, or a size the store's array does not have.
    pub fn is_empty(&self) -> bool {
        self.written.lock().is_empty() && self.size() == *self.stored_size.lock()
    }

    /// Whether bytes `range` were all written.
    pub fn covers(&self, range: Range<u64>) -> bool {
        range.is_empty() || self.written.lock().gaps(&range).next().is_none()
    }

    /// Read staged bytes `[offset, offset + buf.len())` (within ranges written).
    pub fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.file
            .read_exact_at(buf, self.base + offset)
            .map_err(|e| staging_error(&self.at, e))
    }

    /// Lay the staged bytes of `[offset, offset + buf.len())` over `buf`.
    pub fn overlay(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let end = offset.saturating_add(buf.len() as u64);
        if buf.is_empty() {
            return Ok(());
        }
        let over: Vec<Range<u64>> = self
            .written
            .lock()
            .overlapping(offset..end)
            .cloned()
            .collect();
        for r in over {
            let (a, b) = (r.start.max(offset), r.end.min(end));
            self.read_at(a, &mut buf[(a - offset) as usize..(b - offset) as usize])?;
        }
        Ok(())
    }

    /// The ranges `taken` are in the store now: reads no longer lay them over it.
    pub fn committed(&self, taken: &[Range<u64>]) {
        *self.stored_size.lock() = self.size();
        let mut written = self.written.lock();
        for r in taken {
            written.remove(r.clone());
        }
        if written.is_empty() && self.owned {
            // The space of the staged bytes goes back to the system.
            let _ = self.file.set_len(0);
        }
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        if self.is_empty() {
            let _ = std::fs::remove_file(&self.at);
            super::Writes::forget_note(&self.at);
        } else {
            log::warn!(
                "/{}: staged writes not committed are kept in {}",
                self.path,
                self.at.display()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn staged_bytes_lie_over_a_read_and_leave_once_committed() {
        let dir = std::env::temp_dir().join(format!("zarrfs-staged-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let at = dir.join("a.staged");
        let s = Staged::create("g/a", 100, at.clone()).unwrap();
        s.write(10, b"abcd", false).unwrap();
        s.write(12, b"XYZ", false).unwrap();
        s.write(50, b"q", false).unwrap();
        assert_eq!(s.ranges(), vec![10..15, 50..51]);
        let mut buf = vec![b'.'; 10];
        s.overlay(8, &mut buf).unwrap();
        assert_eq!(&buf, b"..abXYZ...");
        assert!(matches!(
            s.write(98, b"abc", false),
            Err(Error::BadWrite(_))
        ));
        assert!(matches!(
            s.write(u64::MAX, b"a", true),
            Err(Error::BadWrite(_))
        ));
        assert_eq!(s.size(), 100);
        s.write(98, b"abc", true).unwrap();
        assert_eq!(s.size(), 101);
        assert!(s.covers(98..101) && !s.covers(97..101));
        s.set_size(99).unwrap();
        assert_eq!((s.size(), s.ranges().last().cloned()), (99, Some(98..99)));
        s.set_size(100).unwrap();
        let tail = 98..99;
        s.committed(std::slice::from_ref(&tail));
        let first = 10..15;
        s.committed(std::slice::from_ref(&first));
        let mut buf = vec![b'.'; 10];
        s.overlay(8, &mut buf).unwrap();
        assert_eq!(&buf, b"..........");
        assert!(!s.is_empty());
        let second = 50..51;
        s.committed(std::slice::from_ref(&second));
        assert!(s.is_empty());
        drop(s);
        assert!(!at.exists(), "an empty staging file goes with its array");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_file_only_read_is_never_changed_or_removed() {
        let dir = std::env::temp_dir().join(format!("zarrfs-staged-r-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let at = dir.join("input.raw");
        std::fs::write(&at, b"0123456789").unwrap();
        let file = File::open(&at).unwrap();
        let s = Staged::reading("a", file, at.clone(), 10);
        assert_eq!(s.ranges(), vec![0..10]);
        assert!(matches!(s.write(0, b"x", false), Err(Error::ReadOnly)));
        assert!(matches!(s.set_size(4), Err(Error::ReadOnly)));
        let all = 0..10;
        s.committed(std::slice::from_ref(&all));
        assert!(s.is_empty());
        drop(s);
        assert_eq!(std::fs::read(&at).unwrap(), b"0123456789");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
