//! Where references may read, and the reading of them: a reference (a kerchunk set's
//! chunk, an Icechunk virtual chunk) names a byte range of a target file, local or
//! remote. A reference is data from elsewhere: its target is read only when it lies
//! under one of the allowed prefixes, through a store rooted at that prefix (a folder
//! store, which refuses `..` and symlinks leading out, or a remote store on the shared
//! source of its bucket or host); anything else fails that key alone. Neighbouring
//! chunks of one remote target are fetched together ([`Spans`]).

use std::borrow::Borrow;
use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, OnceLock};

use super::{ByteRange, FolderStore, Spans, Store, StoreConfig, Value, Version, REQUEST_BYTES};
use crate::error::{Error, Result};

/// An allowed prefix and the store that reads under it, made at first use.
struct Allowed {
    prefix: Prefix,
    store: OnceLock<std::result::Result<Arc<dyn Store>, String>>,
}

/// Where references may point: a local folder, or a URL ending in `/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Prefix {
    Local(PathBuf),
    Url(String),
}

/// A target of a reference: a local path or a URL, lexically normalized.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Target {
    Local(PathBuf),
    Url(String),
}

/// The allowed prefixes of a set of references, and the runs fetched from their targets.
pub(super) struct Targets {
    allowed: Vec<Allowed>,
    cfg: StoreConfig,
    /// Runs of neighbouring chunks of one remote target, fetched in one request.
    spans: Spans,
}

/// The `(offset, len)` of the chunks of a target read together (`None`: no bytes).
pub(super) type Members = Vec<Option<(u64, u64)>>;

/// Where a chunk lies among the chunks of its target that are read together with it:
/// the name of that group (unique to its list of members), the members' `(offset, len)`
/// (made when first needed) and the chunk's place among them.
pub(super) struct Near<'a> {
    pub object: String,
    pub members: Box<dyn FnOnce() -> Members + 'a>,
    pub member: usize,
}

/// The byte ranges a set of chunks reads in each target, and the place of each chunk
/// (by its key `K`) among its target's: what [`Spans`] groups into runs.
pub(super) struct Neighbours<K> {
    ranges: BTreeMap<Target, Members>,
    place: HashMap<K, usize>,
}

impl<K> Default for Neighbours<K> {
    fn default() -> Self {
        Neighbours {
            ranges: BTreeMap::new(),
            place: HashMap::new(),
        }
    }
}

impl<K: Hash + Eq + 'static> Neighbours<K> {
    /// Chunk `key` reads `range` of `target` (`None`: a range that cannot be read).
    pub(super) fn add(&mut self, key: K, target: Target, range: Option<(u64, u64)>) {
        let ranges = self.ranges.entry(target).or_default();
        self.place.insert(key, ranges.len());
        ranges.push(range);
    }

    /// Where chunk `key` of `target` lies among its target's chunks, read together as the
    /// group named `object`.
    pub(super) fn near<Q>(
        self: &Arc<Self>,
        key: &Q,
        target: &Target,
        object: String,
    ) -> Option<Near<'static>>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let member = *self.place.get(key)?;
        if !self.ranges.contains_key(target) {
            return None;
        }
        let (all, target) = (self.clone(), target.clone());
        Some(Near {
            object,
            member,
            members: Box::new(move || all.ranges.get(&target).cloned().unwrap_or_default()),
        })
    }
}

impl Targets {
    /// References that may read under `prefixes` (the first is the base of relative
    /// ones), with the store options of `cfg`.
    pub(super) fn new(prefixes: Vec<Prefix>, cfg: &StoreConfig) -> Targets {
        Targets {
            allowed: prefixes.into_iter().map(Allowed::new).collect(),
            cfg: cfg.clone(),
            spans: Spans::read_once(super::spans::budget_for(cfg.max_requests, REQUEST_BYTES)),
        }
    }

    /// The first allowed prefix (the folder of a reference set).
    pub(super) fn base(&self) -> Option<&Prefix> {
        self.allowed.first().map(|a| &a.prefix)
    }

    /// Whether any allowed prefix is remote.
    pub(super) fn any_remote(&self) -> bool {
        self.allowed
            .iter()
            .any(|a| matches!(a.prefix, Prefix::Url(_)))
    }

