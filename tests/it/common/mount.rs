//! Mounting for the end-to-end tests: a background mount unmounted on drop, the
//! mount table, `zarrfs umount`, full preads, a deterministic generator, the test
//! venv's Python, waits with a guard, waits for what docs/consistency.md promises of a mount
//! that refreshes, and a foreground daemon child with its peak memory.

use std::ffi::OsStr;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use super::{zarrfs, Manifest, TempDir};

pub fn mounted(mountpoint: &Path) -> bool {
    let info = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    let target = mountpoint.to_string_lossy().to_string();
    info.lines()
        .any(|l| l.split(' ').nth(4) == Some(target.as_str()))
}

/// A fresh folder for one mount: (the folder, removed on drop; its empty mountpoint
/// `mnt`; the daemon's log file `zarrfs.log`). Fails if /dev/fuse is missing.
pub fn mount_dir(label: &str) -> (TempDir, PathBuf, PathBuf) {
    assert!(
        Path::new("/dev/fuse").exists(),
        "/dev/fuse is missing: mount tests need FUSE"
    );
    let dir = TempDir::new(label);
    let mountpoint = dir.path().join("mnt");
    std::fs::create_dir(&mountpoint).expect("mkdir");
    let log = dir.path().join("zarrfs.log");
    (dir, mountpoint, log)
}

/// `--io MODE` when `ZARRFS_TEST_IO` names one (`cache` or `direct`): every mount of
/// the tests then reads that way, so `scripts/test.sh` runs them in every mode (the
/// default, `auto`, without it).
pub fn io_args() -> Vec<String> {
    match std::env::var("ZARRFS_TEST_IO") {
        Ok(mode) if !mode.is_empty() => vec!["--io".into(), mode],
        _ => vec![],
    }
}

/// Spawns `command` (the `zarrfs` binary, maybe behind a wrapper) as
/// `mount -f STORE MOUNTPOINT ARGS`: a foreground daemon logging warnings to `log`.
pub fn spawn_foreground(
    mut command: Command,
    store: &Path,
    mountpoint: &Path,
    args: &[&str],
    log: &Path,
) -> std::io::Result<Child> {
    command
        .arg("mount")
        .arg("-f")
        .arg(store)
        .arg(mountpoint)
        .args(args)
        .args(io_args())
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).expect("log"))
        .spawn()
}

/// The file of array `path` of `store` under `mountpoint`: a root array is named after
/// the store folder.
pub fn array_file(m: &Manifest, store: &str, path: &str, mountpoint: &Path) -> PathBuf {
    if path.is_empty() {
        let folder = m.store_dir(store);
        let name = folder.file_name().unwrap_or_default().to_string_lossy();
        mountpoint.join(name.trim_end_matches(".zarr"))
    } else {
        mountpoint.join(path)
    }
}

/// A background mount, unmounted on drop.
pub struct Mount {
    pub mountpoint: PathBuf,
    pub log: PathBuf,
    /// Removed after the unmount in `drop`.
    _dir: TempDir,
}

impl Mount {
    pub fn new(store: &Path, args: &[&str]) -> Mount {
        let (dir, mountpoint, log) = mount_dir("mnt");
        // The daemon logs to --log-file once in the background; startup errors come on
        // stderr, appended to the same file.
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .expect("log");
        let status = Command::new(zarrfs())
            .arg("mount")
            .arg(store)
            .arg(&mountpoint)
            .arg("--log-file")
            .arg(&log)
            .args(args)
            .args(io_args())
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(stderr)
            .status()
            .expect("run zarrfs mount");
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(
            status.success(),
            "zarrfs mount {} failed: {text}",
            store.display()
        );
        assert!(
            mounted(&mountpoint),
            "not mounted after zarrfs mount returned"
        );
        Mount {
            mountpoint,
            log,
            _dir: dir,
        }
    }

    pub fn path(&self, p: &str) -> PathBuf {
        self.mountpoint.join(p)
    }

