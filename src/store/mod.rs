//! Where bytes come from: a small read-only key/value store trait (with the value, version,
//! range and listing types it speaks in), and its implementations by kind, each kind using
//! only those after it: `open` (a STORE argument to a namespace), `namespace/` (stores
//! built on sources: zip archives, reference sets and their targets, Icechunk
//! repositories), `connect` (a location to a source with its adapters), `adapter/` (what
//! wraps a source: the disk cache, the coalescing of neighbouring byte ranges of one object
//! into one request), `source/` (where bytes are: a local folder, memory, a blob, object
//! storage and web servers on shared per-host sources). `location`, `options` and this
//! file lie beneath them all.

pub mod adapter;
pub mod connect;
mod error;
#[cfg(test)]
pub(crate) mod fixtures;
pub mod location;
pub mod namespace;
pub mod open;
mod options;
pub mod source;
mod version;
pub mod write;

pub use adapter::disk_cache::DiskCache;
pub use adapter::spans::{budget_for, Spans};
pub use error::StoreError;
pub use location::Location;
#[cfg(feature = "remote")]
pub use namespace::icechunk::IcechunkStore;
pub use namespace::references::ReferenceStore;
pub use namespace::zip::ZipStore;
pub use open::{is_repository, open, short_name};
pub use options::VersionChoice;
pub use options::{is_secret_key, StoreConfig};
pub use source::blob::{Blob, FileBlob, StoreBlob};
pub use source::folder::FolderStore;
pub use source::memory::MemoryStore;
#[cfg(feature = "remote")]
pub use source::remote::pool::{Source, Sources};
#[cfg(feature = "remote")]
pub use source::remote::RemoteStore;
pub use version::Version;

use std::io::Read;
use std::sync::Arc;

use crate::error::{Error, Result};

pub use crate::limits::MAX_VALUE;

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

/// Bytes read from a store, with the version of the object they were read from: the two
/// come from one request, so a cache filing the bytes files them under their own version,
/// never under one asked for before or after.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Value {
    pub bytes: Vec<u8>,
    pub version: Version,
}

/// What a store knows of an object without reading it: its size and version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    pub size: u64,
    pub version: Version,
}

/// How a store wants to be read, reported by every store and passed on by every store
/// built on another (so that a namespace on a remote source is tuned like the source).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caps {
    /// How many requests are worth having in flight at once (readers and prefetch are
    /// sized by it): a disk wants about one per core, a remote store many. Listings of a
    /// local store read their members' metadata with more (see `Hierarchy::kinds_of`).
    pub concurrency: usize,
    /// Bytes worth fetching in one request: neighbouring members of one object (inner
    /// chunks of a shard, entries of a zip archive) are read together up to this size
    /// ([`Spans`]). 0 (a local store): each is read alone.
    pub request_bytes: u64,
    /// The store's URL, for caches shared by mounts of the same store (none: local).
    pub location: Option<String>,
}

/// Bytes worth one request to a remote store: a round trip costs about as much time as
/// this many bytes.
pub const REQUEST_BYTES: u64 = 8 << 20;

impl Caps {
    /// A local store: one request per core, each value read alone, no shared caches.
    pub fn local() -> Caps {
        Caps {
            concurrency: crate::pool::cores(),
            request_bytes: 0,
            location: None,
        }
    }
}

