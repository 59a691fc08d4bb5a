//! The answers every handler builds: bodies (empty, or of bytes), a status with a line
//! of text saying why, a failure of the core as its status (the one place an error
//! becomes one), and the methods served.

use bytes::Bytes;
use http::{header, HeaderValue, Response, StatusCode};
use http_body_util::{BodyExt, Empty, Full};

use super::Body;

/// The methods served, as `Allow` lists them.
pub const ALLOW: &str = "OPTIONS, GET, HEAD, PROPFIND";

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
