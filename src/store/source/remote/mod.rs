//! A store under a URL prefix of an object store or web server (S3, GCS, Azure, plain
//! HTTP/WebDAV): a prefix on a [`Source`], whose client and request limit it shares with
//! every other store on the same bucket or host. A missing object is `None`, every other
//! failure an I/O error naming the key (never a credential: messages are scrubbed of
//! secrets and URL queries).

pub mod client;
pub mod pool;
pub mod runtime;
mod write;

use std::sync::Arc;

use object_store::path::Path as ObjectPath;
use object_store::GetRange;
use url::Url;

use crate::error::{Error, Result};
use crate::store::options::StoreConfig;
use crate::store::{ByteRange, Caps, Head, Listing, Store, Value, REQUEST_BYTES};
use pool::{failure, version_of, Source, Sources};

/// A store under a URL prefix of a source.
pub struct RemoteStore {
    source: Arc<Source>,
    prefix: ObjectPath,
    /// The store's URL, for messages.
    url: String,
}

impl std::fmt::Debug for RemoteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteStore")
            .field("url", &self.url)
            .finish()
    }
}

impl RemoteStore {
    /// Connect to the store at `url`, on the process's source for its bucket or host
    /// (nothing is requested yet).
    pub fn connect(url: &Url, cfg: &StoreConfig) -> Result<RemoteStore> {
        RemoteStore::on(Sources::global().get(url, cfg)?, url)
    }

    /// The store at `url` on `source`, whose allow-list gains the store's prefix.
    pub fn on(source: Arc<Source>, url: &Url) -> Result<RemoteStore> {
        let prefix = ObjectPath::from_url_path(url.path())
            .map_err(|e| Error::Invalid(format!("{}: {e}", source.scrub(url.as_str()))))?;
        source.allow(url)?;
        Ok(RemoteStore {
            source,
            prefix,
            url: url.to_string().trim_end_matches('/').to_string(),
        })
    }

    /// The source the store reads from.
    pub fn source(&self) -> &Arc<Source> {
        &self.source
    }

    /// The URL of `key`, for messages.
    pub fn key_url(&self, key: &str) -> String {
        format!("{}/{key}", self.url)
    }

    pub(super) fn path(&self, key: &str) -> ObjectPath {
        key.split('/')
            .filter(|p| !p.is_empty())
            .fold(self.prefix.clone(), |path, part| path.join(part))
    }

    /// GET `key` (or a range of it) with the version the response names: `None` when it
    /// does not exist.
    fn fetch(&self, key: &str, range: Option<GetRange>) -> Result<Option<Value>> {
        self.source.get(&self.path(key), range, &self.key_url(key))
    }

    /// The size of `key`, `None` when it does not exist.
    pub fn size(&self, key: &str) -> Result<Option<u64>> {
        Ok(self.head(key)?.map(|head| head.size))
    }
}

impl Store for RemoteStore {
    fn read(&self, key: &str, range: Option<ByteRange>) -> Result<Option<Value>> {
        let Some(range) = range else {
            return self.fetch(key, None);
        };
        match range {
            ByteRange::Suffix(0) | ByteRange::Span { len: 0, .. } => {
                return Ok(self.head(key)?.map(|head| Value {
                    bytes: Vec::new(),
                    version: head.version,
                }))
            }
            _ => {}
        }
        let request = match range {
            ByteRange::Span { offset, len } => {
                GetRange::Bounded(offset..offset.saturating_add(len))
            }
            ByteRange::Suffix(len) => GetRange::Suffix(len),
        };
        match self.fetch(key, Some(request)) {
            Ok(got) => Ok(got),
            // A range wholly past the end is refused by servers (416): clip it as a
            // local file would, to nothing.
            Err(e) => match (range, self.head(key)) {
                (ByteRange::Span { offset, .. }, Ok(Some(head))) if offset >= head.size => {
                    Ok(Some(Value {
                        bytes: Vec::new(),
                        version: head.version,
                    }))
                }
                _ => Err(e),
            },
        }
    }

    fn list_dir(&self, prefix: &str) -> Result<Listing> {
        let label = self.key_url(prefix);
        let http = self.source.is_http();
        let listed = self.source.list(&self.path(prefix), &label, |why| {
            if http {
                failure(
                    &label,
                    format!(
                        "no consolidated metadata and the server cannot list: name the \
                         array path, or consolidate ({why})"
                    ),
                )
            } else {
                failure(&label, why)
            }
        })?;
        let mut listing = Listing::default();
        for p in listed.common_prefixes {
            if let Some(name) = p.filename() {
                listing.prefixes.push(name.to_string());
            }
        }
        for o in listed.objects {
            if let Some(name) = o.location.filename() {
                listing.keys.push(name.to_string());
            }
        }
        listing.keys.sort();
        listing.prefixes.sort();
        Ok(listing)
    }

    fn head(&self, key: &str) -> Result<Option<Head>> {
        let meta = self.source.head(&self.path(key), &self.key_url(key))?;
        Ok(meta.map(|meta| Head {
            size: meta.size,
            version: version_of(&meta),
        }))
    }

    fn will_need(&self, _key: &str) {}

    /// Object storage takes writes (a web server does not).
    fn writer(&self) -> Option<Arc<dyn crate::store::write::Writer>> {
        match self.source.is_http() {
            true => None,
            false => Some(Arc::new(RemoteStore {
                source: self.source.clone(),
                prefix: self.prefix.clone(),
                url: self.url.clone(),
            })),
        }
    }

    fn caps(&self) -> Caps {
        Caps {
            concurrency: self.source.max_requests(),
            request_bytes: REQUEST_BYTES,
            location: Some(self.url.clone()),
        }
    }
}
