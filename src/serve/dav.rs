//! WebDAV, class 1 and read-only: `OPTIONS` says so (`DAV: 1`), and `PROPFIND` of depth 0
//! or 1 is answered by dav-server over the tree (`getcontentlength`, `getlastmodified`,
//! `resourcetype`, `getetag`, as `GET` gives them). Depth infinity is refused (`403`,
//! RFC 4918's `propfind-finite-depth`), and so is a body over 64 KiB or one that declares
//! a document type or entities (no entity is ever expanded).

use std::time::SystemTime;

use dav_server::davpath::DavPath;
use dav_server::fs::{
    DavDirEntry, DavFile, DavFileSystem, DavMetaData, FsError, FsFuture, FsResult, FsStream,
    OpenOptions, ReadDirMeta,
};
use dav_server::{DavHandler, DavMethodSet};
use futures::FutureExt;
use http::{header, HeaderValue, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;

use super::get::etag;
use super::reply::{empty, text, ALLOW};
use super::tree::{Found, Tree};
use super::Body;
use crate::fs::{Attr, FileKind};

/// The largest `PROPFIND` body taken.
const MAX_BODY: usize = 64 << 10;

/// `OPTIONS`: what is served.
pub fn options() -> Response<Body> {
    let mut r = Response::new(empty());
    let h = r.headers_mut();
    h.insert("DAV", HeaderValue::from_static("1"));
    h.insert("MS-Author-Via", HeaderValue::from_static("DAV"));
    h.insert(header::ALLOW, HeaderValue::from_static(ALLOW));
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(0));
    r
}

/// The WebDAV handler over the tree.
pub struct Dav {
    handler: DavHandler,
}

impl Dav {
    pub fn new(tree: Tree) -> Dav {
        let handler = DavHandler::builder()
            .filesystem(Box::new(DavTree { tree }))
            .methods(DavMethodSet::WEBDAV_RO)
            .build_handler();
        Dav { handler }
    }

    /// Answer a `PROPFIND`.
    pub async fn propfind(&self, req: Request<Incoming>) -> Response<Body> {
        let depth = req
            .headers()
            .get("Depth")
            .and_then(|v| v.to_str().ok())
            .map(str::trim);
        match depth {
            None | Some("0") | Some("1") => {}
            Some(d) if d.eq_ignore_ascii_case("infinity") => {
                let body = "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n\
                            <D:error xmlns:D=\"DAV:\"><D:propfind-finite-depth/></D:error>\n";
                let mut r = text(StatusCode::FORBIDDEN, body);
                r.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/xml; charset=utf-8"),
                );
                return r;
            }
            Some(_) => return text(StatusCode::BAD_REQUEST, "Depth is 0, 1 or infinity\n"),
        }
        let (parts, body) = req.into_parts();
        let bytes = match Limited::new(body, MAX_BODY).collect().await {
            Ok(b) => b.to_bytes(),
            Err(_) => {
                return text(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "a PROPFIND body is at most 64 KiB\n",
                )
            }
        };
        if declares_entities(&bytes) {
            return text(
                StatusCode::BAD_REQUEST,
                "a PROPFIND body may not declare a document type or entities\n",
            );
        }
        let req = Request::from_parts(parts, Full::new(bytes));
        let answer = self.handler.handle(req).await;
        answer.map(|b| b.boxed_unsync())
    }
}

/// Whether an XML body has a `<!DOCTYPE` or `<!ENTITY` (in any case).
fn declares_entities(body: &[u8]) -> bool {
    body.windows(2).enumerate().any(|(i, w)| {
        w == b"<!" && {
            let rest = &body[i + 2..];
            let word = |s: &[u8]| rest.len() >= s.len() && rest[..s.len()].eq_ignore_ascii_case(s);
            word(b"DOCTYPE") || word(b"ENTITY")
        }
    })
}

/// The tree as dav-server's filesystem: metadata and listings only (files are read by
/// `GET`, answered by [`super::get`]).
#[derive(Clone)]
struct DavTree {
    tree: Tree,
}

