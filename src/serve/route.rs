//! One request, from its head to its answer: the token, the path, the method, and one
//! access line in the log. A failure answers this request alone.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;

use super::auth::Auth;
use super::conn::Conn;
use super::tree::Tree;
use super::{dav, get, path, Body};

/// What every request is answered from.
pub struct Server {
    pub tree: Tree,
    auth: Auth,
    dav: dav::Dav,
}

/// The methods served, as `Allow` lists them.
pub const ALLOW: &str = "OPTIONS, GET, HEAD, PROPFIND";

impl Server {
    pub fn new(tree: Tree, auth: Auth) -> Server {
        Server {
            dav: dav::Dav::new(tree.clone()),
            tree,
            auth,
        }
    }

    /// Answer `req` from `peer` on connection `conn`.
    pub async fn handle(
        &self,
        req: Request<Incoming>,
        peer: SocketAddr,
        conn: &Arc<Conn>,
    ) -> Response<Body> {
        let began = Instant::now();
        let method = req.method().clone();
        let target = req.uri().path().to_string();
        let mut response = self.answer(req).await;
        let length = response
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("-")
            .to_string();
        log::info!(
            "{peer} \"{method} {target}\" {} {length} {}ms",
            response.status().as_u16(),
            began.elapsed().as_millis()
        );
        let body = std::mem::replace(response.body_mut(), empty());
        *response.body_mut() = conn.track(body);
        response
    }

    async fn answer(&self, req: Request<Incoming>) -> Response<Body> {
        let authorization = req
            .headers()
            .get(header::AUTHORIZATION)
            .map(HeaderValue::as_bytes);
        if !self.auth.allows(authorization) {
            let mut r = text(StatusCode::UNAUTHORIZED, "a token is required\n");
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Basic realm=\"zarrfs\", charset=\"UTF-8\""),
            );
            return r;
        }
        let (names, trailing) = match path::names(req.uri().path()) {
            Ok(n) => n,
            Err(path::BadPath(why)) => return text(StatusCode::BAD_REQUEST, &format!("{why}\n")),
        };
        match *req.method() {
            Method::GET | Method::HEAD => get::get(&self.tree, &req, names, trailing).await,
            Method::OPTIONS => dav::options(),
            _ if req.method().as_str() == "PROPFIND" => self.dav.propfind(req).await,
            _ => {
                let mut r = text(
                    StatusCode::METHOD_NOT_ALLOWED,
                    "the tree is served read-only\n",
                );
                r.headers_mut()
                    .insert(header::ALLOW, HeaderValue::from_static(ALLOW));
                r
            }
        }
    }
}

/// An empty body.
pub fn empty() -> Body {
    Empty::new().map_err(|never| match never {}).boxed_unsync()
}

/// A body of `bytes`.
pub fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// An answer of `status` with a line of text saying why.
pub fn text(status: StatusCode, message: &str) -> Response<Body> {
    let mut r = Response::new(full(message.to_string()));
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(message.len()));
    r
}

/// The answer to a failure of the core: its errno as a status, its message as the text.
pub fn failure(e: &crate::Error) -> Response<Body> {
    let status = match e.errno() {
        libc::ENOENT => StatusCode::NOT_FOUND,
        libc::EINVAL => StatusCode::BAD_REQUEST,
        libc::EBUSY => StatusCode::SERVICE_UNAVAILABLE,
        libc::EACCES | libc::EPERM => StatusCode::FORBIDDEN,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    if status == StatusCode::INTERNAL_SERVER_ERROR {
        log::warn!("{e}");
    }
    text(status, &format!("{e}\n"))
}
