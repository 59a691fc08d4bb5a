//! Where a background daemon's log goes: with `--log-file`, a corrupt chunk's log line
//! (naming the store key) lands in the file; without one, in syslog / the journal when
//! the machine has a syslog socket, and otherwise the daemon warns at startup that its
//! later log is discarded. Mounts for real (root and /dev/fuse).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::mount::{assert_daemon_detached, mounted, umount, wait_for, Unmount};
use common::{zarrfs, TempDir};

/// The demo store with one chunk of `temperature` cut in half: (its folder, the key).
fn corrupt_demo(tmp: &TempDir) -> (PathBuf, String) {
    let store = tmp.path().join("demo.zarr");
    let out = Command::new(zarrfs())
        .arg("demo")
        .arg(&store)
        .output()
        .expect("run zarrfs demo");
    assert!(
        out.status.success(),
        "zarrfs demo failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let key = "temperature/c/1/1/1";
    let chunk = store.join(key);
    let bytes = std::fs::read(&chunk).unwrap_or_else(|e| panic!("{}: {e}", chunk.display()));
    std::fs::write(&chunk, &bytes[..bytes.len() / 2]).expect("corrupt the chunk");
    (store, key.to_string())
}

/// `zarrfs mount STORE MOUNTPOINT ARGS` in the background: its stderr.
fn mount(store: &Path, mountpoint: &Path, args: &[&str]) -> String {
    std::fs::create_dir_all(mountpoint).expect("mkdir");
    let out = Command::new(zarrfs())
        .arg("mount")
        .arg(store)
        .arg(mountpoint)
        .args(args)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("run zarrfs mount");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "zarrfs mount failed: {stderr}");
    assert!(mounted(mountpoint), "not mounted");
    stderr
}

/// Reads the whole array file: it must fail with EIO (the corrupt chunk).
fn read_fails(file: &Path) {
    let err = std::fs::read(file).err().and_then(|e| e.raw_os_error());
    assert_eq!(err, Some(libc::EIO), "read of {}", file.display());
}

#[test]
fn with_log_file_the_corrupt_chunk_is_logged_in_the_file() {
    let tmp = TempDir::new("logfile");
    let (store, key) = corrupt_demo(&tmp);
    let mp = tmp.path().join("mnt");
    let log = tmp.path().join("zarrfs.log");
    let stderr = mount(&store, &mp, &["--log-file", log.to_str().expect("utf-8")]);
    let _unmount = Unmount(&mp);
    // Once in the background it holds no descriptor of the terminal (or of a caller
    // waiting for its output, as `mount` through mount.fuse3 does).
    assert_daemon_detached(&mp);
    read_fails(&mp.join("temperature"));
    assert!(
        wait_for(std::time::Duration::from_secs(10), || {
            std::fs::read_to_string(&log).is_ok_and(|t| t.contains(&key))
        }),
        "no line naming {key} in the log file: {:?}",
        std::fs::read_to_string(&log)
    );
    assert!(!stderr.contains(&key), "logged on the terminal: {stderr}");
    // The other arrays still read.
    assert!(std::fs::read(mp.join("surface/elevation")).is_ok());
    assert!(umount(&mp).success());
}

#[test]
fn as_an_option_the_log_file_and_level_work_too() {
    let tmp = TempDir::new("logopt");
    let (store, key) = corrupt_demo(&tmp);
    let mp = tmp.path().join("mnt");
    let log = tmp.path().join("zarrfs.log");
    let option = format!("log_file={},log_level=info", log.display());
    mount(&store, &mp, &["-o", &option]);
    let _unmount = Unmount(&mp);
    read_fails(&mp.join("temperature"));
    assert!(
        wait_for(std::time::Duration::from_secs(10), || {
            std::fs::read_to_string(&log).is_ok_and(|t| t.contains(&key))
        }),
        "no line naming {key}: {:?}",
        std::fs::read_to_string(&log)
    );
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        text.contains("INFO"),
        "log_level=info logs no INFO line: {text}"
    );
    assert!(umount(&mp).success());
}

/// The text of syslog files and the journal that mention `needle`, if any.
fn system_log_has(needle: &str) -> bool {
    let journal = Command::new("journalctl")
        .args(["--no-pager", "-q", "-t", "zarrfs", "--since", "-10min"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains(needle))
        .unwrap_or(false);
    journal
        || [
            "/var/log/syslog",
            "/var/log/daemon.log",
            "/var/log/messages",
        ]
        .iter()
        .any(|f| std::fs::read_to_string(f).is_ok_and(|t| t.contains(needle)))
}

#[test]
fn without_log_file_the_line_goes_to_syslog_or_the_daemon_says_it_cannot() {
    let tmp = TempDir::new("syslog");
    let (store, key) = corrupt_demo(&tmp);
    let mp = tmp.path().join("mnt");
    let stderr = mount(&store, &mp, &[]);
    let _unmount = Unmount(&mp);
    read_fails(&mp.join("temperature"));
    if Path::new("/dev/log").exists() {
        // The machine has syslog or journald: the line lands there.
        assert!(
            wait_for(std::time::Duration::from_secs(10), || system_log_has(&key)),
            "no line naming {key} in the journal or /var/log"
        );
        assert!(!stderr.contains("no syslog"), "{stderr}");
    } else {
        // No syslog socket on this machine: the daemon said so before going to the
        // background, and nothing went to the terminal afterwards.
        assert!(
            stderr.contains("no syslog socket at /dev/log") && stderr.contains("--log-file"),
            "no warning that the log is discarded: {stderr:?}"
        );
        assert!(!stderr.contains(&key), "{stderr}");
    }
    assert!(umount(&mp).success());
}

#[test]
fn in_the_foreground_the_log_stays_on_stderr() {
    let tmp = TempDir::new("fglog");
    let (store, key) = corrupt_demo(&tmp);
    let mp = tmp.path().join("mnt");
    std::fs::create_dir(&mp).expect("mkdir");
    let stderr_file = tmp.path().join("stderr");
    let mut child = Command::new(zarrfs())
        .arg("mount")
        .arg("-f")
        .arg(&store)
        .arg(&mp)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stderr(std::fs::File::create(&stderr_file).expect("stderr file"))
        .spawn()
        .expect("spawn zarrfs mount -f");
    let _unmount = Unmount(&mp);
    common::mount::wait_until("the mount", || mounted(&mp));
    read_fails(&mp.join("temperature"));
    assert!(
        wait_for(std::time::Duration::from_secs(10), || {
            std::fs::read_to_string(&stderr_file).is_ok_and(|t| t.contains(&key))
        }),
        "no line naming {key} on stderr: {:?}",
        std::fs::read_to_string(&stderr_file)
    );
    assert!(umount(&mp).success());
    let status = common::mount::wait_exit(&mut child, std::time::Duration::from_secs(20));
    assert!(status.is_some_and(|s| s.success()), "daemon: {status:?}");
}
