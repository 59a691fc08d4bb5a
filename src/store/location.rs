//! Where a store, a reference target or an allowed prefix lies: a local path or a URL of
//! a remote scheme, parsed once from what a user or a reference set wrote, lexically
//! normalized (`.` and `..` resolved, never above a URL's host or a path's root), joined
//! and shown the same way everywhere.

use std::fmt;
use std::path::{Component, Path, PathBuf};

/// The URL schemes of remote stores (object storage and web servers).
pub const SCHEMES: &[&str] = &[
    "s3", "s3a", "gs", "gcs", "az", "azure", "abfs", "abfss", "http", "https",
];

/// A local path or a URL of a remote scheme (`file://` URLs are local paths).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Location {
    /// A local file or folder.
    Local(PathBuf),
    /// A URL: its scheme lower-cased, its path with `.` and `..` resolved.
    Url(String),
}

impl Location {
    /// `text` as written by a user or a reference set: a URL when it has a scheme other
    /// than `file`, else a local path.
    pub fn parse(text: &str) -> Location {
        match url_of(text) {
            Some(url) => Location::Url(url),
            None => Location::Local(PathBuf::from(text.strip_prefix("file://").unwrap_or(text))),
        }
    }

    /// The scheme of a URL (`None`: a local path).
    pub fn scheme(&self) -> Option<&str> {
        match self {
            Location::Url(u) => u.split_once("://").map(|(s, _)| s),
            Location::Local(_) => None,
        }
    }

    /// Whether this is a URL of a scheme zarrfs reads ([`SCHEMES`]).
    pub fn is_known_scheme(&self) -> bool {
        self.scheme().is_some_and(|s| SCHEMES.contains(&s))
    }

    /// The local path, for a local location.
    pub fn as_path(&self) -> Option<&Path> {
        match self {
            Location::Local(p) => Some(p),
            Location::Url(_) => None,
        }
    }

    /// The URL text, for a URL.
    pub fn as_url(&self) -> Option<&str> {
        match self {
            Location::Url(u) => Some(u),
            Location::Local(_) => None,
        }
    }

    /// This location as a folder: a URL ending in `/`; a path unchanged.
    pub fn as_folder(&self) -> Location {
        match self {
            Location::Url(u) if !u.ends_with('/') => Location::Url(format!("{u}/")),
            other => other.clone(),
        }
    }

    /// The folder this location lies in: a URL cut after its last `/`, a path's parent.
    pub fn parent(&self) -> Location {
        match self {
            Location::Url(u) => {
                let cut = u.rfind('/').map_or(u.len(), |i| i + 1);
                Location::Url(u[..cut].to_string())
            }
            Location::Local(p) => {
                Location::Local(p.parent().map(Path::to_path_buf).unwrap_or_default())
            }
        }
    }

    /// `reference` resolved against this folder: a URL or an absolute path as it is, a
    /// relative one below this folder, normalized.
    pub fn join(&self, reference: &str) -> Location {
        let target = Location::parse(reference);
        match (self, target) {
            (_, url @ Location::Url(_)) => url,
            (_, Location::Local(p)) if p.is_absolute() => Location::Local(normalize_path(&p)),
            (Location::Local(dir), Location::Local(p)) => {
                Location::Local(normalize_path(&dir.join(p)))
            }
            (Location::Url(u), Location::Local(_)) => {
                let folder = if u.ends_with('/') {
                    u.clone()
                } else {
                    format!("{u}/")
                };
                Location::parse(&format!("{folder}{}", reference.trim_start_matches('/')))
            }
        }
    }

    /// The part of `target` below this folder, when it lies there (and is not the folder
    /// itself): the key a store rooted here reads it by.
    pub fn relative(&self, target: &Location) -> Option<String> {
        match (self, target) {
            (Location::Local(dir), Location::Local(path)) if dir.is_absolute() => {
                let rel = path.strip_prefix(dir).ok()?;
                let key = rel.to_str()?.to_string();
                (!key.is_empty()).then_some(key)
            }
            (Location::Url(prefix), Location::Url(url)) => {
                let folder = if prefix.ends_with('/') {
                    prefix.clone()
                } else {
                    format!("{prefix}/")
                };
                let rel = url.strip_prefix(folder.as_str())?;
                (!rel.is_empty()).then(|| rel.to_string())
            }
            _ => None,
        }
    }

