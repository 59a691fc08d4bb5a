//! Object storage and HTTP servers (S3, GCS, Azure, plain HTTP/WebDAV) through the
//! `object_store` crate. Requests run on the store runtime, at most `max_requests` at a
//! time; a missing object is `None`, every other failure an I/O error naming the key
//! (never a credential: messages are scrubbed of secrets and URL queries).

use std::sync::Arc;

use object_store::path::Path as ObjectPath;
use object_store::{GetOptions, GetRange, ObjectMeta, ObjectStore};
use tokio::sync::Semaphore;
use url::Url;

use super::options::{Secrets, StoreConfig};
use super::runtime::block_on;
use super::{ByteRange, Caps, Head, Listing, Store, Value, Version, MAX_VALUE};
use crate::error::{Error, Result};

/// Bytes worth one request: a round trip costs about as much time as this many bytes.
const REQUEST_BYTES: u64 = 8 << 20;

/// A store under a URL prefix of an object store or web server.
pub struct RemoteStore {
    inner: Arc<dyn ObjectStore>,
    prefix: ObjectPath,
    /// The store's URL, for messages.
    url: String,
    http: bool,
    limit: Semaphore,
    secrets: Secrets,
    max_requests: usize,
}

impl std::fmt::Debug for RemoteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteStore")
            .field("url", &self.url)
            .finish()
    }
}

/// A failed request, as an I/O error naming the key.
fn failure(key: &str, what: String) -> Error {
    Error::Io {
        key: key.to_string(),
        source: std::io::Error::other(what),
    }
}

impl RemoteStore {
    /// Connect to the store at `url` (nothing is requested yet).
    pub fn connect(url: &Url, cfg: &StoreConfig) -> Result<RemoteStore> {
        let inner = super::backends::build(url, cfg)?;
        let prefix = ObjectPath::from_url_path(url.path())
            .map_err(|e| Error::Invalid(format!("{url}: {e}")))?;
        Ok(RemoteStore {
            inner,
            prefix,
            url: url.to_string().trim_end_matches('/').to_string(),
            http: matches!(url.scheme(), "http" | "https"),
            limit: Semaphore::new(cfg.max_requests.max(1)),
            secrets: Secrets::gather(cfg),
            max_requests: cfg.max_requests.max(1),
        })
    }

    /// The URL of `key`, for messages.
    pub fn key_url(&self, key: &str) -> String {
        format!("{}/{key}", self.url)
    }

    fn path(&self, key: &str) -> ObjectPath {
        key.split('/')
            .filter(|p| !p.is_empty())
            .fold(self.prefix.clone(), |path, part| path.join(part))
    }

    /// A place among the requests in flight.
    async fn permit(&self, key: &str) -> Result<tokio::sync::SemaphorePermit<'_>> {
        self.limit
            .acquire()
            .await
            .map_err(|e| failure(key, e.to_string()))
    }

    fn error(&self, key: &str, e: object_store::Error) -> Error {
        failure(&self.key_url(key), self.secrets.scrub(&e.to_string()))
    }

    /// GET `key` (or a range of it) with the version the response names: `None` when it
    /// does not exist.
    fn fetch(&self, key: &str, range: Option<GetRange>) -> Result<Option<Value>> {
        let path = self.path(key);
        block_on(async {
            let _permit = self.permit(key).await?;
            let options = GetOptions {
                range: range.clone(),
                ..Default::default()
            };
            let got = match self.inner.get_opts(&path, options).await {
                Ok(got) => got,
                Err(object_store::Error::NotFound { .. }) => return Ok(None),
                Err(e) => return Err(self.error(key, e)),
            };
            let len = got.range.end.saturating_sub(got.range.start);
            if len > MAX_VALUE {
                return Err(Error::corrupt(
                    self.key_url(key),
                    format!("value of {len} bytes is larger than any chunk can be"),
                ));
            }
            let version = version_of(&got.meta);
            let bytes = got.bytes().await.map_err(|e| self.error(key, e))?;
            Ok(Some(Value {
                bytes: Vec::from(bytes),
                version,
            }))
        })?
    }

    /// The size of `key`, `None` when it does not exist.
    pub fn size(&self, key: &str) -> Result<Option<u64>> {
        Ok(self.head_meta(key)?.map(|meta| meta.size))
    }

    /// The object's metadata (HEAD), `None` when it does not exist.
    fn head_meta(&self, key: &str) -> Result<Option<ObjectMeta>> {
        let path = self.path(key);
        block_on(async {
            let _permit = self.permit(key).await?;
            let options = GetOptions {
                head: true,
                ..Default::default()
            };
            match self.inner.get_opts(&path, options).await {
                Ok(got) => Ok(Some(got.meta)),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(self.error(key, e)),
            }
        })?
    }
}

/// The version an object's metadata names: its ETag, or without one its size and
/// modification time.
fn version_of(meta: &ObjectMeta) -> Version {
    Version::Tag(match &meta.e_tag {
        Some(tag) => format!("etag:{tag}"),
        None => format!(
            "size:{}:{}",
            meta.size,
            meta.last_modified.timestamp_nanos_opt().unwrap_or(0)
        ),
    })
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
        let path = self.path(prefix);
        let listed = block_on(async {
            let _permit = self.permit(prefix).await?;
            self.inner
                .list_with_delimiter(Some(&path))
                .await
                .map_err(|e| {
                    let why = self.secrets.scrub(&e.to_string());
                    if self.http {
                        failure(
                            &self.key_url(prefix),
                            format!(
                                "no consolidated metadata and the server cannot list: name \
                                 the array path, or consolidate ({why})"
                            ),
                        )
                    } else {
                        failure(&self.key_url(prefix), why)
                    }
                })
        })??;
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
        Ok(self.head_meta(key)?.map(|meta| Head {
            size: meta.size,
            version: version_of(&meta),
        }))
    }

    fn will_need(&self, _key: &str) {}

    fn caps(&self) -> Caps {
        Caps {
            concurrency: self.max_requests,
            request_bytes: REQUEST_BYTES,
            location: Some(self.url.clone()),
        }
    }
}