/// A node's metadata as WebDAV shows it.
#[derive(Debug, Clone)]
struct Meta {
    attr: Attr,
    since: SystemTime,
}

impl DavMetaData for Meta {
    fn len(&self) -> u64 {
        self.attr.size
    }

    fn modified(&self) -> FsResult<SystemTime> {
        Ok(self.since)
    }

    fn is_dir(&self) -> bool {
        self.attr.kind == FileKind::Directory
    }

    fn etag(&self) -> Option<String> {
        Some(etag(&self.attr))
    }
}

struct Entry {
    name: String,
    meta: Meta,
}

impl DavDirEntry for Entry {
    fn name(&self) -> Vec<u8> {
        self.name.as_bytes().to_vec()
    }

    fn metadata(&self) -> FsFuture<'_, Box<dyn DavMetaData>> {
        let meta: Box<dyn DavMetaData> = Box::new(self.meta.clone());
        async move { Ok(meta) }.boxed()
    }
}

/// The names of a dav-server path (already checked by the front: no `..`).
fn names_of(path: &DavPath) -> FsResult<Vec<String>> {
    path.as_rel_ospath()
        .components()
        .map(|c| match c {
            std::path::Component::Normal(n) => {
                n.to_str().map(str::to_string).ok_or(FsError::NotFound)
            }
            _ => Err(FsError::Forbidden),
        })
        .collect()
}

fn fs_error(e: &crate::Error) -> FsError {
    match e.errno() {
        libc::ENOENT => FsError::NotFound,
        _ => {
            log::warn!("{e}");
            FsError::GeneralFailure
        }
    }
}

impl DavTree {
    /// The node at a dav-server path.
    async fn find(&self, path: &DavPath) -> FsResult<Found> {
        self.tree
            .find(names_of(path)?)
            .await
            .map_err(|e| fs_error(&e))
    }
}

impl DavFileSystem for DavTree {
    fn open<'a>(
        &'a self,
        _path: &'a DavPath,
        _options: OpenOptions,
    ) -> FsFuture<'a, Box<dyn DavFile>> {
        async { Err(FsError::NotImplemented) }.boxed()
    }

    fn read_dir<'a>(
        &'a self,
        path: &'a DavPath,
        _meta: ReadDirMeta,
    ) -> FsFuture<'a, FsStream<Box<dyn DavDirEntry>>> {
        async move {
            let found = self.find(path).await?;
            let listed = self
                .tree
                .list(&found, false)
                .await
                .map_err(|e| fs_error(&e))?;
            let since = self.tree.since;
            let entries: Vec<FsResult<Box<dyn DavDirEntry>>> = listed
                .into_iter()
                .map(|l| {
                    let entry: Box<dyn DavDirEntry> = Box::new(Entry {
                        name: l.name,
                        meta: Meta {
                            attr: l.attr,
                            since,
                        },
                    });
                    Ok(entry)
                })
                .collect();
            let stream: FsStream<Box<dyn DavDirEntry>> = Box::pin(futures::stream::iter(entries));
            Ok(stream)
        }
        .boxed()
    }

    fn metadata<'a>(&'a self, path: &'a DavPath) -> FsFuture<'a, Box<dyn DavMetaData>> {
        async move {
            let found = self.find(path).await?;
            let meta: Box<dyn DavMetaData> = Box::new(Meta {
                attr: found.attr.clone(),
                since: self.tree.since,
            });
            Ok(meta)
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entity_declarations_are_found() {
        assert!(declares_entities(
            b"<?xml version=\"1.0\"?><!DOCTYPE lolz [<!ENTITY lol \"lol\">]>"
        ));
        assert!(declares_entities(
            b"<!entity x SYSTEM \"file:///etc/passwd\">"
        ));
        assert!(!declares_entities(
            b"<?xml version=\"1.0\"?><D:propfind xmlns:D=\"DAV:\"><D:allprop/></D:propfind>"
        ));
        assert!(!declares_entities(b"<!-- a comment -->"));
    }
}
