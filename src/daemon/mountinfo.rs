//! What the kernel says is mounted: `/proc/self/mountinfo`, read for whether a folder is
//! a mount point now and which device (`major:minor`) is mounted there.

use std::path::Path;

/// The `major:minor` device of the mount at `path`, if `path` is a mount point now.
pub fn mounted_device(path: &Path) -> Option<String> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    device_in(&info, path)
}

/// Whether `path` is a mount point now.
pub fn is_mounted(path: &Path) -> bool {
    mounted_device(path).is_some()
}

/// The device of the mount at `path` in `info` (mountinfo's text: the device is the third
/// field, the mount point the fifth, with blanks and backslashes escaped in octal).
fn device_in(info: &str, path: &Path) -> Option<String> {
    let target = path.to_string_lossy();
    info.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(' ').collect();
        let point = fields
            .get(4)?
            .replace("\\040", " ")
            .replace("\\011", "\t")
            .replace("\\134", "\\");
        (point == target)
            .then(|| fields.get(2).map(|d| d.to_string()))
            .flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_points_with_escaped_blanks() {
        let info = "22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw\n\
                    97 22 0:52 / /mnt/my\\040data rw,nosuid - fuse.zarrfs zarrfs:x rw\n";
        assert_eq!(device_in(info, Path::new("/")).as_deref(), Some("8:1"));
        assert_eq!(
            device_in(info, Path::new("/mnt/my data")).as_deref(),
            Some("0:52")
        );
        assert_eq!(device_in(info, Path::new("/mnt")), None);
        assert!(is_mounted(Path::new("/")));
    }
}
