//! A directory's listing: an HTML page for browsers (names linked, sizes, and for the
//! files of an array its shape, data type and chunks), the same as JSON for
//! `Accept: application/json` or `?format=json`.

use http::{header, HeaderValue, Request, Response, StatusCode};
use hyper::body::Incoming;
use serde_json::{json, Value};

use super::path::href;
use super::reply::{empty, failure, full};
use super::tree::{Found, Listed, Tree};
use super::Body;
use crate::formats::xml_escape as escape;
use crate::fs::FileKind;

/// Whether the client asks for JSON.
fn wants_json(req: &Request<Incoming>) -> bool {
    let query = req.uri().query().unwrap_or("");
    if query.split('&').any(|q| q == "format=json") {
        return true;
    }
    req.headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("application/json"))
}

/// A comma list of numbers (`user.zarr.shape`) as a JSON array.
fn numbers(list: &str) -> Value {
    Value::Array(
        list.split(',')
            .filter_map(|n| n.trim().parse::<u64>().ok())
            .map(Value::from)
            .collect(),
    )
}

/// The array a listed file shows, if any: shape, data type (as the metadata writes it)
/// and chunks.
fn array_of(entry: &Listed) -> Option<Value> {
    if entry.xattr("user.zarr.kind") != Some("array") {
        return None;
    }
    let data_type = entry
        .xattr("user.zarr.data_type")
        .and_then(|d| serde_json::from_str::<Value>(d).ok())
        .unwrap_or(Value::Null);
    let mut array = json!({
        "shape": numbers(entry.xattr("user.zarr.shape").unwrap_or("")),
        "data_type": data_type,
        "chunks": numbers(entry.xattr("user.zarr.chunks").unwrap_or("")),
    });
    // Stored bytes read for the array since the server started (every file of it).
    if let Some(n) = entry
        .xattr("user.zarrfs.bytes_fetched")
        .and_then(|n| n.parse::<u64>().ok())
    {
        array["bytes_fetched"] = n.into();
    }
    Some(array)
}

fn entry_json(dir: &[String], e: &Listed) -> Value {
    let mut names = dir.to_vec();
    names.push(e.name.clone());
    let is_dir = e.attr.kind == FileKind::Directory;
    let mut v = json!({
        "name": e.name,
        "href": href(&names, is_dir),
        "type": if is_dir { "directory" } else { "file" },
    });
    if !is_dir {
        v["size"] = e.attr.size.into();
    }
    if let Some(array) = array_of(e) {
        v["array"] = array;
    }
    v
}

fn cell_of(array: Option<&Value>, key: &str) -> String {
    match array.and_then(|a| a.get(key)) {
        Some(Value::Array(v)) => v
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join(" × "),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

fn html(dir: &[String], entries: &[Value]) -> String {
    let here = href(dir, true);
    let title = escape(&format!(
        "Index of {}",
        percent_encoding::percent_decode_str(&here).decode_utf8_lossy()
    ));
    let mut page = format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{title}</title>\n\
         <style>body{{font-family:sans-serif}}td,th{{padding:2px 12px;text-align:left}}\
         td.n{{text-align:right}}</style></head>\n<body><h1>{title}</h1>\n<table>\n\
         <tr><th>Name</th><th>Size</th><th>Shape</th><th>Data type</th><th>Chunks</th></tr>\n"
    );
    if !dir.is_empty() {
        let up = href(&dir[..dir.len() - 1], true);
        page.push_str(&format!(
            "<tr class=\"parent\"><td><a href=\"{}\">../</a></td><td></td><td></td><td></td><td></td></tr>\n",
            escape(&up)
        ));
    }
    for e in entries {
        let is_dir = e["type"] == "directory";
        let name = e["name"].as_str().unwrap_or("");
        let shown = if is_dir {
            format!("{name}/")
        } else {
            name.to_string()
        };
        let size = e.get("size").map(Value::to_string).unwrap_or_default();
        let array = e.get("array");
        let class = match (is_dir, array.is_some()) {
            (true, _) => "directory",
            (false, true) => "array",
            (false, false) => "file",
        };
        page.push_str(&format!(
            "<tr class=\"{class}\"><td><a href=\"{}\">{}</a></td><td class=\"n\">{size}</td>\
             <td>{}</td><td>{}</td><td>{}</td></tr>\n",
            escape(e["href"].as_str().unwrap_or("")),
            escape(&shown),
            escape(&cell_of(array, "shape")),
            escape(&cell_of(array, "data_type")),
            escape(&cell_of(array, "chunks")),
        ));
    }
    page.push_str("</table>\n</body></html>\n");
    page
}

/// Answer a `GET` or `HEAD` of directory `found` at `dir`.
pub async fn answer(
    tree: &Tree,
    req: &Request<Incoming>,
    dir: &[String],
    found: Found,
    head: bool,
) -> Response<Body> {
    let listed = match tree.list(&found, true).await {
        Ok(l) => l,
        Err(e) => return failure(&e),
    };
    let entries: Vec<Value> = listed.iter().map(|e| entry_json(dir, e)).collect();
    let (content_type, text) = if wants_json(req) {
        let doc = json!({"path": href(dir, true), "entries": entries});
        ("application/json", format!("{doc:#}\n"))
    } else {
        ("text/html; charset=utf-8", html(dir, &entries))
    };
    let mut r = Response::new(empty());
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(text.len()));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(header::VARY, HeaderValue::from_static("Accept"));
    if !head {
        *r.body_mut() = full(text);
    }
    *r.status_mut() = StatusCode::OK;
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_escaped_in_html() {
        let e = json!({"name": "<b>&", "href": "/%3Cb%3E&", "type": "file", "size": 4});
        let page = html(&[], &[e]);
        assert!(page.contains("&lt;b&gt;&amp;"));
        assert!(!page.contains("<b>&"));
        assert!(page.contains("href=\"/%3Cb%3E&amp;\""));
    }

    #[test]
    fn lists_of_numbers() {
        assert_eq!(numbers("10,20,3"), json!([10, 20, 3]));
        assert_eq!(numbers(""), json!([]));
    }
}
