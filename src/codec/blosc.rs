//! The blosc codec (v3 `blosc`, numcodecs `blosc`) through c-blosc, built from source by
//! `blosc-src` and called through its C API: every cname built in (blosclz, lz4, lz4hc,
//! zlib, zstd) and every shuffle mode; the header gives the decoded size, checked before
//! decompressing. That c-blosc has no snappy: a buffer whose header names it is re-framed
//! by `snappy` (streams decompressed in Rust, stored raw) and then decompressed by
//! c-blosc like any other, which undoes the shuffle. Snappy is read only, never written.

mod snappy;

use std::ffi::CStr;

use serde_json::Value;

use super::{check_len, BytesToBytes, UnitRepr};
use crate::error::{corrupt, Error, Result};
use crate::metadata::CodecSpec;

/// The shuffle filter applied before compressing; decoding reads it from each header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shuffle {
    None,
    Byte,
    Bit,
}

impl Shuffle {
    fn code(self) -> libc::c_int {
        let code = match self {
            Shuffle::None => blosc_src::BLOSC_NOSHUFFLE,
            Shuffle::Byte => blosc_src::BLOSC_SHUFFLE,
            Shuffle::Bit => blosc_src::BLOSC_BITSHUFFLE,
        };
        code as libc::c_int
    }
}

pub struct Blosc {
    /// c-blosc's name of the compressor, NUL-terminated.
    cname: &'static CStr,
    clevel: libc::c_int,
    shuffle: Shuffle,
    typesize: usize,
}

/// The compressors of this build of c-blosc, by the names metadata uses, and snappy,
/// which only decodes (through `snappy`).
fn compressor(name: &str) -> Option<&'static CStr> {
    let bytes: &'static [u8] = match name {
        "blosclz" => blosc_src::BLOSC_BLOSCLZ_COMPNAME,
        "lz4" => blosc_src::BLOSC_LZ4_COMPNAME,
        "lz4hc" => blosc_src::BLOSC_LZ4HC_COMPNAME,
        "zlib" => blosc_src::BLOSC_ZLIB_COMPNAME,
        "zstd" => blosc_src::BLOSC_ZSTD_COMPNAME,
        "snappy" => blosc_src::BLOSC_SNAPPY_COMPNAME,
        _ => return None,
    };
    CStr::from_bytes_with_nul(bytes).ok()
}

impl Blosc {
    pub fn build(spec: &CodecSpec, repr: &UnitRepr) -> Result<Blosc> {
        let c = &spec.config;
        let name = c.get("cname").and_then(Value::as_str).unwrap_or("lz4");
        let cname = compressor(name)
            .ok_or_else(|| Error::unsupported("", format!("blosc cname {name:?}")))?;
        let clevel = c.get("clevel").and_then(Value::as_u64).unwrap_or(5).min(9) as libc::c_int;
        let typesize = c
            .get("typesize")
            .and_then(Value::as_u64)
            .map(|t| t as usize)
            .or(repr.dtype.size())
            .unwrap_or(1)
            .max(1);
        let shuffle = shuffle_mode(c.get("shuffle"), typesize)?;
        Ok(Blosc {
            cname,
            clevel,
            shuffle,
            typesize,
        })
    }
}

/// The shuffle mode as numcodecs (`0`, `1`, `2`, `-1` for automatic), the v3 spec
/// (`"noshuffle"`, `"shuffle"`, `"bitshuffle"`) or GDAL (`"NONE"`, `"BYTE"`, `"BIT"`)
/// write it (strings in any case), or numcodecs' code as a string (`"2"`, as GDAL
/// writes it). Absent or null: byte shuffle, numcodecs' default.
/// Decoding reads the mode from each chunk's header; this one is for encoding.
fn shuffle_mode(value: Option<&Value>, typesize: usize) -> Result<Shuffle> {
    use Shuffle::{Bit, Byte, None as NoShuffle};
    let code = |n: Option<i64>| match n {
        Some(0) => Some(NoShuffle),
        Some(1) => Some(Byte),
        Some(2) => Some(Bit),
        Some(-1) if typesize == 1 => Some(Bit),
        Some(-1) => Some(Byte),
        _ => None,
    };
    let mode = match value {
        None | Some(Value::Null) => Some(Byte),
        Some(Value::Number(n)) => code(n.as_i64()),
        Some(Value::String(s)) => match s.to_ascii_lowercase().as_str() {
            "noshuffle" | "none" => Some(NoShuffle),
            "shuffle" | "byte" => Some(Byte),
            "bitshuffle" | "bit" => Some(Bit),
            // GDAL writes numcodecs' code as a string ("2").
            number => code(number.parse().ok()),
        },
        Some(_) => None,
    };
    mode.ok_or_else(|| {
        let shown = value.map(Value::to_string).unwrap_or_default();
        Error::unsupported("", format!("blosc shuffle {shown}"))
    })
}

