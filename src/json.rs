//! Metadata JSON as real writers write it. Python's json module (zarr-python 2 attributes),
//! netCDF-C (NCZarr metadata) and GDAL write the bare tokens `NaN`, `Infinity` and
//! `-Infinity`, which strict JSON (and serde_json) rejects. A document is parsed strictly
//! first; only when that fails are those tokens, where they stand as values outside
//! strings, turned into the strings `"NaN"`, `"Infinity"` and `"-Infinity"` (the v3
//! spelling of those fill values, which the fill value parser reads) and the text is
//! parsed again. Everything else must still be strict JSON.

use serde_json::Value;

/// The bare tokens, longest first so that `-Infinity` is matched before `Infinity`.
const TOKENS: [&[u8]; 3] = [b"-Infinity", b"Infinity", b"NaN"];

/// Parse `bytes` as JSON, reading bare `NaN` / `Infinity` / `-Infinity` values as strings.
pub fn parse(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    match serde_json::from_slice(bytes) {
        Ok(value) => Ok(value),
        Err(strict) => match quote_non_finite(bytes) {
            Some(text) => serde_json::from_slice(&text),
            None => Err(strict),
        },
    }
}

/// `bytes` with every bare `NaN`, `Infinity` and `-Infinity` value outside strings put in
/// quotes; `None` when there is none. A token counts only where a JSON value can start
/// (after `[`, `,`, `:`, whitespace or at the start) and ends where a value can end.
pub fn quote_non_finite(bytes: &[u8]) -> Option<Vec<u8>> {
    let mut out: Option<Vec<u8>> = None;
    let mut copied = 0;
    let mut i = 0;
    let mut in_string = false;
    while i < bytes.len() {
        let b = bytes[i];
        if in_string {
            match b {
                // An escape covers the next byte (`\"`, `\\`, or the first of `\uXXXX`).
                b'\\' => i += 2,
                b'"' => {
                    in_string = false;
                    i += 1;
                }
                _ => i += 1,
            }
            continue;
        }
        if b == b'"' {
            in_string = true;
            i += 1;
            continue;
        }
        let token = TOKENS.iter().find(|t| bytes[i..].starts_with(t));
        if let Some(token) = token {
            let end = i + token.len();
            let starts =
                i == 0 || matches!(bytes[i - 1], b'[' | b',' | b':') || is_space(bytes[i - 1]);
            let ends = end == bytes.len()
                || matches!(bytes[end], b']' | b'}' | b',')
                || is_space(bytes[end]);
            if starts && ends {
                let o = out.get_or_insert_with(|| Vec::with_capacity(bytes.len() + 16));
                o.extend_from_slice(&bytes[copied..i]);
                o.push(b'"');
                o.extend_from_slice(token);
                o.push(b'"');
                i = end;
                copied = end;
                continue;
            }
        }
        i += 1;
    }
    let mut out = out?;
    out.extend_from_slice(&bytes[copied..]);
    Some(out)
}

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn quoted(s: &str) -> Option<String> {
        quote_non_finite(s.as_bytes()).map(|b| String::from_utf8(b).unwrap())
    }

    #[test]
    fn strict_json_is_parsed_as_is() {
        assert_eq!(
            parse(br#"{"a": [1, -1.5e3]}"#).unwrap(),
            json!({"a": [1, -1.5e3]})
        );
        assert_eq!(quoted(r#"{"a": "NaN", "b": -1}"#), None);
    }

    #[test]
    fn bare_tokens_become_strings() {
        let doc = br#"{"fill_value": NaN, "a": [Infinity,-Infinity, 1], "b":-Infinity}"#;
        assert_eq!(
            parse(doc).unwrap(),
            json!({"fill_value": "NaN", "a": ["Infinity", "-Infinity", 1], "b": "-Infinity"})
        );
        // netCDF-C's layout, and GDAL's with newlines and escaped slashes.
        let nc =
            br#"{"_FillValue": NaN, "valid_max": Infinity, "x": {"types": {"_FillValue": "<f4"}}}"#;
        assert_eq!(parse(nc).unwrap()["valid_max"], json!("Infinity"));
        let gdal = b"{\n  \"inf_list\":[\n    Infinity,\n    -Infinity\n  ],\n  \"p\":\"a\\/b\",\n  \"nan\":NaN\n}";
        assert_eq!(
            parse(gdal).unwrap(),
            json!({"inf_list": ["Infinity", "-Infinity"], "p": "a/b", "nan": "NaN"})
        );
        assert_eq!(parse(b"NaN").unwrap(), json!("NaN"));
        assert_eq!(parse(b" -Infinity\n").unwrap(), json!("-Infinity"));
    }

    #[test]
    fn tokens_inside_strings_are_untouched() {
        let doc = r#"{"s": "NaN, Infinity", "e": "q\"NaN\\", "k\\": NaN, "u": "\u0022 NaN"}"#;
        assert_eq!(
            quoted(doc).as_deref(),
            Some(r#"{"s": "NaN, Infinity", "e": "q\"NaN\\", "k\\": "NaN", "u": "\u0022 NaN"}"#)
        );
        assert_eq!(parse(doc.as_bytes()).unwrap()["e"], json!("q\"NaN\\"));
        // A key spelled NaN stays a key.
        assert_eq!(parse(br#"{"NaN": NaN}"#).unwrap(), json!({"NaN": "NaN"}));
    }

    #[test]
    fn only_whole_tokens_count() {
        for bad in [
            "[NaNa]",
            "[xNaN]",
            "[-NaN]",
            "[+Infinity]",
            "[Infinityy]",
            "[1NaN]",
            "[nan]",
            "[inf]",
            "[-Infinit]",
            "{\"a\": NaN",
            "[NaN,]",
        ] {
            assert!(parse(bad.as_bytes()).is_err(), "{bad} parsed");
        }
        assert_eq!(
            quoted("[-1, -Infinity]").as_deref(),
            Some(r#"[-1, "-Infinity"]"#)
        );
        assert_eq!(quoted("[NaNa, NaN]").as_deref(), Some(r#"[NaNa, "NaN"]"#));
    }

    #[test]
    fn a_truncated_string_or_escape_does_not_panic() {
        for text in ["\"abc\\", "[\"NaN", "\\", "[NaN, \"\\"] {
            assert!(parse(text.as_bytes()).is_err());
        }
    }
}
