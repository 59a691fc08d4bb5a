//! The one error type of zarrfs: what failed, where (store key or node path) and why,
//! and its mapping to an errno.

use std::io;
use std::sync::Arc;

/// Everything that can go wrong between a request and the store.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No node, key or name at this path.
    #[error("{0}: not found")]
    NotFound(String),
    /// A node uses a data type, codec or extension zarrfs does not implement.
    #[error("{at}: unsupported {what}")]
    Unsupported { at: String, what: String },
    /// A metadata document is malformed.
    #[error("{key}: invalid metadata: {reason}")]
    Metadata { key: String, reason: String },
    /// A stored chunk (or shard, or index) failed to decode.
    #[error("{key}: corrupt chunk: {reason}")]
    Corrupt { key: String, reason: String },
    /// A key that would leave the store root or is otherwise not allowed.
    #[error("{0}: invalid store key")]
    InvalidKey(String),
    /// An I/O failure reading the store.
    #[error("{key}: {source}")]
    Io { key: String, source: io::Error },
    /// A failure of a subsystem's own kind at `key` (a store's: a reference target out of
    /// bounds, the Icechunk crate's), with its source chain.
    #[error("{key}: {source}")]
    Failed {
        key: String,
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A failure computed once and shared by every reader that waited for it (a run of
    /// neighbouring ranges, a references file, a target's store), seen at `key`.
    #[error("{key}: {source}")]
    Shared { key: String, source: Arc<Error> },
    /// A request that does not make sense for this node (e.g. reading a group).
    #[error("{0}")]
    Invalid(String),
    /// A failure inside zarrfs (a broken invariant, an encoder that failed): the reader
    /// sees EIO, like any other failed read.
    #[error("internal error: {0}")]
    Internal(String),
    /// No such extended attribute.
    #[error("no such attribute")]
    NoAttribute,
    /// The filesystem is read-only.
    #[error("read-only filesystem")]
    ReadOnly,
    /// What is at `key` cannot be written here (a codec without an encoder, a store
    /// that takes no writes): the call fails with `EROFS`.
    #[error("{key}: cannot be written: {reason}")]
    NotWritable { key: String, reason: String },
    /// Another writer changed the value at `key` since it was read: nothing was written.
    #[error("{key}: changed by another writer since it was read ({reason}); not written")]
    Conflict { key: String, reason: String },
    /// A write that needs room the staging folder does not have.
    #[error("{at}: no space left for staged writes ({source})")]
    NoSpace { at: String, source: io::Error },
    /// A size or offset a write cannot have (not a whole number of rows, past the end).
    #[error("{0}")]
    BadWrite(String),
    /// A node to be made is there already.
    #[error("{0}: exists")]
    Exists(String),
    /// A group to be removed still has nodes in it.
    #[error("{0}: not empty")]
    NotEmpty(String),
    /// Another writer has the array open, longer than `--write-wait`.
    #[error("{0}: another writer has it open")]
    Busy(String),
    /// A mount that could not start: a store or mountpoint that cannot be used, a session
    /// the kernel refused, a background daemon that did not come up. The message names
    /// the cause too (the command line prints only the message); `source` is the failure
    /// underneath, when there is one.
    #[error("{message}")]
    Startup {
        message: String,
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn unsupported(at: impl Into<String>, what: impl Into<String>) -> Self {
        Error::Unsupported {
            at: at.into(),
            what: what.into(),
        }
    }

    pub fn metadata(key: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::Metadata {
            key: key.into(),
            reason: reason.into(),
        }
    }

    pub fn corrupt(key: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::Corrupt {
            key: key.into(),
            reason: reason.into(),
        }
    }

    /// A subsystem's failure at `key`.
    pub fn failed(
        key: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Error::Failed {
            key: key.into(),
            source: Box::new(source),
        }
    }

    /// `source`, computed once and shared, as seen at `key`.
    pub fn shared(key: impl Into<String>, source: &Arc<Error>) -> Self {
        Error::Shared {
            key: key.into(),
            source: source.clone(),
        }
    }

    /// A start-up failure with no failure underneath.
    pub fn startup(message: impl Into<String>) -> Self {
        Error::Startup {
            message: message.into(),
            source: None,
        }
    }

    /// A start-up failure of `what` because of `source`: the message is `what: source`.
    pub fn startup_from(
        what: impl std::fmt::Display,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Error::Startup {
            message: format!("{what}: {source}"),
            source: Some(Box::new(source)),
        }
    }

    /// Attach a store key to an error raised without one (codec errors carry "" until
    /// the array layer knows which chunk it was decoding).
    pub fn at_key(self, key: &str) -> Self {
        match self {
            Error::Corrupt { key: k, reason } if k.is_empty() => Error::Corrupt {
                key: key.to_string(),
                reason,
            },
            Error::Unsupported { at, what } if at.is_empty() => Error::Unsupported {
                at: key.to_string(),
                what,
            },
            Error::Metadata { key: k, reason } if k.is_empty() => Error::Metadata {
                key: key.to_string(),
                reason,
            },
            other => other,
        }
    }

    /// The errno a filesystem caller sees for this error.
    pub fn errno(&self) -> i32 {
        match self {
            Error::Shared { source, .. } => source.errno(),
            Error::NotFound(_) => libc::ENOENT,
            Error::ReadOnly | Error::NotWritable { .. } => libc::EROFS,
            Error::NoSpace { .. } => libc::ENOSPC,
            Error::BadWrite(_) => libc::EINVAL,
            Error::Busy(_) => libc::EBUSY,
            Error::Exists(_) => libc::EEXIST,
            Error::NotEmpty(_) => libc::ENOTEMPTY,
            Error::Invalid(_) => libc::EINVAL,
            Error::NoAttribute => libc::ENODATA,
            _ => libc::EIO,
        }
    }
}

/// A failure writing the output stream (`zarrfs cat`, `inspect`).
pub fn output_error(source: io::Error) -> Error {
    Error::Io {
        key: "output".into(),
        source,
    }
}

/// Shorthand for a decode failure whose key is filled in by the caller.
pub fn corrupt(reason: impl Into<String>) -> Error {
    Error::corrupt("", reason)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_startup_failure_names_its_cause_and_keeps_it_as_its_source() {
        let e = Error::startup_from("mountpoint /m", io::Error::from_raw_os_error(libc::ENOENT));
        assert_eq!(
            e.to_string(),
            "mountpoint /m: No such file or directory (os error 2)"
        );
        assert!(std::error::Error::source(&e).is_some());
        let plain = Error::startup("mountpoint /m: not a directory");
        assert_eq!(plain.to_string(), "mountpoint /m: not a directory");
        assert!(std::error::Error::source(&plain).is_none());
    }
}
