//! An Icechunk repository as a store, through the `icechunk` crate: it resolves a
//! version (a branch tip, a tag or a snapshot) to its nodes and chunk references, and
//! hands out the Zarr v3 documents and the stored chunk bytes; zarrfs decodes them with
//! its own codec chain. Every value carries the snapshot it was read from as its
//! version, so that caches keep two versions of a dataset apart. With `--versions`, the
//! root also holds `@branches/NAME/`, `@tags/NAME/` and `@snapshots/ID/`, each the tree of
//! that version, opened at first use. A chunk stored in the repository is read by
//! zarrfs from its chunk object (`chunks/ID`, a range of it) through the store of the
//! repository's folder or bucket, with that store's request limits, retries and disk
//! cache; the crate only looks up where it is. Virtual chunks (byte ranges of NetCDF/HDF5 files)
//! are read by zarrfs itself, as a reference set's chunks are ([`Targets`]): only under
//! the allowed prefixes (the repository's virtual chunk containers, narrowed or added to
//! with `--virtual-prefix`), neighbouring chunks of a remote file in one request. With
//! `--versions`, a chunk's identity (its chunk object and range, or its file, range and
//! checksum) names it in caches shared by versions, so a chunk two versions share is
//! decoded once.
//!
//! A branch moves: with a refresh interval its tip is read again once per interval (and
//! at `zarrfs refresh`), and the tree follows it. What was read at a snapshot goes on
//! being read at that snapshot ([`Store::at_version`]), so an open file never mixes two.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use icechunk::format::manifest::{Checksum, ChunkPayload, ChunkRef, VirtualChunkRef};
use icechunk::format::{ByteRange as IcRange, ChunkIndices, SnapshotId};
use icechunk::repository::VersionInfo;
use icechunk::session::Session;
use icechunk::store::{StoreError, StoreErrorKind};
use icechunk::Repository;
use parking_lot::{Mutex, RwLock};

use super::runtime::{block_on, on_runtime};
use super::targets::{
    prefix_of, read_part, resolve, Neighbours, Prefix, Referred, Target, Targets,
};
use super::{
    ByteRange, Caps, FolderStore, Head, Listing, ReadAgain, Store, StoreConfig, Value, Version,
    SNAPSHOT_TAG,
};
use crate::error::{Error, Result};

/// The metadata of a version that holds no root group.
const EMPTY_GROUP: &[u8] = br#"{"zarr_format":3,"node_type":"group","attributes":{}}"#;

/// The folders of the versions beside the default tree.
const BRANCHES: &str = "@branches";
const TAGS: &str = "@tags";
const SNAPSHOTS: &str = "@snapshots";

/// Snapshots kept open for what was read at them, at most (more are opened again).
const KEPT_SNAPSHOTS: usize = 16;

/// Virtual chunks of one array grouped for reading together at most (more are read
/// one by one).
const MAX_NEIGHBOURS: usize = 1 << 22;

/// One version opened read-only: its store and session, its snapshot's id, the version
/// its values carry (the snapshot), and the virtual chunks of its arrays by target.
struct Checkout {
    store: icechunk::Store,
    session: Arc<tokio::sync::RwLock<Session>>,
    snapshot: String,
    version: Version,
    neighbours: Mutex<HashMap<String, Arc<Listed>>>,
}

/// The virtual chunks of one array by their grid coordinates, listed once (`None`: the
/// listing failed or was too long).
type Listed = OnceLock<Option<Arc<Neighbours<Vec<u32>>>>>;

/// What every version of a repository shares: its name in messages, the store of its own
/// objects, where its virtual chunks may be read, and its virtual chunk containers by
/// name (for `vcc://` locations).
struct Repo {
    label: String,
    objects: Arc<dyn Store>,
    targets: Targets,
    containers: HashMap<String, String>,
}

pub struct IcechunkStore {
    label: String,
    shared: Arc<Repo>,
    repo: Repository,
    /// The version the mount's own tree shows (the tip of `follows` when last read).
    default: RwLock<Arc<Checkout>>,
    /// The branch the default tree follows; none for a tag or a snapshot (they never
    /// move).
    follows: Option<String>,
    /// When the branches' tips were last read.
    tips_read: ReadAgain,
    all: bool,
    /// Versions opened so far under the version folders, by folder (`@tags/v1`).
    opened: Mutex<BTreeMap<String, Arc<Checkout>>>,
    /// Versions opened, by snapshot id (for [`Store::at_version`]).
    snapshots: Mutex<HashMap<String, Arc<Checkout>>>,
    caps: Caps,
}

fn failed(label: &str, what: &str, e: impl std::fmt::Display) -> Error {
    Error::Io {
        key: label.to_string(),
        source: std::io::Error::other(format!("icechunk: {what}: {e}")),
    }
}

