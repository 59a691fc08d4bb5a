//! The command line's value parsers: sizes with units, the cache size, `--refresh`
//! durations, `--timeout` seconds, and `-o` lists split into the store's options and
//! FUSE's.

use std::time::Duration;

/// `--refresh`: a duration (`1s`, `500ms`, `10m`, a number of seconds) or `off`; `auto`
/// for [`crate::daemon::mount::default_refresh`].
pub fn parse_refresh(s: &str) -> Result<Option<Option<Duration>>, String> {
    match s.trim() {
        "auto" => Ok(None),
        "off" | "no" | "never" => Ok(Some(None)),
        t => {
            let d = match t.parse::<f64>() {
                Ok(secs) if secs.is_finite() && secs >= 0.0 => Duration::from_secs_f64(secs),
                Ok(_) => return Err(format!("{t:?}: not a duration")),
                Err(_) => humantime::parse_duration(t).map_err(|e| format!("{t:?}: {e}"))?,
            };
            if d.is_zero() || d > Duration::from_secs(365 * 24 * 3600) {
                return Err(format!("{t:?}: more than 0 and at most a year, or off"));
            }
            Ok(Some(Some(d)))
        }
    }
}

/// `-o key=value` options that are the kernel's or libfuse's, not the store's.
const FUSE_KEYS: &[&str] = &[
    "fsname",
    "subtype",
    "max_read",
    "blksize",
    "uid",
    "gid",
    "umask",
    "context",
    "fscontext",
    "defcontext",
    "rootcontext",
];

/// Split `-o` options into the store's (`key=value` that FUSE does not know) and FUSE's.
pub fn split_options(options: &[String]) -> (Vec<&str>, Vec<String>) {
    let mut store = Vec::new();
    let mut fuse = Vec::new();
    for o in options
        .iter()
        .flat_map(|o| o.split(','))
        .filter(|o| !o.is_empty())
    {
        match o.split_once('=') {
            Some((key, _)) if !FUSE_KEYS.contains(&key) => store.push(o),
            _ => fuse.push(o.to_string()),
        }
    }
    (store, fuse)
}

/// Parse `512MiB`, `2G`, `1.5GiB`, `4096` into bytes (K/M/G/T are powers of 1024).
pub fn parse_size(s: &str) -> Result<usize, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let value: f64 = num.parse().map_err(|_| format!("bad size {s:?}"))?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        other => return Err(format!("bad size unit {other:?}")),
    };
    Ok((value * (1u64 << shift) as f64) as usize)
}

/// `--cache-size`: bytes with a unit, or `auto` (see [`crate::daemon::memory::default_cache`]).
pub fn parse_cache_size(s: &str) -> Result<usize, String> {
    if s.trim() == "auto" {
        return Ok(crate::daemon::memory::default_cache(
            crate::daemon::memory::physical(),
        ));
    }
    parse_size(s)
}

/// `--timeout`: seconds, more than 0 and at most a day.
pub fn parse_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 86_400.0 => Ok(v),
        _ => Err(format!("{s:?}: seconds, more than 0 and at most a day")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_with_units() {
        assert_eq!(parse_size("512MiB"), Ok(512 << 20));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("1.5k"), Ok(1536));
        assert!(parse_size("12 parsecs").is_err());
        assert!(parse_size("MiB").is_err());
    }

    #[test]
    fn the_cache_size_is_a_size_or_auto() {
        let auto = crate::daemon::memory::default_cache(crate::daemon::memory::physical());
        assert_eq!(parse_cache_size("auto"), Ok(auto));
        assert!((256 << 20..=4 << 30).contains(&auto));
        assert_eq!(parse_cache_size("64MiB"), Ok(64 << 20));
        assert!(parse_cache_size("lots").is_err());
    }
}
