//! Why a mount cannot happen, in words a user can act on: no /dev/fuse, /dev/fuse not
//! readable and writable by this user, no fusermount3 (the fuse3 package) for a normal
//! user, or `allow_other` without `user_allow_other` in /etc/fuse.conf.

use std::path::Path;

const FUSE_DEVICE: &str = "/dev/fuse";
const FUSE_CONF: &str = "/etc/fuse.conf";

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Whether `text` (the contents of /etc/fuse.conf) has a `user_allow_other` line.
pub fn allows_other(text: &str) -> bool {
    text.lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .any(|l| l == "user_allow_other")
}

/// The error of a normal user asking for `allow_other` when /etc/fuse.conf does not
/// allow it (fusermount3 would refuse); `None` when the mount may go ahead.
pub fn check_allow_other(fuse_options: &[String]) -> Option<String> {
    let wants = fuse_options
        .iter()
        .flat_map(|o| o.split(','))
        .any(|o| o == "allow_other");
    if !wants || is_root() {
        return None;
    }
    let text = std::fs::read_to_string(FUSE_CONF).unwrap_or_default();
    (!allows_other(&text)).then(|| {
        format!(
            "-o allow_other: a normal user needs a line `user_allow_other` in {FUSE_CONF} \
             (ask an administrator), or mount without allow_other"
        )
    })
}

/// Whether `name` is an executable file in a folder of PATH.
fn on_path(name: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/bin".into(), "/usr/bin".into()])
        .any(|dir| {
            std::fs::metadata(dir.join(name))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// Whether this process may read and write `path` (access(2), nothing is opened).
fn accessible(path: &Path) -> bool {
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: a valid C string.
    unsafe { libc::access(c.as_ptr(), libc::R_OK | libc::W_OK) == 0 }
}

/// The message for a failed mount at `mountpoint`: the likely cause when one of the
/// usual ones applies, else the error itself.
pub fn explain(mountpoint: &Path, error: &std::io::Error) -> String {
    let mp = mountpoint.display();
    let text = error.to_string();
    if !Path::new(FUSE_DEVICE).exists() {
        return format!(
            "mount {mp}: {FUSE_DEVICE} does not exist: load the fuse kernel module \
             (modprobe fuse), or give the container the device ({text})"
        );
    }
    if text.contains("user_allow_other") {
        return format!(
            "mount {mp}: allow_other needs a line `user_allow_other` in {FUSE_CONF} for a \
             normal user ({})",
            text.trim()
        );
    }
    if !accessible(Path::new(FUSE_DEVICE)) {
        return format!(
            "mount {mp}: {FUSE_DEVICE} is not readable and writable by this user (Debian \
             makes it mode 0666; as root: chmod 0666 {FUSE_DEVICE}) ({text})"
        );
    }
    if !is_root() && !on_path("fusermount3") {
        return format!(
            "mount {mp}: fusermount3 not found: a normal user mounts through it; install \
             the fuse3 package ({text})"
        );
    }
    format!("mount {mp}: {}", text.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_allow_other_must_be_a_line_of_its_own() {
        assert!(allows_other("user_allow_other\n"));
        assert!(allows_other(
            "# comment\n  user_allow_other  # yes\nmount_max = 9\n"
        ));
        assert!(!allows_other("#user_allow_other\n"));
        assert!(!allows_other("user_allow_other_not\n"));
        assert!(!allows_other(""));
    }
}
