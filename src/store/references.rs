//! A kerchunk reference set as a store: Zarr metadata plus, for every chunk key, inline
//! bytes or a byte range of another file (a NetCDF-4 or HDF5 archive, local or remote).
//! Read from kerchunk's JSON (version 0, and version 1 with `templates` and `gen`),
//! optionally gzip- or zstd-compressed. A reference is data from elsewhere: its targets
//! are read only under the allowed prefixes (the reference set's own folder, and those
//! given with `--virtual-prefix`), each through a store rooted at its prefix (a folder
//! store, which refuses `..` and symlinks leading out, or a remote store on the shared
//! source of its bucket or host); anything else fails that key alone.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, OnceLock};

use base64::Engine;
use serde_json::{Map, Value as Json};

use super::references_parquet::{ParquetRefs, Row};
use super::{
    ByteRange, Caps, FolderStore, Head, Listing, Spans, Store, StoreConfig, Value, Version,
};
use crate::error::{Error, Result};

/// Keys a `gen` entry may make at most (all entries together).
const MAX_GENERATED: u64 = 10_000_000;
/// Bytes a reference file may hold, or expand to when compressed, at most.
pub const MAX_REFERENCE_BYTES: u64 = 4 << 30;
/// Bytes worth one request to a remote target.
const REQUEST_BYTES: u64 = 8 << 20;
/// Template steps one rendering may take (minijinja's fuel).
const TEMPLATE_FUEL: u64 = 100_000;

/// What a key resolves to.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Ref {
    /// The value itself.
    Inline(Vec<u8>),
    /// `len` bytes at `offset` of target `target` (the whole target when `len` is None).
    Range {
        target: Arc<Target>,
        offset: u64,
        len: Option<u64>,
    },
    /// A reference that cannot be read (bad base64, a range past 2^63, ...): its key
    /// fails alone, with this reason.
    Invalid(String),
}

/// Where references may point: a prefix (a local folder, or a URL ending in `/`) and the
/// store that reads under it, made at first use.
struct Allowed {
    prefix: Prefix,
    store: OnceLock<std::result::Result<Arc<dyn Store>, String>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Prefix {
    Local(PathBuf),
    Url(String),
}

/// A target of the reference set: a local path or a URL, lexically normalized.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Target {
    Local(PathBuf),
    Url(String),
}

/// Where the references are: all in memory (JSON), or in Parquet files read lazily.
enum Refs {
    Json(BTreeMap<String, Ref>),
    Parquet(ParquetRefs),
}

pub struct ReferenceStore {
    /// The reference file, for messages.
    label: String,
    refs: Refs,
    allowed: Vec<Allowed>,
    version: Version,
    cfg: StoreConfig,
    /// Runs of neighbouring chunks of one remote target, fetched in one request.
    spans: Spans,
    /// Where each chunk lies among its target's chunks, made at the first coalesced read.
    neighbours: OnceLock<Neighbours>,
}

/// Bytes of fetched runs a reference set keeps: enough for every request in flight.
fn run_budget(cfg: &StoreConfig) -> u64 {
    (cfg.max_requests as u64)
        .saturating_mul(REQUEST_BYTES)
        .max(super::spans::BUDGET)
}

/// The byte ranges the references point to in each target (in key order), and the place
/// of each key's range among its target's: what [`Spans`] groups into runs.
#[derive(Default)]
struct Neighbours {
    ranges: BTreeMap<Target, Vec<Option<(u64, u64)>>>,
    place: std::collections::HashMap<String, usize>,
}

impl Neighbours {
    fn of(refs: &Refs) -> Neighbours {
        let mut n = Neighbours::default();
        // Parquet sets are grouped per references file instead.
        let Refs::Json(refs) = refs else {
            return n;
        };
        for (key, r) in refs {
            if let Ref::Range {
                target,
                offset,
                len: Some(len),
            } = r
            {
                let ranges = n.ranges.entry(target.as_ref().clone()).or_default();
                n.place.insert(key.clone(), ranges.len());
                ranges.push(Some((*offset, *len)));
            }
        }
        n
    }
}

