//! Writing a store: the [`Writer`] a writable store hands out ([`super::Store::writer`]),
//! and the [`Change`] it begins for each commit. Each value is replaced whole, so a
//! reader sees the old value or the new, never part of either, and a replace names the
//! version it patched: a value another writer changed since is never silently
//! overwritten (the put fails with `Error::Conflict`). A store that versions its
//! changes (an Icechunk branch) makes one change one commit, all or nothing.

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
    /// Begin one change: the puts and deletes of one commit.
    fn begin(&self) -> Result<Box<dyn Change + '_>>;
    /// Whether each change makes a new version of the whole store (an Icechunk
    /// branch's next snapshot): what was read of it is read again before a change
    /// begins (so that a change starts from the newest version) and after it is made.
    fn versions(&self) -> bool {
        false
    }
}

/// The puts and deletes of one commit.
pub trait Change {
    /// Store `bytes` at `key` whole, when what is there is still what `expected` says;
    /// else fail with `Error::Conflict` and change nothing.
    fn put(&mut self, key: &str, bytes: &[u8], expected: &Expected) -> Result<()>;
    /// Remove the value at `key` (nothing there is no error), on the same condition.
    fn delete(&mut self, key: &str, expected: &Expected) -> Result<()>;
    /// Whether the change is seen whole or not at all (an Icechunk commit): the order of
    /// its puts does not matter to readers.
    fn all_or_nothing(&self) -> bool {
        false
    }
    /// Make the change visible, `message` saying what it was (an Icechunk commit's
    /// message). A store whose puts each stand alone (a folder) has nothing left to do;
    /// one that groups them makes none of a change dropped unfinished visible.
    fn finish(self: Box<Self>, message: &str) -> Result<()>;
}