    /// The file of array `p` of `store`: a root array is named after the store folder.
    pub fn array(&self, m: &Manifest, store: &str, p: &str) -> PathBuf {
        array_file(m, store, p, &self.mountpoint)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// The command `zarrfs umount MOUNTPOINT`, not yet run.
pub fn umount_command(mountpoint: &Path) -> Command {
    let mut command = Command::new(zarrfs());
    command.arg("umount").arg(mountpoint);
    command
}

/// `zarrfs umount MOUNTPOINT`.
pub fn umount(mountpoint: &Path) -> ExitStatus {
    umount_command(mountpoint)
        .status()
        .expect("run zarrfs umount")
}

/// Unmounts a mount made by someone else (a script) when dropped, even after a panic.
pub struct Unmount<'a>(pub &'a Path);

impl Drop for Unmount<'_> {
    fn drop(&mut self) {
        if mounted(self.0) {
            let _ = umount_command(self.0).status();
        }
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = umount_command(&self.mountpoint).status();
    }
}

/// A small deterministic generator for offsets and lengths.
pub struct Lcg(pub u64);

impl Lcg {
    pub fn next(&mut self, bound: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % bound.max(1)
    }
}

/// pread until `len` bytes or end of file.
pub fn pread_full(file: &std::fs::File, offset: u64, len: usize) -> std::io::Result<Vec<u8>> {
    let mut buf = vec![0u8; len];
    let mut got = 0;
    while got < len {
        let n = file.read_at(&mut buf[got..], offset + got as u64)?;
        if n == 0 {
            break;
        }
        got += n;
    }
    buf.truncate(got);
    Ok(buf)
}

/// Run a Python snippet with the test venv's Python; its stdout.
pub fn run_python(script: &str) -> String {
    python_stdout("python", &[OsStr::new("-c"), OsStr::new(script)])
}

