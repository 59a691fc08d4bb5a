//! One request, from its head to its answer: the token, the path, the method, and one
//! access line in the log. A failure answers this request alone.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use hyper::body::Incoming;

use super::auth::Auth;
use super::conn::Conn;
use super::reply::{empty, text, ALLOW};
use super::tree::Tree;
use super::{dav, get, path, Body};

/// What every request is answered from.
pub struct Server {
    pub tree: Tree,
    auth: Auth,
    dav: dav::Dav,
}

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