impl IcechunkStore {
    /// The repository in local folder `dir`, at the version `cfg` chooses (default: the
    /// tip of branch `main`).
    pub fn open_local(dir: &Path, cfg: &StoreConfig) -> Result<IcechunkStore> {
        let label = dir.display().to_string();
        let path = dir.to_path_buf();
        let storage = block_on(async move { icechunk::new_local_filesystem_storage(&path).await })?
            .map_err(|e| failed(&label, "storage", e))?;
        let objects = Arc::new(FolderStore::open(dir)?);
        Self::open(label, storage, objects, cfg, Caps::local())
    }

    /// The repository at `url` (`s3://BUCKET/PREFIX`, `gs://BUCKET/PREFIX`,
    /// `az://CONTAINER/PREFIX`, or an
    /// `http(s)://` folder), with the store options of `cfg` (`endpoint`, `region`,
    /// `allow_http`, `account_name`, `use_emulator`, ..., and `--anonymous`); `objects` is
    /// the store of the same URL, which its chunk objects are read from.
    pub fn open_url(
        url: &url::Url,
        cfg: &StoreConfig,
        objects: Arc<dyn Store>,
    ) -> Result<IcechunkStore> {
        let label = url.to_string();
        let option = |names: &[&str]| {
            cfg.options
                .iter()
                .find(|(k, _)| names.contains(&k.as_str()))
                .map(|(_, v)| v.clone())
        };
        // The bucket (or container) and the prefix in it, for the cloud schemes.
        let bucket = url.host_str().unwrap_or_default().to_string();
        let prefix = Some(url.path().trim_matches('/').to_string()).filter(|p| !p.is_empty());
        let storage = match url.scheme() {
            "s3" | "s3a" => {
                let endpoint = option(&["endpoint", "aws_endpoint", "aws_endpoint_url"]);
                let mut options = icechunk::storage::S3Options::default()
                    .with_force_path_style(endpoint.is_some())
                    .with_anonymous(cfg.anonymous)
                    .with_allow_http(
                        option(&["allow_http", "aws_allow_http"]).is_some_and(|v| v == "true"),
                    );
                if let Some(region) = option(&["region", "aws_region"]) {
                    options = options.with_region(region);
                }
                if let Some(endpoint) = endpoint {
                    options = options.with_endpoint_url(endpoint);
                }
                block_on(icechunk::storage::new_s3_object_store_storage(
                    options,
                    bucket,
                    prefix,
                    Some(s3_credentials(cfg)),
                    Vec::new(),
                    Vec::new(),
                ))?
            }
            "az" | "azure" | "abfs" | "abfss" => {
                let emulator = option(&["use_emulator", "azure_storage_use_emulator"])
                    .is_some_and(|v| v == "true");
                let account = option(&["account_name", "azure_storage_account_name"])
                    .or_else(|| std::env::var("AZURE_STORAGE_ACCOUNT_NAME").ok())
                    .or_else(|| emulator.then(|| "devstoreaccount1".to_string()))
                    .ok_or_else(|| {
                        Error::Invalid(format!(
                            "{label}: name the storage account (-o account_name=NAME, or \
                             AZURE_STORAGE_ACCOUNT_NAME in the environment)"
                        ))
                    })?;
                let options = options_as::<object_store::azure::AzureConfigKey>(&label, cfg)?;
                let credentials = if cfg.anonymous {
                    icechunk::storage::AzureCredentials::Anonymous
                } else {
                    icechunk::storage::AzureCredentials::FromEnv
                };
                block_on(icechunk::storage::new_azure_blob_storage(
                    account,
                    bucket,
                    prefix,
                    Some(credentials),
                    Some(options),
                ))?
            }
            "gs" | "gcs" => {
                let options = options_as::<object_store::gcp::GoogleConfigKey>(&label, cfg)?;
                let credentials = if cfg.anonymous {
                    icechunk::storage::GcsCredentials::Anonymous
                } else {
                    icechunk::storage::GcsCredentials::FromEnv
                };
                icechunk::storage::new_gcs_storage(
                    bucket,
                    prefix,
                    Some(credentials),
                    Some(options),
                    Vec::new(),
                    Vec::new(),
                )
            }
            "http" | "https" => icechunk::storage::new_http_storage(url.as_str(), None, None),
            other => {
                return Err(Error::Invalid(format!(
                    "{label}: Icechunk repositories are read from local folders, s3://, gs://, \
                     az:// and http(s):// (not {other}:// yet)"
                )))
            }
        }
        .map_err(|e| failed(&label, "storage", e))?;
        let caps = Caps {
            concurrency: cfg.max_requests,
            // Inner chunks of a shard are read together, and readahead spans many
            // requests in flight.
            request_bytes: super::REQUEST_BYTES,
            location: Some(label.clone()),
        };
        Self::open(label, storage, objects, cfg, caps)
    }

