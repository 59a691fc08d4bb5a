//! Checksum codecs: v3 `crc32c` (4-byte little-endian suffix) and numcodecs' `crc32`,
//! `adler32` and `crc32c` (4-byte little-endian checksum at `location`, start by default
//! for crc32 / adler32) and `fletcher32` (HDF5's Fletcher-32, 4-byte little-endian suffix).

use serde_json::Value;

use super::BytesToBytes;
use crate::error::{corrupt, Error, Result};
use crate::metadata::CodecSpec;

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Crc32c,
    Crc32,
    Adler32,
    Fletcher32,
}

pub struct Checksum {
    kind: Kind,
    prefix: bool,
}

pub fn build(name: &str, spec: &CodecSpec) -> Result<Box<dyn BytesToBytes>> {
    let kind = match name {
        "crc32c" => Kind::Crc32c,
        "crc32" => Kind::Crc32,
        "fletcher32" => Kind::Fletcher32,
        _ => Kind::Adler32,
    };
    let prefix = match spec.config.get("location").and_then(Value::as_str) {
        Some("start") => true,
        Some("end") => false,
        None => matches!(kind, Kind::Crc32 | Kind::Adler32),
        Some(other) => {
            return Err(Error::metadata(
                "",
                format!("bad checksum location {other:?}"),
            ))
        }
    };
    Ok(Box::new(Checksum { kind, prefix }))
}

impl Checksum {
    fn sum(&self, data: &[u8]) -> u32 {
        match self.kind {
            Kind::Crc32c => crc32c::crc32c(data),
            Kind::Crc32 => {
                let mut h = flate2::Crc::new();
                h.update(data);
                h.sum()
            }
            Kind::Adler32 => adler32(data),
            Kind::Fletcher32 => fletcher32(data),
        }
    }
}

/// HDF5's Fletcher-32 over big-endian 16-bit words (an odd last byte is the high half).
fn fletcher32(data: &[u8]) -> u32 {
    let fold = |s: u32| (s & 0xffff) + (s >> 16);
    let (mut sum1, mut sum2) = (0u32, 0u32);
    let words = &data[..data.len() / 2 * 2];
    for block in words.chunks(720) {
        for word in block.chunks_exact(2) {
            sum1 += ((word[0] as u32) << 8) | word[1] as u32;
            sum2 += sum1;
        }
        sum1 = fold(sum1);
        sum2 = fold(sum2);
    }
    if data.len() % 2 == 1 {
        sum1 += (data[data.len() - 1] as u32) << 8;
        sum2 += sum1;
        sum1 = fold(sum1);
        sum2 = fold(sum2);
    }
    sum1 = fold(sum1);
    sum2 = fold(sum2);
    (sum2 << 16) | sum1
}

fn adler32(data: &[u8]) -> u32 {
    let (mut a, mut b) = (1u32, 0u32);
    for chunk in data.chunks(5552) {
        for &x in chunk {
            a += x as u32;
            b += a;
        }
        a %= 65521;
        b %= 65521;
    }
    (b << 16) | a
}

impl BytesToBytes for Checksum {
    fn decode(&self, mut bytes: Vec<u8>, _limit: usize) -> Result<Vec<u8>> {
        if bytes.len() < 4 {
            return Err(corrupt("too short for its checksum"));
        }
        let (stored, payload) = if self.prefix {
            let stored = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
            bytes.drain(..4);
            (stored, bytes)
        } else {
            let n = bytes.len() - 4;
            let stored = u32::from_le_bytes([bytes[n], bytes[n + 1], bytes[n + 2], bytes[n + 3]]);
            bytes.truncate(n);
            (stored, bytes)
        };
        let actual = self.sum(&payload);
        if actual != stored {
            return Err(corrupt(format!(
                "checksum mismatch: stored {stored:#010x}, computed {actual:#010x}"
            )));
        }
        Ok(payload)
    }

    fn encode(&self, mut bytes: Vec<u8>) -> Result<Vec<u8>> {
        let sum = self.sum(&bytes).to_le_bytes();
        if self.prefix {
            bytes.splice(0..0, sum);
        } else {
            bytes.extend_from_slice(&sum);
        }
        Ok(bytes)
    }

    fn max_encoded_len(&self, decoded: usize) -> usize {
        decoded + 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Checksums computed by numcodecs 0.16 (`numcodecs.Fletcher32().encode(...)[-4:]`).
    const FLETCHER_ABCDE: [u8; 4] = [199, 41, 240, 79];
    const FLETCHER_LONG: [u8; 4] = [255, 0, 22, 21];

    #[test]
    fn crc32c_known_value_and_mismatch() {
        // The CRC-32C check value of "123456789".
        assert_eq!(crc32c::crc32c(b"123456789"), 0xe3069283);
        for name in ["crc32c", "crc32", "adler32", "fletcher32"] {
            let c = build(name, &CodecSpec::new(name, serde_json::json!({}))).unwrap();
            let enc = c.encode(b"hello zarr".to_vec()).unwrap();
            assert_eq!(enc.len(), 14);
            assert_eq!(c.decode(enc.clone(), 100).unwrap(), b"hello zarr", "{name}");
            let mut bad = enc;
            bad[5] ^= 1;
            assert!(c.decode(bad, 100).is_err(), "{name}");
        }
        assert_eq!(adler32(b"Wikipedia"), 0x11e60398);
        // numcodecs.Fletcher32().encode(b"abcde")[-4:] and of bytes(range(256)) * 4.
        assert_eq!(fletcher32(b"abcde").to_le_bytes(), FLETCHER_ABCDE);
        let long: Vec<u8> = (0..1024).map(|i| (i % 256) as u8).collect();
        assert_eq!(fletcher32(&long).to_le_bytes(), FLETCHER_LONG);
    }
}
