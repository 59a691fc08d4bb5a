//! `zarrfs refresh PATH`: have a mount read a node (a file or folder inside it, or the
//! whole mount) from its store again now. It is a `setxattr` of `user.zarrfs.refresh` on
//! PATH, which any tool can make as well (`setfattr -n user.zarrfs.refresh -v 1 PATH`),
//! then a read of the same attribute, which the mount answers once the kernel has
//! dropped the names it held below PATH (`getfattr -n user.zarrfs.refresh PATH`).

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::daemon::fuse::REFRESH_XATTR;
use crate::error::{Error, Result};

/// Ask the mount holding `path` to refresh it.
pub fn refresh(path: &Path) -> Result<()> {
    let shown = path.display().to_string();
    let c_path = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| Error::Invalid(format!("{shown}: a path with a NUL byte")))?;
    let name = CString::new(REFRESH_XATTR)
        .map_err(|_| Error::Internal("refresh attribute name".into()))?;
    let value = b"1";
    // SAFETY: both strings are NUL-terminated and live across the call; the value's
    // pointer and length describe one live buffer.
    let rc = unsafe {
        libc::setxattr(
            c_path.as_ptr(),
            name.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    };
    if rc == 0 {
        // Reading it back waits until the kernel has dropped the names it held of
        // what was refreshed (the mount does that after answering the setxattr).
        let mut back = [0u8; 8];
        // SAFETY: both strings are NUL-terminated; the buffer's pointer and length
        // describe one live buffer.
        unsafe {
            libc::getxattr(
                c_path.as_ptr(),
                name.as_ptr(),
                back.as_mut_ptr().cast(),
                back.len(),
            )
        };
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    Err(Error::Invalid(match e.raw_os_error() {
        Some(libc::ENOTSUP) | Some(libc::EROFS) | Some(libc::EPERM) => {
            format!("{shown}: not in a zarrfs mount ({e})")
        }
        _ => format!("{shown}: {e}"),
    }))
}
