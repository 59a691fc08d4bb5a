//! Stream compressors from real libraries: gzip, zlib (flate2; a zlib chunk of known
//! size is decompressed whole by libdeflate), zstd, bz2 (bzip2), lzma / xz (xz2) and
//! numcodecs' size-prefixed LZ4 block format (lz4).

use std::io::{Read, Write};

use serde_json::Value;

use super::{check_len, BytesToBytes};
use crate::error::{corrupt, Error, Result};
use crate::metadata::CodecSpec;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Gzip,
    Zlib,
    Zstd,
    Bz2,
    Lzma,
    Lz4,
}

pub struct Compressor {
    kind: Kind,
    level: i32,
}

pub fn build(name: &str, spec: &CodecSpec) -> Result<Box<dyn BytesToBytes>> {
    let kind = match name {
        "gzip" => Kind::Gzip,
        "zlib" => Kind::Zlib,
        "zstd" => Kind::Zstd,
        "bz2" => Kind::Bz2,
        "lzma" => Kind::Lzma,
        _ => Kind::Lz4,
    };
    if kind == Kind::Lzma {
        // numcodecs: format 1 = xz, 2 = lzma-alone, 3 = raw (needs explicit filters).
        match spec.config.get("format").and_then(Value::as_i64) {
            None | Some(0) | Some(1) | Some(2) => {}
            Some(f) => return Err(Error::unsupported("", format!("lzma format {f}"))),
        }
    }
    let level = ["level", "clevel", "preset", "acceleration"]
        .iter()
        .find_map(|k| spec.config.get(*k).and_then(Value::as_i64))
        .unwrap_or(match kind {
            Kind::Bz2 | Kind::Lzma => 6,
            Kind::Lz4 => 1,
            _ => 3,
        }) as i32;
    Ok(Box::new(Compressor { kind, level }))
}

/// Read at most `limit` bytes; more is an error naming `what`. `hint` is the input size.
fn read_limited(reader: impl Read, limit: usize, hint: usize, what: &str) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    out.try_reserve(limit.min(hint.saturating_mul(8)).min(64 << 20))
        .map_err(|_| corrupt(format!("{what}: out of memory")))?;
    reader
        .take(limit as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| corrupt(format!("{what}: {e}")))?;
    check_len(out.len(), limit, what)?;
    Ok(out)
}

fn write_all<W: Write>(mut w: W, bytes: &[u8]) -> std::io::Result<W> {
    w.write_all(bytes)?;
    Ok(w)
}

thread_local! {
    /// One zstd decompression context per thread, reused across chunks.
    static ZSTD_DCTX: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { std::cell::RefCell::new(None) };
}

/// The largest output decompressed whole by libdeflate: a chunk's decoded size, at most.
const WHOLE_ZLIB: usize = 64 << 20;

thread_local! {
    /// One libdeflate decompressor per thread, reused across chunks.
    static DEFLATE: std::cell::RefCell<libdeflater::Decompressor> =
        std::cell::RefCell::new(libdeflater::Decompressor::new());
}

/// A zlib stream decompressed in one call by libdeflate into a buffer of `limit` bytes,
/// or `None` when it does not fit or is not a valid stream.
fn zlib_whole(src: &[u8], limit: usize) -> Option<Vec<u8>> {
    if limit > WHOLE_ZLIB {
        return None;
    }
    let mut out = vec![0u8; limit];
    let n = DEFLATE
        .with_borrow_mut(|d| d.zlib_decompress(src, &mut out))
        .ok()?;
    out.truncate(n);
    Some(out)
}

/// Decompress a whole zstd frame of known size with this thread's context.
fn zstd_decompress(src: &[u8], size: usize) -> std::io::Result<Vec<u8>> {
    ZSTD_DCTX.with(|cell| {
        let mut slot = cell.borrow_mut();
        let dctx = match slot.as_mut() {
            Some(dctx) => dctx,
            None => slot.insert(zstd::bulk::Decompressor::new()?),
        };
        // The size comes from the frame header: reserved fallibly, so that a header that
        // claims more than memory holds fails here (and the caller streams instead).
        let mut out = Vec::new();
        out.try_reserve_exact(size)
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::OutOfMemory))?;
        dctx.decompress_to_buffer(src, &mut out)?;
        Ok(out)
    })
}

