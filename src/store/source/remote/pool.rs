//! Object sources: one `object_store` client per bucket or host (scheme and authority),
//! shared by every store on it, with one request limit, the secrets scrubbed from its
//! messages and an allow-list of the URL prefixes under which it may read. A store on a
//! source (a prefix, a zip archive, a reference set's targets) adds its own prefix to the
//! list; a read outside every allowed prefix is refused before any request is made.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use object_store::path::Path as ObjectPath;
use object_store::{GetOptions, GetRange, ListResult, ObjectMeta, ObjectStore};
use parking_lot::{Mutex, RwLock};
use tokio::sync::{Semaphore, SemaphorePermit};
use url::Url;

use crate::error::{Error, Result};
use crate::store::options::{Secrets, StoreConfig};
use crate::store::source::remote::runtime::{block_on, on_runtime};
use crate::store::{Value, Version, MAX_VALUE};

/// A failed request, as an I/O error naming what was asked for.
pub(super) fn failure(what: &str, why: String) -> Error {
    Error::Io {
        key: what.to_string(),
        source: std::io::Error::other(why),
    }
}

/// The scheme and authority of `url`: what a source is named by (`s3://bucket`,
/// `http://host:port`).
fn origin(url: &Url) -> String {
    let host = url.host_str().unwrap_or("");
    match url.port() {
        Some(port) => format!("{}://{host}:{port}", url.scheme()),
        None => format!("{}://{host}", url.scheme()),
    }
}

/// One bucket or host: its client, request limit, secrets and allowed prefixes.
pub struct Source {
    client: Arc<dyn ObjectStore>,
    origin: String,
    http: bool,
    /// Whether a conditional update names the object's generation, not its ETag (GCS).
    generations: bool,
    limit: Semaphore,
    max_requests: usize,
    secrets: Secrets,
    /// The URL prefixes (each ending in `/`) under which keys may be read, with their
    /// paths in the bucket or on the host.
    allowed: RwLock<Vec<(String, ObjectPath)>>,
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Source")
            .field("origin", &self.origin)
            .field("allowed", &self.allowed())
            .finish()
    }
}

impl Source {
    fn new(client: Arc<dyn ObjectStore>, url: &Url, cfg: &StoreConfig) -> Source {
        Source {
            client,
            origin: origin(url),
            http: matches!(url.scheme(), "http" | "https"),
            generations: matches!(url.scheme(), "gs" | "gcs"),
            limit: Semaphore::new(cfg.max_requests.max(1)),
            max_requests: cfg.max_requests.max(1),
            secrets: Secrets::gather(cfg),
            allowed: RwLock::new(Vec::new()),
        }
    }

    /// The source's scheme and authority (`s3://bucket`, `http://host:port`).
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// Whether the source is a plain web server (which may not list).
    pub fn is_http(&self) -> bool {
        self.http
    }

    /// Whether a conditional update names the object's generation (GCS), not its ETag.
    pub fn updates_by_generation(&self) -> bool {
        self.generations
    }

    /// Requests in flight at most, over every store on the source.
    pub fn max_requests(&self) -> usize {
        self.max_requests
    }

    /// Let keys under the folder `url` (a URL of this source) be read.
    pub fn allow(&self, url: &Url) -> Result<()> {
        if origin(url) != self.origin {
            return Err(Error::Invalid(format!(
                "{}: not on the source {}",
                self.scrub(url.as_str()),
                self.origin
            )));
        }
        let path = ObjectPath::from_url_path(url.path())
            .map_err(|e| Error::Invalid(format!("{}: {e}", self.scrub(url.as_str()))))?;
        let prefix = self.url_of(&path, true);
        let mut allowed = self.allowed.write();
        if !allowed.iter().any(|(p, _)| *p == prefix) {
            allowed.push((prefix, path));
        }
        Ok(())
    }