    /// The value of `key`, which refers to `len` bytes at `offset` of `target` (the whole
    /// target when `len` is None), or to part of them (`range`). A whole chunk of a
    /// remote target is read with its neighbours when `near` places it among them.
    pub(super) fn read<'a>(
        &'a self,
        key: &str,
        target: &Target,
        offset: u64,
        len: Option<u64>,
        range: Option<ByteRange>,
        near: impl FnOnce() -> Option<Near<'a>>,
    ) -> Result<Value> {
        let (store, tkey) = self.store_of(key, target)?;
        if let (None, Some(len)) = (range, len) {
            if let Some(bytes) = self.coalesced(key, &store, &tkey, len, near) {
                return Ok(Value {
                    bytes,
                    version: Version::Unknown,
                });
            }
        }
        let what = Referred {
            kind: "reference",
            noun: "target",
            shown: target.shown(),
        };
        read_part(store.as_ref(), key, &tkey, &what, offset, len, range)
    }

    /// The `len` bytes `key` refers to (read as `tkey` of `store`), from the run of
    /// neighbouring chunks around it, fetched in one request when the target is remote;
    /// `None` when it is to be read alone.
    fn coalesced<'a>(
        &'a self,
        key: &str,
        store: &Arc<dyn Store>,
        tkey: &str,
        len: u64,
        near: impl FnOnce() -> Option<Near<'a>>,
    ) -> Option<Vec<u8>> {
        let request = store.caps().request_bytes;
        if request == 0 {
            return None;
        }
        let near = near()?;
        // A run that cannot be had (a neighbour's range past the target's end, the
        // target unreachable) leaves each chunk to its own read and its own error.
        let fetch = |offset, n| {
            store
                .read(tkey, Some(ByteRange::Span { offset, len: n }))?
                .filter(|v| v.bytes.len() as u64 == n)
                .ok_or_else(|| Error::corrupt(key, "short run"))
        };
        let got = self.spans.read(
            &near.object,
            &Version::Unknown,
            near.members,
            near.member,
            request,
            fetch,
        );
        got.ok().flatten().filter(|b| b.len() as u64 == len)
    }

    /// The store that reads `target`, and its key there; an error naming the target when
    /// it lies under no allowed prefix.
    pub(super) fn store_of(&self, key: &str, target: &Target) -> Result<(Arc<dyn Store>, String)> {
        for a in &self.allowed {
            let Some(rel) = a.prefix.contains(target) else {
                continue;
            };
            let store = a
                .store
                .get_or_init(|| a.prefix.open(&self.cfg).map_err(|e| e.to_string()))
                .clone()
                .map_err(|e| Error::Io {
                    key: key.to_string(),
                    source: std::io::Error::other(e),
                })?;
            return Ok((store, rel));
        }
        Err(Error::Io {
            key: key.to_string(),
            source: std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                format!(
                    "reference target {} lies outside the allowed prefixes ({}; add one with --virtual-prefix)",
                    target.shown(),
                    self.allowed.iter().map(|a| a.prefix.shown()).collect::<Vec<_>>().join(", ")
                ),
            ),
        })
    }
}

/// Where a set whose folder is `base` may read: there, and under `cfg.virtual_prefixes`.
pub(super) fn allow_list(base: &Prefix, cfg: &StoreConfig) -> Result<Vec<Prefix>> {
    let mut allowed = vec![base.clone()];
    for p in &cfg.virtual_prefixes {
        allowed.push(prefix_of(p, base)?);
    }
    Ok(allowed)
}

/// The folder a reference file at `location` lies in: its allowed prefix by default.
pub(super) fn base_of(location: &str) -> Prefix {
    if let Some(url) = url_of(location) {
        let cut = url.rfind('/').map_or(url.len(), |i| i + 1);
        return Prefix::Url(url[..cut].to_string());
    }
    let path = Path::new(location.strip_prefix("file://").unwrap_or(location));
    let real = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    Prefix::Local(real.parent().map(Path::to_path_buf).unwrap_or_default())
}

/// `text` when it is a URL of a remote scheme (not `file://`).
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
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
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

/// A target as written in the reference set, resolved against `base`.
pub(super) fn resolve(url: &str, base: &Prefix) -> Target {
    if let Some(u) = url_of(url) {
        return Target::Url(u);
    }
    let path = Path::new(url.strip_prefix("file://").unwrap_or(url));
    match base {
        _ if path.is_absolute() => Target::Local(normalize_path(path)),
        Prefix::Local(dir) => Target::Local(normalize_path(&dir.join(path))),
        Prefix::Url(u) => Target::Url(format!("{u}{}", url.trim_start_matches('/'))).normalized(),
    }
}

/// A `--virtual-prefix` value as a prefix: a URL, or a local folder (relative to the
/// reference set's folder when relative).
pub(super) fn prefix_of(text: &str, base: &Prefix) -> Result<Prefix> {
    if let Some(u) = url_of(text) {
        let u = if u.ends_with('/') { u } else { format!("{u}/") };
        return Ok(Prefix::Url(u));
    }
    let path = Path::new(text.strip_prefix("file://").unwrap_or(text));
    let path = match base {
        Prefix::Local(dir) if path.is_relative() => dir.join(path),
        _ => path.to_path_buf(),
    };
    let real = path
        .canonicalize()
        .map_err(|e| Error::Invalid(format!("--virtual-prefix {text}: {e}")))?;
    Ok(Prefix::Local(real))
}

