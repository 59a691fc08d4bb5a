//! The store layer's own failures, typed: what a reference or a repository asked for that
//! cannot be had, and failures of the Icechunk crate, each with its source. A failure is
//! reported at the key it was read for ([`crate::Error::failed`]).

use crate::error::Error;

/// How a store failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The Icechunk crate failed to do `what`.
    #[error("icechunk: {what}: {source}")]
    Icechunk {
        what: String,
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A referred object (a reference's target, a chunk object) failed to read.
    #[error("{kind} {noun} {shown}: {source}")]
    Referred {
        kind: &'static str,
        noun: &'static str,
        shown: String,
        source: Box<Error>,
    },
    /// A referred object is not there.
    #[error("{kind} {noun} {shown} is missing")]
    Missing {
        kind: &'static str,
        noun: &'static str,
        shown: String,
    },
    /// A reference's target lies outside every allowed prefix.
    #[error(
        "reference target {target} lies outside the allowed prefixes ({allowed}; add one with --virtual-prefix)"
    )]
    NotAllowed { target: String, allowed: String },
    /// A virtual chunk names a container the repository does not have.
    #[error("virtual chunk {location}: no container named {name}")]
    NoContainer { location: String, name: String },
    /// A snapshot ID that is none.
    #[error("icechunk: snapshot {id:?}: {reason}")]
    SnapshotId { id: String, reason: &'static str },
    /// The store runtime could not be started.
    #[error("store runtime: {0}")]
    Runtime(#[source] std::sync::Arc<std::io::Error>),
}

impl StoreError {
    /// This failure, reported at `key`.
    pub fn at(self, key: impl Into<String>) -> Error {
        Error::failed(key, self)
    }
}
