//! What every front does before it serves: the store opened with its refresh interval,
//! its hierarchy read, and the filesystem built over it with its read threads sized from
//! the store. The FUSE mount and the HTTP server start the same way from here.

use std::sync::Arc;
use std::time::Duration;

use crate::fs::{FsOptions, ZarrFs};
use crate::hierarchy::Hierarchy;
use crate::read::prefetch::PREFETCH_PER_CORE;
use crate::store::{Location, StoreConfig};
use crate::{Error, Result};

/// A remote store's metadata is read again after this long by default.
pub const REMOTE_REFRESH: Duration = Duration::from_secs(60);

/// The refresh interval of a store by default: a minute for a remote store (a few
/// requests per node a minute); none for a local folder or archive (a folder that
/// refreshes is watched instead, see `daemon/watch.rs`).
pub fn default_refresh(store: &str) -> Option<Duration> {
    let remote = matches!(Location::parse(store), Location::Url(_));
    remote.then_some(REMOTE_REFRESH)
}

/// The refresh interval asked for (`Some(None)`: off; `None`: the store's default).
pub fn refresh_of(store: &str, asked: Option<Option<Duration>>) -> Option<Duration> {
    asked.unwrap_or_else(|| default_refresh(store))
}

/// Open `store` and read its hierarchy; what the disk cache knows of a version holds
/// for one refresh interval.
pub fn open_hierarchy(
    store: &str,
    store_cfg: &StoreConfig,
    refresh: Option<Duration>,
) -> Result<Hierarchy> {
    let mut store_cfg = store_cfg.clone();
    store_cfg.revalidate = refresh;
    let opened = crate::store::open(store, &store_cfg)?;
    Hierarchy::open(opened).map_err(|e| Error::startup_from(store, e))
}

/// The filesystem over `hierarchy` and the read threads it is served with (`threads`,
/// default what the store can use at once): its prefetchers sized from them when
/// `options` leaves it to the threads.
pub fn build(
    hierarchy: Hierarchy,
    mut options: FsOptions,
    store: &str,
    threads: Option<usize>,
    refresh: Option<Duration>,
) -> (Arc<ZarrFs>, usize) {
    let threads = threads
        .unwrap_or_else(|| hierarchy.store().caps().concurrency)
        .max(1);
    if options.prefetch_threads == 0 {
        options.prefetch_threads = threads * PREFETCH_PER_CORE;
    }
    match refresh {
        Some(d) => log::info!("refresh: what is read of the store is read again after {d:?}"),
        None => log::info!("refresh: off"),
    }
    let name = crate::store::short_name(store);
    let fs = ZarrFs::new(hierarchy.with_refresh(refresh), options, &name);
    (Arc::new(fs), threads)
}
