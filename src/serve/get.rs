//! `GET` and `HEAD`: a file's bytes, whole or one range, with its validators (`ETag` from
//! the node's reading, `Last-Modified`); a directory's listing (see [`super::listing`]).
//! A file's bytes are read by the core in pieces, a few ahead of what the client has
//! taken, and sent as they come: nothing holds a whole file.

use std::sync::Arc;
use std::time::SystemTime;

use futures::StreamExt;
use http::{header, HeaderMap, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Frame, Incoming};

use super::range::{self, Asked};
use super::reply::{empty, failure, text};
use super::tree::{OpenFile, Tree};
use super::{listing, Body};
use crate::fs::{Attr, FileKind};

/// Bytes per read of the core.
const PIECE: usize = 1 << 20;
/// Reads in flight ahead of the client.
const AHEAD: usize = 4;

/// The entity tag of a node's reading: its inode number and generation name one reading
/// of one node for good (see `fs/inode.rs`), its size the bytes it shows.
pub fn etag(attr: &Attr) -> String {
    format!("\"{:x}-{:x}-{:x}\"", attr.ino, attr.generation, attr.size)
}

/// `Content-Type` of a file by its name: what the view is.
pub fn content_type(name: &str) -> &'static str {
    let lower = name.to_ascii_lowercase();
    let ends = |s: &str| lower.ends_with(s);
    if ends(".tif") || ends(".tiff") {
        "image/tiff"
    } else if ends(".json") {
        "application/json"
    } else if ends(".vrt") {
        "application/xml"
    } else if ends(".hdr") || ends(".mhd") || ends(".nhdr") {
        "text/plain; charset=utf-8"
    } else {
        "application/octet-stream"
    }
}

/// Whether an `If-None-Match` list names `tag` (or is `*`); weak comparison.
fn none_match(value: &str, tag: &str) -> bool {
    value.split(',').map(str::trim).any(|t| {
        t == "*" || t.strip_prefix("W/").unwrap_or(t) == tag.strip_prefix("W/").unwrap_or(tag)
    })
}

/// Whether `If-Range` still holds: the same strong tag, or a date not before the
/// file's.
fn range_holds(value: &str, tag: &str, since: SystemTime) -> bool {
    let value = value.trim();
    if value.starts_with('"') {
        return value == tag;
    }
    match httpdate::parse_http_date(value) {
        Ok(date) => httpdate::fmt_http_date(date) == httpdate::fmt_http_date(since),
        Err(_) => false,
    }
}

/// Answer a `GET` or `HEAD` of the node at `names`.
pub async fn get(
    tree: &Tree,
    req: &Request<Incoming>,
    names: Vec<String>,
    trailing: bool,
) -> Response<Body> {
    let head = req.method() == Method::HEAD;
    let found = match tree.find(names.clone()).await {
        Ok(f) => f,
        Err(e) => return failure(&e),
    };
    if found.attr.kind == FileKind::Directory {
        return listing::answer(tree, req, &names, found, head).await;
    }
    if trailing {
        return text(StatusCode::NOT_FOUND, "not a directory\n");
    }
    let size = found.attr.size;
    let tag = etag(&found.attr);
    let headers = req.headers();
    let value = |h: header::HeaderName| headers.get(h).and_then(|v| v.to_str().ok());
    let mut out = HeaderMap::new();
    let name = names.last().map_or("", String::as_str);
    out.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(content_type(name)),
    );
    out.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    if let Ok(v) = HeaderValue::from_str(&tag) {
        out.insert(header::ETAG, v);
    }
    if let Ok(v) = HeaderValue::from_str(&httpdate::fmt_http_date(tree.since)) {
        out.insert(header::LAST_MODIFIED, v);
    }
    if value(header::IF_NONE_MATCH).is_some_and(|v| none_match(v, &tag)) {
        return answer(StatusCode::NOT_MODIFIED, out, empty());
    }
    let if_range = value(header::IF_RANGE).is_none_or(|v| range_holds(v, &tag, tree.since));
    let asked = match value(header::RANGE) {
        Some(r) if if_range => range::parse(r, size),
        _ => Asked::Whole,
    };
    let (status, start, end) = match asked {
        Asked::Whole => (StatusCode::OK, 0, size),
        Asked::Part { start, end } => {
            let range = format!("bytes {start}-{}/{size}", end - 1);
            if let Ok(v) = HeaderValue::from_str(&range) {
                out.insert(header::CONTENT_RANGE, v);
            }
            (StatusCode::PARTIAL_CONTENT, start, end)
        }
        Asked::Unsatisfiable => {
            let mut r = text(
                StatusCode::RANGE_NOT_SATISFIABLE,
                "the range is past the end\n",
            );
            if let Ok(v) = HeaderValue::from_str(&format!("bytes */{size}")) {
                r.headers_mut().insert(header::CONTENT_RANGE, v);
            }
            return r;
        }
    };
    out.insert(header::CONTENT_LENGTH, HeaderValue::from(end - start));
    // Opened for HEAD and empty files too: a file that cannot be read (a codec zarrfs
    // does not decode) fails here, with its status, as its open fails on the mount.
    let file = match tree.open(found).await {
        Ok(file) => file,
        Err(e) => return failure(&e),
    };
    if head || start == end {
        return answer(status, out, empty());
    }
    answer(status, out, file_body(tree.clone(), file, start, end))
}

