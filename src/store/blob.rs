//! One object read by byte ranges: the container a zip archive lives in. A local file
//! here; a remote object in `remote.rs`.

use std::fs::File;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

use super::{value_buffer, ByteRange};
use crate::error::{Error, Result};

/// An object of known size read by ranges.
pub trait Blob: Send + Sync {
    /// Its size in bytes.
    fn size(&self) -> u64;
    /// `len` bytes at `offset`, fewer at the end of the object.
    fn read(&self, offset: u64, len: u64) -> Result<Vec<u8>>;
    /// Its name, for messages.
    fn name(&self) -> &str;
}

/// A regular local file.
pub struct FileBlob {
    file: File,
    size: u64,
    name: String,
}

impl FileBlob {
    /// Open `path`, refusing (without blocking) anything but a regular file.
    pub fn open(path: &Path) -> Result<FileBlob> {
        let name = path.display().to_string();
        let io = |source| Error::Io {
            key: name.clone(),
            source,
        };
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
            .open(path)
            .map_err(io)?;
        let meta = file.metadata().map_err(io)?;
        if !meta.is_file() {
            return Err(Error::Invalid(format!("{name}: not a regular file")));
        }
        Ok(FileBlob {
            file,
            size: meta.len(),
            name,
        })
    }
}

impl Blob for FileBlob {
    fn size(&self) -> u64 {
        self.size
    }

    fn read(&self, offset: u64, len: u64) -> Result<Vec<u8>> {
        let (offset, len) = ByteRange::Span { offset, len }.clip(self.size);
        let mut buf = value_buffer(&self.name, len)?;
        self.file
            .read_exact_at(&mut buf, offset)
            .map_err(|source| Error::Io {
                key: self.name.clone(),
                source,
            })?;
        Ok(buf)
    }

    fn name(&self) -> &str {
        &self.name
    }
}
