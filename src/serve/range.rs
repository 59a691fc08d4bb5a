//! `Range: bytes=...` of a GET: one range is served (`206`); a range that starts past
//! the end is refused (`416`); a header with several ranges, or one that is not a byte
//! range, is ignored and the whole file served (RFC 9110 lets a server ignore `Range`),
//! so no request makes the server answer more than once per byte.

/// What a `Range` header asks of a file of `size` bytes.
#[derive(Debug, PartialEq, Eq)]
pub enum Asked {
    /// The whole file (no range, or one the server ignores).
    Whole,
    /// Bytes `start..end` (end exclusive, not empty).
    Part { start: u64, end: u64 },
    /// Nothing of the file can be served (`416`).
    Unsatisfiable,
}

/// Parse `header` (the value of `Range`) against a file of `size` bytes.
pub fn parse(header: &str, size: u64) -> Asked {
    let Some(spec) = header.trim().strip_prefix("bytes=") else {
        return Asked::Whole;
    };
    if spec.contains(',') {
        return Asked::Whole;
    }
    let Some((first, last)) = spec.trim().split_once('-') else {
        return Asked::Whole;
    };
    let number = |s: &str| -> Option<u64> {
        let s = s.trim();
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse().ok())
            .flatten()
    };
    match (first.trim().is_empty(), last.trim().is_empty()) {
        // `bytes=-N`: the last N bytes.
        (true, false) => match number(last) {
            Some(0) => Asked::Unsatisfiable,
            Some(_) if size == 0 => Asked::Unsatisfiable,
            Some(n) => Asked::Part {
                start: size - n.min(size),
                end: size,
            },
            // Digits too many for a u64: more than the file holds.
            None if last.trim().bytes().all(|b| b.is_ascii_digit()) => Asked::Part {
                start: 0,
                end: size,
            },
            None => Asked::Whole,
        },
        // `bytes=A-` and `bytes=A-B`.
        (false, open_end) => {
            let Some(start) = number(first) else {
                return if first.trim().bytes().all(|b| b.is_ascii_digit()) {
                    Asked::Unsatisfiable
                } else {
                    Asked::Whole
                };
            };
            let end = if open_end {
                size
            } else {
                match number(last) {
                    Some(b) if b < start => return Asked::Whole,
                    Some(b) => b.saturating_add(1).min(size),
                    None if last.trim().bytes().all(|b| b.is_ascii_digit()) => size,
                    None => return Asked::Whole,
                }
            };
            if start >= size {
                Asked::Unsatisfiable
            } else {
                Asked::Part { start, end }
            }
        }
        (true, true) => Asked::Whole,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(start: u64, end: u64) -> Asked {
        Asked::Part { start, end }
    }

    #[test]
    fn single_ranges() {
        assert_eq!(parse("bytes=0-99", 1000), part(0, 100));
        assert_eq!(parse("bytes=990-2000", 1000), part(990, 1000));
        assert_eq!(parse("bytes=500-", 1000), part(500, 1000));
        assert_eq!(parse("bytes=-10", 1000), part(990, 1000));
        assert_eq!(parse("bytes=-5000", 1000), part(0, 1000));
        assert_eq!(parse("bytes= 1 - 1 ", 1000), part(1, 2));
    }

    #[test]
    fn past_the_end_negative_and_huge() {
        assert_eq!(parse("bytes=1000-", 1000), Asked::Unsatisfiable);
        assert_eq!(parse("bytes=5000-6000", 1000), Asked::Unsatisfiable);
        assert_eq!(parse("bytes=-0", 1000), Asked::Unsatisfiable);
        assert_eq!(parse("bytes=0-", 0), Asked::Unsatisfiable);
        assert_eq!(parse("bytes=-5", 0), Asked::Unsatisfiable);
        assert_eq!(
            parse("bytes=99999999999999999999999-", 1000),
            Asked::Unsatisfiable
        );
        assert_eq!(
            parse("bytes=0-99999999999999999999999", 1000),
            part(0, 1000)
        );
        assert_eq!(parse("bytes=-99999999999999999999999", 1000), part(0, 1000));
        assert_eq!(parse(&format!("bytes=0-{}", u64::MAX), 10), part(0, 10));
        // Not byte ranges, backwards or malformed: ignored.
        assert_eq!(parse("bytes=-1-2", 1000), Asked::Whole);
        assert_eq!(parse("bytes=5-3", 1000), Asked::Whole);
        assert_eq!(parse("bytes=a-b", 1000), Asked::Whole);
        assert_eq!(parse("items=0-1", 1000), Asked::Whole);
        assert_eq!(parse("bytes=-", 1000), Asked::Whole);
        assert_eq!(parse("bytes=+1-2", 1000), Asked::Whole);
    }

    #[test]
    fn many_ranges_are_ignored() {
        let many = (0..10_000)
            .map(|i| format!("{i}-{i}"))
            .collect::<Vec<_>>()
            .join(",");
        assert_eq!(parse(&format!("bytes={many}"), 1000), Asked::Whole);
        assert_eq!(parse("bytes=0-1,5-6", 1000), Asked::Whole);
    }
}
