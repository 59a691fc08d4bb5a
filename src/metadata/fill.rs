//! Fill values: every JSON encoding of the v3, v2 and draft specs, turned into the
//! bit-exact little-endian bytes of one element.

use base64::Engine;
use serde_json::Value;

use super::dtype::DataType;
use crate::error::{Error, Result};

/// The value of every element of a chunk that was never written.
#[derive(Debug, Clone, PartialEq)]
pub enum FillValue {
    /// One element's little-endian bytes.
    Fixed(Vec<u8>),
    /// A variable-length element, or `None` for a missing object.
    Var(Option<Vec<u8>>),
}

fn b64(s: &str) -> Option<Vec<u8>> {
    base64::engine::general_purpose::STANDARD.decode(s).ok()
}

/// Parse a fill value for `dtype`. `v2` selects v2 conventions (base64 for S, V and
/// structured values; `stored_big` units are then swapped to little-endian).
pub fn parse_fill(
    value: &Value,
    dtype: &DataType,
    v2: bool,
    stored_big: &[(usize, usize)],
    at: &str,
) -> Result<FillValue> {
    let bad = || {
        Error::metadata(
            at,
            format!("fill_value {value} does not fit {}", dtype.name()),
        )
    };
    if dtype.is_var() {
        return Ok(FillValue::Var(match value {
            Value::Null => None,
            Value::String(s) if *dtype == DataType::String => Some(s.as_bytes().to_vec()),
            Value::String(s) => Some(b64(s).ok_or_else(bad)?),
            Value::Array(items) => Some(byte_list(items).ok_or_else(bad)?),
            // zarr-python v2 object arrays record 0 for "no fill".
            Value::Number(n) if n.as_u64() == Some(0) => None,
            _ => return Err(bad()),
        }));
    }
    let size = dtype.size().unwrap_or(0);
    if value.is_null() {
        return Ok(FillValue::Fixed(vec![0; size]));
    }
    let mut out = Vec::with_capacity(size);
    let opaque = matches!(
        dtype,
        DataType::Bytes(_) | DataType::Raw(_) | DataType::Struct(_)
    );
    match value {
        Value::String(s)
            if opaque && (v2 || !matches!(dtype, DataType::Struct(_)) || b64(s).is_some()) =>
        {
            let mut bytes = b64(s).ok_or_else(bad)?;
            for &(o, l) in stored_big {
                if let Some(unit) = bytes.get_mut(o..o + l) {
                    unit.reverse();
                }
            }
            if matches!(dtype, DataType::Bytes(_)) {
                bytes.resize(size, 0);
            }
            out = bytes;
        }
        _ => encode(value, dtype, &mut out).ok_or_else(bad)?,
    }
    if out.len() != size {
        return Err(bad());
    }
    Ok(FillValue::Fixed(out))
}

fn byte_list(items: &[Value]) -> Option<Vec<u8>> {
    items
        .iter()
        .map(|v| v.as_u64().filter(|b| *b < 256).map(|b| b as u8))
        .collect()
}

/// `Some` unless `value` is a `0x…` / `0b…` bit pattern of other than `n` bytes' digits
/// (as for floats, a pattern spells out every bit).
fn full_width(value: &Value, n: usize) -> Option<()> {
    let Value::String(s) = value else {
        return Some(());
    };
    match (s.strip_prefix("0x"), s.strip_prefix("0b")) {
        (Some(hex), _) => (hex.len() == 2 * n).then_some(()),
        (_, Some(bits)) => (bits.len() == 8 * n).then_some(()),
        _ => Some(()),
    }
}