    /// The last part of the location's path, a URL's %-decoded.
    pub fn name(&self) -> String {
        match self {
            Location::Url(u) => {
                let trimmed = u.trim_end_matches('/');
                let last = trimmed.rsplit('/').next().unwrap_or(trimmed);
                percent_encoding::percent_decode_str(last)
                    .decode_utf8_lossy()
                    .into_owned()
            }
            Location::Local(p) => {
                let real = p.canonicalize().ok();
                let shown = p.to_string_lossy();
                real.as_deref()
                    .and_then(Path::file_name)
                    .map(|n| n.to_string_lossy().to_string())
                    .unwrap_or_else(|| {
                        let trimmed = shown.trim_end_matches('/');
                        trimmed.rsplit('/').next().unwrap_or(trimmed).to_string()
                    })
            }
        }
    }

    /// Whether the location's name ends in `ending` (ASCII case ignored, a trailing `/`
    /// too).
    pub fn name_ends_with(&self, ending: &str) -> bool {
        path_ends_with(&self.to_string(), ending)
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Local(p) => write!(f, "{}", p.display()),
            Location::Url(u) => f.write_str(u),
        }
    }
}

/// Whether the path `path` ends in `ending` (ASCII case and a trailing `/` ignored).
pub fn path_ends_with(path: &str, ending: &str) -> bool {
    path.to_ascii_lowercase()
        .trim_end_matches('/')
        .ends_with(ending)
}

/// `text` when it is a URL of a remote scheme (not `file://`), normalized.
fn url_of(text: &str) -> Option<String> {
    let (scheme, rest) = text.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    (scheme != "file"
        && !scheme.is_empty()
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '+'))
    .then(|| format!("{scheme}://{}", normalize_url_path(rest)))
}

/// A URL's `host/path` with `.` and `..` segments resolved (never above the host).
fn normalize_url_path(rest: &str) -> String {
    let Some((host, path)) = rest.split_once('/') else {
        return rest.to_string();
    };
    let mut parts: Vec<&str> = Vec::new();
    for seg in path.split('/') {
        match seg {
            "." => {}
            ".." => {
                parts.pop();
            }
            s => parts.push(s),
        }
    }
    format!("{host}/{}", parts.join("/"))
}

/// A local path with `.` and `..` resolved lexically (symlinks are the folder store's).
fn normalize_path(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_paths_are_told_apart_and_normalized() {
        assert_eq!(
            Location::parse("/data/a.zarr"),
            Location::Local("/data/a.zarr".into())
        );
        assert_eq!(
            Location::parse("file:///data/a.zarr"),
            Location::Local("/data/a.zarr".into())
        );
        let s3 = Location::parse("S3://bucket/x/../a");
        assert_eq!(s3, Location::Url("s3://bucket/a".into()));
        assert_eq!(s3.scheme(), Some("s3"));
        assert!(s3.is_known_scheme());
        assert!(!Location::parse("ftp://h/x").is_known_scheme());
        assert_eq!(Location::parse("https://h").to_string(), "https://h");
    }

    #[test]
    fn references_join_below_their_folder_and_must_lie_there() {
        let base = Location::Local("/data/refs".into());
        let out = base.join("nc/../../other.nc");
        assert_eq!(out, Location::Local("/data/other.nc".into()));
        assert_eq!(base.relative(&out), None);
        assert_eq!(
            base.relative(&base.join("file:///data/refs/nc/a.nc")),
            Some("nc/a.nc".into())
        );
        let s3 = Location::parse("s3://bucket/nc/");
        assert_eq!(
            s3.relative(&base.join("s3://bucket/nc/x/../a.nc")),
            Some("a.nc".into())
        );
        assert_eq!(s3.relative(&base.join("s3://bucket/nc/../secret")), None);
        assert_eq!(s3.relative(&base.join("s3://bucket/ncx/a.nc")), None);
        assert_eq!(
            s3.join("../b/c.nc"),
            Location::Url("s3://bucket/b/c.nc".into())
        );
        assert_eq!(
            Location::parse("https://h/d/set.json").parent(),
            Location::Url("https://h/d/".into())
        );
    }

    #[test]
    fn names_are_decoded() {
        assert_eq!(
            Location::parse("s3://b/x/my%20data.zarr.zip").name(),
            "my data.zarr.zip"
        );
        assert_eq!(
            Location::parse("https://h/d/v3_root_array/").name(),
            "v3_root_array"
        );
        assert!(Location::parse("x/data.zarr.ZIP").name_ends_with(".zip"));
    }
}