    fn open(
        label: String,
        storage: Arc<dyn icechunk::Storage + Send + Sync>,
        objects: Arc<dyn Store>,
        cfg: &StoreConfig,
        caps: Caps,
    ) -> Result<IcechunkStore> {
        let repo = block_on(async move { Repository::open(storage).execute().await })?
            .map_err(|e| failed(&label, "open", e))?;
        let shared = Arc::new(virtual_targets(&label, &repo, objects, cfg)?);
        let choice = &cfg.icechunk;
        let version = match (&choice.reference, &choice.snapshot) {
            (Some(_), Some(_)) => {
                return Err(Error::Invalid("--ref and --snapshot: give one".into()))
            }
            (None, Some(id)) => snapshot_version(&label, id)?,
            (Some(name), None) => reference_version(&label, &repo, name)?,
            (None, None) => VersionInfo::BranchTipRef("main".into()),
        };
        let follows = match &version {
            VersionInfo::BranchTipRef(name) => Some(name.clone()),
            _ => None,
        };
        let default = Arc::new(checkout(&label, &repo, version)?);
        let store = IcechunkStore {
            label,
            shared,
            repo,
            default: RwLock::new(default.clone()),
            follows,
            tips_read: ReadAgain::now(),
            all: choice.all,
            opened: Mutex::new(BTreeMap::new()),
            snapshots: Mutex::new(HashMap::new()),
            caps,
        };
        store.keep(&default);
        Ok(store)
    }

    /// Remember `checkout` by its snapshot (what is read at it is read through it).
    fn keep(&self, checkout: &Arc<Checkout>) {
        let mut kept = self.snapshots.lock();
        if kept.len() >= KEPT_SNAPSHOTS && !kept.contains_key(&checkout.snapshot) {
            kept.clear();
        }
        kept.insert(checkout.snapshot.clone(), checkout.clone());
    }

    /// The version at snapshot `id`, opened if need be.
    fn at_snapshot(&self, id: &str) -> Result<Arc<Checkout>> {
        if let Some(hit) = self.snapshots.lock().get(id) {
            return Ok(hit.clone());
        }
        let opened = Arc::new(checkout(
            &self.label,
            &self.repo,
            snapshot_version(&self.label, id)?,
        )?);
        self.keep(&opened);
        Ok(opened)
    }

    /// The snapshot branch `name` points at now.
    fn tip(&self, name: &str) -> Result<String> {
        block_on(self.repo.lookup_branch(name))?
            .map(|id| id.to_string())
            .map_err(|e| failed(&self.label, &format!("branch {name}"), e))
    }

    /// The version that `key` lies in and the key inside it; `None` when it names a
    /// version folder itself or one that does not exist.
    fn route<'k>(&self, key: &'k str) -> Result<Option<(Arc<Checkout>, &'k str)>> {
        if !self.all || !key.starts_with('@') {
            return Ok(Some((self.default.read().clone(), key)));
        }
        let mut parts = key.splitn(3, '/');
        let (Some(kind), Some(name)) = (parts.next(), parts.next()) else {
            return Ok(None);
        };
        let rest = parts.next().unwrap_or("");
        let folder = format!("{kind}/{name}");
        if let Some(hit) = self.opened.lock().get(&folder) {
            return Ok(Some((hit.clone(), rest)));
        }
        let version = match kind {
            BRANCHES if self.names(BRANCHES)?.contains(name) => {
                VersionInfo::BranchTipRef(name.to_string())
            }
            TAGS if self.names(TAGS)?.contains(name) => VersionInfo::TagRef(name.to_string()),
            SNAPSHOTS if self.names(SNAPSHOTS)?.contains(name) => {
                snapshot_version(&self.label, name)?
            }
            _ => return Ok(None),
        };
        // Opened outside the lock; a version opened meanwhile wins.
        let opened = Arc::new(checkout(&self.label, &self.repo, version)?);
        self.keep(&opened);
        let mut map = self.opened.lock();
        let hit = map.entry(folder).or_insert(opened).clone();
        Ok(Some((hit, rest)))
    }

    /// The names in version folder `kind`: branches, tags, or every snapshot that a
    /// branch or a tag leads back to.
    fn names(&self, kind: &str) -> Result<BTreeSet<String>> {
        let repo = &self.repo;
        let label = &self.label;
        match kind {
            BRANCHES => block_on(repo.list_branches())?.map_err(|e| failed(label, "branches", e)),
            TAGS => block_on(repo.list_tags())?.map_err(|e| failed(label, "tags", e)),
            _ => {
                let mut tips: Vec<VersionInfo> = self
                    .names(BRANCHES)?
                    .into_iter()
                    .map(VersionInfo::BranchTipRef)
                    .collect();
                tips.extend(self.names(TAGS)?.into_iter().map(VersionInfo::TagRef));
                let mut all = BTreeSet::new();
                for tip in tips {
                    let ids: Vec<String> = block_on(async {
                        let stream = repo.ancestry(&tip).await?;
                        stream
                            .map_ok(|info| info.id.to_string())
                            .try_collect()
                            .await
                    })?
                    .map_err(|e| failed(label, "ancestry", e))?;
                    all.extend(ids);
                }
                Ok(all)
            }
        }
    }
}

