//! A mount made by a privileged helper and served by zarrfs without privileges: the test
//! (root) opens `/dev/fuse` and mounts it itself (`fd=N`, owned by the user
//! `zarrfs-test`, `allow_other`), then starts `zarrfs mount STORE /dev/fd/N -f` as that
//! user with no capabilities at all (setpriv), the descriptor inherited. Every fixed-size
//! array of the v3 fixture store reads through it as zarr-python read it back; when the
//! helper unmounts, the daemon ends with success. A descriptor that is not `/dev/fuse` is
//! refused before anything starts. Mounts for real (root, /dev/fuse).

use crate::common;

use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::helper::{detach, mount_device, unmount};
use common::user::{id, open_to_all, USER};
use common::{copy_dir, fixtures_dir, sha256, zarrfs, Manifest, TempDir};

/// Arrays of the v3 store written with a codec zarrfs does not implement.
const UNSUPPORTED: [&str; 1] = ["codecs/numcodecs_jenkins_lookup3"];

/// The daemon, killed and the mount detached if the test ends early.
struct Daemon {
    child: Child,
    mountpoint: std::path::PathBuf,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        detach(&self.mountpoint);
    }
}

/// `command` started with descriptor `fd` left open across its exec (no close-on-exec),
/// as a helper hands it over.
fn inheriting(command: &mut Command, fd: i32) {
    // SAFETY: only fcntl, async-signal-safe, between fork and exec.
    unsafe {
        command.pre_exec(move || {
            if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// The status line `name` of /proc/PID/status.
fn status_line(pid: u32, name: &str) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .map(|v| v.trim().to_string())
        .unwrap_or_default()
}

#[test]
fn a_mount_made_by_root_is_served_by_a_normal_user_through_its_descriptor() {
    let (uid, gid) = (id("-u"), id("-g"));
    assert_ne!(uid, 0, "{USER} must not be root");
    let tmp = TempDir::new("descriptor");
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let store = tmp.path().join("v3");
    copy_dir(&fixtures_dir().join("v3"), &store);
    open_to_all(&store);
    let bin = tmp.path().join("zarrfs");
    std::fs::copy(zarrfs(), &bin).expect("copy the binary");
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let mnt = tmp.path().join("mnt");
    std::fs::create_dir(&mnt).expect("mkdir");
    let log = tmp.path().join("zarrfs.log");
    std::fs::File::create(&log).expect("log file");
    std::os::unix::fs::chown(&log, Some(uid), Some(gid)).expect("chown the log");

    // The helper's part: open /dev/fuse and mount it.
    let device = mount_device(&mnt, uid, gid);
    let fd = device.as_raw_fd();

    // zarrfs as the user, without any capability, the descriptor inherited as it is.
    let mut command = Command::new("setpriv");
    command
        .arg(format!("--reuid={uid}"))
        .arg(format!("--regid={gid}"))
        .args([
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
            "--",
        ])
        .arg(&bin)
        .arg("mount")
        .arg(&store)
        .arg(format!("/dev/fd/{fd}"))
        .args(["-f", "--log-level", "info", "--log-file"])
        .arg(&log)
        .stdin(Stdio::null())
        .env_remove("RUST_LOG");
    inheriting(&mut command, fd);
    let child = command.spawn().expect("run setpriv (util-linux)");
    drop(device);
    let mut daemon = Daemon {
        child,
        mountpoint: mnt.clone(),
    };
    let pid = daemon.child.id();

    // Served once the root folder lists.
    let began = Instant::now();
    while std::fs::read_dir(&mnt).is_err() {
        if let Ok(Some(status)) = daemon.child.try_wait() {
            panic!(
                "the daemon ended ({status}): {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        assert!(
            began.elapsed() < Duration::from_secs(30),
            "the mount was not served within 30 s: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // setpriv has become zarrfs: the user's, with no capability.
    assert_eq!(
        status_line(pid, "Uid").split_whitespace().next(),
        Some(uid.to_string().as_str()),
        "the daemon does not run as {USER}"
    );
    assert_eq!(
        status_line(pid, "CapEff"),
        "0000000000000000",
        "the daemon has capabilities"
    );

    let manifest = Manifest::load();
    let mut failures = Vec::new();
    let mut read = 0;
    for entry in manifest.arrays() {
        let path = entry["path"].as_str().unwrap_or_default();
        if entry["store"] != "v3" || path.is_empty() || entry["vlen"] == true {
            continue;
        }
        if UNSUPPORTED.contains(&path) {
            continue;
        }
        match std::fs::read(mnt.join(path)) {
            Ok(bytes) if entry["sha256"]["C_little"] == sha256(&bytes).as_str() => read += 1,
            Ok(_) => failures.push(format!("{path}: other bytes than zarr-python's")),
            Err(e) => failures.push(format!("{path}: {e}")),
        }
    }
    common::assert_no_failures(&failures);
    assert!(read > 100, "only {read} arrays read");

    // The helper unmounts: the connection ends and so does the daemon, with success.
    unmount(&mnt);
    let began = Instant::now();
    let status = loop {
        if let Some(status) = daemon.child.try_wait().expect("wait") {
            break status;
        }
        assert!(
            began.elapsed() < Duration::from_secs(30),
            "the daemon did not end after the unmount"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(status.success(), "the daemon ended with {status}: {text}");
    assert!(!text.contains("ERROR"), "daemon log: {text}");
}

#[test]
fn a_descriptor_that_is_not_dev_fuse_is_refused() {
    let tmp = TempDir::new("descriptor-refused");
    let file = std::fs::File::create(tmp.path().join("not-fuse")).expect("file");
    let fd = file.as_raw_fd();
    let mut command = Command::new(zarrfs());
    command
        .arg("mount")
        .arg(fixtures_dir().join("v3"))
        .arg(format!("/dev/fd/{fd}"))
        .arg("-f");
    inheriting(&mut command, fd);
    let out = command.output().expect("run zarrfs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("/dev/fd/{fd}: not a /dev/fuse descriptor")),
        "{stderr}"
    );
    // A number no descriptor has.
    let out = Command::new(zarrfs())
        .arg("mount")
        .arg(fixtures_dir().join("v3"))
        .arg("/dev/fd/987654")
        .arg("-f")
        .output()
        .expect("run zarrfs");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("/dev/fd/987654"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
