//! A mount made by someone else: `zarrfs mount STORE /dev/fd/N` serves the FUSE connection
//! whose `/dev/fuse` descriptor N it inherited (libfuse's convention, as `mount.fuse3`,
//! meta-fuse-csi-plugin and gcsfuse's CSI sidecar use it), so that a process without
//! `CAP_SYS_ADMIN` serves a mount a privileged helper made. Who may use the mount is what
//! the helper's mount options say: the kernel checks it.

use std::os::fd::{BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;

use crate::{Error, Result};

/// `/dev/fuse`'s device number: character device 10, 229.
const FUSE_MAJOR: u32 = 10;
const FUSE_MINOR: u32 = 229;

/// The descriptor number a mountpoint `/dev/fd/N` names, if it is one.
pub fn number(mountpoint: &Path) -> Option<RawFd> {
    let rest = mountpoint.to_str()?.strip_prefix("/dev/fd/")?;
    if rest.is_empty() || !rest.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    rest.parse().ok()
}

/// Whether this process can open `/dev/fuse` itself (to clone a connection's descriptor
/// for each request loop).
pub fn device_openable() -> bool {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")
        .is_ok()
}

/// Check that descriptor `fd` is open on `/dev/fuse`: anything else (a closed number, a
/// file, another device) fails before the daemon starts.
pub fn check(fd: RawFd) -> Result<()> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: fstat writes a stat of any number it is given, or fails with EBADF.
    if unsafe { libc::fstat(fd, st.as_mut_ptr()) } != 0 {
        return Err(Error::startup_from(
            format_args!("/dev/fd/{fd}"),
            std::io::Error::last_os_error(),
        ));
    }
    // SAFETY: fstat succeeded, so it filled the struct.
    let st = unsafe { st.assume_init() };
    let is_char = st.st_mode & libc::S_IFMT == libc::S_IFCHR;
    if !is_char || libc::major(st.st_rdev) != FUSE_MAJOR || libc::minor(st.st_rdev) != FUSE_MINOR {
        return Err(Error::startup(format!(
            "/dev/fd/{fd}: not a /dev/fuse descriptor (a helper that mounts opens /dev/fuse, \
             mounts it with fd={fd} and starts zarrfs with the descriptor open)"
        )));
    }
    Ok(())
}

/// The session's own copy of descriptor `fd` (close-on-exec), which [`check`] passed.
pub fn take(fd: RawFd) -> Result<OwnedFd> {
    // SAFETY: `fd` is open (checked) and stays open while it is borrowed here; the copy
    // is a new descriptor that the OwnedFd owns alone.
    let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
    let copy = borrowed
        .try_clone_to_owned()
        .map_err(|e| Error::startup_from(format_args!("/dev/fd/{fd}"), e))?;
    // The inherited number is closed: only the session holds the connection, so it ends
    // when the session does.
    // SAFETY: `fd` is the inherited descriptor, no longer used once copied.
    drop(unsafe { OwnedFd::from_raw_fd(fd) });
    Ok(copy)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptor_mountpoints() {
        assert_eq!(number(Path::new("/dev/fd/3")), Some(3));
        assert_eq!(number(Path::new("/dev/fd/17")), Some(17));
        assert_eq!(number(Path::new("/dev/fd/")), None);
        assert_eq!(number(Path::new("/dev/fd/-1")), None);
        assert_eq!(number(Path::new("/dev/fd/3/x")), None);
        assert_eq!(number(Path::new("/mnt/fd/3")), None);
        assert_eq!(number(Path::new("/dev/fd/99999999999999999999")), None);
    }

    #[test]
    fn only_a_fuse_descriptor_passes() {
        let file = std::fs::File::open("/proc/self/status").expect("open");
        use std::os::fd::AsRawFd;
        let err = check(file.as_raw_fd()).expect_err("a file is no /dev/fuse");
        assert!(
            err.to_string().contains("not a /dev/fuse descriptor"),
            "{err}"
        );
        assert!(check(987_654).is_err(), "a closed number passed");
    }
}
