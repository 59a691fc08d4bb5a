//! Scalar numeric access by numpy typestring (`<i4`, `>f8`, `|u1`, `|b1`): what the
//! numcodecs filters need to read, convert and write elements of either byte order.

use serde_json::Value;

use crate::error::{Error, Result};
use crate::metadata::dtype::parse_typestr;
use crate::metadata::DataType;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    Bool,
    Int,
    UInt,
    Float,
}

/// A numeric element type with its stored byte order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Num {
    pub kind: Kind,
    pub size: usize,
    pub big: bool,
}

impl Num {
    pub fn parse(s: &str) -> Result<Num> {
        let (dtype, big) = parse_typestr(s, "")?;
        let kind = match dtype {
            DataType::Bool => Kind::Bool,
            DataType::Int(_) | DataType::DateTime(_) | DataType::TimeDelta(_) => Kind::Int,
            DataType::UInt(_) => Kind::UInt,
            DataType::Float(_) => Kind::Float,
            _ => return Err(Error::unsupported("", format!("numeric filter on {s:?}"))),
        };
        Ok(Num {
            kind,
            size: dtype.size().unwrap_or(1),
            big: !big.is_empty(),
        })
    }

    /// The typestring config entry `key`, or `default`.
    pub fn from_config(v: Option<&Value>, default: Option<Num>) -> Result<Num> {
        match v.and_then(Value::as_str) {
            Some(s) => Num::parse(s),
            None => default.ok_or_else(|| Error::metadata("", "filter without a dtype")),
        }
    }

    /// The little-endian numeric type of a decoded chunk.
    pub fn of(dtype: &DataType) -> Option<Num> {
        Num::parse(&dtype.typestr(false)).ok()
    }

    pub fn data_type(&self) -> DataType {
        match self.kind {
            Kind::Bool => DataType::Bool,
            Kind::Int => DataType::Int(self.size),
            Kind::UInt => DataType::UInt(self.size),
            Kind::Float => DataType::Float(self.size),
        }
    }

    fn le(&self, b: &[u8]) -> [u8; 8] {
        let mut out = [0u8; 8];
        out[..self.size].copy_from_slice(&b[..self.size]);
        if self.big {
            out[..self.size].reverse();
        }
        out
    }

    fn store(&self, le: &[u8], out: &mut [u8]) {
        out[..self.size].copy_from_slice(&le[..self.size]);
        if self.big {
            out[..self.size].reverse();
        }
    }

    pub fn read_f64(&self, b: &[u8]) -> f64 {
        let le = self.le(b);
        match (self.kind, self.size) {
            (Kind::Float, 2) => half::f16::from_le_bytes([le[0], le[1]]).to_f64(),
            (Kind::Float, 4) => f32::from_le_bytes([le[0], le[1], le[2], le[3]]) as f64,
            (Kind::Float, _) => f64::from_le_bytes(le),
            _ => self.read_i128(b) as f64,
        }
    }

    pub fn read_i128(&self, b: &[u8]) -> i128 {
        if self.kind == Kind::Float {
            return self.read_f64(b) as i128;
        }
        let le = self.le(b);
        let raw = u64::from_le_bytes(le) as i128;
        let bits = self.size * 8;
        if self.kind == Kind::Int && bits < 128 && raw >> (bits - 1) & 1 == 1 {
            raw - (1i128 << bits)
        } else {
            raw
        }
    }

    /// Write `v` converted as numpy's astype would (float to int truncates).
    pub fn write_f64(&self, v: f64, out: &mut [u8]) {
        match (self.kind, self.size) {
            (Kind::Float, 2) => self.store(&half::f16::from_f64(v).to_le_bytes(), out),
            (Kind::Float, 4) => self.store(&(v as f32).to_le_bytes(), out),
            (Kind::Float, _) => self.store(&v.to_le_bytes(), out),
            (Kind::Bool, _) => out[0] = (v != 0.0) as u8,
            _ => self.write_i128(v as i128, out),
        }
    }

    /// Write `v`, wrapping integers to the type's width.
    pub fn write_i128(&self, v: i128, out: &mut [u8]) {
        match self.kind {
            Kind::Float => self.write_f64(v as f64, out),
            Kind::Bool => out[0] = (v != 0) as u8,
            _ => self.store(&v.to_le_bytes(), out),
        }
    }
}

/// Convert every element of `input` from `from` to `to`, as numpy's astype.
pub fn convert(input: &[u8], from: Num, to: Num) -> Vec<u8> {
    let n = input.len() / from.size;
    let mut out = vec![0u8; n * to.size];
    for (src, dst) in input
        .chunks_exact(from.size)
        .zip(out.chunks_exact_mut(to.size))
    {
        if from.kind == Kind::Float || to.kind == Kind::Float {
            to.write_f64(from.read_f64(src), dst);
        } else {
            to.write_i128(from.read_i128(src), dst);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_and_converts_both_byte_orders() {
        let be = Num::parse(">i2").unwrap();
        assert_eq!(be.read_i128(&[0xff, 0xfe]), -2);
        let f = Num::parse("<f4").unwrap();
        let out = convert(&[0xff, 0xfe], be, f);
        assert_eq!(out, (-2.0f32).to_le_bytes());
        let u = Num::parse("|u1").unwrap();
        let mut b = [0u8];
        u.write_i128(257, &mut b);
        assert_eq!(b, [1]);
        assert!(Num::parse("<U3").is_err());
    }
}