/// A chunk's byte range (`kind` names it in the error) must end below 2^63: stores and
/// servers take offsets as signed 64-bit numbers.
fn below_2_63(key: &str, kind: &str, offset: u64, length: u64) -> Result<()> {
    match offset.checked_add(length) {
        Some(end) if end <= i64::MAX as u64 => Ok(()),
        _ => Err(Error::corrupt(
            key,
            format!("{kind} range {offset}+{length} past 2^63"),
        )),
    }
}

/// The store options of `cfg` as keys `K` of one object_store backend: every option must
/// be one (the crate would drop the others silently).
fn options_as<K: std::str::FromStr>(
    label: &str,
    cfg: &StoreConfig,
) -> Result<HashMap<String, String>>
where
    K::Err: std::fmt::Display,
{
    cfg.options
        .iter()
        .map(|(key, value)| match key.parse::<K>() {
            Ok(_) => Ok((key.clone(), value.clone())),
            Err(e) => Err(Error::Invalid(format!("{label}: store option {key}: {e}"))),
        })
        .collect()
}

/// Where the virtual chunks of `repo` may be read: under its virtual chunk containers,
/// or, with `cfg.virtual_prefixes`, under exactly those (a prefix inside a container
/// narrows it; one elsewhere opens that place; a container no prefix names is closed). A
/// local prefix is a folder (relative to the current one).
fn virtual_targets(
    label: &str,
    repo: &Repository,
    objects: Arc<dyn Store>,
    cfg: &StoreConfig,
) -> Result<Repo> {
    let here = Prefix::Local(std::env::current_dir().unwrap_or_default());
    let given: Vec<Prefix> = cfg
        .virtual_prefixes
        .iter()
        .map(|p| prefix_of(p, &here))
        .collect::<Result<_>>()?;
    let mut allowed = Vec::new();
    let mut containers = HashMap::new();
    for container in repo.config().virtual_chunk_containers() {
        let url = container.url_prefix();
        if let Some(name) = container.name() {
            containers.insert(name.to_string(), url.to_string());
        }
        if !given.is_empty() {
            continue;
        }
        match prefix_of(url, &here) {
            Ok(prefix) => allowed.push(prefix),
            // A container whose folder is not there: its chunks fail as missing.
            Err(e) => log::warn!("{label}: virtual chunk container {url}: {e}"),
        }
    }
    allowed.extend(given);
    Ok(Repo {
        label: label.to_string(),
        objects,
        targets: Targets::new(allowed, cfg),
        containers,
    })
}

/// Unsigned requests with `--anonymous`, else credentials from the environment.
fn s3_credentials(cfg: &StoreConfig) -> icechunk::storage::S3Credentials {
    if cfg.anonymous {
        icechunk::storage::S3Credentials::Anonymous
    } else {
        icechunk::storage::S3Credentials::FromEnv
    }
}

/// The version of snapshot `id` (its base32 name).
fn snapshot_version(label: &str, id: &str) -> Result<VersionInfo> {
    SnapshotId::try_from(id)
        .map(VersionInfo::SnapshotId)
        .map_err(|e| failed(label, &format!("snapshot {id:?}"), e))
}

/// The version `--ref NAME` names: a branch, else a tag.
fn reference_version(label: &str, repo: &Repository, name: &str) -> Result<VersionInfo> {
    let branches = block_on(repo.list_branches())?.map_err(|e| failed(label, "branches", e))?;
    if branches.contains(name) {
        return Ok(VersionInfo::BranchTipRef(name.to_string()));
    }
    let tags = block_on(repo.list_tags())?.map_err(|e| failed(label, "tags", e))?;
    if tags.contains(name) {
        return Ok(VersionInfo::TagRef(name.to_string()));
    }
    Err(Error::Invalid(format!(
        "{label}: --ref {name}: no such branch or tag (branches: {}; tags: {})",
        branches.into_iter().collect::<Vec<_>>().join(", "),
        tags.into_iter().collect::<Vec<_>>().join(", ")
    )))
}

