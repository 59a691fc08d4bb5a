//! What identifies the content of an object: a version that changes whenever the content
//! does (a local file's modification time and size, a remote object's ETag, a
//! repository's snapshot, a memory store's insertion), typed by where it came from. It is
//! compared, hashed and shown, never parsed back from text.

use std::fmt;

/// The version of a value, read together with it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Version {
    /// The store cannot tell.
    Unknown,
    /// A local file: its modification time (seconds and nanoseconds) and size.
    File { secs: i64, nanos: i64, size: u64 },
    /// A remote object with an ETag, its modification time (seconds), and the
    /// object's own version when the store names one (GCS's generation, S3's version
    /// ID): what a conditional update of it names on GCS.
    ETag {
        etag: String,
        modified: i64,
        generation: Option<String>,
    },
    /// A remote object without an ETag: its size and modification time (nanoseconds).
    Object { size: u64, nanos: i64 },
    /// A value of a memory store: the insertion that wrote it.
    Generation(u64),
    /// A snapshot of a versioned repository (an Icechunk snapshot's ID).
    Snapshot(String),
    /// The versions of the documents one node was read from (a v2 array's `.zarray`
    /// and `.zattrs`).
    Joined(Box<Version>, Box<Version>),
    /// One reading of a node whose chunks may change under unchanged metadata: each
    /// reading is a version of its own.
    Reading(Box<Version>, u64),
    /// A version named by a label alone (an archive's own, tests).
    Label(String),
}

impl Version {
    /// A local file's version, from the metadata of the descriptor it is read through.
    pub fn of_file(meta: &std::fs::Metadata) -> Version {
        use std::os::unix::fs::MetadataExt;
        Version::File {
            secs: meta.mtime(),
            nanos: meta.mtime_nsec(),
            size: meta.len(),
        }
    }

    /// The versions of two documents of one node as one; unknown when either is.
    pub fn joined(a: Version, b: &Version) -> Version {
        if a == Version::Unknown || *b == Version::Unknown {
            return Version::Unknown;
        }
        Version::Joined(Box::new(a), Box::new(b.clone()))
    }

    /// Whether the store could tell the version.
    pub fn is_known(&self) -> bool {
        *self != Version::Unknown
    }

    /// The version of the first document a joined version was read from (itself when
    /// not joined).
    pub fn first(&self) -> &Version {
        match self {
            Version::Joined(a, _) => a.first(),
            other => other,
        }
    }

    /// The ETag of a remote object's version, unquoted.
    pub fn etag(&self) -> Option<&str> {
        match self {
            Version::ETag { etag, .. } => Some(etag.trim_matches('"')),
            _ => None,
        }
    }

    /// The modification time (Unix seconds) of a local file's or a remote object's
    /// version.
    pub fn modified(&self) -> Option<i64> {
        match self {
            Version::File { secs, .. } => Some(*secs),
            Version::ETag { modified, .. } => Some(*modified),
            Version::Object { nanos, .. } => Some(nanos.div_euclid(1_000_000_000)),
            _ => None,
        }
    }

    /// The snapshot ID of a repository's version.
    pub fn snapshot(&self) -> Option<&str> {
        match self {
            Version::Snapshot(id) => Some(id),
            _ => None,
        }
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Version::Unknown => f.write_str("unknown"),
            Version::File { secs, nanos, size } => write!(f, "mtime:{secs}.{nanos:09}:size:{size}"),
            Version::ETag {
                etag,
                modified,
                generation,
            } => {
                write!(f, "etag:{etag} modified:{modified}")?;
                match generation {
                    Some(g) => write!(f, " generation:{g}"),
                    None => Ok(()),
                }
            }
            Version::Object { size, nanos } => write!(f, "size:{size}:{nanos}"),
            Version::Generation(n) => write!(f, "insert:{n}"),
            Version::Snapshot(id) => write!(f, "snapshot:{id}"),
            Version::Joined(a, b) => write!(f, "{a}+{b}"),
            Version::Reading(v, n) => write!(f, "{v} (reading {n})"),
            Version::Label(label) => f.write_str(label),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_etags_come_from_their_own_fields() {
        let etag = Version::ETag {
            etag: "\"abc\"".into(),
            modified: 5,
            generation: None,
        };
        assert_eq!(etag.etag(), Some("abc"));
        assert_eq!(etag.modified(), Some(5));
        let object = Version::Object {
            size: 10,
            nanos: 1_999_000_000,
        };
        assert_eq!(object.modified(), Some(1));
        assert_eq!(object.etag(), None);
        let file = Version::File {
            secs: 7,
            nanos: 1,
            size: 3,
        };
        assert_eq!(file.modified(), Some(7));
        assert_eq!(Version::Snapshot("S".into()).snapshot(), Some("S"));
        assert_eq!(Version::Label("x".into()).modified(), None);
    }

    #[test]
    fn a_joined_version_is_unknown_when_a_part_is_and_leads_to_its_first() {
        let a = Version::Generation(1);
        let b = Version::Generation(2);
        let joined = Version::joined(a.clone(), &b);
        assert_eq!(joined.first(), &a);
        assert_ne!(joined, Version::joined(a.clone(), &a));
        assert_eq!(Version::joined(a, &Version::Unknown), Version::Unknown);
        assert!(!Version::joined(Version::Unknown, &b).is_known());
    }
}