/// Append the little-endian encoding of `value` as `dtype`; `None` when it does not fit.
fn encode(value: &Value, dtype: &DataType, out: &mut Vec<u8>) -> Option<()> {
    match dtype {
        DataType::Bool => out.push(match value {
            Value::Bool(b) => *b as u8,
            Value::Number(n) => (n.as_u64()? != 0) as u8,
            _ => return None,
        }),
        DataType::Int(n) => {
            full_width(value, *n)?;
            let v = int_value(value)?;
            let min = -(1i128 << (n * 8 - 1));
            let max = (1i128 << (n * 8 - 1)) - 1;
            let v = if (min..=max).contains(&v) {
                v
            } else if v >= 0 && v < (1i128 << (n * 8)) {
                // A bit pattern given as hex / binary.
                v - (1i128 << (n * 8))
            } else {
                return None;
            };
            out.extend_from_slice(&v.to_le_bytes()[..*n]);
        }
        DataType::UInt(n) => {
            full_width(value, *n)?;
            let v = int_value(value)?;
            if v < 0 || v >= (1i128 << (n * 8)) {
                return None;
            }
            out.extend_from_slice(&v.to_le_bytes()[..*n]);
        }
        DataType::Float(n) => encode_float(value, *n, out)?,
        DataType::Complex(n) => match value {
            Value::Array(pair) if pair.len() == 2 => {
                encode_float(&pair[0], n / 2, out)?;
                encode_float(&pair[1], n / 2, out)?;
            }
            _ => {
                encode_float(value, n / 2, out)?;
                out.extend(std::iter::repeat_n(0, n / 2));
            }
        },
        DataType::DateTime(_) | DataType::TimeDelta(_) => {
            let v = match value {
                Value::String(s) if s == "NaT" => i64::MIN,
                _ => i64::try_from(int_value(value)?).ok()?,
            };
            out.extend_from_slice(&v.to_le_bytes());
        }
        DataType::Utf32(n) => {
            let s = value.as_str()?;
            let units: Vec<char> = s.chars().collect();
            if units.len() > *n {
                return None;
            }
            for i in 0..*n {
                let c = units.get(i).map(|c| *c as u32).unwrap_or(0);
                out.extend_from_slice(&c.to_le_bytes());
            }
        }
        DataType::Bytes(n) | DataType::Raw(n) => {
            let bytes = match value {
                Value::Array(items) => byte_list(items)?,
                Value::String(s) => b64(s)?,
                Value::Number(z) if z.as_u64() == Some(0) => vec![0; *n],
                _ => return None,
            };
            if bytes.len() > *n {
                return None;
            }
            let pad = n - bytes.len();
            out.extend(bytes);
            out.extend(std::iter::repeat_n(0, pad));
        }
        DataType::Struct(fields) => {
            let start = out.len();
            out.resize(start + dtype.size()?, 0);
            for (i, f) in fields.iter().enumerate() {
                let v = match value {
                    Value::Object(o) => o.get(&f.name)?,
                    Value::Array(items) => items.get(i)?,
                    _ => return None,
                };
                let mut one = Vec::new();
                encode(v, &f.dtype, &mut one)?;
                let count: usize = f.shape.iter().product();
                for k in 0..count {
                    let at = start + f.offset + k * one.len();
                    out.get_mut(at..at + one.len())?.copy_from_slice(&one);
                }
            }
        }
        DataType::String | DataType::VarBytes => return None,
    }
    Some(())
}

/// An integer from a JSON number, a `0x…` / `0b…` string, or a decimal string (GDAL writes
/// 64-bit fill values as strings, e.g. `"18446744073709551615"`, `"-7"`).
fn int_value(value: &Value) -> Option<i128> {
    match value {
        Value::Number(n) => n
            .as_i64()
            .map(i128::from)
            .or_else(|| n.as_u64().map(i128::from))
            .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i128)),
        Value::String(s) => radix_bits(s)
            .and_then(|v| i128::try_from(v).ok())
            .or_else(|| decimal(s)),
        Value::Bool(b) => Some(*b as i128),
        _ => None,
    }
}