/// Open `version` of `repo` read-only.
fn checkout(label: &str, repo: &Repository, version: VersionInfo) -> Result<Checkout> {
    let session = block_on(repo.readonly_session(&version))?
        .map_err(|e| failed(label, &format!("{version:?}"), e))?;
    let snapshot = session.snapshot_id().to_string();
    let version = Version::Tag(format!("{SNAPSHOT_TAG}{snapshot}"));
    let session = Arc::new(tokio::sync::RwLock::new(session));
    let store = block_on(icechunk::Store::from_session(session.clone()))?;
    Ok(Checkout {
        store,
        session,
        snapshot,
        version,
        neighbours: Mutex::new(HashMap::new()),
    })
}

fn not_found(e: &StoreError) -> bool {
    matches!(e.kind(), StoreErrorKind::NotFound(_))
}

/// The array path (`/a/b`) and grid coordinates of chunk key `key` (`a/b/c/0/1`; `c`
/// alone for a 0-d root array), or `None` when it is no chunk key: read as the icechunk
/// crate reads it (the last `c` splits the array's path from the coordinates).
fn chunk_of(key: &str) -> Option<(String, Vec<u32>)> {
    if key == "c" {
        return Some(("/".to_string(), Vec::new()));
    }
    let (path, coords) = key.rsplit_once('c')?;
    let path = path.strip_suffix('/').unwrap_or(path);
    let coords = if coords.is_empty() {
        Vec::new()
    } else {
        coords
            .strip_prefix('/')?
            .split('/')
            .map(|c| c.parse::<u32>().ok())
            .collect::<Option<Vec<u32>>>()?
    };
    Some((format!("/{path}"), coords))
}

/// What chunk key `inner` of version `at` holds: inline bytes, a range of a chunk object,
/// or a virtual chunk; `None` for no chunk (or a key that is not one).
fn payload(at: &Checkout, inner: &str) -> Option<(String, Vec<u32>, ChunkPayload)> {
    let (path, coords) = chunk_of(inner)?;
    let node = icechunk::format::Path::new(&path).ok()?;
    let indices = ChunkIndices(coords.clone());
    let got = block_on(async {
        let session = at.session.read().await;
        session.get_chunk_ref(&node, &indices).await
    })
    .ok()?;
    // Errors (no such node, a manifest that cannot be read) are the crate's own read's to
    // report.
    Some((path, coords, got.ok()??))
}

/// Whether a value of `version` may be what a virtual chunk recorded with `checksum` was
/// made from: the same ETag, or modified no later than recorded (a remote object's
/// version names its ETag and time, a local file's its time). A version that tells
/// neither passes.
fn unmodified(version: &Version, checksum: &Checksum) -> bool {
    match checksum {
        Checksum::ETag(etag) => version
            .etag()
            .is_none_or(|got| got == etag.0.trim_matches('"')),
        Checksum::LastModified(at) => version.modified().is_none_or(|s| s <= i64::from(at.0)),
    }
}

impl Repo {
    /// The target a virtual chunk's location names (a `vcc://NAME/` location lies in the
    /// container named NAME).
    fn target(&self, key: &str, location: &str) -> Result<Target> {
        let location = match location.strip_prefix("vcc://") {
            None => location.to_string(),
            Some(rest) => {
                let (name, path) = rest.split_once('/').unwrap_or((rest, ""));
                let prefix = self.containers.get(name).ok_or_else(|| Error::Io {
                    key: key.to_string(),
                    source: std::io::Error::new(
                        std::io::ErrorKind::NotFound,
                        format!("virtual chunk {location}: no container named {name}"),
                    ),
                })?;
                format!("{prefix}{path}")
            }
        };
        Ok(resolve(&location, &Prefix::Local("/".into())))
    }

    /// Chunk `key` (or part of it, `range`) from its chunk object: `chunk.length` bytes at
    /// `chunk.offset` of `chunks/ID`.
    fn read_stored(
        &self,
        key: &str,
        at: &Checkout,
        chunk: &ChunkRef,
        range: Option<ByteRange>,
    ) -> Result<Value> {
        below_2_63(key, "chunk", chunk.offset, chunk.length)?;
        let object = format!("chunks/{}", chunk.id);
        let what = Referred {
            kind: "chunk",
            noun: "object",
            shown: format!("{}/{object}", self.label),
        };
        let value = read_part(
            self.objects.as_ref(),
            key,
            &object,
            &what,
            chunk.offset,
            Some(chunk.length),
            range,
        )?;
        Ok(Value {
            bytes: value.bytes,
            version: at.version.clone(),
        })
    }