/// Runs the test venv's Python with `args`; its stdout. Fails, naming `what` and
/// quoting Python's stderr, unless it exits 0.
pub fn python_stdout(what: &str, args: &[&OsStr]) -> String {
    let out = Command::new(test_python())
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run {what}: {e}"));
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

pub fn test_python() -> String {
    std::env::var("ZARRFS_TEST_PYTHON")
        .expect("ZARRFS_TEST_PYTHON must name a Python with numpy (scripts/test.sh sets it)")
}

/// Waits until `f` holds, up to 20 s; fails naming `what` if it never did.
pub fn wait_until(what: &str, f: impl FnMut() -> bool) {
    assert!(
        wait_for(Duration::from_secs(20), f),
        "timed out waiting for {what}"
    );
}

/// Waits until `f` holds, up to `guard`; false if it never did.
pub fn wait_for(guard: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + guard;
    while !f() {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// What docs/consistency.md promises of a mount refreshed every `interval` (`--refresh`): a new
/// open, stat or listing made more than twice the interval after a change sees it. The
/// tests measure from when the change's write returned, and allow this much on top: the
/// writer's last request may reach the store a moment after its call returns (and the
/// test hears of the return a moment after that).
pub const PROMISE_ALLOWANCE: Duration = Duration::from_millis(300);

/// When what docs/consistency.md promises holds for a change whose write returned at `changed`.
pub fn promised(changed: Instant, interval: Duration) -> Instant {
    changed + 2 * interval + PROMISE_ALLOWANCE
}

/// Looks at one node with `look` (each time a new open, stat or listing) until it shows
/// the change, or until a look begun after the promise's deadline does not: that look's
/// complaint. Looks before the deadline may see the store as it was.
pub fn shown_by_promise(
    changed: Instant,
    interval: Duration,
    mut look: impl FnMut() -> Result<(), String>,
) -> Result<(), String> {
    let deadline = promised(changed, interval);
    loop {
        let begun = Instant::now();
        match look() {
            Ok(()) => return Ok(()),
            Err(e) if begun >= deadline => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// Looks at one node with `look` until the promise's deadline (what those looks see is
/// not judged: they are a reader's traffic), then once more: what that look, begun after
/// the deadline, sees.
pub fn look_after_promise<T>(
    changed: Instant,
    interval: Duration,
    mut look: impl FnMut() -> T,
) -> T {
    let deadline = promised(changed, interval);
    while Instant::now() < deadline {
        look();
        std::thread::sleep(Duration::from_millis(20));
    }
    look()
}

/// Waits up to `guard` for `child` to exit; `None` if it is still running.
pub fn wait_exit(child: &mut Child, guard: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + guard;
    loop {
        if let Some(status) = child.try_wait().expect("wait for a child process") {
            return Some(status);
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A `zarrfs mount -f` daemon that is a child of the test, so that its PID (peak memory,
/// signals) is known. On drop: unmounted with `zarrfs umount` if still mounted, then
/// waited for; killed if it has not exited 20 s later.
pub struct ForegroundMount {
    pub mountpoint: PathBuf,
    pub log: PathBuf,
    pub child: Child,
    _dir: TempDir,
}

impl ForegroundMount {
    /// Starts the daemon and returns once the mount is up; fails (with the daemon's log)
    /// if it exits first or the mount does not appear within 20 s.
    pub fn new(store: &Path, args: &[&str]) -> ForegroundMount {
        let (dir, mountpoint, log) = mount_dir("fgmnt");
        let mut child = spawn_foreground(Command::new(zarrfs()), store, &mountpoint, args, &log)
            .expect("spawn zarrfs mount -f");
        let deadline = Instant::now() + Duration::from_secs(20);
        while !mounted(&mountpoint) {
            let text = || std::fs::read_to_string(&log).unwrap_or_default();
            if let Some(status) = child.try_wait().expect("wait for zarrfs") {
                panic!(
                    "zarrfs mount -f {} exited ({status}): {}",
                    store.display(),
                    text()
                );
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "zarrfs mount -f {}: no mount after 20 s: {}",
                    store.display(),
                    text()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        ForegroundMount {
            mountpoint,
            log,
            child,
            _dir: dir,
        }
    }

    pub fn path(&self, p: &str) -> PathBuf {
        self.mountpoint.join(p)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The daemon's peak resident memory so far, in bytes (VmHWM).
    pub fn peak_rss(&self) -> u64 {
        peak_rss(self.pid()).unwrap_or_else(|| panic!("no VmHWM for daemon {}", self.pid()))
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits up to `guard` for the daemon to exit; `None` if it is still running.
    pub fn wait_exit(&mut self, guard: Duration) -> Option<ExitStatus> {
        wait_exit(&mut self.child, guard)
    }
}

impl Drop for ForegroundMount {
    fn drop(&mut self) {
        if mounted(&self.mountpoint) {
            let _ = umount_command(&self.mountpoint).status();
        }
        if self.wait_exit(Duration::from_secs(20)).is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Peak resident memory (VmHWM) of process `pid` in bytes; `None` once it has exited.
pub fn peak_rss(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The processes whose command line has `mountpoint` as an argument (the daemon of a
/// background mount, whoever started it): their PIDs, for inspection only.
pub fn processes_naming(mountpoint: &Path) -> Vec<u32> {
    let want = mountpoint.as_os_str().as_encoded_bytes();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.split(|b| *b == 0).any(|arg| arg == want))
        })
        .collect()
}

/// Where descriptor `fd` of process `pid` leads (`/dev/null`, a pipe, a file).
pub fn fd_target(pid: u32, fd: u32) -> String {
    std::fs::read_link(format!("/proc/{pid}/fd/{fd}"))
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Fails unless the daemon of the mount at `mountpoint` has let go of the stdout and
/// stderr it was started with (both /dev/null): whoever started it may wait for them.
pub fn assert_daemon_detached(mountpoint: &Path) {
    let pids: Vec<u32> = processes_naming(mountpoint)
        .into_iter()
        .filter(|&pid| pid != std::process::id())
        .collect();
    assert!(!pids.is_empty(), "no daemon names {}", mountpoint.display());
    for pid in pids {
        for fd in [1, 2] {
            assert_eq!(
                fd_target(pid, fd),
                "/dev/null",
                "daemon {pid} still holds descriptor {fd}"
            );
        }
    }
}