/// `[-]digits`, nothing else (no sign-only, no `+`, no spaces, no fraction).
fn decimal(s: &str) -> Option<i128> {
    let digits = s.strip_prefix('-').unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

fn radix_bits(s: &str) -> Option<u128> {
    if let Some(h) = s.strip_prefix("0x") {
        u128::from_str_radix(h, 16).ok()
    } else if let Some(b) = s.strip_prefix("0b") {
        u128::from_str_radix(b, 2).ok()
    } else {
        None
    }
}

/// A float of `n` bytes from a number, `NaN`, `±Infinity` or raw bits as `0x…` / `0b…`.
fn encode_float(value: &Value, n: usize, out: &mut Vec<u8>) -> Option<()> {
    let v: f64 = match value {
        Value::Number(x) => x.as_f64()?,
        Value::String(s) => match s.as_str() {
            "NaN" | "nan" => f64::NAN,
            "Infinity" | "+Infinity" | "inf" => f64::INFINITY,
            "-Infinity" | "-inf" => f64::NEG_INFINITY,
            _ => {
                let bits = radix_bits(s)?;
                if n < 16 && bits >> (n * 8) != 0 {
                    return None;
                }
                out.extend_from_slice(&bits.to_le_bytes()[..n]);
                return Some(());
            }
        },
        _ => return None,
    };
    match n {
        2 => out.extend_from_slice(&half::f16::from_f64(v).to_le_bytes()),
        4 => out.extend_from_slice(&(v as f32).to_le_bytes()),
        8 => out.extend_from_slice(&v.to_le_bytes()),
        _ => return None,
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fixed(v: Value, dt: DataType) -> Vec<u8> {
        match parse_fill(&v, &dt, false, &[], "t").unwrap() {
            FillValue::Fixed(b) => b,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn float_special_values_are_bit_exact() {
        assert_eq!(
            fixed(json!("NaN"), DataType::Float(4)),
            0x7fc00000u32.to_le_bytes()
        );
        assert_eq!(
            fixed(json!("0x7fc00001"), DataType::Float(4)),
            0x7fc00001u32.to_le_bytes()
        );
        assert_eq!(
            fixed(json!("+Infinity"), DataType::Float(8)),
            f64::INFINITY.to_le_bytes()
        );
        assert_eq!(fixed(json!("-Infinity"), DataType::Float(2)), [0x00, 0xfc]);
        assert_eq!(
            fixed(json!(-0.0), DataType::Float(8)),
            (-0.0f64).to_le_bytes()
        );
        assert_eq!(
            fixed(json!("0b0011110000000000"), DataType::Float(2)),
            half::f16::ONE.to_le_bytes()
        );
        assert!(parse_fill(&json!("0x7fc000011"), &DataType::Float(4), false, &[], "t").is_err());
    }

    #[test]
    fn integers_complex_and_times() {
        assert_eq!(fixed(json!(u64::MAX), DataType::UInt(8)), [0xff; 8]);
        assert_eq!(
            fixed(json!(i64::MIN), DataType::Int(8)),
            i64::MIN.to_le_bytes()
        );
        assert_eq!(fixed(json!(-1), DataType::Int(2)), [0xff, 0xff]);
        assert!(parse_fill(&json!(256), &DataType::UInt(1), false, &[], "t").is_err());
        let c = fixed(json!(["NaN", -1.5]), DataType::Complex(8));
        assert_eq!(&c[..4], 0x7fc00000u32.to_le_bytes());
        assert_eq!(&c[4..], (-1.5f32).to_le_bytes());
        let unit = super::super::dtype::TimeUnit {
            unit: "ns".into(),
            scale: 1,
        };
        assert_eq!(
            fixed(json!("NaT"), DataType::DateTime(unit)),
            i64::MIN.to_le_bytes()
        );
        assert_eq!(fixed(json!(true), DataType::Bool), [1]);
        assert_eq!(fixed(json!(null), DataType::Float(4)), [0; 4]);
    }

    #[test]
    fn integers_as_decimal_strings() {
        assert_eq!(fixed(json!("42"), DataType::Int(4)), 42i32.to_le_bytes());
        assert_eq!(fixed(json!("-7"), DataType::Int(8)), (-7i64).to_le_bytes());
        assert_eq!(
            fixed(json!("18446744073709551615"), DataType::UInt(8)),
            [0xff; 8]
        );
        assert_eq!(
            fixed(json!("-9223372036854775808"), DataType::Int(8)),
            i64::MIN.to_le_bytes()
        );
        assert_eq!(fixed(json!("255"), DataType::UInt(1)), [255]);
        assert_eq!(fixed(json!("0"), DataType::UInt(2)), [0, 0]);
        assert_eq!(fixed(json!("-0"), DataType::Int(2)), [0, 0]);
        for bad in [
            "18446744073709551616",
            "-1",
            "",
            "-",
            "+1",
            " 1",
            "1 ",
            "1.0",
            "1e3",
            "NaN",
            "0x1g",
            "340282366920938463463374607431768211456",
        ] {
            assert!(
                parse_fill(&json!(bad), &DataType::UInt(8), false, &[], "t").is_err(),
                "{bad:?} accepted for uint64"
            );
        }
        assert!(parse_fill(&json!("256"), &DataType::UInt(1), false, &[], "t").is_err());
        // Bit patterns give every bit.
        assert_eq!(
            fixed(json!("0xffffff7f"), DataType::Int(4)),
            [0x7f, 0xff, 0xff, 0xff]
        );
        assert!(parse_fill(&json!("0x7f"), &DataType::Int(4), false, &[], "t").is_err());
        assert!(parse_fill(&json!("0b1"), &DataType::UInt(1), false, &[], "t").is_err());
        assert!(parse_fill(&json!("-129"), &DataType::Int(1), false, &[], "t").is_err());
    }

    #[test]
    fn v2_base64_structured_is_swapped_to_little_endian() {
        let (dt, big) =
            super::super::dtype::parse_v2(&json!([["a", ">i2"], ["b", "|u1"]]), "t").unwrap();
        let v = json!(base64::engine::general_purpose::STANDARD.encode([0x01, 0x02, 0x03]));
        let got = parse_fill(&v, &dt, true, &big, "t").unwrap();
        assert_eq!(got, FillValue::Fixed(vec![0x02, 0x01, 0x03]));
        assert_eq!(
            fixed(json!("ab"), DataType::Utf32(3)),
            [97, 0, 0, 0, 98, 0, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(
            parse_fill(&json!("x"), &DataType::String, false, &[], "t").unwrap(),
            FillValue::Var(Some(b"x".to_vec()))
        );
    }
}
