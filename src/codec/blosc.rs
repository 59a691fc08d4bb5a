//! The blosc codec (v3 `blosc`, numcodecs `blosc`) through c-blosc: every cname and
//! shuffle mode; the header gives the decoded size, checked before decompressing.

use serde_json::Value;

use super::{check_len, BytesToBytes, ChunkRepr};
use crate::error::{corrupt, Error, Result};
use crate::metadata::CodecSpec;

// c-blosc's decompressor into a caller's buffer; the library is linked through the blosc
// crate (blosc-sys), which does not re-export it.
extern "C" {
    fn blosc_decompress_ctx(
        src: *const libc::c_void,
        dest: *mut libc::c_void,
        destsize: libc::size_t,
        numinternalthreads: libc::c_int,
    ) -> libc::c_int;
}

pub struct Blosc {
    cname: blosc::Compressor,
    clevel: blosc::Clevel,
    shuffle: blosc::ShuffleMode,
    typesize: usize,
}

impl Blosc {
    pub fn build(spec: &CodecSpec, repr: &ChunkRepr) -> Result<Blosc> {
        let c = &spec.config;
        let cname = match c.get("cname").and_then(Value::as_str).unwrap_or("lz4") {
            "blosclz" => blosc::Compressor::BloscLZ,
            "lz4" => blosc::Compressor::LZ4,
            "lz4hc" => blosc::Compressor::LZ4HC,
            "snappy" => blosc::Compressor::Snappy,
            "zlib" => blosc::Compressor::Zlib,
            "zstd" => blosc::Compressor::Zstd,
            other => return Err(Error::unsupported("", format!("blosc cname {other:?}"))),
        };
        let clevel = match c.get("clevel").and_then(Value::as_u64).unwrap_or(5) {
            0 => blosc::Clevel::None,
            1 => blosc::Clevel::L1,
            2 => blosc::Clevel::L2,
            3 => blosc::Clevel::L3,
            4 => blosc::Clevel::L4,
            5 => blosc::Clevel::L5,
            6 => blosc::Clevel::L6,
            7 => blosc::Clevel::L7,
            8 => blosc::Clevel::L8,
            _ => blosc::Clevel::L9,
        };
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
/// write it; strings in any case. Absent or null: byte shuffle, numcodecs' default.
/// Decoding reads the mode from each chunk's header; this one is for encoding.
fn shuffle_mode(value: Option<&Value>, typesize: usize) -> Result<blosc::ShuffleMode> {
    use blosc::ShuffleMode::{Bit, Byte, None as NoShuffle};
    let mode = match value {
        None | Some(Value::Null) => Some(Byte),
        Some(Value::Number(n)) => match n.as_i64() {
            Some(0) => Some(NoShuffle),
            Some(1) => Some(Byte),
            Some(2) => Some(Bit),
            Some(-1) if typesize == 1 => Some(Bit),
            Some(-1) => Some(Byte),
            _ => None,
        },
        Some(Value::String(s)) => match s.to_ascii_lowercase().as_str() {
            "noshuffle" | "none" => Some(NoShuffle),
            "shuffle" | "byte" => Some(Byte),
            "bitshuffle" | "bit" => Some(Bit),
            _ => None,
        },
        Some(_) => None,
    };
    mode.ok_or_else(|| {
        let shown = value.map(Value::to_string).unwrap_or_default();
        Error::unsupported("", format!("blosc shuffle {shown}"))
    })
}

impl BytesToBytes for Blosc {
    fn decode(&self, bytes: Vec<u8>, limit: usize) -> Result<Vec<u8>> {
        // validate() checks the header against the buffer length and gives the decoded size.
        let size = blosc::validate(&bytes).map_err(|_| corrupt("blosc: invalid header"))?;
        check_len(size, limit, "blosc")?;
        if size == 0 {
            return Ok(Vec::new());
        }
        // The size comes from the header: reserved fallibly (blosc::decompress_bytes
        // would allocate it infallibly, before finding out that the header lies).
        let mut out: Vec<u8> = Vec::new();
        out.try_reserve_exact(size)
            .map_err(|_| corrupt(format!("blosc: out of memory for {size} bytes")))?;
        // SAFETY: `out` has room for `size` bytes and blosc writes at most `destsize`;
        // the header was validated against the buffer length above.
        let n = unsafe {
            blosc_decompress_ctx(bytes.as_ptr().cast(), out.as_mut_ptr().cast(), size, 1)
        };
        if n < 0 || n as usize != size {
            return Err(corrupt("blosc: decompression failed"));
        }
        // SAFETY: blosc wrote exactly `size` bytes.
        unsafe { out.set_len(size) };
        Ok(out)
    }

    fn encode(&self, bytes: Vec<u8>) -> Result<Vec<u8>> {
        let ctx = blosc::Context::new()
            .compressor(self.cname)
            .map_err(|_| Error::unsupported("", "blosc compressor not built in"))?
            .clevel(self.clevel)
            .shuffle(self.shuffle)
            .typesize(Some(self.typesize));
        Ok(ctx.compress(&bytes).into())
    }

    fn max_encoded_len(&self, decoded: usize) -> usize {
        decoded.saturating_add(16 + decoded / 16)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::{DataType, FillValue};
    use serde_json::json;

    #[test]
    fn every_cname_and_shuffle_round_trips() {
        let repr = ChunkRepr {
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
    fn shuffle_is_read_from_numbers_and_strings_in_any_case() {
        use blosc::ShuffleMode::{Bit, Byte, None as NoShuffle};
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
            json!(true),
            json!([1]),
        ] {
            assert!(mode(bad.clone(), 4).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn gdal_string_shuffle_builds_and_round_trips() {
        let repr = ChunkRepr {
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
