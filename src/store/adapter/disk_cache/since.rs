//! The cache as one reading of the hierarchy sees it ([`Store::learned_since`]):
//! versions learned before the reading began are asked for again.

use std::sync::Arc;
use std::time::Instant;

use super::Cache;
use crate::error::Result;
use crate::store::{ByteRange, Caps, Head, Listing, Store, Value};

/// The cache as seen by one reading of the hierarchy: versions learned before `since`
/// are asked for again (see [`Store::learned_since`]).
struct Since {
    cache: Arc<Cache>,
    since: Instant,
}

impl Cache {
    /// The view of `cache` for a reading that began at `at` (the same one for every
    /// array of that reading while kept); `None` without a refresh interval, when
    /// versions are remembered for the process's life.
    pub(super) fn since(cache: &Arc<Cache>, at: Instant) -> Option<Arc<dyn Store>> {
        cache.revalidate?;
        let mut views = cache.views.lock();
        let view = views.get_or_insert(at, || {
            Arc::new(Since {
                cache: cache.clone(),
                since: at,
            })
        });
        Some(view.clone())
    }
}

impl Store for Since {
    fn read(&self, key: &str, range: Option<ByteRange>) -> Result<Option<Value>> {
        self.cache.cached(key, range, Some(self.since))
    }

    fn read_named(&self, key: &str, range: Option<ByteRange>, name: &str) -> Result<Option<Value>> {
        self.cache.named(key, range, name)
    }

    fn list_dir(&self, prefix: &str) -> Result<Listing> {
        self.cache.inner.list_dir(prefix)
    }

    fn head(&self, key: &str) -> Result<Option<Head>> {
        self.cache.head(key, Some(self.since))
    }

    fn will_need(&self, key: &str) {
        self.cache.inner.will_need(key)
    }

    fn caps(&self) -> Caps {
        self.cache.inner.caps()
    }

    fn refresh(&self, max_age: Option<std::time::Duration>) -> Result<()> {
        self.cache.inner.refresh(max_age)
    }

    fn as_of(&self) -> Option<Instant> {
        self.cache.inner.as_of()
    }

    fn learned_since(&self, at: Instant) -> Option<Arc<dyn Store>> {
        Cache::since(&self.cache, at)
    }

    fn identity(&self, key: &str) -> Option<String> {
        self.cache.inner.identity(key)
    }

    fn names_bytes(&self) -> bool {
        self.cache.inner.names_bytes()
    }
}
