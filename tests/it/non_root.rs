//! A normal user mounts: as the system user `zarrfs-test` (scripts/test.sh creates it),
//! through the setuid fusermount3, with /dev/fuse mode 0666 (Debian's default; the test
//! sets it if it is not, and puts the old mode back). The user writes the demo store,
//! is told that allow_other needs user_allow_other, mounts, reads an array (sha256 equal
//! to root's `zarrfs cat`) and unmounts with `zarrfs umount`.

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use common::mount::{mounted, Unmount};
use common::user::{as_user, id, text, FuseDeviceMode, USER};
use common::{sha256, zarrfs, TempDir};

#[test]
fn a_normal_user_mounts_reads_and_unmounts_the_demo_store() {
    let (uid, gid) = (id("-u"), id("-g"));
    assert_ne!(uid, 0, "{USER} must not be root");
    let _mode = FuseDeviceMode::world_usable();
    // The binary under test where the user can run it; a folder the user owns.
    let tmp = TempDir::new("non-root");
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let bin = tmp.path().join("zarrfs");
    std::fs::copy(zarrfs(), &bin).expect("copy the binary");
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let home: PathBuf = tmp.path().join("home");
    std::fs::create_dir(&home).expect("mkdir");
    std::os::unix::fs::chown(&home, Some(uid), Some(gid)).expect("chown");

    let made = as_user(&home, &bin, &["demo", "demo.zarr"]);
    assert!(
        made.status.success(),
        "zarrfs demo as {USER}: {}",
        text(&made)
    );
    let made = as_user(&home, Path::new("mkdir"), &["mnt"]);
    assert!(made.status.success(), "mkdir as {USER}: {}", text(&made));
    let mp = home.join("mnt");
    let _unmount = Unmount(&mp);

    // allow_other: refused with the reason unless /etc/fuse.conf has user_allow_other.
    let conf = std::fs::read_to_string("/etc/fuse.conf").unwrap_or_default();
    let allowed = conf.lines().any(|l| l.trim() == "user_allow_other");
    let other = as_user(
        &home,
        &bin,
        &["mount", "demo.zarr", "mnt", "-o", "allow_other"],
    );
    if allowed {
        assert!(
            other.status.success(),
            "allow_other allowed: {}",
            text(&other)
        );
        let out = as_user(&home, &bin, &["umount", "mnt"]);
        assert!(out.status.success(), "{}", text(&out));
    } else {
        assert_eq!(other.status.code(), Some(1), "{}", text(&other));
        assert!(
            String::from_utf8_lossy(&other.stderr).contains("user_allow_other"),
            "the failure does not name user_allow_other: {}",
            text(&other)
        );
        assert!(!mounted(&mp), "mounted although allow_other was refused");
    }

    let mount = as_user(
        &home,
        &bin,
        &["mount", "demo.zarr", "mnt", "--log-file", "log"],
    );
    assert!(mount.status.success(), "mount as {USER}: {}", text(&mount));
    assert!(mounted(&mp), "not mounted");
    // The mount belongs to the user (made through fusermount3).
    let info = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    let line = info
        .lines()
        .find(|l| l.split(' ').nth(4) == Some(mp.to_str().expect("utf-8")))
        .expect("mount line");
    assert!(line.contains(&format!("user_id={uid}")), "{line}");

    let read = as_user(&home, Path::new("cat"), &["mnt/temperature"]);
    assert!(read.status.success(), "read as {USER}: {}", text(&read));
    let root = common::cat(&home.join("demo.zarr"), "temperature", &[]);
    assert_eq!(read.stdout.len(), root.len(), "size");
    assert_eq!(
        sha256(&read.stdout),
        sha256(&root),
        "bytes differ from root's cat"
    );

    let out = as_user(&home, &bin, &["umount", "mnt"]);
    assert!(
        out.status.success(),
        "zarrfs umount as {USER}: {}",
        text(&out)
    );
    assert!(!mounted(&mp), "still mounted after zarrfs umount");
    let log = std::fs::read_to_string(home.join("log")).unwrap_or_default();
    assert!(!log.contains("ERROR"), "daemon log: {log}");
}
