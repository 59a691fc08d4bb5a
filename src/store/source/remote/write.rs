//! Writing object storage (S3, GCS, Azure): one PUT per value, conditional on the
//! version the value was read with (S3 and Azure: its ETag, `If-Match`; GCS: its
//! generation, `x-goog-if-generation-match`), or on there being none, so a chunk another
//! writer changed in between is never silently overwritten; a refused condition fails
//! that change with `Error::Conflict`. A version the put cannot name (no ETag; on GCS no
//! generation) is checked by a HEAD just before the put instead. A delete checks the
//! ETag first (object stores have no conditional delete). Each put and delete stands
//! alone; web servers (HTTP) take no writes.

use object_store::path::Path as ObjectPath;
use object_store::{ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion};

use super::pool::Source;
use super::RemoteStore;
use crate::error::{Error, Result};
use crate::store::source::remote::runtime::block_on;
use crate::store::write::{Change, Expected, Writer};
use crate::store::Version;

/// The condition a put makes of what it expects, on a store whose updates name the
/// object's generation (`by_generation`, GCS) or its ETag.
fn mode_of(expected: &Expected, by_generation: bool) -> PutMode {
    match expected {
        Expected::Absent => PutMode::Create,
        Expected::At(Version::ETag {
            etag, generation, ..
        }) if !by_generation || generation.is_some() => PutMode::Update(UpdateVersion {
            e_tag: Some(etag.clone()),
            version: generation.clone(),
        }),
        // A version the store's condition cannot name: the put is checked by a HEAD
        // just before it (see `Source::put`).
        Expected::At(_) => PutMode::Overwrite,
    }
}

impl Source {
    /// PUT `bytes` at `path` on the condition `expected` (`label` names it).
    pub fn put(
        &self,
        path: &ObjectPath,
        bytes: &[u8],
        expected: &Expected,
        label: &str,
    ) -> Result<()> {
        self.check(path)?;
        let mode = mode_of(expected, self.updates_by_generation());
        if matches!(mode, PutMode::Overwrite) {
            self.still(path, expected, label)?;
        }
        let payload = PutPayload::from(bytes.to_vec());
        let client = self.client();
        block_on(async {
            let _permit = self.permit(label).await?;
            let options = PutOptions {
                mode,
                ..Default::default()
            };
            match client.put_opts(path, payload, options).await {
                Ok(_) => Ok(()),
                Err(
                    object_store::Error::Precondition { .. }
                    | object_store::Error::AlreadyExists { .. },
                ) => Err(conflict(label)),
                Err(e) => Err(self.error(label, e)),
            }
        })?
    }

    /// DELETE `path`, when it is still what `expected` says (checked by a HEAD first).
    pub fn delete(&self, path: &ObjectPath, expected: &Expected, label: &str) -> Result<()> {
        self.check(path)?;
        self.still(path, expected, label)?;
        let client = self.client();
        block_on(async {
            let _permit = self.permit(label).await?;
            match client.delete(path).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                Err(e) => Err(self.error(label, e)),
            }
        })?
    }

    /// Fail unless the object at `path` is still what `expected` says.
    fn still(&self, path: &ObjectPath, expected: &Expected, label: &str) -> Result<()> {
        let now = self.head(path, label)?.map(|m| super::pool::version_of(&m));
        let same = match (expected, now) {
            (Expected::Absent, None) => true,
            (Expected::At(v), Some(now)) => *v == now || *v == Version::Unknown,
            _ => false,
        };
        if same {
            Ok(())
        } else {
            Err(conflict(label))
        }
    }
}

fn conflict(label: &str) -> Error {
    Error::Conflict {
        key: label.to_string(),
        reason: "the object is not the one read (another writer changed it)".into(),
    }
}

impl Writer for RemoteStore {
    fn begin(&self) -> Result<Box<dyn Change + '_>> {
        Ok(Box::new(RemoteChange(self)))
    }

    /// What was read of the store is read again around a change: a cache of objects by
    /// ETag (the disk cache) then asks again for what the change rewrote.
    fn versions(&self) -> bool {
        true
    }
}

/// A change of object storage: each put and delete stands alone.
struct RemoteChange<'a>(&'a RemoteStore);

impl Change for RemoteChange<'_> {
    fn put(&mut self, key: &str, bytes: &[u8], expected: &Expected) -> Result<()> {
        let s = self.0;
        s.source()
            .put(&s.path(key), bytes, expected, &s.key_url(key))
    }

    fn delete(&mut self, key: &str, expected: &Expected) -> Result<()> {
        let s = self.0;
        s.source().delete(&s.path(key), expected, &s.key_url(key))
    }

    fn finish(self: Box<Self>, _message: &str) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_put_names_the_etag_or_on_gcs_the_generation_else_is_checked_by_a_head() {
        let read = |generation: Option<&str>| {
            Expected::At(Version::ETag {
                etag: "\"e1\"".into(),
                modified: 7,
                generation: generation.map(str::to_string),
            })
        };
        let update = |mode: PutMode| match mode {
            PutMode::Update(v) => Some((v.e_tag, v.version)),
            _ => None,
        };
        let etag = Some("\"e1\"".to_string());
        assert_eq!(
            update(mode_of(&read(None), false)),
            Some((etag.clone(), None))
        );
        assert_eq!(
            update(mode_of(&read(Some("42")), true)),
            Some((etag, Some("42".into())))
        );
        // GCS without a generation, and a version with no ETag: a HEAD checks them.
        assert!(matches!(mode_of(&read(None), true), PutMode::Overwrite));
        let file = Expected::At(Version::Object { size: 1, nanos: 2 });
        assert!(matches!(mode_of(&file, false), PutMode::Overwrite));
        assert!(matches!(mode_of(&Expected::Absent, true), PutMode::Create));
    }
}
