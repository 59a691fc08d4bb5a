//! Who may read: everyone on loopback or with `--public`; else whoever sends the token of
//! `--token-file`, as a Bearer token or as the password of HTTP Basic (any user name: that
//! is what WebDAV clients, browsers and GDAL can send).

use base64::Engine;

/// The token every request must carry (`None`: no token asked).
#[derive(Clone)]
pub struct Auth {
    token: Option<Vec<u8>>,
}

impl Auth {
    /// No token asked.
    pub fn open() -> Auth {
        Auth { token: None }
    }

    /// The token in `file`'s first line (without its end of line); refused when empty.
    pub fn from_file(file: &std::path::Path) -> crate::Result<Auth> {
        let text = std::fs::read_to_string(file).map_err(|e| {
            crate::Error::startup_from(format_args!("--token-file {}", file.display()), e)
        })?;
        let token = text.lines().next().unwrap_or("").trim();
        if token.is_empty() {
            return Err(crate::Error::startup(format!(
                "--token-file {}: no token in its first line",
                file.display()
            )));
        }
        Ok(Auth {
            token: Some(token.as_bytes().to_vec()),
        })
    }

    pub fn asks_token(&self) -> bool {
        self.token.is_some()
    }

    /// Whether a request with this `Authorization` header may read.
    pub fn allows(&self, authorization: Option<&[u8]>) -> bool {
        let Some(token) = &self.token else {
            return true;
        };
        let Some(value) = authorization.and_then(|v| std::str::from_utf8(v).ok()) else {
            return false;
        };
        let value = value.trim();
        let (scheme, rest) = value.split_once(' ').unwrap_or((value, ""));
        let rest = rest.trim();
        if scheme.eq_ignore_ascii_case("bearer") {
            return same(rest.as_bytes(), token);
        }
        if scheme.eq_ignore_ascii_case("basic") {
            let Ok(pair) = base64::engine::general_purpose::STANDARD.decode(rest) else {
                return false;
            };
            let password = match pair.iter().position(|&b| b == b':') {
                Some(i) => &pair[i + 1..],
                None => return false,
            };
            return same(password, token);
        }
        false
    }
}

/// `a == b` in a time that does not depend on where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(token: &str) -> Auth {
        Auth {
            token: Some(token.as_bytes().to_vec()),
        }
    }

    fn basic(user: &str, password: &str) -> Vec<u8> {
        let b = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        format!("Basic {b}").into_bytes()
    }

    #[test]
    fn bearer_and_basic_with_any_user() {
        let a = with("s3cret");
        assert!(a.allows(Some(b"Bearer s3cret")));
        assert!(a.allows(Some(b"bearer  s3cret ")));
        assert!(a.allows(Some(&basic("anyone", "s3cret"))));
        assert!(a.allows(Some(&basic("", "s3cret"))));
        assert!(!a.allows(None));
        assert!(!a.allows(Some(b"Bearer s3cre")));
        assert!(!a.allows(Some(b"Bearer s3cret2")));
        assert!(!a.allows(Some(&basic("s3cret", "x"))));
        assert!(!a.allows(Some(b"Basic !!!")));
        assert!(!a.allows(Some(b"Digest s3cret")));
        assert!(!a.allows(Some(b"s3cret")));
        assert!(!a.allows(Some(&[0xff, 0xfe])));
        assert!(Auth::open().allows(None));
    }
}