/// The decoded size a blosc buffer declares, once its header has been checked against
/// the buffer's length.
fn validated_size(bytes: &[u8]) -> Option<usize> {
    let mut size = 0usize;
    // SAFETY: c-blosc reads at most `bytes.len()` bytes of the buffer and writes `size`.
    let rc =
        unsafe { blosc_src::blosc_cbuffer_validate(bytes.as_ptr().cast(), bytes.len(), &mut size) };
    (rc == 0).then_some(size)
}

impl BytesToBytes for Blosc {
    fn decode(&self, bytes: Vec<u8>, limit: usize) -> Result<Vec<u8>> {
        let size = validated_size(&bytes).ok_or_else(|| corrupt("blosc: invalid header"))?;
        check_len(size, limit, "blosc")?;
        if size == 0 {
            return Ok(Vec::new());
        }
        // Snappy streams are decompressed in Rust into a frame this c-blosc reads.
        let bytes = if snappy::is_snappy(&bytes) {
            snappy::reframe(&bytes, size)?
        } else {
            bytes
        };
        // The size comes from the header: reserved fallibly, before finding out whether
        // the header lies.
        let mut out: Vec<u8> = Vec::new();
        out.try_reserve_exact(size)
            .map_err(|_| corrupt(format!("blosc: out of memory for {size} bytes")))?;
        // SAFETY: `out` has room for `size` bytes and blosc writes at most `destsize`;
        // the header was validated against the buffer length above.
        let n = unsafe {
            blosc_src::blosc_decompress_ctx(bytes.as_ptr().cast(), out.as_mut_ptr().cast(), size, 1)
        };
        if n < 0 || n as usize != size {
            return Err(corrupt("blosc: decompression failed"));
        }
        // SAFETY: blosc wrote exactly `size` bytes.
        unsafe { out.set_len(size) };
        Ok(out)
    }

    fn encode(&self, bytes: Vec<u8>) -> Result<Vec<u8>> {
        if self.cname.to_bytes_with_nul() == blosc_src::BLOSC_SNAPPY_COMPNAME {
            return Err(Error::unsupported(
                "",
                "blosc cname \"snappy\" for writing (read only: c-blosc is built without it)",
            ));
        }
        let room = self.max_encoded_len(bytes.len());
        let mut out: Vec<u8> = Vec::with_capacity(room);
        // c-blosc takes a type size up to 255 and treats a larger one as 1; passed as
        // it is, a size from a hostile document could reach its arithmetic unchecked.
        let typesize = match self.typesize {
            t if t > blosc_src::BLOSC_MAX_TYPESIZE as usize => 1,
            t => t,
        };
        // SAFETY: `out` has room for `room` bytes, at least the input plus c-blosc's
        // maximum overhead, and blosc writes at most `destsize`.
        let n = unsafe {
            blosc_src::blosc_compress_ctx(
                self.clevel,
                self.shuffle.code(),
                typesize,
                bytes.len(),
                bytes.as_ptr().cast(),
                out.as_mut_ptr().cast(),
                room,
                self.cname.as_ptr(),
                0,
                1,
            )
        };
        if n <= 0 {
            return Err(Error::Internal(format!(
                "blosc: compression with {:?} failed ({n})",
                self.cname
            )));
        }
        // SAFETY: blosc wrote `n` bytes, at most `room`.
        unsafe { out.set_len(n as usize) };
        Ok(out)
    }