/// Whether `head` (the first bytes of a file) looks like a JSON reference set: a JSON
/// object, or gzip or zstd data (the name then decides).
pub fn looks_like_references(name: &str, head: &[u8]) -> bool {
    let lower = name.to_ascii_lowercase();
    let compressed = lower.ends_with(".json.gz") || lower.ends_with(".json.zst");
    let first = head.iter().find(|b| !b.is_ascii_whitespace());
    first == Some(&b'{')
        || (compressed
            && (head.starts_with(&[0x1f, 0x8b]) || head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd])))
}

/// The JSON text of a reference file's bytes, decompressed when they are gzip or zstd.
fn decompress(label: &str, bytes: Vec<u8>) -> Result<Vec<u8>> {
    let bounded = |reader: Box<dyn Read + '_>| -> Result<Vec<u8>> {
        let mut out = Vec::new();
        reader
            .take(MAX_REFERENCE_BYTES + 1)
            .read_to_end(&mut out)
            .map_err(|source| Error::Io {
                key: label.to_string(),
                source,
            })?;
        if out.len() as u64 > MAX_REFERENCE_BYTES {
            return Err(Error::metadata(label, "reference set larger than 4 GiB"));
        }
        Ok(out)
    };
    if bytes.starts_with(&[0x1f, 0x8b]) {
        bounded(Box::new(flate2::read::GzDecoder::new(&bytes[..])))
    } else if bytes.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        let decoder = zstd::stream::read::Decoder::new(&bytes[..]).map_err(|source| Error::Io {
            key: label.to_string(),
            source,
        })?;
        bounded(Box::new(decoder))
    } else {
        Ok(bytes)
    }
}

impl ReferenceStore {
    /// The reference set in `bytes`, read from `location` (a local file's path or a URL),
    /// whose targets may lie under its own folder and under `cfg.virtual_prefixes`.
    pub fn parse(
        location: &str,
        bytes: Vec<u8>,
        version: Version,
        cfg: &StoreConfig,
    ) -> Result<ReferenceStore> {
        let label = location.to_string();
        let text = decompress(&label, bytes)?;
        let doc: Json = crate::json::parse(&text)
            .map_err(|e| Error::metadata(&label, format!("reference set: {e}")))?;
        let Json::Object(doc) = doc else {
            return Err(Error::metadata(&label, "reference set: not a JSON object"));
        };
        let base = base_of(location);
        let allowed = allow_list(&base, cfg)?;
        let mut store = ReferenceStore {
            label: label.clone(),
            refs: Refs::Json(BTreeMap::new()),
            allowed,
            version,
            cfg: cfg.clone(),
            spans: Spans::read_once(run_budget(cfg)),
            neighbours: OnceLock::new(),
        };
        let mut target_ids: BTreeMap<Target, Arc<Target>> = BTreeMap::new();
        let (refs, templates, gen) = match doc.get("version").and_then(Json::as_u64) {
            Some(1) => (
                match doc.get("refs") {
                    Some(Json::Object(refs)) => refs.clone(),
                    None => Map::new(),
                    Some(_) => return Err(Error::metadata(&label, "refs: not an object")),
                },
                match doc.get("templates") {
                    Some(Json::Object(t)) => t.clone(),
                    None | Some(Json::Null) => Map::new(),
                    Some(_) => return Err(Error::metadata(&label, "templates: not an object")),
                },
                match doc.get("gen") {
                    Some(Json::Array(g)) => g.clone(),
                    None | Some(Json::Null) => Vec::new(),
                    Some(_) => return Err(Error::metadata(&label, "gen: not a list")),
                },
            ),
            Some(other) => {
                return Err(Error::unsupported(
                    &label,
                    format!("reference set version {other}"),
                ))
            }
            None => (doc, Map::new(), Vec::new()),
        };
        let templates: BTreeMap<String, String> = templates
            .into_iter()
            .map(|(k, v)| match v {
                Json::String(s) => Ok((k, s)),
                _ => Err(Error::metadata(
                    &label,
                    format!("template {k}: not a string"),
                )),
            })
            .collect::<Result<_>>()?;
        let renderer = Renderer::new(templates);
        for (key, value) in refs {
            let r = store
                .reference(&key, &value, &renderer, &base, &mut target_ids)
                .unwrap_or_else(|e| Ref::Invalid(e.to_string()));
            store.insert(key, r);
        }
        store.generate(&gen, &renderer, &base, &mut target_ids)?;
        Ok(store)
    }