    /// The URL prefixes under which keys may be read.
    pub fn allowed(&self) -> Vec<String> {
        self.allowed.read().iter().map(|(p, _)| p.clone()).collect()
    }

    /// The URL of `path` on this source (a folder's ends in `/`).
    fn url_of(&self, path: &ObjectPath, folder: bool) -> String {
        let path = path.as_ref();
        match (path.is_empty(), folder) {
            (true, _) => format!("{}/", self.origin),
            (false, true) => format!("{}/{path}/", self.origin),
            (false, false) => format!("{}/{path}", self.origin),
        }
    }

    /// Ok when `path` lies under an allowed prefix, else an error naming its URL.
    /// The source's client (for its writes, see `super::write`).
    pub(super) fn client(&self) -> Arc<dyn ObjectStore> {
        self.client.clone()
    }

    pub(super) fn check(&self, path: &ObjectPath) -> Result<()> {
        let allowed = self.allowed.read();
        if allowed.iter().any(|(_, p)| path.prefix_matches(p)) {
            return Ok(());
        }
        let list: Vec<&str> = allowed.iter().map(|(p, _)| p.as_str()).collect();
        Err(Error::Invalid(format!(
            "{}: outside the prefixes this source may read ({})",
            self.url_of(path, false),
            if list.is_empty() {
                "none".to_string()
            } else {
                list.join(", ")
            }
        )))
    }

    /// `text` with every credential and URL query scrubbed.
    pub fn scrub(&self, text: &str) -> String {
        self.secrets.scrub(text)
    }

    /// A place among the source's requests in flight.
    pub(super) async fn permit(&self, label: &str) -> Result<SemaphorePermit<'_>> {
        self.limit
            .acquire()
            .await
            .map_err(|e| failure(label, e.to_string()))
    }

    pub(super) fn error(&self, label: &str, e: object_store::Error) -> Error {
        failure(label, self.scrub(&e.to_string()))
    }

    /// GET `path` (or a range of it) with the version the response names: `None` when it
    /// does not exist. `label` names it in messages.
    pub fn get(
        &self,
        path: &ObjectPath,
        range: Option<GetRange>,
        label: &str,
    ) -> Result<Option<Value>> {
        self.check(path)?;
        block_on(async {
            let _permit = self.permit(label).await?;
            let options = GetOptions {
                range: range.clone(),
                ..Default::default()
            };
            let got = match self.client.get_opts(path, options).await {
                Ok(got) => got,
                Err(object_store::Error::NotFound { .. }) => return Ok(None),
                // Azure has no suffix ranges: the object's size (HEAD), then its last
                // bytes of that very object (If-Match its ETag).
                Err(object_store::Error::NotSupported { .. })
                    if matches!(range, Some(GetRange::Suffix(_))) =>
                {
                    let Some(GetRange::Suffix(n)) = range else {
                        return Err(failure(label, "suffix range".into()));
                    };
                    let head = GetOptions {
                        head: true,
                        ..Default::default()
                    };
                    let meta = match self.client.get_opts(path, head).await {
                        Ok(got) => got.meta,
                        Err(object_store::Error::NotFound { .. }) => return Ok(None),
                        Err(e) => return Err(self.error(label, e)),
                    };
                    if meta.size == 0 {
                        return Ok(Some(Value {
                            bytes: Vec::new(),
                            version: version_of(&meta),
                        }));
                    }
                    let options = GetOptions {
                        range: Some(GetRange::Bounded(meta.size.saturating_sub(n)..meta.size)),
                        if_match: meta.e_tag.clone(),
                        ..Default::default()
                    };
                    match self.client.get_opts(path, options).await {
                        Ok(got) => got,
                        Err(object_store::Error::NotFound { .. }) => return Ok(None),
                        Err(e) => return Err(self.error(label, e)),
                    }
                }
                Err(e) => return Err(self.error(label, e)),
            };
            let len = got.range.end.saturating_sub(got.range.start);
            if len > MAX_VALUE {
                return Err(Error::corrupt(
                    label,
                    format!("value of {len} bytes is larger than any chunk can be"),
                ));
            }
            let version = version_of(&got.meta);
            let bytes = on_runtime(got.bytes())
                .await?
                .map_err(|e| self.error(label, e))?;
            Ok(Some(Value {
                bytes: Vec::from(bytes),
                version,
            }))
        })?
    }

    /// The object's metadata (a HEAD request), `None` when it does not exist.
    pub fn head(&self, path: &ObjectPath, label: &str) -> Result<Option<ObjectMeta>> {
        self.check(path)?;
        block_on(async {
            let _permit = self.permit(label).await?;
            let options = GetOptions {
                head: true,
                ..Default::default()
            };
            match self.client.get_opts(path, options).await {
                Ok(got) => Ok(Some(got.meta)),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(self.error(label, e)),
            }
        })?
    }

    /// The objects and sub-prefixes directly below `path`; a failure's message (scrubbed)
    /// is passed to `fail`.
    pub fn list(
        &self,
        path: &ObjectPath,
        label: &str,
        fail: impl FnOnce(String) -> Error + Send,
    ) -> Result<ListResult> {
        self.check(path)?;
        block_on(async {
            let _permit = self.permit(label).await?;
            self.client
                .list_with_delimiter(Some(path))
                .await
                .map_err(|e| fail(self.scrub(&e.to_string())))
        })?
    }
}