    fn max_encoded_len(&self, decoded: usize) -> usize {
        decoded.saturating_add(blosc_src::BLOSC_MAX_OVERHEAD as usize + decoded / 16)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::{DataType, FillValue};
    use serde_json::json;

    #[test]
    fn every_cname_and_shuffle_round_trips() {
        let repr = UnitRepr {
            shape: vec![1000],
            dtype: DataType::Float(4),
            fill: FillValue::Fixed(vec![0; 4]),
        };
        let data: Vec<u8> = (0..1000)
            .flat_map(|i| (i as f32 * 0.5).to_le_bytes())
            .collect();
        for cname in ["blosclz", "lz4", "lz4hc", "zlib", "zstd"] {
            for shuffle in ["noshuffle", "shuffle", "bitshuffle"] {
                let spec = CodecSpec::new(
                    "blosc",
                    json!({"cname": cname, "shuffle": shuffle, "clevel": 5}),
                );
                let b = Blosc::build(&spec, &repr).unwrap();
                let enc = b.encode(data.clone()).unwrap();
                assert_eq!(
                    b.decode(enc.clone(), 4000).unwrap(),
                    data,
                    "{cname} {shuffle}"
                );
                assert!(b.decode(enc.clone(), 3999).is_err());
                assert!(b.decode(enc[..10].to_vec(), 4000).is_err());
            }
        }
    }

    #[test]
    fn a_type_size_past_what_blosc_takes_encodes_as_bytes() {
        let repr = UnitRepr {
            shape: vec![64],
            dtype: DataType::Float(4),
            fill: FillValue::Fixed(vec![0; 4]),
        };
        let data: Vec<u8> = (0..256u32).map(|i| (i * 7) as u8).collect();
        for typesize in [256u64, 1 << 40, u64::MAX] {
            let spec = CodecSpec::new(
                "blosc",
                json!({"cname": "lz4", "shuffle": "shuffle", "typesize": typesize}),
            );
            let b = Blosc::build(&spec, &repr).unwrap();
            let enc = b.encode(data.clone()).unwrap();
            assert_eq!(b.decode(enc, 256).unwrap(), data, "typesize {typesize}");
        }
    }

    #[test]
    fn shuffle_is_read_from_numbers_and_strings_in_any_case() {
        use Shuffle::{Bit, Byte, None as NoShuffle};
        let mode = |v: Value, typesize| shuffle_mode(Some(&v), typesize);
        for (v, want) in [
            (json!(0), NoShuffle),
            (json!(1), Byte),
            (json!(2), Bit),
            (json!(-1), Byte),
            (json!("noshuffle"), NoShuffle),
            (json!("shuffle"), Byte),
            (json!("bitshuffle"), Bit),
            (json!("NoShuffle"), NoShuffle),
            (json!("SHUFFLE"), Byte),
            (json!("BitShuffle"), Bit),
            (json!("NONE"), NoShuffle),
            (json!("BYTE"), Byte),
            (json!("BIT"), Bit),
            (json!("bit"), Bit),
            (json!("0"), NoShuffle),
            (json!("1"), Byte),
            (json!("2"), Bit),
            (json!("-1"), Byte),
            (Value::Null, Byte),
        ] {
            assert_eq!(mode(v.clone(), 4).unwrap(), want, "{v}");
        }
        assert_eq!(mode(json!(-1), 1).unwrap(), Bit);
        assert_eq!(shuffle_mode(None, 4).unwrap(), Byte);
        for bad in [
            json!(3),
            json!(-2),
            json!(1.5),
            json!("bytes"),
            json!(""),
            json!(" shuffle"),
            json!("3"),
            json!("2.0"),
            json!(true),
            json!([1]),
        ] {
            assert!(mode(bad.clone(), 4).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn gdal_string_shuffle_builds_and_round_trips() {
        let repr = UnitRepr {
            shape: vec![64],
            dtype: DataType::Float(4),
            fill: FillValue::Fixed(vec![0; 4]),
        };
        let data: Vec<u8> = (0..64).flat_map(|i| (i as f32).to_le_bytes()).collect();
        for shuffle in ["NONE", "BYTE", "BIT"] {
            let spec = CodecSpec::new(
                "blosc",
                json!({"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": shuffle, "blocksize": 0}),
            );
            let b = Blosc::build(&spec, &repr).unwrap();
            let enc = b.encode(data.clone()).unwrap();
            assert_eq!(b.decode(enc, 256).unwrap(), data, "{shuffle}");
        }
        let spec = CodecSpec::new("blosc", json!({"shuffle": "SOMETIMES"}));
        assert!(Blosc::build(&spec, &repr).is_err());
    }
}
