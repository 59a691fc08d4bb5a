//! `zarrfs serve`: the tree a mount of the same flags shows, over HTTP/1.1 and WebDAV
//! (class 1, read-only), for the machines where no FUSE mount can be made and for
//! clients that open files by URL (GDAL's `/vsicurl/`, fsspec, browsers, rclone, the
//! WebDAV clients of macOS, Windows and Linux). The second front over the same core
//! (`fs/`, `fs/io/`): every lookup, listing and read is the core's, none is copied here.
//!
//! - [`conn`]: connections, their cap and timeouts;
//! - [`route`]: one request: who may ask, which path, which method, the access log line;
//! - [`reply`]: the answers handlers build: bodies, text, a core failure as its status;
//! - [`get`]: `GET`/`HEAD` of files (ranges, validators) and [`listing`] of directories;
//! - [`dav`]: WebDAV's `OPTIONS` and `PROPFIND` (answered by dav-server over the tree);
//! - [`path`], [`range`], [`auth`]: what a request says, checked;
//! - [`tree`]: the core's calls made from async handlers, and [`pieces`]: the buffers
//!   a file's bytes are read into and sent from.

mod auth;
mod conn;
mod dav;
mod get;
mod listing;
mod path;
mod pieces;
mod range;
mod reply;
mod route;
mod tree;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;

use crate::fs::io::{setup, IoMode, Serving};
use crate::fs::FsOptions;
use crate::store::StoreConfig;
use crate::{Error, Result};
pub use auth::Auth;

/// What every answer's body is.
pub type Body = UnsyncBoxBody<Bytes, std::io::Error>;

/// Request heads (line and headers) larger than this are refused (`431`).
const MAX_HEAD: usize = 16 << 10;

/// Everything `zarrfs serve` needs.
pub struct ServeConfig {
    pub store: String,
    pub store_cfg: StoreConfig,
    pub fs: FsOptions,
    pub threads: Option<usize>,
    pub io: IoMode,
    pub refresh: Option<Option<Duration>>,
    /// Where to listen.
    pub addr: SocketAddr,
    /// The token every request must carry (`--token-file`).
    pub token_file: Option<PathBuf>,
    /// Serve without a token on an address other than loopback.
    pub public: bool,
    pub max_connections: usize,
}

/// Why listening on `addr` is refused: another address than loopback, without a token
/// or `--public`.
fn exposure(addr: &SocketAddr, auth: &Auth, public: bool) -> Option<String> {
    (!addr.ip().is_loopback() && !auth.asks_token() && !public).then(|| {
        format!(
            "--http {addr}: not a loopback address; anyone who reaches it could read the \
             store: give --token-file FILE (clients send its token) or --public"
        )
    })
}

/// Run `zarrfs serve` in the foreground until SIGINT or SIGTERM.
pub fn serve(cfg: ServeConfig) -> Result<()> {
    let auth = match &cfg.token_file {
        Some(file) => Auth::from_file(file)?,
        None => Auth::open(),
    };
    if let Some(message) = exposure(&cfg.addr, &auth, cfg.public) {
        return Err(Error::startup(message));
    }
    raise_open_files();
    // Chunk buffers from heaps that keep their pages, as for a mount.
    crate::process::memory::tune_allocator();
    let refresh = setup::refresh_of(&cfg.store, cfg.refresh);
    let hierarchy = setup::open_hierarchy(&cfg.store, &cfg.store_cfg, refresh)?;
    let (fs, threads) = setup::build(hierarchy, cfg.fs, &cfg.store, cfg.threads, refresh);
    // No copies: nothing hands them to a kernel, and reads of decoded bytes are served
    // from the decoded cache.
    // A chunk whose every byte went to a client leaves the decoded cache, as on a mount
    // whose kernel keeps what it read: HTTP clients keep what they fetched (by its
    // `ETag`; davfs2, rclone and Windows' WebDAV client in a file cache of their own),
    // and a file downloaded whole is not held twice (nor paid for in fresh memory, a
    // page fault per page, while the cache fills). Chunks read in part (tiles, ranges)
    // stay.
    let core = Serving::new(fs, threads, cfg.io, 0, false);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(crate::pool::cores())
        .thread_name("http")
        .enable_all()
        .build()
        .map_err(|e| Error::startup_from("the HTTP runtime", e))?;
    let server = Arc::new(route::Server::new(tree::Tree::new(core), auth));
    runtime.block_on(run(server, cfg.addr, cfg.max_connections, &cfg.store))
}

async fn run(
    server: Arc<route::Server>,
    addr: SocketAddr,
    max_connections: usize,
    store: &str,
) -> Result<()> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| Error::startup_from(format_args!("--http {addr}"), e))?;
    let bound = listener
        .local_addr()
        .map_err(|e| Error::startup_from(format_args!("--http {addr}"), e))?;
    let conns = conn::Conns::new(max_connections);
    log::info!("serving {store} at http://{bound}/");
    // Scripts wait for this line to know the server is up (and where, with port 0); a
    // closed stdout is no reason to stop.
    {
        use std::io::Write;
        let mut out = std::io::stdout();
        let _ = writeln!(out, "serving {store} at http://{bound}/").and_then(|()| out.flush());
    }
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| Error::startup_from("SIGTERM", e))?;
    loop {
        let slot = tokio::select! {
            slot = conns.admit() => slot,
            _ = tokio::signal::ctrl_c() => break,
            _ = term.recv() => break,
        };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of descriptors, or a connection reset before it was taken.
                    log::warn!("accept: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = tokio::signal::ctrl_c() => break,
            _ = term.recv() => break,
        };
        let _ = stream.set_nodelay(true);
        let server = server.clone();
        tokio::spawn(async move {
            let conn = slot.conn.clone();
            let service = hyper::service::service_fn(move |req| {
                let server = server.clone();
                let conn = conn.clone();
                async move { Ok::<_, std::convert::Infallible>(server.handle(req, peer, &conn).await) }
            });
            let connection = http1::Builder::new()
                .max_buf_size(MAX_HEAD)
                .max_headers(100)
                .serve_connection(TokioIo::new(stream), service);
            tokio::select! {
                done = connection => {
                    if let Err(e) = done {
                        log::debug!("{peer}: {e}");
                    }
                }
                why = slot.conn.watch() => log::debug!("{peer}: connection closed: {why}"),
            }
            drop(slot);
        });
    }
    log::info!("stopped serving {store}");
    Ok(())
}

/// Raise the soft limit of open descriptors to the hard one: each connection is one.
fn raise_open_files() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read and write the struct given, nothing else.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max
        {
            limit.rlim_cur = limit.rlim_max;
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                log::info!("open files: the soft limit stays at its default");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_is_served_without_a_token_or_public() {
        let open = Auth::open();
        let at = |s: &str| s.parse::<SocketAddr>().unwrap();
        assert!(exposure(&at("127.0.0.1:8000"), &open, false).is_none());
        assert!(exposure(&at("[::1]:8000"), &open, false).is_none());
        assert!(exposure(&at("0.0.0.0:8000"), &open, false).is_some());
        assert!(exposure(&at("192.168.1.5:80"), &open, false).is_some());
        assert!(exposure(&at("0.0.0.0:8000"), &open, true).is_none());
    }
}
