//! A kerchunk reference set as a store: Zarr metadata plus, for every chunk key, inline
//! bytes or a byte range of another file (a NetCDF-4 or HDF5 archive, local or remote).
//! Read from kerchunk's JSON (version 0, and version 1 with `templates` and `gen`),
//! optionally gzip- or zstd-compressed. A reference is data from elsewhere: its targets
//! are read only under the allowed prefixes (the reference set's own folder, and those
//! given with `--virtual-prefix`), through [`Targets`]; anything else fails that key
//! alone.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use base64::Engine;
use serde_json::{Map, Value as Json};

mod generate;
pub mod live;
mod parquet;

use generate::Renderer;
use parquet::{ParquetRefs, Row};

use crate::error::{Error, Result};
use crate::store::location::Location;
use crate::store::namespace::targets::{allow_list, base_of, Near, Neighbours, Targets};
use crate::store::{
    ByteRange, Caps, Head, Listing, Store, StoreConfig, Value, Version, REQUEST_BYTES,
};

/// Bytes a reference file may hold, or expand to when compressed, at most.
pub const MAX_REFERENCE_BYTES: u64 = 4 << 30;

/// What a key resolves to.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Ref {
    /// The value itself.
    Inline(Vec<u8>),
    /// `len` bytes at `offset` of target `target` (the whole target when `len` is None).
    Range {
        target: Arc<Location>,
        offset: u64,
        len: Option<u64>,
    },
    /// A reference that cannot be read (bad base64, a range past 2^63, ...): its key
    /// fails alone, with this reason.
    Invalid(String),
}

/// Where the references are: all in memory (JSON), or in Parquet files read lazily.
enum Refs {
    Json(BTreeMap<String, Ref>),
    Parquet(Box<ParquetRefs>),
}

pub struct ReferenceStore {
    /// The reference file, for messages.
    label: String,
    refs: Refs,
    targets: Targets,
    version: Version,
    cfg: StoreConfig,
    /// Where each chunk lies among its target's chunks, made at the first coalesced read.
    neighbours: OnceLock<Arc<Neighbours<String>>>,
}

/// The byte ranges the references of a JSON set point to in each target (in key order);
/// Parquet sets are grouped per references file instead.
fn neighbours_of(refs: &Refs) -> Neighbours<String> {
    let mut n = Neighbours::default();
    if let Refs::Json(refs) = refs {
        for (key, r) in refs {
            if let Ref::Range {
                target,
                offset,
                len: Some(len),
            } = r
            {
                n.add(key.clone(), target.as_ref().clone(), Some((*offset, *len)));
            }
        }
    }
    n
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
        location: &Location,
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
            targets: Targets::new(allowed, cfg),
            version,
            cfg: cfg.clone(),
            neighbours: OnceLock::new(),
        };
        let mut target_ids: BTreeMap<Location, Arc<Location>> = BTreeMap::new();
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
        base: &Location,
        ids: &mut BTreeMap<Location, Arc<Location>>,
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
        base: &Location,
        ids: &mut BTreeMap<Location, Arc<Location>>,
    ) -> Arc<Location> {
        let t = base.join(url);
        ids.entry(t.clone()).or_insert_with(|| Arc::new(t)).clone()
    }

    fn insert(&mut self, key: String, r: Ref) {
        if let Refs::Json(refs) = &mut self.refs {
            refs.insert(key, r);
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
        location: &Location,
        cfg: &StoreConfig,
    ) -> Result<Option<ReferenceStore>> {
        let shown = location.to_string();
        let label = shown.trim_end_matches('/');
        let Some((refs, version)) = ParquetRefs::open(folder, label)? else {
            return Ok(None);
        };
        let allowed = allow_list(&base_of(&Location::parse(label)), cfg)?;
        let label = label.to_string();
        Ok(Some(ReferenceStore {
            label,
            refs: Refs::Parquet(Box::new(refs)),
            targets: Targets::new(allowed, cfg),
            version,
            cfg: cfg.clone(),
            neighbours: OnceLock::new(),
        }))
    }

    /// Where `key`'s chunk lies among the chunks of target `t` read together with it:
    /// all of the target's chunks in a JSON set, those in the same references file in a
    /// Parquet set (the files are read lazily, one at a time).
    fn near(&self, key: &str, t: &Location) -> Option<Near<'_>> {
        match &self.refs {
            Refs::Json(_) => self
                .neighbours
                .get_or_init(|| Arc::new(neighbours_of(&self.refs)))
                .near(key, t, t.to_string()),
            Refs::Parquet(parquet) => {
                let place = parquet.place(key).ok().flatten()?;
                Some(Near {
                    object: format!("{} ({})", t, place.name),
                    member: place.member(),
                    members: Box::new(move || place.ranges()),
                })
            }
        }
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
        let Some(base) = self.targets.base() else {
            return Ok(None);
        };
        Ok(Some(Cow::Owned(match parquet.row(key)? {
            None | Some(Row::Missing) => return Ok(None),
            Some(Row::Inline(bytes)) => Ref::Inline(bytes),
            // Offset and size 0: the whole target.
            Some(Row::Range { path, offset, size }) => Ref::Range {
                target: Arc::new(base.join(&path)),
                offset,
                len: (size > 0 || offset > 0).then_some(size),
            },
        })))
    }
}