    /// The virtual chunk `chunk` of key `key` (chunk `coords` of array `path` at `at`),
    /// or part of it, read from its target under the allowed prefixes.
    fn read_virtual(
        &self,
        key: &str,
        at: &Checkout,
        (path, coords): (&str, &[u32]),
        chunk: &VirtualChunkRef,
        range: Option<ByteRange>,
    ) -> Result<Value> {
        below_2_63(key, "virtual chunk", chunk.offset, chunk.length)?;
        let target = self.target(key, chunk.location.url())?;
        let grouped = target.clone();
        // A chunk with a checksum is read alone: its own read tells its version.
        let near = || {
            if chunk.checksum.is_some() {
                return None;
            }
            let object = format!("{} (snapshot {} {path})", grouped.shown(), at.snapshot);
            self.neighbours(at, path)?.near(coords, &grouped, object)
        };
        let value =
            self.targets
                .read(key, &target, chunk.offset, Some(chunk.length), range, near)?;
        if let Some(checksum) = &chunk.checksum {
            if !unmodified(&value.version, checksum) {
                return Err(Error::corrupt(
                    key,
                    format!(
                        "virtual chunk target {} changed after the chunk was written ({checksum:?})",
                        target.shown()
                    ),
                ));
            }
        }
        Ok(Value {
            bytes: value.bytes,
            version: at.version.clone(),
        })
    }

    /// The virtual chunks of array `path` at `at`, by target, listed once per version
    /// (by the first reader that needs them; `None` when the listing failed or the array
    /// has more than [`MAX_NEIGHBOURS`] chunks, and each chunk is then read alone).
    fn neighbours(&self, at: &Checkout, path: &str) -> Option<Arc<Neighbours<Vec<u32>>>> {
        let once = at
            .neighbours
            .lock()
            .entry(path.to_string())
            .or_default()
            .clone();
        once.get_or_init(|| self.list_neighbours(at, path).map(Arc::new))
            .clone()
    }

    fn list_neighbours(&self, at: &Checkout, path: &str) -> Option<Neighbours<Vec<u32>>> {
        let node = icechunk::format::Path::new(path).ok()?;
        let chunks: Vec<icechunk::format::manifest::ChunkInfo> = block_on(async {
            let session = at.session.read().await;
            let stream = session.array_chunk_iterator(&node).await;
            stream.take(MAX_NEIGHBOURS + 1).try_collect().await
        })
        .ok()?
        .ok()?;
        if chunks.len() > MAX_NEIGHBOURS {
            return None;
        }
        let mut n = Neighbours::default();
        for info in chunks {
            let ChunkPayload::Virtual(v) = info.payload else {
                continue;
            };
            let fits = v
                .offset
                .checked_add(v.length)
                .is_some_and(|end| end <= i64::MAX as u64);
            let Ok(target) = self.target(path, v.location.url()) else {
                continue;
            };
            n.add(info.coord.0, target, fits.then_some((v.offset, v.length)));
        }
        Some(n)
    }

    /// What names the bytes of chunk key `inner` at `at` wherever they are stored: its
    /// chunk object and range, or its target, range and checksum (a virtual chunk without
    /// a checksum has none: its file may change under it); `None` for inline chunks.
    fn identity(&self, at: &Checkout, inner: &str) -> Option<String> {
        match payload(at, inner)?.2 {
            ChunkPayload::Ref(r) => Some(format!(
                "icechunk {} chunk {} {}+{}",
                self.label, r.id, r.offset, r.length
            )),
            ChunkPayload::Virtual(v) => {
                let checksum = v.checksum.as_ref()?;
                let target = self.target(inner, v.location.url()).ok()?;
                Some(format!(
                    "virtual {} {}+{} {checksum:?}",
                    target.shown(),
                    v.offset,
                    v.length
                ))
            }
            _ => None,
        }
    }

    /// `key`, or part of it, read at version `at` as `inner` (its key inside the version).
    fn read_at(
        &self,
        at: &Checkout,
        key: &str,
        inner: &str,
        range: Option<ByteRange>,
    ) -> Result<Option<Value>> {
        match payload(at, inner) {
            Some((path, coords, ChunkPayload::Virtual(chunk))) => {
                return self
                    .read_virtual(key, at, (&path, &coords), &chunk, range)
                    .map(Some);
            }
            Some((_, _, ChunkPayload::Ref(chunk))) => {
                return self.read_stored(key, at, &chunk, range).map(Some);
            }
            Some((_, _, ChunkPayload::Inline(bytes))) => {
                let (from, len) =
                    range.map_or((0, bytes.len() as u64), |r| r.clip(bytes.len() as u64));
                return Ok(Some(Value {
                    bytes: bytes[from as usize..(from + len) as usize].to_vec(),
                    version: at.version.clone(),
                }));
            }
            _ => {}
        }
        let label = &self.label;
        let range = match range {
            None => IcRange::ALL,
            Some(ByteRange::Span { offset, len }) => {
                IcRange::Bounded(offset..offset.saturating_add(len))
            }
            Some(ByteRange::Suffix(n)) => IcRange::Last(n),
        };
        let (store, name) = (at.store.clone(), inner.to_string());
        match block_on(on_runtime(async move { store.get(&name, &range).await }))?? {
            Ok(bytes) => Ok(Some(Value {
                bytes: Vec::from(bytes),
                version: at.version.clone(),
            })),
            // A version folder is a group even where the version holds nothing (the
            // repository's first snapshot has not even a root group).
            Err(e) if not_found(&e) && key != inner && inner == "zarr.json" => Ok(Some(Value {
                bytes: EMPTY_GROUP.to_vec(),
                version: at.version.clone(),
            })),
            Err(e) if not_found(&e) => Ok(None),
            Err(e) => Err(failed(&format!("{label}/{key}"), "read", e)),
        }
    }
}

