//! A location to a source with its adapters: a local folder as a folder store, a URL
//! prefix as a remote store on the shared source of its bucket or host, behind the disk
//! cache when one is configured. Namespaces reach remote objects through here (a
//! reference set's targets, a repository's chunk objects), so every one of them gets the
//! same limits, allow-list and cache.

use std::sync::Arc;

use crate::error::Result;
use crate::store::location::Location;
use crate::store::source::folder::FolderStore;
use crate::store::{Store, StoreConfig};

/// The store reading under the folder `prefix`: a folder store for a local path, a remote
/// store with its adapters for a URL.
pub fn folder(prefix: &Location, cfg: &StoreConfig) -> Result<Arc<dyn Store>> {
    match prefix {
        Location::Local(dir) => Ok(Arc::new(FolderStore::open(dir)?)),
        url => remote::folder(url, cfg),
    }
}

#[cfg(feature = "remote")]
pub use remote::{adapted, url};

#[cfg(feature = "remote")]
mod remote {
    use std::sync::Arc;

    use url::Url;

    use crate::error::{Error, Result};
    use crate::store::adapter::disk_cache::DiskCache;
    use crate::store::location::{Location, SCHEMES};
    use crate::store::source::remote::RemoteStore;
    use crate::store::{Store, StoreConfig};

    /// The URL of a remote location, parsed: an error naming the scheme when zarrfs does
    /// not read it or the URL is malformed.
    pub fn url(location: &Location) -> Result<Url> {
        let scheme = location.scheme().unwrap_or("file");
        if !location.is_known_scheme() {
            return Err(Error::Invalid(format!(
                "{scheme}://: not a known store scheme (known: a local path, file, {})",
                SCHEMES.join(", ")
            )));
        }
        Url::parse(&location.to_string())
            .map_err(|e| Error::Invalid(format!("{scheme}:// URL: {e}")))
    }

    /// The remote store under the URL folder `prefix`, with its adapters.
    pub fn folder(prefix: &Location, cfg: &StoreConfig) -> Result<Arc<dyn Store>> {
        let url = url(&prefix.as_folder())?;
        let cfg = StoreConfig {
            zip: false,
            ..cfg.clone()
        };
        adapted(Arc::new(RemoteStore::connect(&url, &cfg)?), &cfg)
    }

    /// `source` with its adapters: behind the disk cache when one is configured.
    pub fn adapted(source: Arc<dyn Store>, cfg: &StoreConfig) -> Result<Arc<dyn Store>> {
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

    use crate::error::{Error, Result};
    use crate::store::location::Location;
    use crate::store::{Store, StoreConfig};

    /// Without remote stores, a URL is refused.
    pub fn folder(prefix: &Location, _cfg: &StoreConfig) -> Result<Arc<dyn Store>> {
        Err(Error::Invalid(format!(
            "{}://: this zarrfs was built without remote stores (feature `remote`)",
            prefix.scheme().unwrap_or("file")
        )))
    }
}
