//! Where materialized copies live: unnamed files on a private tmpfs, mounted with huge
//! pages, which the kernel reads in 2 MiB folios (as fast as a page-cached disk file; a
//! memfd is read in 4 KiB pages at about half that). On a virtual machine that hands
//! free memory back to its host (virtio-balloon free page reporting), free blocks of
//! 2 MiB are exactly what is handed back, and each huge page then costs a host fault per
//! 4 KiB to fill: there the tmpfs takes 4 KiB pages, which fill about 15 times faster.
//! The tmpfs is detached right after it is mounted, so nothing else sees it and it goes
//! away with the daemon's last file. Where it cannot be mounted, the copies are memfds.
//! Both take `O_DIRECT` readers at any offset and length, which the kernel hands on to
//! them through passthrough.

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
        let huge = if reports_free_pages(Path::new(SYSFS_BALLOONS)) {
            log::info!(
                "materialize: copies in 4 KiB pages: this machine reports free memory to its \
                 hypervisor, and a huge page taken from it costs a host fault per 4 KiB"
            );
            false
        } else {
            true
        };
        match mount_detached(&place, budget, huge) {
            Ok(dir) => Backings { dir: Some(dir) },
            Err(e) => {
                log::info!("materialize: copies in memfds (4 KiB pages): tmpfs: {e}");
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

/// Mount a tmpfs (in huge pages when `huge`, else in 4 KiB pages) on a new directory
/// at `place`, keep a handle on its root, detach it and remove the directory.
fn mount_detached(place: &Path, budget: u64, huge: bool) -> io::Result<File> {
    std::fs::DirBuilder::new().mode(0o700).create(place)?;
    let result = mount_and_open(place, budget, huge);
    let _ = std::fs::remove_dir(place);
    result
}

fn mount_and_open(place: &Path, budget: u64, huge: bool) -> io::Result<File> {
    let target = CString::new(place.as_os_str().as_bytes())?;
    // Room for the budget, and for copies the kernel still holds after they were dropped.
    let size = budget.saturating_mul(2).max(64 << 20);
    let pages = if huge { "within_size" } else { "never" };
    let data = CString::new(format!("huge={pages},mode=0700,size={size}"))?;
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

/// Where the kernel lists virtio-balloon devices.
const SYSFS_BALLOONS: &str = "/sys/bus/virtio/drivers/virtio_balloon";

/// The virtio-balloon feature bit of free page reporting (`VIRTIO_BALLOON_F_REPORTING`).
const FREE_PAGE_REPORTING: usize = 5;

/// Whether a virtio-balloon device under `balloons` (its sysfs driver folder) has free
/// page reporting on: each device's `features` file is one `0`/`1` per feature bit,
/// bit 0 first.
fn reports_free_pages(balloons: &Path) -> bool {
    let Ok(devices) = std::fs::read_dir(balloons) else {
        return false;
    };
    devices.flatten().any(|device| {
        std::fs::read(device.path().join("features"))
            .is_ok_and(|bits| bits.get(FREE_PAGE_REPORTING) == Some(&b'1'))
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_page_reporting_is_read_from_each_balloon_device_features() {
        let root = std::env::temp_dir().join(format!("zarrfs-balloons-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        assert!(!reports_free_pages(&root), "no balloon driver");
        std::fs::create_dir_all(root.join("virtio0")).unwrap();
        // Not a device: the driver folder also holds files such as `bind`.
        std::fs::write(root.join("bind"), "").unwrap();
        assert!(!reports_free_pages(&root), "a device without features");
        std::fs::write(root.join("virtio0/features"), "0110000100000000\n").unwrap();
        assert!(!reports_free_pages(&root), "bit 5 off");
        std::fs::create_dir_all(root.join("virtio1")).unwrap();
        std::fs::write(root.join("virtio1/features"), "0110010100000000\n").unwrap();
        assert!(reports_free_pages(&root), "bit 5 on in a second device");
        std::fs::write(root.join("virtio1/features"), "01100").unwrap();
        assert!(!reports_free_pages(&root), "too short to say");
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// Both kinds of tmpfs mount (the tests run as root) and hold what is written.
    #[test]
    fn copies_in_huge_and_small_pages_keep_their_bytes() {
        use std::os::unix::fs::FileExt;
        for huge in [true, false] {
            let place = std::env::temp_dir()
                .join(format!("zarrfs-copies-test-{}-{huge}", std::process::id()));
            let dir = mount_detached(&place, 64 << 20, huge)
                .unwrap_or_else(|e| panic!("tmpfs with huge pages {huge}: {e}"));
            assert!(!place.exists(), "the mount point is removed once detached");
            let file = tmpfile_in(&dir).unwrap();
            let bytes: Vec<u8> = (0..(5 << 20) + 7).map(|i| (i % 251) as u8).collect();
            file.set_len(bytes.len() as u64).unwrap();
            // Written as reads are served: out of order, in pieces.
            let (head, tail) = bytes.split_at(3 << 20);
            file.write_all_at(tail, head.len() as u64).unwrap();
            file.write_all_at(head, 0).unwrap();
            let mut back = vec![0u8; bytes.len()];
            file.read_exact_at(&mut back, 0).unwrap();
            assert!(back == bytes, "huge pages {huge}: bytes differ");
        }
    }
}