fn answer(status: StatusCode, headers: HeaderMap, body: Body) -> Response<Body> {
    let mut r = Response::new(body);
    *r.status_mut() = status;
    *r.headers_mut() = headers;
    r
}

/// Bytes `start..end` of `file`, read `AHEAD` pieces ahead of the client. A piece that
/// cannot be read ends the body early (the client sees the connection cut before the
/// length it was promised) and is logged with its key.
fn file_body(tree: Tree, file: OpenFile, start: u64, end: u64) -> Body {
    let file = Arc::new(file);
    let pieces = (start..end)
        .step_by(PIECE)
        .map(move |at| (at, (end - at).min(PIECE as u64)));
    let reads = futures::stream::iter(pieces)
        .map(move |(at, n)| {
            let tree = tree.clone();
            let file = file.clone();
            async move {
                let n = n as usize;
                match tree.read(&file, at, n).await {
                    Ok(bytes) if bytes.len() == n => Ok(Frame::data(bytes)),
                    Ok(bytes) => Err(std::io::Error::other(format!(
                        "inode {}: {} bytes at {at}, short of {n}",
                        file.ino,
                        bytes.len()
                    ))),
                    Err(e) => {
                        log::warn!("{e}");
                        Err(std::io::Error::other(e.to_string()))
                    }
                }
            }
        })
        .buffered(AHEAD);
    StreamBody::new(reads).boxed_unsync()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validators() {
        let tag = "\"a-1-10\"";
        assert!(none_match("\"a-1-10\"", tag));
        assert!(none_match("W/\"a-1-10\"", tag));
        assert!(none_match("\"x\", \"a-1-10\"", tag));
        assert!(none_match("*", tag));
        assert!(!none_match("\"a-1-11\"", tag));
        let since = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
        assert!(range_holds(tag, tag, since));
        assert!(!range_holds("W/\"a-1-10\"", tag, since));
        assert!(range_holds(&httpdate::fmt_http_date(since), tag, since));
        assert!(!range_holds("Tue, 15 Nov 1994 08:12:31 GMT", tag, since));
        assert!(!range_holds("garbage", tag, since));
    }

    #[test]
    fn content_types_by_view() {
        assert_eq!(content_type("t.tif"), "image/tiff");
        assert_eq!(content_type("img.ome.tif"), "image/tiff");
        assert_eq!(content_type(".t.json"), "application/json");
        assert_eq!(content_type("t.vrt"), "application/xml");
        assert_eq!(content_type("t"), "application/octet-stream");
        assert_eq!(content_type("t.npy"), "application/octet-stream");
    }
}
