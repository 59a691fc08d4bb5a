//! The versions of an Icechunk repository: each version opened read-only (a checkout),
//! the snapshots kept open for what was read at them, and, with `--versions`, the folders
//! `@branches/NAME/`, `@tags/NAME/` and `@snapshots/ID/` that route a key to its version.

use std::collections::BTreeSet;
use std::sync::{Arc, OnceLock};

use futures::TryStreamExt;
use icechunk::format::SnapshotId;
use icechunk::repository::VersionInfo;
use icechunk::session::Session;
use icechunk::Repository;
use parking_lot::Mutex;

use super::{failed, IcechunkStore};
use crate::error::{Error, Result};
use crate::store::namespace::targets::Neighbours;
use crate::store::source::remote::runtime::block_on;
use crate::store::{StoreError, Version};
use std::collections::HashMap;

/// The folders of the versions beside the default tree.
pub(super) const BRANCHES: &str = "@branches";
pub(super) const TAGS: &str = "@tags";
pub(super) const SNAPSHOTS: &str = "@snapshots";

/// The virtual chunks of one array by their grid coordinates, listed once (`None`: the
/// listing failed or was too long).
pub(super) type Listed = OnceLock<Option<Arc<Neighbours<Vec<u32>>>>>;

/// Snapshots kept open for what was read at them, at most (more are opened again).
pub(super) const KEPT_SNAPSHOTS: usize = 16;

/// One version opened read-only: its store and session, its snapshot's id, the version
/// its values carry (the snapshot), and the virtual chunks of its arrays by target.
pub(super) struct Checkout {
    pub(super) store: icechunk::Store,
    pub(super) session: Arc<tokio::sync::RwLock<Session>>,
    pub(super) snapshot: String,
    pub(super) version: Version,
    pub(super) neighbours: Mutex<HashMap<String, Arc<Listed>>>,
}

impl IcechunkStore {
    /// Remember `checkout` by its snapshot (what is read at it is read through it).
    pub(super) fn keep(&self, checkout: &Arc<Checkout>) {
        let mut kept = self.snapshots.lock();
        if kept.len() >= KEPT_SNAPSHOTS && !kept.contains_key(&checkout.snapshot) {
            kept.clear();
        }
        kept.insert(checkout.snapshot.clone(), checkout.clone());
    }

    /// The version at snapshot `id`, opened if need be.
    pub(super) fn at_snapshot(&self, id: &str) -> Result<Arc<Checkout>> {
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
    pub(super) fn tip(&self, name: &str) -> Result<String> {
        block_on(self.repo.lookup_branch(name))?
            .map(|id| id.to_string())
            .map_err(|e| failed(&self.label, &format!("branch {name}"), e))
    }

    /// The version that `key` lies in and the key inside it; `None` when it names a
    /// version folder itself or one that does not exist.
    pub(super) fn route<'k>(&self, key: &'k str) -> Result<Option<(Arc<Checkout>, &'k str)>> {
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
    pub(super) fn names(&self, kind: &str) -> Result<BTreeSet<String>> {
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

/// The version of snapshot `id` (its base32 name).
pub(super) fn snapshot_version(label: &str, id: &str) -> Result<VersionInfo> {
    SnapshotId::try_from(id)
        .map(VersionInfo::SnapshotId)
        .map_err(|reason| {
            StoreError::SnapshotId {
                id: id.to_string(),
                reason,
            }
            .at(label)
        })
}

/// The version `--ref NAME` names: a branch, else a tag.
pub(super) fn reference_version(label: &str, repo: &Repository, name: &str) -> Result<VersionInfo> {
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
pub(super) fn checkout(label: &str, repo: &Repository, version: VersionInfo) -> Result<Checkout> {
    let session = block_on(repo.readonly_session(&version))?
        .map_err(|e| failed(label, &format!("{version:?}"), e))?;
    let snapshot = session.snapshot_id().to_string();
    let version = Version::Snapshot(snapshot.clone());
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
