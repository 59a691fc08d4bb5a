//! The unprivileged test user `zarrfs-test` (scripts/test.sh creates it): its ids, a
//! command run as it, and /dev/fuse made usable by it (fusermount3's route).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

pub const USER: &str = "zarrfs-test";

/// /dev/fuse made 0666 for the test; its old mode back on drop.
/// The device's mode, and the lock held meanwhile (closing the file releases it).
pub struct FuseDeviceMode(Option<u32>, std::fs::File);

impl FuseDeviceMode {
    /// /dev/fuse at mode 0666 until the value is dropped. The tests that need it take
    /// turns, in this process and in any other test run on the machine (a lock file), so
    /// that none puts the old mode back under another.
    pub fn world_usable() -> FuseDeviceMode {
        let turn = std::fs::File::create("/tmp/zarrfs-test-dev-fuse.lock")
            .expect("create /tmp/zarrfs-test-dev-fuse.lock");
        // SAFETY: flock on a descriptor this function owns.
        let locked = unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&turn), libc::LOCK_EX) };
        assert_eq!(locked, 0, "flock /tmp/zarrfs-test-dev-fuse.lock");
        let device = Path::new("/dev/fuse");
        let mode = device
            .metadata()
            .expect("/dev/fuse is missing: mount tests need FUSE")
            .permissions()
            .mode()
            & 0o7777;
        if mode == 0o666 {
            return FuseDeviceMode(None, turn);
        }
        std::fs::set_permissions(device, std::fs::Permissions::from_mode(0o666))
            .expect("chmod 0666 /dev/fuse");
        FuseDeviceMode(Some(mode), turn)
    }
}

impl Drop for FuseDeviceMode {
    fn drop(&mut self) {
        if let Some(mode) = self.0 {
            let _ = std::fs::set_permissions("/dev/fuse", std::fs::Permissions::from_mode(mode));
        }
    }
}

/// The user's id (`-u`) or group id (`-g`); no such user fails the test.
pub fn id(flag: &str) -> u32 {
    let out = Command::new("id")
        .args([flag, USER])
        .output()
        .expect("run id");
    assert!(
        out.status.success(),
        "no user {USER}: scripts/test.sh creates it (useradd --system {USER})"
    );
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("numeric id")
}

/// `PROGRAM ARGS` as the test user, in `dir`.
pub fn as_user(dir: &Path, program: &Path, args: &[&str]) -> Output {
    Command::new("runuser")
        .args(["-u", USER, "--"])
        .arg(program)
        .args(args)
        .current_dir(dir)
        .env_remove("RUST_LOG")
        .output()
        .expect("run runuser (util-linux)")
}

/// Makes `path` and everything under it readable by every user (folders enterable), as
/// `chmod -R a+rX`.
pub fn open_to_all(path: &Path) {
    let status = Command::new("chmod")
        .arg("-R")
        .arg("a+rX")
        .arg(path)
        .status()
        .expect("run chmod");
    assert!(status.success(), "chmod -R a+rX {}", path.display());
}

/// Exit status, stdout and stderr of `out`, for failure messages.
pub fn text(out: &Output) -> String {
    format!(
        "{} {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}