impl ReferenceStore {
    /// The reference set in the local file `path`, when its content is one (a JSON
    /// object, or gzip / zstd data under a `.json.gz` / `.json.zst` name); `None` for
    /// other files.
    pub fn from_file(path: &Path, cfg: &StoreConfig) -> Result<Option<ReferenceStore>> {
        let label = path.display().to_string();
        let io = |source| Error::Io {
            key: label.clone(),
            source,
        };
        let mut file = std::fs::File::open(path).map_err(io)?;
        let meta = file.metadata().map_err(io)?;
        let mut head = [0u8; 64];
        let n = file.read(&mut head).map_err(io)?;
        if !looks_like_references(&label, &head[..n]) {
            return Ok(None);
        }
        if meta.len() > MAX_REFERENCE_BYTES {
            return Err(Error::metadata(&label, "reference set larger than 4 GiB"));
        }
        let mut bytes = head[..n].to_vec();
        file.read_to_end(&mut bytes).map_err(io)?;
        let version = Version::of_file(&meta);
        ReferenceStore::parse(&Location::Local(path.into()), bytes, version, cfg).map(Some)
    }

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
            } => self
                .targets
                .read(key, target, *offset, *len, range, || self.near(key, target))
                .map(Some),
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
            // The version of a range is its target's, as its read gives.
            Ref::Range {
                target,
                len: Some(len),
                ..
            } => {
                let (store, tkey) = self.targets.store_of(key, target)?;
                let version = store.head(&tkey)?.map_or(Version::Unknown, |h| h.version);
                Ok(Some(Head {
                    size: *len,
                    version,
                }))
            }
            Ref::Range {
                target, len: None, ..
            } => {
                let (store, tkey) = self.targets.store_of(key, target)?;
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
        if self.targets.any_remote() {
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
    use super::generate::dimension;
    use super::*;
    use crate::store::StoreExt;
    use std::path::PathBuf;

    fn refs(store: &ReferenceStore) -> &BTreeMap<String, Ref> {
        match &store.refs {
            Refs::Json(refs) => refs,
            Refs::Parquet(_) => panic!("not a JSON set"),
        }
    }

    fn parse(doc: Json) -> ReferenceStore {
        ReferenceStore::parse(
            &Location::parse("/nowhere/refs.json"),
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
                if **target == Location::Local(PathBuf::from("/nowhere/data/x.nc"))
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
            &Location::parse("/nowhere/refs.json"),
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
}
