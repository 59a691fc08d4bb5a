//! mount(8) and fstab: `mount -t fuse.zarrfs STORE DIR -o OPTIONS` through Debian's
//! mount.fuse3 helper (which runs `zarrfs STORE DIR -o OPTIONS`), and an fstab line used
//! with `mount -T`, both serving F-order bytes equal to zarr-python's. Mounts for real
//! (root, /dev/fuse, the fuse3 package).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::fixtures::{arrays_of, check_arrays_at};
use common::mount::{assert_daemon_detached, mounted, Unmount};
use common::{zarrfs, Manifest, TempDir};

/// mount.fuse3 looks for `zarrfs` on its own PATH (/usr/local/bin among it): the binary
/// under test is linked there for the test's run; whatever was there before comes back
/// on drop.
struct LinkedBinary {
    link: PathBuf,
    saved: Option<PathBuf>,
}

impl LinkedBinary {
    fn new() -> LinkedBinary {
        let link = PathBuf::from("/usr/local/bin/zarrfs");
        let saved = link.symlink_metadata().is_ok().then(|| {
            let saved = PathBuf::from(format!(
                "/usr/local/bin/.zarrfs-before-test-{}",
                std::process::id()
            ));
            std::fs::rename(&link, &saved).expect("move the installed zarrfs aside");
            saved
        });
        std::os::unix::fs::symlink(zarrfs(), &link).expect("link zarrfs into /usr/local/bin");
        LinkedBinary { link, saved }
    }
}

impl Drop for LinkedBinary {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.link);
        if let Some(saved) = &self.saved {
            let _ = std::fs::rename(saved, &self.link);
        }
    }
}

/// Runs `command` with its output in a file, not a pipe: a daemon that kept the pipe
/// would make the test wait for ever instead of failing.
fn run(command: &mut Command, tmp: &TempDir) -> String {
    let out_file = tmp.path().join("command.out");
    let out = std::fs::File::create(&out_file).expect("output file");
    let err = out.try_clone().expect("output file");
    let status = command
        .stdin(std::process::Stdio::null())
        .stdout(out)
        .stderr(err)
        .status()
        .unwrap_or_else(|e| panic!("{command:?}: {e}"));
    let text = std::fs::read_to_string(&out_file).unwrap_or_default();
    assert!(status.success(), "{command:?} failed ({status}): {text}");
    text
}

/// Every fixed-size array of the v3 fixtures through the mount at `mp`, in F order.
fn check_f_order(m: &Manifest, mp: &Path, what: &str) {
    let failures = check_arrays_at(m, "v3", mp, "F_little", "F");
    assert!(failures.is_empty(), "{what}: {failures:#?}");
    assert!(arrays_of(m, "v3").len() > 10, "too few fixture arrays");
    let order = Command::new("getfattr")
        .args(["--only-values", "-n", "user.zarr.order"])
        .arg(mp.join(arrays_of(m, "v3")[0]["path"].as_str().expect("path")))
        .output()
        .expect("run getfattr (the attr package)");
    assert_eq!(
        String::from_utf8_lossy(&order.stdout),
        "F",
        "{what}: order xattr"
    );
}

#[test]
fn mount_t_fuse_zarrfs_and_an_fstab_line_mount_in_f_order() {
    assert!(
        Path::new("/usr/sbin/mount.fuse3").exists() || Path::new("/sbin/mount.fuse3").exists(),
        "mount.fuse3 is missing: install the fuse3 package (scripts/test.sh does)"
    );
    let m = Manifest::load();
    let _linked = LinkedBinary::new();
    let store = m.store_dir("v3");
    let tmp = TempDir::new("mount-helper");
    let mp = tmp.path().join("mnt");
    std::fs::create_dir(&mp).expect("mkdir");
    let log = tmp.path().join("zarrfs.log");

    // mount(8) -> mount.fuse3 -> `zarrfs STORE DIR -o ...`; _netdev and ro are mount(8)'s.
    let options = format!(
        "ro,order=F,cache_size=64MiB,_netdev,log_file={}",
        log.display()
    );
    {
        let _unmount = Unmount(&mp);
        run(
            Command::new("mount")
                .args(["-t", "fuse.zarrfs"])
                .arg(&store)
                .arg(&mp)
                .args(["-o", &options]),
            &tmp,
        );
        assert!(
            mounted(&mp),
            "mount -t fuse.zarrfs returned but nothing is mounted"
        );
        assert_daemon_detached(&mp);
        check_f_order(&m, &mp, "mount -t fuse.zarrfs");
        run(Command::new("umount").arg(&mp), &tmp);
        assert!(!mounted(&mp), "still mounted after umount");
    }

    // A temporary fstab line, with the options an fstab line for a remote store carries.
    let fstab = tmp.path().join("fstab");
    std::fs::write(
        &fstab,
        format!(
            "# zarrfs test\n{} {} fuse.zarrfs ro,order=F,cache_size=64MiB,nofail,_netdev,\
             x-systemd.automount,x-systemd.idle-timeout=60,log_file={} 0 0\n",
            store.display(),
            mp.display(),
            log.display()
        ),
    )
    .expect("write fstab");
    let _unmount = Unmount(&mp);
    run(Command::new("mount").arg("-T").arg(&fstab).arg(&mp), &tmp);
    assert!(
        mounted(&mp),
        "mount -T FSTAB DIR returned but nothing is mounted"
    );
    check_f_order(&m, &mp, "fstab line");
    run(Command::new("umount").arg(&mp), &tmp);
    assert!(!mounted(&mp), "still mounted after umount");
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(!text.contains("ERROR"), "daemon log: {text}");
}
