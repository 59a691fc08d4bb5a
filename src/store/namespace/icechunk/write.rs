//! Writing the branch an Icechunk repository's tree follows: each change is one writable
//! session on the branch's tip, its chunks and `zarr.json` documents set through the
//! crate's store, and one commit. A branch that moved while the change was being made
//! is rebased where the two sides touched different chunks (the crate's conflict
//! detector), else the commit fails and nothing of the change is in the repository.
//! Commits of one repository take turns in this process (a local repository has no
//! conditional update to keep two of them apart); tags and snapshots are never written.

use std::sync::Arc;

use bytes::Bytes;
use icechunk::conflicts::detector::ConflictDetector;
use icechunk::session::{Session, SessionErrorKind};
use icechunk::Repository;
use parking_lot::{Mutex, MutexGuard};

use super::failed;
use crate::error::{Error, Result};
use crate::store::source::remote::runtime::block_on;
use crate::store::write::{Change, Expected, Writer};
use crate::store::Version;

/// How many times a commit is rebased onto a branch that moved under it.
const REBASES: u16 = 5;

/// The branch a repository's tree follows, written.
pub struct BranchWriter {
    label: String,
    repo: Arc<Repository>,
    branch: String,
    /// Held from the start of a change to its commit.
    turn: Mutex<()>,
}

impl BranchWriter {
    pub fn new(label: &str, repo: Arc<Repository>, branch: &str) -> BranchWriter {
        BranchWriter {
            label: label.to_string(),
            repo,
            branch: branch.to_string(),
            turn: Mutex::new(()),
        }
    }
}

impl Writer for BranchWriter {
    fn begin(&self) -> Result<Box<dyn Change + '_>> {
        let turn = self.turn.lock();
        let repo = self.repo.clone();
        let branch = self.branch.clone();
        let session = block_on(async move { repo.writable_session(&branch).await })?
            .map_err(|e| failed(&self.label, "writable session", e))?;
        let base = session.snapshot_id().to_string();
        let session = Arc::new(tokio::sync::RwLock::new(session));
        let store = block_on(icechunk::Store::from_session(session.clone()))?;
        Ok(Box::new(BranchChange {
            writer: self,
            _turn: turn,
            session,
            store,
            base,
            changed: false,
        }))
    }

    fn versions(&self) -> bool {
        true
    }
}

/// One commit on the branch in the making.
struct BranchChange<'a> {
    writer: &'a BranchWriter,
    _turn: MutexGuard<'a, ()>,
    session: Arc<tokio::sync::RwLock<Session>>,
    store: icechunk::Store,
    /// The snapshot the session starts from (the branch's tip when it began).
    base: String,
    changed: bool,
}

impl BranchChange<'_> {
    /// Fail unless `key` is of the tree the branch holds and what was read of it is of
    /// the snapshot the change starts from (the branch did not move since).
    fn check(&self, key: &str, expected: &Expected) -> Result<()> {
        if key.starts_with('@') {
            return Err(Error::NotWritable {
                key: key.to_string(),
                reason: "the version folders are read-only".into(),
            });
        }
        match expected {
            Expected::At(Version::Snapshot(read)) if *read != self.base => Err(Error::Conflict {
                key: format!("{}/{key}", self.writer.label),
                reason: format!(
                    "read at snapshot {read}, and branch {} has moved to {}",
                    self.writer.branch, self.base
                ),
            }),
            _ => Ok(()),
        }
    }
}

impl Change for BranchChange<'_> {
    fn put(&mut self, key: &str, bytes: &[u8], expected: &Expected) -> Result<()> {
        self.check(key, expected)?;
        let value = Bytes::copy_from_slice(bytes);
        let store = &self.store;
        block_on(store.set(key, value))?
            .map_err(|e| failed(&format!("{}/{key}", self.writer.label), "set", e))?;
        self.changed = true;
        Ok(())
    }

    fn delete(&mut self, key: &str, expected: &Expected) -> Result<()> {
        self.check(key, expected)?;
        let store = &self.store;
        block_on(store.delete(key))?
            .map_err(|e| failed(&format!("{}/{key}", self.writer.label), "delete", e))?;
        self.changed = true;
        Ok(())
    }

    fn all_or_nothing(&self) -> bool {
        true
    }

    fn finish(self: Box<Self>, message: &str) -> Result<()> {
        if !self.changed {
            return Ok(());
        }
        let session = self.session.clone();
        let message = message.to_string();
        let committed = block_on(async move {
            let mut session = session.write().await;
            session
                .commit(message)
                .rebase(&ConflictDetector, REBASES)
                .execute()
                .await
        })?;
        let label = format!("{} branch {}", self.writer.label, self.writer.branch);
        match committed {
            Ok(snapshot) => {
                log::info!("{label}: committed snapshot {snapshot}");
                Ok(())
            }
            Err(e) => match &e.kind {
                SessionErrorKind::RebaseFailed { conflicts, .. } => Err(Error::Conflict {
                    key: label,
                    reason: format!(
                        "another commit changed what this one changes ({} conflicts, the first {:?})",
                        conflicts.len(),
                        conflicts.first()
                    ),
                }),
                SessionErrorKind::Conflict { .. } => Err(Error::Conflict {
                    key: label,
                    reason: "the branch kept moving".into(),
                }),
                _ => Err(failed(&label, "commit", e)),
            },
        }
    }
}
