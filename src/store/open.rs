//! From the STORE argument to a store: a local folder, a URL of an object store or web
//! server, or a zip archive at either (a name ending in `.zip`, or `--zip`).

use std::path::Path;
use std::sync::Arc;

use super::blob::{Blob, FileBlob};
use super::options::StoreConfig;
use super::zip::ZipStore;
use super::{FolderStore, ReferenceStore, Store};
use crate::error::Result;

/// The scheme of `spec` when it is a URL (`file://` excepted: a local path).
fn url_scheme(spec: &str) -> Option<String> {
    let (scheme, _) = spec.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    (scheme != "file").then_some(scheme)
}

fn is_zip_name(name: &str) -> bool {
    name.to_ascii_lowercase()
        .trim_end_matches('/')
        .ends_with(".zip")
}

/// Whether a URL path names a kerchunk JSON reference set (a remote object cannot be
/// looked at before it is chosen: its name decides).
#[cfg(feature = "remote")]
fn is_reference_name(name: &str) -> bool {
    ends_with_any(name, &[".json", ".json.gz", ".json.zst"])
}

/// Whether a URL path names a kerchunk Parquet reference folder (`NAME.parq/`, as kerchunk
/// and VirtualiZarr name them): its `.zmetadata` then decides.
#[cfg(feature = "remote")]
fn is_parquet_name(name: &str) -> bool {
    ends_with_any(name, &[".parq", ".parquet"])
}

/// Whether the local folder `dir` holds an Icechunk repository: its `repo` object
/// (format 2) or its `config.yaml` beside `snapshots/` (format 1).
pub fn is_repository(dir: &Path) -> bool {
    dir.join("repo").is_file()
        || (dir.join("config.yaml").is_file() && dir.join("snapshots").is_dir())
}

#[cfg(feature = "remote")]
fn ends_with_any(name: &str, ends: &[&str]) -> bool {
    let lower = name.to_ascii_lowercase();
    ends.iter()
        .any(|end| lower.trim_end_matches('/').ends_with(end))
}

/// Open the store named by `spec`. A remote source sits behind the disk cache when one is
/// configured, and a namespace on it (a zip archive) reads through that cache.
pub fn open(spec: &str, cfg: &StoreConfig) -> Result<Arc<dyn Store>> {
    if let Some(scheme) = url_scheme(spec) {
        return remote::open(spec, &scheme, cfg, true);
    }
    let path = Path::new(spec.strip_prefix("file://").unwrap_or(spec));
    if !cfg.zip && path.is_file() && !is_zip_name(spec) {
        if let Some(refs) = reference_file(path, cfg)? {
            let live = super::references_live::LiveReferences::new(path.into(), cfg.clone(), refs);
            return Ok(Arc::new(live));
        }
    }
    #[cfg(feature = "remote")]
    if !cfg.zip && is_repository(path) {
        return Ok(Arc::new(super::IcechunkStore::open_local(path, cfg)?));
    }
    if !cfg.zip && path.is_dir() {
        let folder = Arc::new(FolderStore::open(path)?);
        if let Some(refs) = ReferenceStore::parquet(folder, &path.display().to_string(), cfg)? {
            return Ok(Arc::new(refs));
        }
    }
    if cfg.zip || (is_zip_name(spec) && !path.is_dir()) {
        let blob: Box<dyn Blob> = Box::new(FileBlob::open(path)?);
        Ok(Arc::new(ZipStore::open(blob, &cfg.root_markers)?))
    } else {
        Ok(Arc::new(FolderStore::open(path)?))
    }
}

/// The reference set in the local file `path`, when its content is one (a JSON object,
/// or gzip / zstd data under a `.json.gz` / `.json.zst` name); `None` for other files.
pub(super) fn reference_file(path: &Path, cfg: &StoreConfig) -> Result<Option<ReferenceStore>> {
    use std::io::Read;
    let label = path.display().to_string();
    let io = |source| crate::error::Error::Io {
        key: label.clone(),
        source,
    };
    let mut file = std::fs::File::open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    let mut head = [0u8; 64];
    let n = file.read(&mut head).map_err(io)?;
    if !super::references::looks_like_references(&label, &head[..n]) {
        return Ok(None);
    }
    if meta.len() > super::references::MAX_REFERENCE_BYTES {
        return Err(crate::error::Error::metadata(
            &label,
            "reference set larger than 4 GiB",
        ));
    }
    let mut bytes = head[..n].to_vec();
    file.read_to_end(&mut bytes).map_err(io)?;
    let version = super::folder::file_version(&meta);
    ReferenceStore::parse(&label, bytes, version, cfg).map(Some)
}

/// The store reading under URL `prefix` (a folder ending in `/`): a reference set's
/// targets there, on the shared source of its bucket or host, through the disk cache.
pub(super) fn open_remote_prefix(prefix: &str, cfg: &StoreConfig) -> Result<Arc<dyn Store>> {
    let scheme = url_scheme(prefix).unwrap_or_default();
    remote::open(
        prefix,
        &scheme,
        &StoreConfig {
            zip: false,
            ..cfg.clone()
        },
        false,
    )
}

#[cfg(feature = "remote")]
mod remote {
    use std::sync::Arc;

    use url::Url;