impl BytesToBytes for Compressor {
    fn decode(&self, bytes: Vec<u8>, limit: usize) -> Result<Vec<u8>> {
        let src = bytes.as_slice();
        let n = src.len();
        match self.kind {
            Kind::Gzip => read_limited(flate2::read::MultiGzDecoder::new(src), limit, n, "gzip"),
            Kind::Zlib => match zlib_whole(src, limit) {
                Some(out) => Ok(out),
                // Past the whole-buffer size, or a stream libdeflate refuses: the
                // streaming decoder reads it (and names what is wrong with it).
                None => read_limited(flate2::read::ZlibDecoder::new(src), limit, n, "zlib"),
            },
            Kind::Zstd => {
                // One allocation of the size the frame header declares, when it fits.
                if let Ok(Some(size)) = zstd::zstd_safe::get_frame_content_size(src) {
                    if size as usize <= limit {
                        if let Ok(out) = zstd_decompress(src, size as usize) {
                            return Ok(out);
                        }
                    }
                }
                let decoder = zstd::stream::read::Decoder::with_buffer(src)
                    .map_err(|e| corrupt(format!("zstd: {e}")))?;
                read_limited(decoder, limit, n, "zstd")
            }
            Kind::Bz2 => read_limited(bzip2::read::MultiBzDecoder::new(src), limit, n, "bz2"),
            Kind::Lzma => {
                let stream =
                    xz2::stream::Stream::new_auto_decoder(u64::MAX, xz2::stream::CONCATENATED)
                        .map_err(|e| corrupt(format!("lzma: {e}")))?;
                read_limited(
                    xz2::read::XzDecoder::new_stream(src, stream),
                    limit,
                    n,
                    "lzma",
                )
            }
            Kind::Lz4 => {
                let header: [u8; 4] = src
                    .get(..4)
                    .and_then(|h| h.try_into().ok())
                    .ok_or_else(|| corrupt("lz4: missing size header"))?;
                let size = i32::from_le_bytes(header);
                if size < 0 {
                    return Err(corrupt("lz4: negative size"));
                }
                check_len(size as usize, limit, "lz4")?;
                // An LZ4 block expands at most 255-fold: a larger claim is a lie, refused
                // before the output is allocated (fallibly, as it may still be large).
                let body = &src[4..];
                if size as usize > body.len().saturating_mul(255) {
                    return Err(corrupt(format!(
                        "lz4: {size} bytes claimed from {} compressed",
                        body.len()
                    )));
                }
                let mut out = Vec::new();
                out.try_reserve_exact(size as usize)
                    .map_err(|_| corrupt(format!("lz4: out of memory for {size} bytes")))?;
                out.resize(size as usize, 0);
                let n = lz4::block::decompress_to_buffer(body, Some(size), &mut out)
                    .map_err(|e| corrupt(format!("lz4: {e}")))?;
                out.truncate(n);
                Ok(out)
            }
        }
    }

    fn encode(&self, bytes: Vec<u8>) -> Result<Vec<u8>> {
        let level = self.level;
        let io = |e: std::io::Error| Error::Internal(format!("compress: {e}"));
        Ok(match self.kind {
            Kind::Gzip => {
                let c = flate2::Compression::new(level.clamp(0, 9) as u32);
                write_all(flate2::write::GzEncoder::new(Vec::new(), c), &bytes)
                    .and_then(|w| w.finish())
                    .map_err(io)?
            }
            Kind::Zlib => {
                let c = flate2::Compression::new(level.clamp(0, 9) as u32);
                write_all(flate2::write::ZlibEncoder::new(Vec::new(), c), &bytes)
                    .and_then(|w| w.finish())
                    .map_err(io)?
            }
            Kind::Zstd => zstd::bulk::compress(&bytes, level).map_err(io)?,
            Kind::Bz2 => {
                let c = bzip2::Compression::new(level.clamp(1, 9) as u32);
                write_all(bzip2::write::BzEncoder::new(Vec::new(), c), &bytes)
                    .and_then(|w| w.finish())
                    .map_err(io)?
            }
            Kind::Lzma => write_all(
                xz2::write::XzEncoder::new(Vec::new(), level.clamp(0, 9) as u32),
                &bytes,
            )
            .and_then(|w| w.finish())
            .map_err(io)?,
            Kind::Lz4 => lz4::block::compress(&bytes, None, true).map_err(io)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_compressor_round_trips_and_checks_its_limit() {
        let data: Vec<u8> = (0..5000u32).flat_map(|i| (i % 251).to_le_bytes()).collect();
        for name in ["gzip", "zlib", "zstd", "bz2", "lzma", "lz4"] {
            let c = build(name, &CodecSpec::new(name, json!({}))).unwrap();
            let enc = c.encode(data.clone()).unwrap();
            assert_eq!(c.decode(enc.clone(), data.len()).unwrap(), data, "{name}");
            assert!(
                c.decode(enc.clone(), data.len() - 1).is_err(),
                "{name} limit"
            );
            let mut bad = enc.clone();
            bad.truncate(enc.len() / 2);
            assert!(c.decode(bad, data.len()).is_err(), "{name} truncated");
        }
    }

    /// A zlib chunk decodes the same whole (libdeflate, into a buffer of the limit) and
    /// streamed (past the whole-buffer size), also when it is shorter than the limit.
    #[test]
    fn zlib_whole_and_streamed_agree() {
        let data: Vec<u8> = (0..300_000u32).map(|i| (i / 7 % 253) as u8).collect();
        let c = build("zlib", &CodecSpec::new("zlib", json!({"level": 1}))).unwrap();
        let enc = c.encode(data.clone()).unwrap();
        assert_eq!(zlib_whole(&enc, data.len()).unwrap(), data);
        assert_eq!(zlib_whole(&enc, data.len() + 100).unwrap(), data);
        assert!(zlib_whole(&enc, data.len() - 1).is_none());
        assert!(zlib_whole(&enc, WHOLE_ZLIB + 1).is_none());
        assert_eq!(c.decode(enc.clone(), data.len() + 100).unwrap(), data);
        assert_eq!(c.decode(enc, WHOLE_ZLIB + 1).unwrap(), data);
    }
}
