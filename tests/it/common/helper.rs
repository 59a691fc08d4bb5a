//! The privileged helper's part of a mount served on a descriptor (as a CSI driver or
//! `mount.fuse3` does it): open `/dev/fuse`, mount it for a user, and unmount it.

use std::ffi::CString;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;

use super::mount::mounted;

/// `/dev/fuse` opened and mounted (`mount -t fuse.zarrfs`, `fd=N`) at `mountpoint` for the
/// user `uid`/`gid`, read-only, with allow_other: the open device, whose descriptor the
/// server is to be given.
pub fn mount_device(mountpoint: &Path, uid: u32, gid: u32) -> File {
    let device = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")
        .expect("/dev/fuse is missing: mount tests need FUSE");
    let fd = device.as_raw_fd();
    let source = CString::new("zarrfs").expect("source");
    let target = c_path(mountpoint);
    let fstype = CString::new("fuse.zarrfs").expect("type");
    let data = CString::new(format!(
        "fd={fd},rootmode=40000,user_id={uid},group_id={gid},allow_other"
    ))
    .expect("data");
    // SAFETY: valid C strings; the data is the FUSE options string.
    let rc = unsafe {
        libc::mount(
            source.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_RDONLY,
            data.as_ptr().cast(),
        )
    };
    assert_eq!(
        rc,
        0,
        "mount of /dev/fuse at {}: {}",
        mountpoint.display(),
        std::io::Error::last_os_error()
    );
    assert!(mounted(mountpoint), "the helper's mount is not there");
    device
}

/// Unmount `mountpoint` as the helper does when it is done: the connection ends.
pub fn unmount(mountpoint: &Path) {
    let target = c_path(mountpoint);
    // SAFETY: a valid C string.
    let rc = unsafe { libc::umount2(target.as_ptr(), 0) };
    assert_eq!(rc, 0, "umount: {}", std::io::Error::last_os_error());
}

/// Detach `mountpoint` if it is still mounted (a test that ended early).
pub fn detach(mountpoint: &Path) {
    if mounted(mountpoint) {
        let target = c_path(mountpoint);
        // SAFETY: a valid C string.
        unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
    }
}

fn c_path(path: &Path) -> CString {
    CString::new(path.as_os_str().as_encoded_bytes()).expect("a path without NUL")
}
