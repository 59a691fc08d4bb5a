//! A request's path, decoded once and checked: the names it walks from the served root.
//! Nothing a client sends can leave the tree: `..` (in any encoding) is refused, not
//! resolved, and so are backslashes, NULs and other control characters, an encoded `/`
//! inside a name, and bytes that are not UTF-8. `.` and empty segments (`//`) are
//! dropped.

use percent_encoding::percent_decode_str;

/// Why a path was refused (answered with `400`).
#[derive(Debug, PartialEq, Eq)]
pub struct BadPath(pub &'static str);

/// The names of `raw` (a request target's path, still percent-encoded) from the root;
/// whether it ends with `/`.
pub fn names(raw: &str) -> Result<(Vec<String>, bool), BadPath> {
    if !raw.starts_with('/') {
        return Err(BadPath("the path does not start with /"));
    }
    let mut out = Vec::new();
    for segment in raw.split('/') {
        let name = percent_decode_str(segment)
            .decode_utf8()
            .map_err(|_| BadPath("the path is not UTF-8"))?;
        if name.contains('/') {
            return Err(BadPath("an encoded / inside a name"));
        }
        if name.contains('\\') {
            return Err(BadPath("a backslash in the path"));
        }
        if name.chars().any(char::is_control) {
            return Err(BadPath("a control character in the path"));
        }
        match name.as_ref() {
            "" | "." => {}
            ".." => return Err(BadPath("a .. in the path")),
            _ => out.push(name.into_owned()),
        }
    }
    Ok((out, raw.ends_with('/')))
}

/// The URL path of `names` (each name percent-encoded), with a trailing `/` for a
/// directory.
pub fn href(names: &[String], dir: bool) -> String {
    let mut out = String::from("/");
    for (i, n) in names.iter().enumerate() {
        if i > 0 {
            out.push('/');
        }
        out.extend(percent_encoding::utf8_percent_encode(n, SEGMENT));
    }
    if dir && !names.is_empty() {
        out.push('/');
    }
    out
}

/// What is encoded in a path segment: controls, space and what URLs and HTML give a
/// meaning (`/ ? # % "` `< > \` ...).
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'/')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'`')
    .add(b'{')
    .add(b'}')
    .add(b'\\')
    .add(b'\'')
    .add(b'&')
    .add(b'+');

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(raw: &str) -> Vec<String> {
        names(raw).unwrap().0
    }

    #[test]
    fn plain_paths_and_dots() {
        assert_eq!(ok("/"), Vec::<String>::new());
        assert_eq!(ok("/a/b"), vec!["a", "b"]);
        assert_eq!(ok("//a/./b/"), vec!["a", "b"]);
        assert!(names("/a/b/").unwrap().1);
        assert_eq!(ok("/a%20b/.c.json"), vec!["a b", ".c.json"]);
        assert_eq!(ok("/%2e%2e.tif"), vec!["...tif"]);
    }

    #[test]
    fn traversal_is_refused_in_every_encoding() {
        for raw in [
            "/..",
            "/a/../..",
            "/%2e%2e/etc/passwd",
            "/%2E%2E/x",
            "/.%2e/x",
            "/a/%2e./x",
            "/a%2f..%2fb",
            "/a%2F..",
            "/..%5c..%5cetc",
            "/a\\b",
            "/a%00b",
            "/a%0ab",
            "/%ff%fe",
            "a/b",
            "/%252e%252e/%2e%2e",
        ] {
            assert!(names(raw).is_err(), "{raw} was taken");
        }
        // Decoded once: %252e is the name "%2e", not a dot.
        assert_eq!(ok("/%252e%252e"), vec!["%2e%2e"]);
    }

    #[test]
    fn hrefs_encode_names_once() {
        let n = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(href(&n(&[]), true), "/");
        assert_eq!(href(&n(&["a b", "c#?"]), false), "/a%20b/c%23%3F");
        assert_eq!(href(&n(&["g"]), true), "/g/");
        for name in ["a b", "x%y", "q?#", "<i>", "ü"] {
            let h = href(&n(&["d", name]), false);
            assert_eq!(ok(&h), vec!["d", name]);
        }
    }
}