    /// One entry of `refs`.
    fn reference(
        &mut self,
        key: &str,
        value: &Json,
        renderer: &Renderer,
        base: &Prefix,
        ids: &mut BTreeMap<Target, Arc<Target>>,
    ) -> Result<Ref> {
        let at = || format!("{}: {key}", self.label);
        match value {
            Json::String(s) => match s.strip_prefix("base64:") {
                Some(b64) => base64::engine::general_purpose::STANDARD
                    .decode(b64)
                    .map(Ref::Inline)
                    .map_err(|e| Error::metadata(at(), format!("bad base64: {e}"))),
                None => Ok(Ref::Inline(s.as_bytes().to_vec())),
            },
            // An inline JSON document written as JSON (kerchunk's version 0 sometimes).
            Json::Object(_) => Ok(Ref::Inline(value.to_string().into_bytes())),
            Json::Array(parts) => {
                let url = match parts.first() {
                    Some(Json::String(u)) => {
                        renderer.render(u).map_err(|e| Error::metadata(at(), e))?
                    }
                    _ => return Err(Error::metadata(at(), "reference without a target")),
                };
                let number = |i: usize| -> Result<Option<u64>> {
                    match parts.get(i) {
                        None => Ok(None),
                        Some(v) => v
                            .as_u64()
                            .filter(|n| *n <= i64::MAX as u64)
                            .map(Some)
                            .ok_or_else(|| {
                                Error::metadata(at(), format!("bad offset or length {v}"))
                            }),
                    }
                };
                let (offset, len) = match parts.len() {
                    1 => (0, None),
                    3 => (number(1)?.unwrap_or(0), number(2)?),
                    n => return Err(Error::metadata(at(), format!("reference of {n} items"))),
                };
                if let Some(len) = len {
                    if offset
                        .checked_add(len)
                        .is_none_or(|end| end > i64::MAX as u64)
                    {
                        return Err(Error::metadata(at(), "offset + length past 2^63"));
                    }
                }
                let target = self.target(&url, base, ids);
                Ok(Ref::Range {
                    target,
                    offset,
                    len,
                })
            }
            _ => Err(Error::metadata(
                at(),
                format!("reference {value}: not a string or a list"),
            )),
        }
    }

    /// Target `url`, resolved against the reference set's folder (one `Arc` per target).
    fn target(
        &mut self,
        url: &str,
        base: &Prefix,
        ids: &mut BTreeMap<Target, Arc<Target>>,
    ) -> Arc<Target> {
        let t = resolve(url, base);
        ids.entry(t.clone()).or_insert_with(|| Arc::new(t)).clone()
    }

    fn insert(&mut self, key: String, r: Ref) {
        if let Refs::Json(refs) = &mut self.refs {
            refs.insert(key, r);
        }
    }

    /// The keys of the `gen` entries: each a cartesian product over its dimensions.
    fn generate(
        &mut self,
        gen: &[Json],
        renderer: &Renderer,
        base: &Prefix,
        ids: &mut BTreeMap<Target, Arc<Target>>,
    ) -> Result<()> {
        let label = self.label.clone();
        let mut total: u64 = 0;
        for entry in gen {
            let field = |name: &str| -> Result<String> {
                match entry.get(name) {
                    Some(Json::String(s)) => Ok(s.clone()),
                    Some(Json::Number(n)) => Ok(n.to_string()),
                    _ => Err(Error::metadata(&label, format!("gen: no {name}"))),
                }
            };
            let (key, url, offset, length) = (
                field("key")?,
                field("url")?,
                field("offset")?,
                field("length")?,
            );
            let Some(Json::Object(dims)) = entry.get("dimensions") else {
                return Err(Error::metadata(&label, "gen: no dimensions"));
            };
            let mut axes: Vec<(String, Vec<i64>)> = Vec::new();
            let mut count: u64 = 1;
            for (name, spec) in dims {
                let values = dimension(spec).ok_or_else(|| {
                    Error::metadata(&label, format!("gen: dimension {name}: bad range {spec}"))
                })?;
                count = count.saturating_mul(values.len() as u64);
                if count.saturating_add(total) > MAX_GENERATED {
                    return Err(Error::metadata(
                        &label,
                        format!("gen: more than {MAX_GENERATED} keys"),
                    ));
                }
                axes.push((name.clone(), values));
            }
            total += count;
            let mut index = vec![0usize; axes.len()];
            for _ in 0..count {
                let ctx: BTreeMap<String, i64> = axes
                    .iter()
                    .zip(&index)
                    .map(|((n, v), i)| (n.clone(), v[*i]))
                    .collect();
                let render = |t: &str| {
                    renderer
                        .render_with(t, &ctx)
                        .map_err(|e| Error::metadata(&label, format!("gen: {e}")))
                };
                let number = |t: &str| -> Result<u64> {
                    let text = render(t)?;
                    text.trim()
                        .parse::<u64>()
                        .ok()
                        .filter(|n| *n <= i64::MAX as u64)
                        .ok_or_else(|| Error::metadata(&label, format!("gen: bad number {text:?}")))
                };
                let k = render(&key)?;
                let (o, l) = (number(&offset)?, number(&length)?);
                if o.checked_add(l).is_none_or(|end| end > i64::MAX as u64) {
                    return Err(Error::metadata(&label, "gen: offset + length past 2^63"));
                }
                let u = render(&url)?;
                let target = self.target(&u, base, ids);
                self.insert(
                    k,
                    Ref::Range {
                        target,
                        offset: o,
                        len: Some(l),
                    },
                );
                // The next index, the last axis fastest.
                for d in (0..index.len()).rev() {
                    index[d] += 1;
                    if index[d] < axes[d].1.len() {
                        break;
                    }
                    index[d] = 0;
                }
            }
        }
        Ok(())
    }