/// The names below `prefix` at version `at` (as `inner` there), sorted.
fn list_at(label: &str, at: &Checkout, prefix: &str, inner: &str) -> Result<Listing> {
    let items: Vec<icechunk::store::ListDirItem> = match block_on(async {
        let stream = at.store.list_dir_items(inner).await?;
        stream.try_collect().await
    })? {
        Ok(items) => items,
        Err(e) if not_found(&e) => Vec::new(),
        Err(e) => return Err(failed(&format!("{label}/{prefix}"), "read", e)),
    };
    let mut listing = Listing::default();
    for item in items {
        match item {
            icechunk::store::ListDirItem::Key(k) => listing.keys.push(k),
            icechunk::store::ListDirItem::Prefix(p) => listing.prefixes.push(p),
        }
    }
    listing.keys.sort();
    listing.prefixes.sort();
    listing.prefixes.dedup();
    Ok(listing)
}

/// The size and version of `key` at version `at` (as `inner` there).
fn head_at(label: &str, at: &Checkout, key: &str, inner: &str) -> Result<Option<Head>> {
    match block_on(at.store.getsize(inner))? {
        Ok(size) => Ok(Some(Head {
            size,
            version: at.version.clone(),
        })),
        Err(e) if not_found(&e) => Ok(None),
        Err(e) => Err(failed(&format!("{label}/{key}"), "read", e)),
    }
}

impl Store for IcechunkStore {
    fn read(&self, key: &str, range: Option<ByteRange>) -> Result<Option<Value>> {
        let Some((at, inner)) = self.route(key)? else {
            return Ok(None);
        };
        self.shared.read_at(&at, key, inner, range)
    }

    fn list_dir(&self, prefix: &str) -> Result<Listing> {
        let prefix = prefix.trim_end_matches('/');
        let mut listing = Listing::default();
        if self.all && [BRANCHES, TAGS, SNAPSHOTS].contains(&prefix) {
            listing.prefixes = self.names(prefix)?.into_iter().collect();
            return Ok(listing);
        }
        let Some((at, inner)) = self.route(prefix)? else {
            return Ok(listing);
        };
        let mut listing = list_at(&self.label, &at, prefix, inner)?;
        if self.all && prefix.is_empty() {
            listing
                .prefixes
                .extend([BRANCHES, TAGS, SNAPSHOTS].map(String::from));
            listing.prefixes.sort();
            listing.prefixes.dedup();
        }
        Ok(listing)
    }

    fn head(&self, key: &str) -> Result<Option<Head>> {
        let Some((at, inner)) = self.route(key)? else {
            return Ok(None);
        };
        head_at(&self.label, &at, key, inner)
    }

    fn will_need(&self, _key: &str) {}

    fn caps(&self) -> Caps {
        self.caps.clone()
    }

    /// The tip of the branch the tree follows read again, and the branch folders opened
    /// under `--versions` dropped where their branch moved or is gone (opened again at
    /// their next use).
    fn refresh(&self, max_age: Option<Duration>) -> Result<()> {
        // One reader reads the tips; the others go on with what is there.
        if !self.tips_read.due(max_age) {
            return Ok(());
        }
        if let Some(branch) = &self.follows {
            let tip = self.tip(branch)?;
            if tip != self.default.read().snapshot {
                let next = self.at_snapshot(&tip)?;
                log::info!(
                    "refresh: branch {branch} of {} moved to snapshot {tip}",
                    self.label
                );
                *self.default.write() = next;
            }
        }
        let branches: Vec<(String, String)> = self
            .opened
            .lock()
            .iter()
            .filter_map(|(folder, at)| {
                let name = folder.strip_prefix(BRANCHES)?.strip_prefix('/')?;
                Some((name.to_string(), at.snapshot.clone()))
            })
            .collect();
        for (name, snapshot) in branches {
            if self.tip(&name).ok().as_ref() != Some(&snapshot) {
                self.opened.lock().remove(&format!("{BRANCHES}/{name}"));
            }
        }
        Ok(())
    }

