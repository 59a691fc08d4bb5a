//! From the STORE argument to a namespace: a local folder, a URL of an object store or web
//! server, a zip archive at either (a name ending in `.zip`, or `--zip`), a kerchunk
//! reference set (JSON file or Parquet folder) or an Icechunk repository. Nothing else in
//! `store/` uses this module.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use crate::error::Result;
use crate::store::location::Location;
use crate::store::namespace::references::live::{LiveReferences, Origin};
use crate::store::namespace::references::ReferenceStore;
use crate::store::namespace::zip::ZipStore;
use crate::store::source::blob::{Blob, FileBlob};
use crate::store::source::folder::FolderStore;
use crate::store::{Store, StoreConfig};

/// Whether the local folder `dir` holds an Icechunk repository: its `repo` object
/// (format 2) or its `config.yaml` beside `snapshots/` (format 1).
pub fn is_repository(dir: &Path) -> bool {
    dir.join("repo").is_file()
        || (dir.join("config.yaml").is_file() && dir.join("snapshots").is_dir())
}

/// Open the store named by `spec`. A remote source sits behind the disk cache when one is
/// configured, and a namespace on it (a zip archive) reads through that cache.
pub fn open(spec: &str, cfg: &StoreConfig) -> Result<Arc<dyn Store>> {
    let location = Location::parse(spec);
    let path = match &location {
        Location::Local(path) => path.as_path(),
        Location::Url(_) => return remote::open(&location, cfg),
    };
    let zip_name = location.name_ends_with(".zip");
    // A reference set is followed as it is rewritten (with a refresh interval) from the
    // reading begun here.
    let started = Instant::now();
    if !cfg.zip && path.is_file() && !zip_name {
        if let Some(refs) = ReferenceStore::from_file(path, cfg)? {
            let origin = Origin::File(path.into());
            return Ok(Arc::new(LiveReferences::new(
                origin,
                cfg.clone(),
                refs,
                started,
            )));
        }
    }
    #[cfg(feature = "remote")]
    if !cfg.zip && is_repository(path) {
        use crate::store::namespace::icechunk::IcechunkStore;
        return Ok(Arc::new(IcechunkStore::open_local(path, cfg)?));
    }
    if !cfg.zip && path.is_dir() {
        let folder: Arc<dyn Store> = Arc::new(FolderStore::open(path)?);
        if let Some(refs) = ReferenceStore::parquet(folder.clone(), &location, cfg)? {
            let origin = Origin::Parquet { folder, location };
            return Ok(Arc::new(LiveReferences::new(
                origin,
                cfg.clone(),
                refs,
                started,
            )));
        }
    }
    if cfg.zip || (zip_name && !path.is_dir()) {
        let blob: Box<dyn Blob> = Box::new(FileBlob::open(path)?);
        Ok(Arc::new(ZipStore::open(blob, &cfg.root_markers)?))
    } else {
        Ok(Arc::new(FolderStore::open(path)?))
    }
}

#[cfg(feature = "remote")]
mod remote {
    use std::sync::Arc;
    use std::time::Instant;

    use crate::error::{Error, Result};
    use crate::store::connect;
    use crate::store::location::{path_ends_with, Location};
    use crate::store::namespace::icechunk::IcechunkStore;
    use crate::store::namespace::references::live::{LiveReferences, Origin};
    use crate::store::namespace::references::ReferenceStore;
    use crate::store::namespace::zip::ZipStore;
    use crate::store::source::blob::{Blob, StoreBlob};
    use crate::store::source::remote::RemoteStore;
    use crate::store::{Store, StoreConfig};

    /// Whether a URL names a kerchunk JSON reference set (a remote object cannot be
    /// looked at before it is chosen: its name decides).
    fn is_reference_name(path: &str) -> bool {
        ends_with_any(path, &[".json", ".json.gz", ".json.zst"])
    }

    /// Whether a URL names a kerchunk Parquet reference folder (`NAME.parq/`, as kerchunk
    /// and VirtualiZarr name them): its `.zmetadata` then decides.
    fn is_parquet_name(path: &str) -> bool {
        ends_with_any(path, &[".parq", ".parquet"])
    }

