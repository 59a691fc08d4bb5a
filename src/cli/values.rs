//! The command line's value parsers: sizes with units, the cache size, `--refresh`
//! durations, `--timeout` seconds, and `-o` lists split into the store's options and
//! FUSE's.

use std::time::Duration;

use crate::write::new_array::{Compressor, NewChunks, NewCodecs};

/// `--refresh`: a duration (`1s`, `500ms`, `10m`, a number of seconds) or `off`; `auto`
/// for [`crate::fs::io::setup::default_refresh`].
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
#[cfg_attr(not(feature = "fuse"), allow(dead_code))]
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
#[cfg_attr(not(feature = "fuse"), allow(dead_code))]
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

/// `--cache-size`: bytes with a unit, or `auto` (see [`crate::process::memory::default_cache`]).
pub fn parse_cache_size(s: &str) -> Result<usize, String> {
    if s.trim() == "auto" {
        return Ok(crate::process::memory::default_cache(
            crate::process::memory::physical(),
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

/// `--new-codecs`: a comma list: one of `none`, `zstd[:LEVEL]`, `gzip[:LEVEL]`,
/// `blosc-lz4`, `blosc-zstd`, and optionally `shard:INNER_BYTES` (`shard:256KiB`).
#[cfg_attr(not(feature = "fuse"), allow(dead_code))]
pub fn parse_new_codecs(s: &str) -> Result<NewCodecs, String> {
    let mut out = NewCodecs {
        compressor: Compressor::Zstd(3),
        shard_inner_bytes: None,
    };
    for part in s.split(',').map(str::trim) {
        let (name, arg) = match part.split_once(':') {
            Some((n, a)) => (n, Some(a)),
            None => (part, None),
        };
        let level = |default: i64, range: std::ops::RangeInclusive<i64>| match arg {
            None => Ok(default),
            Some(a) => a
                .parse::<i64>()
                .ok()
                .filter(|l| range.contains(l))
                .ok_or_else(|| format!("{part}: level out of {range:?}")),
        };
        out.compressor = match name {
            "none" => Compressor::None,
            "zstd" => Compressor::Zstd(level(3, -7..=22)? as i32),
            "gzip" => Compressor::Gzip(level(5, 0..=9)? as u32),
            "blosc-lz4" => Compressor::Blosc("lz4"),
            "blosc-zstd" => Compressor::Blosc("zstd"),
            "shard" => {
                let size = arg.ok_or("shard needs the inner chunk size: shard:SIZE")?;
                let bytes = parse_size(size)? as u64;
                if bytes == 0 {
                    return Err("shard: an inner chunk of 0 bytes".into());
                }
                out.shard_inner_bytes = Some(bytes);
                continue;
            }
            _ => {
                return Err(format!(
                    "{part:?}: not one of none, zstd[:LEVEL], gzip[:LEVEL], blosc-lz4, \
                         blosc-zstd, shard:SIZE"
                ))
            }
        };
    }
    Ok(out)
}

/// `--new-chunks`: a size (`4MiB`: about that many bytes per chunk) or a chunk shape
/// with commas (`1,256,256`; `4096,` for one dimension).
#[cfg_attr(not(feature = "fuse"), allow(dead_code))]
pub fn parse_new_chunks(s: &str) -> Result<NewChunks, String> {
    if s.contains(',') {
        let shape: Option<Vec<u64>> = s
            .trim_end_matches(',')
            .split(',')
            .map(|n| n.trim().parse::<u64>().ok().filter(|n| *n > 0))
            .collect();
        return shape
            .map(NewChunks::Shape)
            .ok_or_else(|| format!("{s:?}: not a chunk shape"));
    }
    match parse_size(s)? as u64 {
        0 => Err("a chunk of 0 bytes".into()),
        bytes => Ok(NewChunks::Bytes(bytes)),
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
        let auto = crate::process::memory::default_cache(crate::process::memory::physical());
        assert_eq!(parse_cache_size("auto"), Ok(auto));
        assert!((256 << 20..=4 << 30).contains(&auto));
        assert_eq!(parse_cache_size("64MiB"), Ok(64 << 20));
        assert!(parse_cache_size("lots").is_err());
    }

    #[test]
    fn codec_and_chunk_options_parse() {
        let c = parse_new_codecs("gzip:9,shard:1MiB").unwrap();
        assert_eq!(c.compressor, Compressor::Gzip(9));
        assert_eq!(c.shard_inner_bytes, Some(1 << 20));
        assert!(parse_new_codecs("zstd:99").is_err());
        assert!(parse_new_codecs("lzw").is_err());
        assert_eq!(
            parse_new_codecs("none").unwrap().compressor,
            Compressor::None
        );
        assert_eq!(
            parse_new_chunks("1,256,256").unwrap(),
            NewChunks::Shape(vec![1, 256, 256])
        );
        assert_eq!(parse_new_chunks("8MiB").unwrap(), NewChunks::Bytes(8 << 20));
        assert_eq!(parse_new_chunks("4096").unwrap(), NewChunks::Bytes(4096));
        assert!(parse_new_chunks("1,0").is_err());
    }
}