/// The version an object's metadata names: its ETag and modification time (in seconds,
/// which a virtual chunk's recorded time is checked against), or without an ETag its
/// size and modification time.
pub(super) fn version_of(meta: &ObjectMeta) -> Version {
    match &meta.e_tag {
        Some(tag) => Version::ETag {
            etag: tag.clone(),
            modified: meta.last_modified.timestamp(),
            generation: meta.version.clone(),
        },
        None => Version::Object {
            size: meta.size,
            nanos: meta.last_modified.timestamp_nanos_opt().unwrap_or(0),
        },
    }
}

/// What a source is shared by: its origin and everything that shapes its client (the
/// same bucket opened with another endpoint or other options is another source).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct SourceKey {
    origin: String,
    anonymous: bool,
    options: Vec<(String, String)>,
    timeout: Duration,
    retries: usize,
    max_requests: usize,
}

/// The sources of the process, by origin and options.
///
/// One registry serves the whole process ([`Sources::global`]): stores are opened from a
/// spec and options alone (`store::open`), and a store that opens other stores beneath it
/// (a reference set's targets) finds the sources of its siblings there without a handle
/// threaded through every constructor. It holds its sources weakly: a source lives as
/// long as a store uses it, so a later mount in the same process starts with a fresh
/// client and an allow-list of its own prefixes only.
#[derive(Default)]
pub struct Sources {
    sources: Mutex<HashMap<SourceKey, Weak<Source>>>,
}

impl Sources {
    /// An empty registry (tests; the process uses [`Sources::global`]).
    pub fn new() -> Sources {
        Sources::default()
    }