    /// Whether the URL path `path` ends in one of `ends`.
    fn ends_with_any(path: &str, ends: &[&str]) -> bool {
        ends.iter().any(|end| path_ends_with(path, end))
    }

    /// Open the store at the URL `location`; an Icechunk repository there is opened as
    /// one.
    pub fn open(location: &Location, cfg: &StoreConfig) -> Result<Arc<dyn Store>> {
        let started = Instant::now();
        let mut url = connect::url(location)?;
        let references = !cfg.zip && is_reference_name(url.path());
        if !(cfg.zip || ends_with_any(url.path(), &[".zip"]) || references) {
            if is_parquet_name(url.path()) && !url.path().ends_with('/') {
                url.set_path(&format!("{}/", url.path()));
            }
            let store = RemoteStore::connect(&url, cfg)?;
            // An Icechunk repository is known by its `repo` object.
            let repository = store.head("repo").ok().flatten().is_some();
            let store = connect::adapted(Arc::new(store), cfg)?;
            if repository {
                return Ok(Arc::new(IcechunkStore::open_url(&url, cfg, store)?));
            }
            if is_parquet_name(url.path()) {
                let label = Location::parse(url.as_str());
                if let Some(refs) = ReferenceStore::parquet(store.clone(), &label, cfg)? {
                    let origin = Origin::Parquet {
                        folder: store,
                        location: label,
                    };
                    let live = LiveReferences::new(origin, cfg.clone(), refs, started);
                    return Ok(Arc::new(live));
                }
            }
            return Ok(store);
        }
        // An archive or a reference set is one object: its folder is the store, its
        // name the key.
        let path = url.path().trim_end_matches('/').to_string();
        let (folder, name) = path.rsplit_once('/').unwrap_or(("", path.as_str()));
        let name = percent_encoding::percent_decode_str(name)
            .decode_utf8_lossy()
            .into_owned();
        url.set_path(&format!("{folder}/"));
        url.set_query(None);
        let store = RemoteStore::connect(&url, cfg)?;
        let label = store.key_url(&name);
        let source = connect::adapted(Arc::new(store), cfg)?;
        if references {
            let value = source
                .read(&name, None)?
                .ok_or_else(|| Error::NotFound(label.clone()))?;
            let refs = ReferenceStore::parse(location, value.bytes, value.version, cfg)?;
            let origin = Origin::Object {
                folder: source,
                name,
                location: location.clone(),
            };
            let live = LiveReferences::new(origin, cfg.clone(), refs, started);
            return Ok(Arc::new(live));
        }
        let blob: Box<dyn Blob> = Box::new(StoreBlob::open(source, &name, label)?);
        Ok(Arc::new(ZipStore::open(blob, &cfg.root_markers)?))
    }
}

#[cfg(not(feature = "remote"))]
mod remote {
    use std::sync::Arc;

    use crate::error::Result;
    use crate::store::location::Location;
    use crate::store::{connect, Store, StoreConfig};

    pub fn open(location: &Location, cfg: &StoreConfig) -> Result<Arc<dyn Store>> {
        connect::folder(location, cfg)
    }
}

/// A short name for the store (a root array's file name): its last path part, without
/// a `.zip` ending.
pub fn short_name(spec: &str) -> String {
    let location = Location::parse(spec);
    let name = location.name();
    match name.len().checked_sub(4) {
        Some(cut) if name.to_ascii_lowercase().ends_with(".zip") && cut > 0 => {
            name[..cut].to_string()
        }
        _ => name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_stores() {
        assert_eq!(short_name("https://h/d/v3_root_array/"), "v3_root_array");
        assert_eq!(short_name("s3://b/x/my%20data.zarr.zip"), "my data.zarr");
    }

    #[cfg(feature = "remote")]
    #[test]
    fn refuses_unknown_schemes_and_credentials_in_urls() {
        let cfg = StoreConfig::default();
        let err = open("ftp://host/x", &cfg).err().map(|e| e.to_string());
        assert!(err.is_some_and(|e| e.contains("ftp")));
        let err = open("https://user:pw@example.org/data.zarr", &cfg)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("environment") && !err.contains("pw"), "{err}");
    }
}
