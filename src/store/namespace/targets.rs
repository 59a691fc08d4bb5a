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
use std::sync::{Arc, OnceLock};

use crate::error::{Error, Result};
use crate::store::adapter::spans::{budget_for, Spans};
use crate::store::location::Location;
use crate::store::source::folder::FolderStore;
use crate::store::{ByteRange, Store, StoreConfig, StoreError, Value, Version, REQUEST_BYTES};

/// An allowed prefix and the store that reads under it, made at first use.
struct Allowed {
    prefix: Location,
    store: OnceLock<std::result::Result<Arc<dyn Store>, Arc<Error>>>,
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
    ranges: BTreeMap<Location, Members>,
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
    pub(super) fn add(&mut self, key: K, target: Location, range: Option<(u64, u64)>) {
        let ranges = self.ranges.entry(target).or_default();
        self.place.insert(key, ranges.len());
        ranges.push(range);
    }

    /// Where chunk `key` of `target` lies among its target's chunks, read together as the
    /// group named `object`.
    pub(super) fn near<Q>(
        self: &Arc<Self>,
        key: &Q,
        target: &Location,
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
    pub(super) fn new(prefixes: Vec<Location>, cfg: &StoreConfig) -> Targets {
        Targets {
            allowed: prefixes.into_iter().map(Allowed::new).collect(),
            cfg: cfg.clone(),
            spans: Spans::read_once(budget_for(cfg.max_requests, REQUEST_BYTES)),
        }
    }

    /// The first allowed prefix (the folder of a reference set).
    pub(super) fn base(&self) -> Option<&Location> {
        self.allowed.first().map(|a| &a.prefix)
    }

    /// Whether any allowed prefix is remote.
    pub(super) fn any_remote(&self) -> bool {
        self.allowed
            .iter()
            .any(|a| matches!(a.prefix, Location::Url(_)))
    }

    /// The value of `key`, which refers to `len` bytes at `offset` of `target` (the whole
    /// target when `len` is None), or to part of them (`range`). A whole chunk of a
    /// remote target is read with its neighbours when `near` places it among them.
    pub(super) fn read<'a>(
        &'a self,
        key: &str,
        target: &Location,
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
            shown: target.to_string(),
            named: None,
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
    pub(super) fn store_of(
        &self,
        key: &str,
        target: &Location,
    ) -> Result<(Arc<dyn Store>, String)> {
        for a in &self.allowed {
            let Some(rel) = a.prefix.relative(target) else {
                continue;
            };
            let store = a
                .store
                .get_or_init(|| open_prefix(&a.prefix, &self.cfg).map_err(Arc::new))
                .clone()
                .map_err(|e| Error::shared(key, &e))?;
            return Ok((store, rel));
        }
        Err(StoreError::NotAllowed {
            target: target.to_string(),
            allowed: self
                .allowed
                .iter()
                .map(|a| a.prefix.as_folder().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        }
        .at(key))
    }
}

/// Where a set whose folder is `base` may read: there, and under `cfg.virtual_prefixes`.
pub(super) fn allow_list(base: &Location, cfg: &StoreConfig) -> Result<Vec<Location>> {
    let mut allowed = vec![base.clone()];
    for p in &cfg.virtual_prefixes {
        allowed.push(prefix_of(p, base)?);
    }
    Ok(allowed)
}

/// The folder a reference file at `location` lies in: its allowed prefix by default.
pub(super) fn base_of(location: &Location) -> Location {
    match location {
        Location::Local(path) => {
            let real = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
            Location::Local(real).parent()
        }
        url => url.parent(),
    }
}

/// A `--virtual-prefix` value as a prefix: a URL, or a local folder (relative to the
/// reference set's folder when relative).
pub(super) fn prefix_of(text: &str, base: &Location) -> Result<Location> {
    let path = match (Location::parse(text), base) {
        (url @ Location::Url(_), _) => return Ok(url.as_folder()),
        (Location::Local(path), Location::Local(dir)) if path.is_relative() => dir.join(path),
        (Location::Local(path), _) => path,
    };
    let real = path
        .canonicalize()
        .map_err(|e| Error::Invalid(format!("--virtual-prefix {text}: {e}")))?;
    Ok(Location::Local(real))
}

/// How [`read_part`] names what it reads in messages: the range as `KIND range`, the
/// object as `KIND NOUN SHOWN` (`reference target URL`, `chunk object PATH`).
pub(super) struct Referred {
    pub kind: &'static str,
    pub noun: &'static str,
    pub shown: String,
    /// What names the object wherever it is stored, for an object that never changes
    /// (an Icechunk chunk object): read with [`Store::read_named`], so caches share it.
    pub named: Option<String>,
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
    let Referred {
        kind,
        noun,
        shown,
        named,
    } = what;
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
    let value = match named {
        Some(name) => store.read_named(tkey, asked, name),
        None => store.read(tkey, asked),
    }
    .map_err(|e| {
        StoreError::Referred {
            kind,
            noun,
            shown: shown.clone(),
            source: Box::new(e),
        }
        .at(key)
    })?
    .ok_or_else(|| {
        StoreError::Missing {
            kind,
            noun,
            shown: shown.clone(),
        }
        .at(key)
    })?;
    // A reference of a stated length must find that many bytes; one of a whole target
    // is clipped to it, as any value is.
    if let (Some(_), Some(ByteRange::Span { len: want, .. })) = (len, asked) {
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
    fn new(prefix: Location) -> Allowed {
        Allowed {
            prefix,
            store: OnceLock::new(),
        }
    }
}

/// The store reading under the allowed prefix `prefix`.
fn open_prefix(prefix: &Location, cfg: &StoreConfig) -> Result<Arc<dyn Store>> {
    match prefix {
        Location::Local(dir) => Ok(Arc::new(FolderStore::open(dir)?)),
        Location::Url(_) => crate::store::connect::folder(prefix, cfg),
    }
}