    fn at_version(&self, version: &Version) -> Option<Arc<dyn Store>> {
        let Version::Tag(tag) = version else {
            return None;
        };
        let id = tag.strip_prefix(SNAPSHOT_TAG)?;
        match self.at_snapshot(id) {
            Ok(at) => Some(Arc::new(AtSnapshot {
                shared: self.shared.clone(),
                at,
                all: self.all,
                caps: self.caps.clone(),
            })),
            Err(e) => {
                log::warn!("{e}");
                None
            }
        }
    }
}

/// The repository at one snapshot: what was read at it goes on being read there, the
/// branch it came from moving or not. Keys may name a version folder (`@tags/v1/...`):
/// the snapshot is that folder's.
struct AtSnapshot {
    shared: Arc<Repo>,
    at: Arc<Checkout>,
    all: bool,
    caps: Caps,
}

impl AtSnapshot {
    fn inner<'k>(&self, key: &'k str) -> &'k str {
        if self.all && key.starts_with('@') {
            key.splitn(3, '/').nth(2).unwrap_or("")
        } else {
            key
        }
    }
}

impl Store for AtSnapshot {
    fn read(&self, key: &str, range: Option<ByteRange>) -> Result<Option<Value>> {
        self.shared.read_at(&self.at, key, self.inner(key), range)
    }

    fn list_dir(&self, prefix: &str) -> Result<Listing> {
        let prefix = prefix.trim_end_matches('/');
        list_at(&self.shared.label, &self.at, prefix, self.inner(prefix))
    }

    fn head(&self, key: &str) -> Result<Option<Head>> {
        head_at(&self.shared.label, &self.at, key, self.inner(key))
    }

    fn identity(&self, key: &str) -> Option<String> {
        self.shared.identity(&self.at, self.inner(key))
    }

    /// With `--versions` only: there, another version's file may read a shared chunk
    /// next, so the cache names it by its identity and keeps it once served (see
    /// `read::view`). One version shown at a time has no such reader, and keeping
    /// what was served would hold a whole array read through in memory.
    fn names_bytes(&self) -> bool {
        self.all
    }

    fn will_need(&self, _key: &str) {}

    fn caps(&self) -> Caps {
        self.caps.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use icechunk::format::manifest::SecondsSinceEpoch;

    #[test]
    fn chunk_keys_name_an_array_and_its_grid_coordinates() {
        let chunk = |k: &str| chunk_of(k);
        assert_eq!(chunk("a/b/c/0/12"), Some(("/a/b".into(), vec![0, 12])));
        assert_eq!(chunk("c/3"), Some(("/".into(), vec![3])));
        assert_eq!(chunk("c"), Some(("/".into(), vec![])));
        assert_eq!(chunk("x/c"), Some(("/x".into(), vec![])));
        // An array named c, and a group named c.
        assert_eq!(chunk("x/c/c/1"), Some(("/x/c".into(), vec![1])));
        assert_eq!(chunk("c/zarr.json"), None);
        assert_eq!(chunk("a/c/b/zarr.json"), None);
        assert_eq!(chunk("a/zarr.json"), None);
        assert_eq!(chunk("a/c/99999999999"), None);
        // A root array named c, and arrays under a group named c.
        assert_eq!(chunk("c/c/0"), Some(("/c".into(), vec![0])));
        assert_eq!(chunk("c/x/c/0/2"), Some(("/c/x".into(), vec![0, 2])));
        assert_eq!(chunk("acme/zarr.json"), None);
    }

    #[test]
    fn a_virtual_chunk_checksum_refuses_a_target_changed_since() {
        let etag = Checksum::ETag(icechunk::storage::ETag("\"abc\"".into()));
        let tag = |t: &str| Version::Tag(t.into());
        assert!(unmodified(&tag("etag:\"abc\" modified:5"), &etag));
        assert!(!unmodified(&tag("etag:\"abd\" modified:5"), &etag));
        let at = Checksum::LastModified(SecondsSinceEpoch(1_000));
        assert!(unmodified(&tag("mtime:999.500000000:size:10"), &at));
        assert!(unmodified(&tag("mtime:1000.000000000:size:10"), &at));
        assert!(!unmodified(&tag("mtime:1001.000000000:size:10"), &at));
        assert!(unmodified(&tag("size:10:999000000000"), &at));
        assert!(!unmodified(&tag("size:10:1001000000000"), &at));
        assert!(unmodified(&tag("etag:\"x\" modified:1000"), &at));
        assert!(!unmodified(&tag("etag:\"x\" modified:1001"), &at));
        // A version that tells no time passes.
        assert!(unmodified(&tag("etag:x"), &at));
        assert!(unmodified(&Version::Unknown, &at));
    }
}