    /// The registry of the process.
    pub fn global() -> &'static Sources {
        static SOURCES: OnceLock<Sources> = OnceLock::new();
        SOURCES.get_or_init(Sources::new)
    }

    /// The source of `url`'s bucket or host with `cfg`'s options: the one already in use
    /// when there is one, else a new client (nothing is requested yet). Its allow-list is
    /// the caller's to extend.
    pub fn get(&self, url: &Url, cfg: &StoreConfig) -> Result<Arc<Source>> {
        let key = SourceKey {
            origin: origin(url),
            anonymous: cfg.anonymous,
            options: cfg.options.clone(),
            timeout: cfg.timeout,
            retries: cfg.retries,
            max_requests: cfg.max_requests,
        };
        // Building a client makes no request: done under the lock, so two stores opened
        // at once on one host get one client.
        let mut sources = self.sources.lock();
        if let Some(source) = sources.get(&key).and_then(Weak::upgrade) {
            return Ok(source);
        }
        let client = crate::store::source::remote::client::build(url, cfg)?;
        let source = Arc::new(Source::new(client, url, cfg));
        sources.retain(|_, s| s.strong_count() > 0);
        sources.insert(key, Arc::downgrade(&source));
        Ok(source)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{RemoteStore, Store};
    use std::net::TcpListener;

    fn cfg() -> StoreConfig {
        StoreConfig {
            timeout: Duration::from_secs(2),
            retries: 0,
            ..StoreConfig::default()
        }
    }

    fn url(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    #[test]
    fn stores_on_one_host_share_a_source_and_its_limit_others_do_not() {
        let sources = Sources::new();
        let cfg = cfg();
        let on = |u: &str| RemoteStore::on(sources.get(&url(u), &cfg).unwrap(), &url(u));
        let a = on("http://127.0.0.1:9/data/a.zarr").unwrap();
        let b = on("http://127.0.0.1:9/data/b.zarr/").unwrap();
        let other = on("http://127.0.0.2:9/data/a.zarr").unwrap();
        assert!(Arc::ptr_eq(a.source(), b.source()));
        assert!(!Arc::ptr_eq(a.source(), other.source()));
        // One limit: a place taken through one store is gone for the other.
        let before = b.source().limit.available_permits();
        let taken = a.source().limit.try_acquire().unwrap();
        assert_eq!(b.source().limit.available_permits(), before - 1);
        assert_eq!(other.source().limit.available_permits(), before);
        drop(taken);
        assert_eq!(
            a.source().allowed(),
            [
                "http://127.0.0.1:9/data/a.zarr/",
                "http://127.0.0.1:9/data/b.zarr/"
            ]
        );
        assert_eq!(other.caps().concurrency, cfg.max_requests);
        // Other options (another endpoint, unsigned requests) make another source.
        let anonymous = StoreConfig {
            anonymous: true,
            ..cfg.clone()
        };
        let s3 = |c: &StoreConfig| sources.get(&url("s3://bucket/x"), c).unwrap();
        assert!(Arc::ptr_eq(&s3(&cfg), &s3(&cfg)));
        assert!(!Arc::ptr_eq(&s3(&cfg), &s3(&anonymous)));
        // Held weakly: once no store uses a source, the next store gets a new one.
        let source = Arc::downgrade(a.source());
        drop((a, b));
        assert!(source.upgrade().is_none());
    }

    #[test]
    fn a_key_outside_every_allowed_prefix_is_refused_without_a_request() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let host = format!("http://{}", listener.local_addr().unwrap());
        let sources = Sources::new();
        let cfg = cfg();
        let store_url = url(&format!("{host}/data/a.zarr"));
        let source = sources.get(&store_url, &cfg).unwrap();
        let store = RemoteStore::on(source.clone(), &store_url).unwrap();
        for outside in ["data/a.zarrx/zarr.json", "data/b.zarr/zarr.json", "secret"] {
            let path = ObjectPath::from(outside);
            let err = source.get(&path, None, outside).unwrap_err().to_string();
            assert!(
                err.contains(&format!("{host}/{outside}")) && err.contains("outside"),
                "{err}"
            );
            assert!(source.head(&path, outside).is_err());
        }
        assert!(
            matches!(listener.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
            "a refused read reached the server"
        );
        // A key under the store's prefix is requested (the server never answers).
        let reader = std::thread::spawn(move || store.read("zarr.json", None).is_err());
        let mut accepted = false;
        for _ in 0..100 {
            if listener.accept().is_ok() {
                accepted = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(accepted, "an allowed read made no request");
        assert!(reader.join().unwrap());
        // A prefix of another source is not this source's to allow.
        assert!(source.allow(&url("http://127.0.0.1:1/x/")).is_err());
    }
}