    use super::super::backends::SCHEMES;
    use super::super::blob::{Blob, StoreBlob};
    use super::super::disk_cache::DiskCache;
    use super::super::options::StoreConfig;
    use super::super::remote::RemoteStore;
    use super::super::zip::ZipStore;
    use super::super::{IcechunkStore, ReferenceStore, Store};
    use super::{is_parquet_name, is_reference_name, is_zip_name};
    use crate::error::{Error, Result};

    /// Open the store at URL `spec`; with `repositories`, an Icechunk repository there is
    /// opened as one (a reference set's target folders are plain folders).
    pub fn open(
        spec: &str,
        scheme: &str,
        cfg: &StoreConfig,
        repositories: bool,
    ) -> Result<Arc<dyn Store>> {
        if !SCHEMES.contains(&scheme) {
            return Err(Error::Invalid(format!(
                "{scheme}://: not a known store scheme (known: a local path, file, {})",
                SCHEMES.join(", ")
            )));
        }
        let mut url =
            Url::parse(spec).map_err(|e| Error::Invalid(format!("{scheme}:// URL: {e}")))?;
        let references = !cfg.zip && is_reference_name(url.path());
        if !(cfg.zip || is_zip_name(url.path()) || references) {
            if is_parquet_name(url.path()) && !url.path().ends_with('/') {
                url.set_path(&format!("{}/", url.path()));
            }
            let store = RemoteStore::connect(&url, cfg)?;
            // An Icechunk repository is known by its `repo` object.
            let repository = repositories && store.head("repo").ok().flatten().is_some();
            let store = cached(Arc::new(store), cfg)?;
            if repository {
                return Ok(Arc::new(IcechunkStore::open_url(&url, cfg, store)?));
            }
            if is_parquet_name(url.path()) {
                let label = url.as_str().trim_end_matches('/');
                if let Some(refs) = ReferenceStore::parquet(store.clone(), label, cfg)? {
                    return Ok(Arc::new(refs));
                }
            }
            return Ok(store);
        }
        // An archive or a reference set is one object: its folder is the store, its
        // name the key.
        let path = url.path().trim_end_matches('/').to_string();
        let (folder, name) = path.rsplit_once('/').unwrap_or(("", path.as_str()));
        let name = super::percent_decode(name);
        url.set_path(&format!("{folder}/"));
        url.set_query(None);
        let store = RemoteStore::connect(&url, cfg)?;
        let label = store.key_url(&name);
        let source = cached(Arc::new(store), cfg)?;
        if references {
            let value = source
                .read(&name, None)?
                .ok_or_else(|| Error::NotFound(label.clone()))?;
            return Ok(Arc::new(ReferenceStore::parse(
                spec,
                value.bytes,
                value.version,
                cfg,
            )?));
        }
        let blob: Box<dyn Blob> = Box::new(StoreBlob::open(source, &name, label)?);
        Ok(Arc::new(ZipStore::open(blob, &cfg.root_markers)?))
    }

    /// `source` behind the disk cache when one is configured.
    fn cached(source: Arc<dyn Store>, cfg: &StoreConfig) -> Result<Arc<dyn Store>> {
        match &cfg.disk_cache {
            Some((dir, budget)) => Ok(match DiskCache::new(source.clone(), dir, *budget)? {
                Some(cache) => Arc::new(cache.revalidating(cfg.revalidate)),
                None => source,
            }),
            None => Ok(source),
        }
    }
}

#[cfg(not(feature = "remote"))]
mod remote {
    use std::sync::Arc;

    use super::super::options::StoreConfig;
    use super::super::Store;
    use crate::error::{Error, Result};

    pub fn open(
        _spec: &str,
        scheme: &str,
        _cfg: &StoreConfig,
        _repositories: bool,
    ) -> Result<Arc<dyn Store>> {
        Err(Error::Invalid(format!(
            "{scheme}://: this zarrfs was built without remote stores (feature `remote`)"
        )))
    }
}

/// A URL path segment, %-decoded.
fn percent_decode(segment: &str) -> String {
    #[cfg(feature = "remote")]
    return percent_encoding::percent_decode_str(segment)
        .decode_utf8_lossy()
        .into_owned();
    #[cfg(not(feature = "remote"))]
    segment.to_string()
}

/// A short name for the store (a root array's file name): its last path part, without
/// a `.zip` ending.
pub fn short_name(spec: &str) -> String {
    let trimmed = spec.trim_end_matches('/');
    let last = trimmed.rsplit('/').next().unwrap_or(trimmed);
    let name = if spec.contains("://") {
        percent_decode(last)
    } else {
        Path::new(spec)
            .canonicalize()
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().to_string()))
            .unwrap_or_else(|| last.to_string())
    };
    match name.len().checked_sub(4) {
        Some(cut) if is_zip_name(&name) && cut > 0 => name[..cut].to_string(),
        _ => name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tells_urls_from_paths_and_names_stores() {
        assert_eq!(url_scheme("/data/a.zarr"), None);
        assert_eq!(url_scheme("file:///data/a.zarr"), None);
        assert_eq!(url_scheme("S3://bucket/a"), Some("s3".into()));
        assert!(is_zip_name("x/data.zarr.ZIP"));
        assert!(!is_zip_name("x/data.zarr"));
        assert_eq!(short_name("https://h/d/v3_root_array/"), "v3_root_array");
        #[cfg(feature = "remote")]
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
