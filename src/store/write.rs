//! Writing a store: the [`Writer`] a writable store hands out ([`super::Store::writer`]).
//! Each value is replaced whole, so a reader sees the old value or the new, never part of
//! either, and a replace names the version it patched: a value another writer changed
//! since is never silently overwritten (the put fails with [`Error::Conflict`]).

use crate::error::Result;
use crate::store::Version;

/// What a put or delete expects to find at its key: the value it patched, or nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expected {
    /// No value was there when it was read.
    Absent,
    /// The value was read at this version.
    At(Version),
}

/// A store that takes writes.
pub trait Writer: Send + Sync {
    /// Store `bytes` at `key` whole, when what is there is still what `expected` says;
    /// else fail with [`crate::error::Error::Conflict`] and change nothing.
    fn put(&self, key: &str, bytes: &[u8], expected: &Expected) -> Result<()>;
    /// Remove the value at `key` (nothing there is no error), on the same condition.
    fn delete(&self, key: &str, expected: &Expected) -> Result<()>;
}