/// A read-only Zarr store. Keys use `/` separators and never start with `/`. Every method
/// but `read_named`, the version hooks (`refresh`, `as_of`, `learned_since`,
/// `at_version`, `identity`, `names_bytes`) and `writer` is required: a store built on
/// another store says for each what it passes on.
pub trait Store: Send + Sync {
    /// The whole value (`range` `None`) or part of it, with the version of the object it
    /// was read from; `None` when the key does not exist. Ranges past the end are clipped.
    fn read(&self, key: &str, range: Option<ByteRange>) -> Result<Option<Value>>;
    /// The value at `key` as [`Store::read`] reads it, for a value that never changes once
    /// written and that `name` names wherever it is stored (an Icechunk chunk object, by
    /// its ID): a cache may keep it with no version asked for, and serve it to every store
    /// that names it so. A store that keeps nothing reads it.
    fn read_named(
        &self,
        key: &str,
        range: Option<ByteRange>,
        _name: &str,
    ) -> Result<Option<Value>> {
        self.read(key, range)
    }
    /// The names directly below `prefix` ("" for the root): keys and sub-prefixes, sorted.
    fn list_dir(&self, prefix: &str) -> Result<Listing>;
    /// The size and version of the value at `key` now (a HEAD request, a `stat`), `None`
    /// when the key does not exist.
    fn head(&self, key: &str) -> Result<Option<Head>>;
    /// A hint that the value at `key` will be read soon: a local store starts reading it
    /// from disk in the background, so that the read finds it in memory. Errors are
    /// ignored (the read reports them).
    fn will_need(&self, key: &str);
    /// How the store wants to be read.
    fn caps(&self) -> Caps;
    /// Read again what the store resolves its version from (an Icechunk branch's tip)
    /// when it was read more than `max_age` ago (`None`: now). A store of one version
    /// has nothing to read again; a store built on another passes it on.
    fn refresh(&self, _max_age: Option<std::time::Duration>) -> Result<()> {
        Ok(())
    }
    /// When the store last read what it resolves its version from (see
    /// [`Store::refresh`]): what it answers may date from then, and a reading of it is
    /// no newer. `None`: the store answers as it is when asked.
    fn as_of(&self) -> Option<std::time::Instant> {
        None
    }
    /// The store reading nothing it learned of its objects before `at` (when a reading
    /// of the hierarchy began): a store that remembers objects' versions for a while (the
    /// disk cache, under a refresh interval) asks again for those it learned before then,
    /// so that what the reading reads is as new as the reading. `None`: the store
    /// remembers nothing of the kind, and serves as it is.
    fn learned_since(&self, _at: std::time::Instant) -> Option<Arc<dyn Store>> {
        None
    }
    /// The store as it was at `version` (the version of a value read from it), for a
    /// store that moves from version to version (an Icechunk branch whose tip moves):
    /// what is read through it never mixes two versions. `None`: the store itself.
    fn at_version(&self, _version: &Version) -> Option<Arc<dyn Store>> {
        None
    }
    /// What names the bytes at `key` wherever the same bytes are stored (an Icechunk
    /// chunk's object and range), the same in every version that holds them: caches
    /// shared by versions file what they make of the value under it. `None`: the store
    /// cannot tell (values are known by key and version alone).
    fn identity(&self, _key: &str) -> Option<String> {
        None
    }
    /// What writes the store, when it takes writes (a local folder); `None`: it is
    /// read-only (a store built on another, such as a cache or an archive in it, is
    /// read-only unless it says otherwise).
    fn writer(&self) -> Option<Arc<dyn write::Writer>> {
        None
    }
    /// Whether [`Store::identity`] may name anything (asking it may cost a lookup, even
    /// store I/O): false, the default, lets readers skip it.
    fn names_bytes(&self) -> bool {
        false
    }
}

/// When something kept was last read again, so that it is read again at most once per
/// interval: the first caller past the interval takes the turn, the others go on with
/// what is kept. It also remembers when what is kept was last read successfully: what it
/// answers dates from then ([`ReadAgain::as_of`]).
pub struct ReadAgain(parking_lot::Mutex<ReadTimes>);

struct ReadTimes {
    /// The last turn taken.
    turn: std::time::Instant,
    /// The start of the last reading that succeeded.
    read: std::time::Instant,
}

impl ReadAgain {
    /// Read just now.
    pub fn now() -> ReadAgain {
        ReadAgain::at(std::time::Instant::now())
    }

    /// Read at `at` (taken before the reading began).
    pub fn at(at: std::time::Instant) -> ReadAgain {
        ReadAgain(parking_lot::Mutex::new(ReadTimes { turn: at, read: at }))
    }

    /// Whether the caller is to read again now: the last turn is older than `max_age`
    /// (`None`: whatever its age), and the turn is taken; `Some(when)` it was taken,
    /// which the caller passes to [`ReadAgain::read`] once its reading succeeded.
    pub fn due(&self, max_age: Option<std::time::Duration>) -> Option<std::time::Instant> {
        let mut times = self.0.lock();
        if max_age.is_some_and(|age| times.turn.elapsed() < age) {
            return None;
        }
        times.turn = std::time::Instant::now();
        Some(times.turn)
    }

    /// A reading that began at `started` succeeded: what is kept dates from then.
    pub fn read(&self, started: std::time::Instant) {
        let mut times = self.0.lock();
        times.read = times.read.max(started);
    }

    /// When what is kept was last read (the start of the last reading that succeeded).
    pub fn as_of(&self) -> std::time::Instant {
        self.0.lock().read
    }
}

/// Shorthands over [`Store`] for callers that want the bytes alone.
pub trait StoreExt: Store {
    /// The whole value, or `None` when the key does not exist.
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        Ok(self.read(key, None)?.map(|v| v.bytes))
    }
    /// Part of a value, or `None` when the key does not exist.
    fn get_range(&self, key: &str, range: ByteRange) -> Result<Option<Vec<u8>>> {
        Ok(self.read(key, Some(range))?.map(|v| v.bytes))
    }
}

impl<T: Store + ?Sized> StoreExt for T {}

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
