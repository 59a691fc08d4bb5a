//! One object read by byte ranges: the container a zip archive lives in. A local file, or
//! an object of any store (so that an archive on object storage is read through whatever
//! wraps that store: its request limit and the disk cache).

use std::fs::File;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::store::{value_buffer, ByteRange, Caps, Store, Value, Version};

/// An object of known size read by ranges.
pub trait Blob: Send + Sync {
    /// Its size in bytes.
    fn size(&self) -> u64;
    /// `len` bytes at `offset` (fewer at the end of the object), with the version of the
    /// object they were read from.
    fn read(&self, offset: u64, len: u64) -> Result<Value>;
    /// Its name, for messages.
    fn name(&self) -> &str;
    /// Its version when it was opened.
    fn version(&self) -> Version;
    /// How the store it lives in wants to be read.
    fn caps(&self) -> Caps;
}

/// A regular local file.
pub struct FileBlob {
    file: File,
    size: u64,
    name: String,
    version: Version,
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
            version: Version::of_file(&meta),
        })
    }
}

impl Blob for FileBlob {
    fn size(&self) -> u64 {
        self.size
    }

    fn read(&self, offset: u64, len: u64) -> Result<Value> {
        let (offset, len) = ByteRange::Span { offset, len }.clip(self.size);
        let mut buf = value_buffer(&self.name, len)?;
        self.file
            .read_exact_at(&mut buf, offset)
            .map_err(|source| Error::Io {
                key: self.name.clone(),
                source,
            })?;
        Ok(Value {
            bytes: buf,
            version: self.version.clone(),
        })
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn version(&self) -> Version {
        self.version.clone()
    }

    fn caps(&self) -> Caps {
        Caps::local()
    }
}

/// The object at `key` of a store.
pub struct StoreBlob {
    store: Arc<dyn Store>,
    key: String,
    size: u64,
    version: Version,
    name: String,
}

impl StoreBlob {
    /// The object `key` of `store` (`name` in messages); fails when it does not exist.
    pub fn open(store: Arc<dyn Store>, key: &str, name: String) -> Result<StoreBlob> {
        let head = store
            .head(key)?
            .ok_or_else(|| Error::NotFound(name.clone()))?;
        Ok(StoreBlob {
            store,
            key: key.to_string(),
            size: head.size,
            version: head.version,
            name,
        })
    }
}

impl Blob for StoreBlob {
    fn size(&self) -> u64 {
        self.size
    }

    fn read(&self, offset: u64, len: u64) -> Result<Value> {
        let (offset, len) = ByteRange::Span { offset, len }.clip(self.size);
        if len == 0 {
            return Ok(Value {
                bytes: Vec::new(),
                version: self.version.clone(),
            });
        }
        self.store
            .read(&self.key, Some(ByteRange::Span { offset, len }))?
            .ok_or_else(|| Error::NotFound(self.name.clone()))
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn version(&self) -> Version {
        self.version.clone()
    }

    fn caps(&self) -> Caps {
        self.store.caps()
    }
}
