//! Where bytes come from: a small read-only key/value store trait and its backends (a
//! local folder, object storage and HTTP, zip archives in either, memory for tests).

#[cfg(feature = "remote")]
mod backends;
mod blob;
mod disk_cache;
mod folder;
mod memory;
mod open;
mod options;
#[cfg(feature = "remote")]
mod remote;
#[cfg(feature = "remote")]
mod runtime;
mod zip;

pub use blob::{Blob, FileBlob};
pub use disk_cache::DiskCache;
pub use folder::FolderStore;
pub use memory::MemoryStore;
pub use open::{open, short_name};
pub use options::{is_secret_key, StoreConfig};
#[cfg(feature = "remote")]
pub use remote::RemoteStore;
pub use zip::ZipStore;

use std::io::Read;

use crate::error::{Error, Result};

/// The largest value (or range of one) a store hands out: the largest chunk zarrfs decodes
/// (4 GiB) and then some for the codecs' overhead. Larger values are refused before anything
/// is allocated for them.
pub const MAX_VALUE: u64 = (4 << 30) + (64 << 20);

/// A zeroed buffer of `len` bytes for the value at `key`, or an error (never an abort) when
/// `len` passes [`MAX_VALUE`] or memory cannot be had.
pub fn value_buffer(key: &str, len: u64) -> Result<Vec<u8>> {
    let mut buf = value_room(key, len)?;
    buf.resize(len as usize, 0);
    Ok(buf)
}

/// The `len` bytes of the value at `key` that `from` gives next, read into a buffer that is
/// not zeroed first; an error when `from` ends sooner (or as [`value_buffer`]).
pub fn read_value(key: &str, from: impl Read, len: u64) -> Result<Vec<u8>> {
    let mut buf = value_room(key, len)?;
    let io = |source| Error::Io {
        key: key.to_string(),
        source,
    };
    from.take(len).read_to_end(&mut buf).map_err(io)?;
    if buf.len() as u64 != len {
        return Err(io(std::io::ErrorKind::UnexpectedEof.into()));
    }
    Ok(buf)
}

/// An empty buffer with room for exactly `len` bytes of the value at `key`.
fn value_room(key: &str, len: u64) -> Result<Vec<u8>> {
    if len > MAX_VALUE {
        return Err(Error::corrupt(
            key,
            format!("value of {len} bytes is larger than any chunk can be"),
        ));
    }
    let mut buf = Vec::new();
    buf.try_reserve_exact(len as usize).map_err(|_| Error::Io {
        key: key.to_string(),
        source: std::io::Error::from(std::io::ErrorKind::OutOfMemory),
    })?;
    Ok(buf)
}

/// A byte range of a stored value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ByteRange {
    /// `len` bytes starting at `offset`.
    Span { offset: u64, len: u64 },
    /// The last `len` bytes.
    Suffix(u64),
}

impl ByteRange {
    /// The (offset, length) this range covers of a value of `size` bytes: clipped to it.
    pub fn clip(self, size: u64) -> (u64, u64) {
        match self {
            ByteRange::Span { offset, len } => {
                let offset = offset.min(size);
                (offset, len.min(size - offset))
            }
            ByteRange::Suffix(len) => {
                let len = len.min(size);
                (size - len, len)
            }
        }
    }
}

/// What a directory-like listing holds: the keys directly below it and the child prefixes.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Listing {
    pub keys: Vec<String>,
    pub prefixes: Vec<String>,
}

/// A read-only Zarr store. Keys use `/` separators and never start with `/`.
pub trait Store: Send + Sync {
    /// The whole value, or `None` when the key does not exist.
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>>;
    /// Part of a value, or `None` when the key does not exist. Ranges past the end are clipped.
    fn get_range(&self, key: &str, range: ByteRange) -> Result<Option<Vec<u8>>>;
    /// The names directly below `prefix` ("" for the root): keys and sub-prefixes, sorted.
    fn list_dir(&self, prefix: &str) -> Result<Listing>;
    /// How many requests are worth having in flight at once (readers and prefetch are
    /// sized by it): a disk wants about one per core, a remote store many.
    fn concurrency(&self) -> usize {
        std::thread::available_parallelism().map_or(2, |n| n.get())
    }
    /// Bytes worth fetching in one request: neighbouring inner chunks of a shard are read
    /// together up to this size. 0 (a local store): each is read alone.
    fn request_bytes(&self) -> u64 {
        0
    }
    /// What identifies the content at `key` now (a remote object's ETag), for caches
    /// that outlive a mount; [`Version::Unknown`] when the store cannot tell.
    fn version(&self, _key: &str) -> Result<Version> {
        Ok(Version::Unknown)
    }
    /// A hint that the value at `key` will be read soon: a local store starts reading it
    /// from disk in the background, so that the read finds it in memory. Errors are
    /// ignored (the read reports them).
    fn will_need(&self, _key: &str) {}
    /// The store's URL, for caches shared by mounts of the same store.
    fn location(&self) -> Option<String> {
        None
    }
}

/// What [`Store::version`] knows about a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Version {
    /// No value at the key.
    Missing,
    /// A tag that changes whenever the value does.
    Tag(String),
    /// The store cannot tell.
    Unknown,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_value_reads_exactly_len_bytes_or_fails() {
        let data: Vec<u8> = (0..=255u8).cycle().take(100_000).collect();
        assert_eq!(read_value("k", &data[..], 100_000).unwrap(), data);
        assert_eq!(read_value("k", &data[..], 70_000).unwrap(), &data[..70_000]);
        assert_eq!(read_value("k", &data[..], 0).unwrap(), Vec::<u8>::new());
        let short = read_value("c/0", &data[..10], 11).unwrap_err();
        assert!(short.to_string().contains("c/0"), "{short}");
        let huge = read_value("c/1", &data[..], MAX_VALUE + 1).unwrap_err();
        assert!(huge.to_string().contains("larger than any chunk"), "{huge}");
    }
}