    /// The store that reads `target`, and its key there; an error naming the target when
    /// it lies under no allowed prefix.
    fn target_store(&self, key: &str, target: &Target) -> Result<(Arc<dyn Store>, String)> {
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
fn allow_list(base: &Prefix, cfg: &StoreConfig) -> Result<Vec<Allowed>> {
    let mut allowed = vec![Allowed::new(base.clone())];
    for p in &cfg.virtual_prefixes {
        allowed.push(Allowed::new(prefix_of(p, base)?));
    }
    Ok(allowed)
}

/// The values of one `gen` dimension: `{"start", "stop", "step"}` or a list of integers.
fn dimension(spec: &Json) -> Option<Vec<i64>> {
    match spec {
        Json::Array(items) => items.iter().map(Json::as_i64).collect(),
        Json::Object(r) => {
            let get = |k: &str, d: i64| r.get(k).map_or(Some(d), Json::as_i64);
            let (start, stop, step) = (get("start", 0)?, get("stop", 0)?, get("step", 1)?);
            if step <= 0 || stop < start {
                return None;
            }
            let n = stop.checked_sub(start)?.checked_add(step - 1)? / step;
            if n as u64 > MAX_GENERATED {
                return None;
            }
            Some((0..n).map(|i| start + i * step).collect())
        }
        _ => None,
    }
}

/// Jinja rendering of URLs (with the set's `templates`) and `gen` fields, bounded in steps.
struct Renderer {
    env: minijinja::Environment<'static>,
    /// The set's templates, as the values templates see.
    templates: BTreeMap<String, minijinja::Value>,
}

impl Renderer {
    fn new(templates: BTreeMap<String, String>) -> Renderer {
        let mut env = minijinja::Environment::new();
        env.set_fuel(Some(TEMPLATE_FUEL));
        Renderer {
            env,
            templates: templates
                .into_iter()
                .map(|(k, v)| (k, minijinja::Value::from(v)))
                .collect(),
        }
    }

    /// `text` with the set's templates substituted (only when it holds `{{`).
    fn render(&self, text: &str) -> std::result::Result<String, String> {
        self.render_with(text, &BTreeMap::new())
    }

    /// `text` rendered with the templates and the `gen` indices `ctx`.
    fn render_with(
        &self,
        text: &str,
        ctx: &BTreeMap<String, i64>,
    ) -> std::result::Result<String, String> {
        if !text.contains("{{") {
            return Ok(text.to_string());
        }
        let mut all = self.templates.clone();
        all.extend(
            ctx.iter()
                .map(|(k, v)| (k.clone(), minijinja::Value::from(*v))),
        );
        self.env
            .render_str(text, &all)
            .map_err(|e| format!("template {text:?}: {e}"))
    }
}

/// The folder a reference file at `location` lies in: its allowed prefix by default.
fn base_of(location: &str) -> Prefix {
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
fn resolve(url: &str, base: &Prefix) -> Target {
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
fn prefix_of(text: &str, base: &Prefix) -> Result<Prefix> {
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

    fn shown(&self) -> String {
        match self {
            Target::Local(p) => p.display().to_string(),
            Target::Url(u) => u.clone(),
        }
    }
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

/// The error of reading key `key` whose reference is unusable.
fn invalid(key: &str, reason: &str) -> Error {
    Error::Io {
        key: key.to_string(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, reason.to_string()),
    }
}

impl ReferenceStore {
    /// Kerchunk's Parquet reference folder read through `folder` (named `label`: a local
    /// path or a URL), whose targets may lie under the folder it sits in and under
    /// `cfg.virtual_prefixes`. `None` when the folder holds no Parquet reference set.
    pub fn parquet(
        folder: Arc<dyn Store>,
        label: &str,
        cfg: &StoreConfig,
    ) -> Result<Option<ReferenceStore>> {
        let Some((refs, version)) = ParquetRefs::open(folder, label)? else {
            return Ok(None);
        };
        let label = label.trim_end_matches('/').to_string();
        let allowed = allow_list(&base_of(&label), cfg)?;
        Ok(Some(ReferenceStore {
            label,
            refs: Refs::Parquet(refs),
            allowed,
            version,
            cfg: cfg.clone(),
            spans: Spans::read_once(run_budget(cfg)),
            neighbours: OnceLock::new(),
        }))
    }

    /// The `len` bytes `key` refers to in target `t` (read as `tkey` of `store`), from
    /// the run of neighbouring chunks of that target around it, fetched in one request
    /// when the target is remote; `None` when it is to be read alone.
    fn coalesced(
        &self,
        key: &str,
        t: &Target,
        store: &Arc<dyn Store>,
        tkey: &str,
        len: u64,
    ) -> Option<Vec<u8>> {
        let request = store.caps().request_bytes;
        if request == 0 {
            return None;
        }
        // A run that cannot be had (a neighbour's range past the target's end, the
        // target unreachable) leaves each chunk to its own read and its own error.
        let fetch = |offset, n| {
            store
                .read(tkey, Some(ByteRange::Span { offset, len: n }))?
                .filter(|v| v.bytes.len() as u64 == n)
                .ok_or_else(|| Error::corrupt(key, "short run"))
        };
        let got = match &self.refs {
            Refs::Json(_) => {
                let neighbours = self.neighbours.get_or_init(|| Neighbours::of(&self.refs));
                let (Some(&place), Some(ranges)) =
                    (neighbours.place.get(key), neighbours.ranges.get(t))
                else {
                    return None;
                };
                let members = || ranges.clone();
                let object = t.shown();
                self.spans
                    .read(&object, &Version::Unknown, members, place, request, fetch)
            }
            // A Parquet set's chunks are grouped with their neighbours in the same
            // references file (the files are read lazily, one at a time).
            Refs::Parquet(parquet) => {
                let place = parquet.place(key).ok().flatten()?;
                let object = format!("{} ({})", t.shown(), place.name);
                let members = || place.ranges();
                let member = place.member();
                self.spans
                    .read(&object, &Version::Unknown, members, member, request, fetch)
            }
        };
        got.ok().flatten().filter(|b| b.len() as u64 == len)
    }

    /// The reference of `key`: borrowed from a JSON set, made from a Parquet set's row.
    fn lookup(&self, key: &str) -> Result<Option<Cow<'_, Ref>>> {
        let parquet = match &self.refs {
            Refs::Json(refs) => return Ok(refs.get(key).map(Cow::Borrowed)),
            Refs::Parquet(p) => p,
        };
        if let Some(doc) = parquet.documents.get(key) {
            return Ok(Some(Cow::Owned(Ref::Inline(doc.clone()))));
        }
        let Some(base) = self.allowed.first().map(|a| &a.prefix) else {
            return Ok(None);
        };
        Ok(Some(Cow::Owned(match parquet.row(key)? {
            None | Some(Row::Missing) => return Ok(None),
            Some(Row::Inline(bytes)) => Ref::Inline(bytes),
            // Offset and size 0: the whole target.
            Some(Row::Range { path, offset, size }) => Ref::Range {
                target: Arc::new(resolve(&path, base)),
                offset,
                len: (size > 0 || offset > 0).then_some(size),
            },
        })))
    }
}

impl ReferenceStore {
    /// The version of the reference set's file (what its inline values carry).
    pub fn version(&self) -> &Version {
        &self.version
    }
}

impl Store for ReferenceStore {
    fn read(&self, key: &str, range: Option<ByteRange>) -> Result<Option<Value>> {
        let Some(r) = self.lookup(key)? else {
            return Ok(None);
        };
        match &*r {
            Ref::Invalid(reason) => Err(invalid(key, reason)),
            Ref::Inline(bytes) => {
                let (o, l) = range.map_or((0, bytes.len() as u64), |r| r.clip(bytes.len() as u64));
                Ok(Some(Value {
                    bytes: bytes[o as usize..(o + l) as usize].to_vec(),
                    version: self.version.clone(),
                }))
            }
            Ref::Range {
                target,
                offset,
                len,
            } => {
                let t = target.as_ref();
                let (store, tkey) = self.target_store(key, t)?;
                if let (None, Some(len)) = (range, len) {
                    if let Some(bytes) = self.coalesced(key, t, &store, &tkey, *len) {
                        return Ok(Some(Value {
                            bytes,
                            version: Version::Unknown,
                        }));
                    }
                }
                let asked = match (len, range) {
                    (None, r) => r,
                    (Some(len), None) => Some(ByteRange::Span {
                        offset: *offset,
                        len: *len,
                    }),
                    (Some(len), Some(r)) => {
                        let (o, l) = r.clip(*len);
                        Some(ByteRange::Span {
                            offset: offset + o,
                            len: l,
                        })
                    }
                };
                let value = store
                    .read(&tkey, asked)
                    .map_err(|e| Error::Io {
                        key: key.to_string(),
                        source: std::io::Error::other(format!(
                            "reference target {}: {e}",
                            t.shown()
                        )),
                    })?
                    .ok_or_else(|| Error::Io {
                        key: key.to_string(),
                        source: std::io::Error::new(
                            std::io::ErrorKind::NotFound,
                            format!("reference target {} is missing", t.shown()),
                        ),
                    })?;
                if let Some(ByteRange::Span { len: want, .. }) = asked {
                    if value.bytes.len() as u64 != want {
                        return Err(Error::corrupt(
                            key,
                            format!(
                                "reference range {offset}+{want} lies past the end of {}",
                                t.shown()
                            ),
                        ));
                    }
                }
                Ok(Some(value))
            }
        }
    }

    fn list_dir(&self, prefix: &str) -> Result<Listing> {
        let start = if prefix.is_empty() {
            String::new()
        } else {
            format!("{}/", prefix.trim_end_matches('/'))
        };
        let mut listing = Listing::default();
        // A Parquet set lists its metadata documents (its chunks are found by index).
        let keys: Box<dyn Iterator<Item = &String>> = match &self.refs {
            Refs::Json(refs) => Box::new(refs.range(start.clone()..).map(|(k, _)| k)),
            Refs::Parquet(p) => Box::new(p.documents.range(start.clone()..).map(|(k, _)| k)),
        };
        for key in keys {
            let Some(rest) = key.strip_prefix(&start) else {
                break;
            };
            match rest.split_once('/') {
                Some((dir, _)) => {
                    if listing.prefixes.last().map(String::as_str) != Some(dir) {
                        listing.prefixes.push(dir.to_string());
                    }
                }
                None => listing.keys.push(rest.to_string()),
            }
        }
        listing.prefixes.dedup();
        Ok(listing)
    }

    fn head(&self, key: &str) -> Result<Option<Head>> {
        let Some(r) = self.lookup(key)? else {
            return Ok(None);
        };
        match &*r {
            Ref::Invalid(reason) => Err(invalid(key, reason)),
            Ref::Inline(bytes) => Ok(Some(Head {
                size: bytes.len() as u64,
                version: self.version.clone(),
            })),
            Ref::Range { len: Some(len), .. } => Ok(Some(Head {
                size: *len,
                version: self.version.clone(),
            })),
            Ref::Range {
                target, len: None, ..
            } => {
                let (store, tkey) = self.target_store(key, target)?;
                store.head(&tkey)
            }
        }
    }

    fn will_need(&self, _key: &str) {
        // Targets are read by range when asked; nothing is read ahead.
    }

    fn caps(&self) -> Caps {
        // Tuned for remote targets when any may be remote (many requests in flight),
        // else like a local folder.
        if self
            .allowed
            .iter()
            .any(|a| matches!(a.prefix, Prefix::Url(_)))
        {
            Caps {
                concurrency: self.cfg.max_requests,
                request_bytes: REQUEST_BYTES,
                location: Some(self.label.clone()),
            }
        } else {
            Caps::local()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::StoreExt;

    fn refs(store: &ReferenceStore) -> &BTreeMap<String, Ref> {
        match &store.refs {
            Refs::Json(refs) => refs,
            Refs::Parquet(_) => panic!("not a JSON set"),
        }
    }

    fn parse(doc: Json) -> ReferenceStore {
        ReferenceStore::parse(
            "/nowhere/refs.json",
            doc.to_string().into_bytes(),
            Version::Unknown,
            &StoreConfig::default(),
        )
        .unwrap()
    }

    #[test]
    fn version_0_and_1_inline_values_templates_and_gen() {
        let v0 = parse(serde_json::json!({
            ".zgroup": "{\"zarr_format\":2}",
            "a/0": "base64:AQID",
            "a/1": ["/nowhere/data.nc", 10, 4],
        }));
        assert_eq!(v0.get("a/0").unwrap(), Some(vec![1, 2, 3]));
        assert_eq!(
            v0.get(".zgroup").unwrap(),
            Some(b"{\"zarr_format\":2}".to_vec())
        );
        assert!(matches!(
            refs(&v0).get("a/1"),
            Some(Ref::Range {
                offset: 10,
                len: Some(4),
                ..
            })
        ));
        let v1 = parse(serde_json::json!({
            "version": 1,
            "templates": {"u": "/nowhere/data"},
            "refs": {"b/0": ["{{u}}/x.nc", 0, 8], "bad": "base64:@@"},
            "gen": [{"key": "g/{{i}}.{{j}}", "url": "{{u}}/f{{i}}.nc",
                     "offset": "{{i * 100 + j}}", "length": "10",
                     "dimensions": {"i": {"stop": 3}, "j": [5, 7]}}],
        }));
        assert!(matches!(
            refs(&v1).get("b/0"),
            Some(Ref::Range { target, .. })
                if **target == Target::Local(PathBuf::from("/nowhere/data/x.nc"))
        ));
        assert!(matches!(refs(&v1).get("bad"), Some(Ref::Invalid(_))));
        assert!(v1.get("bad").is_err());
        assert!(matches!(
            refs(&v1).get("g/2.7"),
            Some(Ref::Range {
                offset: 207,
                len: Some(10),
                ..
            })
        ));
        assert_eq!(refs(&v1).keys().filter(|k| k.starts_with("g/")).count(), 6);
        let listing = v1.list_dir("").unwrap();
        assert_eq!(listing.prefixes, vec!["b", "g"]);
        assert_eq!(listing.keys, vec!["bad"]);
        assert_eq!(v1.list_dir("g").unwrap().keys.len(), 6);
    }

    #[test]
    fn gen_bombs_and_ranges_past_2_63_are_refused() {
        let bomb = ReferenceStore::parse(
            "/nowhere/refs.json",
            serde_json::json!({"version": 1, "refs": {}, "gen": [{
                "key": "k{{i}}{{j}}", "url": "u", "offset": "0", "length": "1",
                "dimensions": {"i": {"stop": 1_000_000}, "j": {"stop": 1_000_000}}}]})
            .to_string()
            .into_bytes(),
            Version::Unknown,
            &StoreConfig::default(),
        );
        assert!(bomb.err().is_some_and(|e| e.to_string().contains("gen")));
        assert_eq!(
            dimension(&serde_json::json!({"start": i64::MIN, "stop": i64::MAX})),
            None
        );
        assert_eq!(dimension(&serde_json::json!({"start": 5, "stop": 1})), None);
        assert_eq!(
            dimension(&serde_json::json!({"start": 1, "stop": 8, "step": 3})),
            Some(vec![1, 4, 7])
        );
        let far = parse(serde_json::json!({"a": ["/nowhere/x", i64::MAX as u64, 2]}));
        assert!(matches!(refs(&far).get("a"), Some(Ref::Invalid(_))));
    }

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
