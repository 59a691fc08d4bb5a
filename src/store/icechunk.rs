//! An Icechunk repository as a store, through the `icechunk` crate: it resolves a
//! version (a branch tip, a tag or a snapshot) to its nodes and chunk references, and
//! hands out the Zarr v3 documents and the stored chunk bytes; zarrfs decodes them with
//! its own codec chain. Every value carries the snapshot it was read from as its
//! version, so that caches keep two versions of a dataset apart. With `--versions`, the
//! root also holds `@branches/NAME/`, `@tags/NAME/` and `@snapshots/ID/`, each the tree of
//! that version, opened at first use. Virtual chunks (byte ranges of NetCDF/HDF5 files)
//! are read by the crate from the repository's virtual chunk containers that are
//! allowed (all, or those under `--virtual-prefix`).
//!
//! A branch moves: with a refresh interval its tip is read again once per interval (and
//! at `zarrfs refresh`), and the tree follows it. What was read at a snapshot goes on
//! being read at that snapshot ([`Store::at_version`]), so an open file never mixes two.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures::TryStreamExt;
use icechunk::format::{ByteRange as IcRange, SnapshotId};
use icechunk::repository::VersionInfo;
use icechunk::store::{StoreError, StoreErrorKind};
use icechunk::Repository;
use parking_lot::{Mutex, RwLock};

use super::runtime::block_on;
use super::{
    ByteRange, Caps, Head, Listing, ReadAgain, Store, StoreConfig, Value, Version, SNAPSHOT_TAG,
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

/// One version opened read-only: its store, its snapshot's id, and the version its
/// values carry (the snapshot).
struct Checkout {
    store: icechunk::Store,
    snapshot: String,
    version: Version,
}

pub struct IcechunkStore {
    label: String,
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
        Self::open(label, storage, cfg, Caps::local())
    }

    /// The repository at `url` (`s3://BUCKET/PREFIX`, or an `http(s)://` folder), with
    /// the store options of `cfg` (`endpoint`, `region`, `allow_http`, `--anonymous`).
    pub fn open_url(url: &url::Url, cfg: &StoreConfig) -> Result<IcechunkStore> {
        let label = url.to_string();
        let option = |names: &[&str]| {
            cfg.options
                .iter()
                .find(|(k, _)| names.contains(&k.as_str()))
                .map(|(_, v)| v.clone())
        };
        let storage = match url.scheme() {
            "s3" | "s3a" => {
                let bucket = url.host_str().unwrap_or_default().to_string();
                let prefix = url.path().trim_matches('/').to_string();
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
                    (!prefix.is_empty()).then_some(prefix),
                    Some(s3_credentials(cfg)),
                    Vec::new(),
                    Vec::new(),
                ))?
            }
            "http" | "https" => icechunk::storage::new_http_storage(url.as_str(), None, None),
            other => {
                return Err(Error::Invalid(format!(
                    "{label}: Icechunk repositories are read from local folders, s3:// and \
                     http(s):// (not {other}:// yet)"
                )))
            }
        }
        .map_err(|e| failed(&label, "storage", e))?;
        let caps = Caps {
            concurrency: cfg.max_requests,
            request_bytes: 0,
            location: Some(label.clone()),
        };
        Self::open(label, storage, cfg, caps)
    }

    fn open(
        label: String,
        storage: Arc<dyn icechunk::Storage + Send + Sync>,
        cfg: &StoreConfig,
        caps: Caps,
    ) -> Result<IcechunkStore> {
        let repo = block_on(async move { Repository::open(storage).execute().await })?
            .map_err(|e| failed(&label, "open", e))?;
        let repo = authorize_containers(&label, repo, cfg)?;
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

/// `repo`, allowed to read the virtual chunks of its virtual chunk containers: all of
/// them, or with `--virtual-prefix`, those that lie under one of the prefixes given (a
/// local folder stands for its `file://` URL). Containers of other schemes than
/// `file://`, `s3://` and `http(s)://` stay closed; a virtual chunk in a closed container
/// fails its read alone.
fn authorize_containers(label: &str, repo: Repository, cfg: &StoreConfig) -> Result<Repository> {
    use icechunk::config::Credentials;
    let given: Vec<String> = cfg
        .virtual_prefixes
        .iter()
        .map(|p| match p.split_once("://") {
            Some(_) => p.clone(),
            None => format!("file://{}/", p.trim_end_matches('/')),
        })
        .collect();
    let mut allowed = std::collections::HashMap::new();
    for container in repo.config().virtual_chunk_containers() {
        let prefix = container.url_prefix();
        if !given.is_empty() && !given.iter().any(|g| prefix.starts_with(g.as_str())) {
            continue;
        }
        let scheme = prefix.split_once("://").map_or("", |(s, _)| s);
        let credentials = match scheme {
            "file" => Credentials::LocalFileSystemAccess,
            "http" | "https" => Credentials::HttpAccess,
            "s3" => Credentials::S3(s3_credentials(cfg)),
            _ => continue,
        };
        allowed.insert(prefix.to_string(), Some(credentials));
    }
    if allowed.is_empty() {
        return Ok(repo);
    }
    block_on(repo.reopen(None, Some(allowed)))?
        .map_err(|e| failed(label, "virtual chunk containers", e))
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
    let store = block_on(icechunk::Store::from_session(Arc::new(
        tokio::sync::RwLock::new(session),
    )))?;
    Ok(Checkout {
        store,
        snapshot,
        version,
    })
}

fn not_found(e: &StoreError) -> bool {
    matches!(e.kind(), StoreErrorKind::NotFound(_))
}

/// `key`, or part of it, read at version `at` as `inner` (its key inside the version).
fn read_at(
    label: &str,
    at: &Checkout,
    key: &str,
    inner: &str,
    range: Option<ByteRange>,
) -> Result<Option<Value>> {
    let range = match range {
        None => IcRange::ALL,
        Some(ByteRange::Span { offset, len }) => {
            IcRange::Bounded(offset..offset.saturating_add(len))
        }
        Some(ByteRange::Suffix(n)) => IcRange::Last(n),
    };
    match block_on(at.store.get(inner, &range))? {
        Ok(bytes) => Ok(Some(Value {
            bytes: bytes.to_vec(),
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
        read_at(&self.label, &at, key, inner, range)
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
                label: self.label.clone(),
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
    label: String,
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
        read_at(&self.label, &self.at, key, self.inner(key), range)
    }

    fn list_dir(&self, prefix: &str) -> Result<Listing> {
        let prefix = prefix.trim_end_matches('/');
        list_at(&self.label, &self.at, prefix, self.inner(prefix))
    }

    fn head(&self, key: &str) -> Result<Option<Head>> {
        head_at(&self.label, &self.at, key, self.inner(key))
    }

    fn will_need(&self, _key: &str) {}

    fn caps(&self) -> Caps {
        self.caps.clone()
    }
}
