//! Where bytes come from: a small read-only key/value store trait and its implementations.

mod folder;

pub use folder::FolderStore;

use crate::error::Result;

/// A byte range of a stored value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ByteRange {
    /// `len` bytes starting at `offset`.
    Span { offset: u64, len: u64 },
    /// The last `len` bytes.
    Suffix(u64),
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
}
