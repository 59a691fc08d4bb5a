//! Where materialized copies live: unnamed files on a private tmpfs mounted with huge
//! pages, which the kernel reads in 2 MiB folios (as fast as a page-cached disk file; a
//! memfd is read in 4 KiB pages at about half that). The tmpfs is detached right after
//! it is mounted, so nothing else sees it and it goes away with the daemon's last file.
//! Where it cannot be mounted, the copies are memfds. Both take `O_DIRECT` readers at any
//! offset and length, which the kernel hands on to them through passthrough.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::FromRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;

/// The directory new copies are created in, or none (memfds).
pub struct Backings {
    dir: Option<File>,
}

impl Backings {
    /// Mount the tmpfs for copies of at most `budget` bytes together, or fall back to
    /// memfds, saying why once.
    pub fn new(budget: u64) -> Backings {
        let place = std::env::temp_dir().join(format!("zarrfs-copies-{}", std::process::id()));
        match mount_detached(&place, budget) {
            Ok(dir) => Backings { dir: Some(dir) },
            Err(e) => {
                log::info!("materialize: copies in memfds (4 KiB pages): huge-page tmpfs: {e}");
                Backings { dir: None }
            }
        }
    }

    /// A new, empty, unnamed file.
    pub fn create(&self) -> io::Result<File> {
        match &self.dir {
            Some(dir) => tmpfile_in(dir),
            None => memfd(),
        }
    }
}

/// Mount a huge-page tmpfs on a new directory at `place`, keep a handle on its root,
/// detach it and remove the directory.
fn mount_detached(place: &Path, budget: u64) -> io::Result<File> {
    std::fs::DirBuilder::new().mode(0o700).create(place)?;
    let result = mount_and_open(place, budget);
    let _ = std::fs::remove_dir(place);
    result
}

fn mount_and_open(place: &Path, budget: u64) -> io::Result<File> {
    let target = CString::new(place.as_os_str().as_bytes())?;
    // Room for the budget, and for copies the kernel still holds after they were dropped.
    let size = budget.saturating_mul(2).max(64 << 20);
    let data = CString::new(format!("huge=within_size,mode=0700,size={size}"))?;
    let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    // SAFETY: valid C strings for the duration of the call; the result is checked.
    let rc = unsafe {
        libc::mount(
            c"zarrfs".as_ptr(),
            target.as_ptr(),
            c"tmpfs".as_ptr(),
            flags,
            data.as_ptr().cast(),
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let dir = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY)
        .open(place);
    // SAFETY: a valid C string; detaching leaves the open root usable.
    let detached = unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
    let dir = dir?;
    if detached != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(dir)
}

/// An unnamed file in `dir`, gone when its last descriptor closes.
fn tmpfile_in(dir: &File) -> io::Result<File> {
    use std::os::fd::AsRawFd;
    // SAFETY: a valid directory descriptor and C string; the result is checked.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            c".".as_ptr(),
            libc::O_TMPFILE | libc::O_RDWR | libc::O_CLOEXEC,
            0o600,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor that nothing else owns.
    Ok(unsafe { File::from_raw_fd(fd) })
}

fn memfd() -> io::Result<File> {
    // SAFETY: a name and flags; the result is checked.
    let fd = unsafe { libc::memfd_create(c"zarrfs".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor that nothing else owns.
    Ok(unsafe { File::from_raw_fd(fd) })
}
