//! Reading an Icechunk repository's chunks: a chunk key to its manifest entry, a stored
//! chunk from its chunk object through the store of the repository's folder or bucket, an
//! inline chunk from the manifest, a virtual chunk from its target file through
//! [`Targets`] (only under the allowed prefixes, neighbours of a remote file in one
//! request), and each chunk's identity for caches shared by versions.

use std::collections::HashMap;
use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use icechunk::format::manifest::{Checksum, ChunkPayload, ChunkRef, VirtualChunkRef};
use icechunk::format::{ByteRange as IcRange, ChunkIndices};
use icechunk::store::{StoreError as CrateStoreError, StoreErrorKind};
use icechunk::Repository;

use super::versions::Checkout;
use super::{failed, EMPTY_GROUP};
use crate::error::{Error, Result};
use crate::store::location::Location;
use crate::store::namespace::targets::{prefix_of, read_part, Neighbours, Referred, Targets};
use crate::store::source::remote::runtime::{block_on, on_runtime};
use crate::store::{ByteRange, Store, StoreConfig, StoreError, Value, Version};

/// Virtual chunks of one array grouped for reading together at most (more are read
/// one by one).
const MAX_NEIGHBOURS: usize = 1 << 22;

/// What every version of a repository shares: its name in messages, the store of its own
/// objects, where its virtual chunks may be read, and its virtual chunk containers by
/// name (for `vcc://` locations).
pub(super) struct Repo {
    pub(super) label: String,
    objects: Arc<dyn Store>,
    targets: Targets,
    containers: HashMap<String, String>,
}

/// A chunk's byte range (`kind` names it in the error) must end below 2^63: stores and
/// servers take offsets as signed 64-bit numbers.
pub(super) fn below_2_63(key: &str, kind: &str, offset: u64, length: u64) -> Result<()> {
    match offset.checked_add(length) {
        Some(end) if end <= i64::MAX as u64 => Ok(()),
        _ => Err(Error::corrupt(
            key,
            format!("{kind} range {offset}+{length} past 2^63"),
        )),
    }
}

/// Where the virtual chunks of `repo` may be read: under its virtual chunk containers,
/// or, with `cfg.virtual_prefixes`, under exactly those (a prefix inside a container
/// narrows it; one elsewhere opens that place; a container no prefix names is closed). A
/// local prefix is a folder (relative to the current one).
pub(super) fn virtual_targets(
    label: &str,
    repo: &Repository,
    objects: Arc<dyn Store>,
    cfg: &StoreConfig,
) -> Result<Repo> {
    let here = Location::Local(std::env::current_dir().unwrap_or_default());
    let given: Vec<Location> = cfg
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

/// Whether the crate's error says there is no such key: none stored, or a key that
/// cannot be one (not a Zarr key, chunk coordinates outside the grid).
pub(super) fn not_found(e: &CrateStoreError) -> bool {
    matches!(
        e.kind(),
        StoreErrorKind::NotFound(_)
            | StoreErrorKind::InvalidKey { .. }
            | StoreErrorKind::InvalidIndex { .. }
    )
}

/// The array path (`/a/b`) and grid coordinates of chunk key `key` (`a/b/c/0/1`; `c`
/// alone for a 0-d root array), or `None` when it is no chunk key: read as the icechunk
/// crate reads it (the last `c` splits the array's path from the coordinates).
pub(super) fn chunk_of(key: &str) -> Option<(String, Vec<u32>)> {
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
pub(super) fn payload(at: &Checkout, inner: &str) -> Option<(String, Vec<u32>, ChunkPayload)> {
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
pub(super) fn unmodified(version: &Version, checksum: &Checksum) -> bool {
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
    fn target(&self, key: &str, location: &str) -> Result<Location> {
        let location = match location.strip_prefix("vcc://") {
            None => location.to_string(),
            Some(rest) => {
                let (name, path) = rest.split_once('/').unwrap_or((rest, ""));
                let prefix = self.containers.get(name).ok_or_else(|| {
                    StoreError::NoContainer {
                        location: location.to_string(),
                        name: name.to_string(),
                    }
                    .at(key)
                })?;
                format!("{prefix}{path}")
            }
        };
        Ok(Location::Local("/".into()).join(&location))
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
            // Chunk IDs are unique and chunk objects never rewritten: every repository
            // naming one names the same bytes.
            named: Some(format!("icechunk/{object}")),
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
            let object = format!("{} (snapshot {} {path})", grouped, at.snapshot);
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
                        target
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
    pub(super) fn identity(&self, at: &Checkout, inner: &str) -> Option<String> {
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
                    target, v.offset, v.length
                ))
            }
            _ => None,
        }
    }

    /// `key`, or part of it, read at version `at` as `inner` (its key inside the version).
    pub(super) fn read_at(
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
        // A metadata document, read whole (the crate takes no range past its end) and
        // clipped here.
        let (store, name) = (at.store.clone(), inner.to_string());
        match block_on(on_runtime(
            async move { store.get(&name, &IcRange::ALL).await },
        ))?? {
            Ok(bytes) => {
                let (from, len) =
                    range.map_or((0, bytes.len() as u64), |r| r.clip(bytes.len() as u64));
                Ok(Some(Value {
                    bytes: bytes[from as usize..(from + len) as usize].to_vec(),
                    version: at.version.clone(),
                }))
            }
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
        let etagged = |etag: &str, modified| Version::ETag {
            etag: etag.into(),
            modified,
            generation: None,
        };
        let file = |secs, nanos| Version::File {
            secs,
            nanos,
            size: 10,
        };
        let object = |nanos| Version::Object { size: 10, nanos };
        assert!(unmodified(&etagged("\"abc\"", 5), &etag));
        assert!(!unmodified(&etagged("\"abd\"", 5), &etag));
        let at = Checksum::LastModified(SecondsSinceEpoch(1_000));
        assert!(unmodified(&file(999, 500_000_000), &at));
        assert!(unmodified(&file(1000, 0), &at));
        assert!(!unmodified(&file(1001, 0), &at));
        assert!(unmodified(&object(999_000_000_000), &at));
        assert!(!unmodified(&object(1_001_000_000_000), &at));
        assert!(unmodified(&etagged("\"x\"", 1000), &at));
        assert!(!unmodified(&etagged("\"x\"", 1001), &at));
        // A version that tells no time passes.
        assert!(unmodified(&Version::Label("x".into()), &at));
        assert!(unmodified(&Version::Unknown, &at));
    }
}