impl Target {
    fn normalized(self) -> Target {
        match self {
            Target::Url(u) => match url_of(&u) {
                Some(n) => Target::Url(n),
                None => Target::Url(u),
            },
            t => t,
        }
    }

    pub(super) fn shown(&self) -> String {
        match self {
            Target::Local(p) => p.display().to_string(),
            Target::Url(u) => u.clone(),
        }
    }
}

/// How [`read_part`] names what it reads in messages: the range as `KIND range`, the
/// object as `KIND NOUN SHOWN` (`reference target URL`, `chunk object PATH`).
pub(super) struct Referred {
    pub kind: &'static str,
    pub noun: &'static str,
    pub shown: String,
}

/// The value of `key`, which refers to `len` bytes at `offset` of object `tkey` of
/// `store` (the whole object when `len` is None), or to part of them (`range`): exactly
/// those bytes, or an error naming `what`.
pub(super) fn read_part(
    store: &dyn Store,
    key: &str,
    tkey: &str,
    what: &Referred,
    offset: u64,
    len: Option<u64>,
    range: Option<ByteRange>,
) -> Result<Value> {
    let Referred { kind, noun, shown } = what;
    let asked = match (len, range) {
        (None, r) => r,
        (Some(len), None) => Some(ByteRange::Span { offset, len }),
        (Some(len), Some(r)) => {
            let (o, l) = r.clip(len);
            let offset = offset.checked_add(o).ok_or_else(|| {
                Error::corrupt(key, format!("{kind} range {offset}+{len} past 2^64"))
            })?;
            Some(ByteRange::Span { offset, len: l })
        }
    };
    let value = store
        .read(tkey, asked)
        .map_err(|e| Error::Io {
            key: key.to_string(),
            source: std::io::Error::other(format!("{kind} {noun} {shown}: {e}")),
        })?
        .ok_or_else(|| Error::Io {
            key: key.to_string(),
            source: std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("{kind} {noun} {shown} is missing"),
            ),
        })?;
    if let Some(ByteRange::Span { len: want, .. }) = asked {
        if value.bytes.len() as u64 != want {
            return Err(Error::corrupt(
                key,
                format!("{kind} range {offset}+{want} lies past the end of {shown}"),
            ));
        }
    }
    Ok(value)
}

impl Allowed {
    fn new(prefix: Prefix) -> Allowed {
        Allowed {
            prefix,
            store: OnceLock::new(),
        }
    }
}

impl Prefix {
    /// The key of `target` under this prefix, when it lies there.
    fn contains(&self, target: &Target) -> Option<String> {
        match (self, target) {
            (Prefix::Local(dir), Target::Local(path)) if dir.is_absolute() => {
                let rel = path.strip_prefix(dir).ok()?;
                let key = rel.to_str()?.to_string();
                (!key.is_empty()).then_some(key)
            }
            (Prefix::Url(prefix), Target::Url(url)) => {
                let rel = url.strip_prefix(prefix.as_str())?;
                (!rel.is_empty()).then(|| rel.to_string())
            }
            _ => None,
        }
    }

    /// The store reading under this prefix.
    fn open(&self, cfg: &StoreConfig) -> Result<Arc<dyn Store>> {
        match self {
            Prefix::Local(dir) => Ok(Arc::new(FolderStore::open(dir)?)),
            Prefix::Url(url) => super::open::open_remote_prefix(url, cfg),
        }
    }

    fn shown(&self) -> String {
        match self {
            Prefix::Local(p) => format!("{}/", p.display()),
            Prefix::Url(u) => u.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_resolve_lexically_and_must_lie_under_an_allowed_prefix() {
        let base = Prefix::Local(PathBuf::from("/data/refs"));
        assert_eq!(
            resolve("nc/../../other.nc", &base),
            Target::Local(PathBuf::from("/data/other.nc"))
        );
        assert_eq!(base.contains(&resolve("nc/../../other.nc", &base)), None);
        assert_eq!(
            base.contains(&resolve("file:///data/refs/nc/a.nc", &base)),
            Some("nc/a.nc".to_string())
        );
        let s3 = Prefix::Url("s3://bucket/nc/".into());
        assert_eq!(
            s3.contains(&resolve("s3://bucket/nc/x/../a.nc", &base)),
            Some("a.nc".to_string())
        );
        assert_eq!(
            s3.contains(&resolve("s3://bucket/nc/../secret", &base)),
            None
        );
        assert_eq!(s3.contains(&resolve("s3://bucket/ncx/a.nc", &base)), None);
    }
}
