//! The numcodecs filters whose decode is a type conversion: `astype`, `quantize` and
//! `bitround` (lossy on encode, plain casts on decode) and `fixedscaleoffset`
//! (`decoded = encoded / scale + offset`).

use serde_json::{Map, Value};

use super::{retyped, Filter};
use crate::codec::num::{convert, Num};
use crate::codec::{check_len, UnitRepr};
use crate::error::{Error, Result};

pub struct Cast {
    dtype: Num,
    astype: Num,
    /// (scale, offset) for fixedscaleoffset.
    linear: Option<(f64, f64)>,
    /// Mantissa bits kept, for bitround's encode.
    keepbits: Option<u32>,
    /// Decimal digits kept, for quantize's encode.
    digits: Option<i32>,
}

impl Cast {
    pub fn build(name: &str, c: &Map<String, Value>, native: Option<Num>) -> Result<Cast> {
        let (dkey, akey) = if name == "astype" {
            ("decode_dtype", "encode_dtype")
        } else {
            ("dtype", "astype")
        };
        // bitround's decode is the identity: without a dtype it passes bytes through.
        let fallback = native.or_else(|| {
            (name == "bitround")
                .then(|| Num::parse("|u1").ok())
                .flatten()
        });
        let dtype = Num::from_config(c.get(dkey), fallback)?;
        let astype = Num::from_config(c.get(akey), Some(dtype))?;
        let f = |k: &str| c.get(k).and_then(Value::as_f64);
        let linear = match name {
            "fixedscaleoffset" => Some((f("scale").unwrap_or(1.0), f("offset").unwrap_or(0.0))),
            _ => None,
        };
        let keepbits = match name {
            "bitround" => Some(
                c.get("keepbits")
                    .and_then(Value::as_u64)
                    .ok_or_else(|| Error::metadata("", "bitround without keepbits"))?
                    as u32,
            ),
            _ => None,
        };
        let digits = (name == "quantize").then(|| f("digits").unwrap_or(0.0) as i32);
        Ok(Cast {
            dtype,
            astype,
            linear,
            keepbits,
            digits,
        })
    }
}

impl Filter for Cast {
    fn decode(&self, input: Vec<u8>, limit: usize) -> Result<Vec<u8>> {
        let n = input.len() / self.astype.size;
        check_len(n * self.dtype.size, limit, "cast filter")?;
        let Some((scale, offset)) = self.linear else {
            return Ok(convert(&input, self.astype, self.dtype));
        };
        let mut out = vec![0u8; n * self.dtype.size];
        for (s, d) in input
            .chunks_exact(self.astype.size)
            .zip(out.chunks_exact_mut(self.dtype.size))
        {
            self.dtype
                .write_f64(self.astype.read_f64(s) / scale + offset, d);
        }
        Ok(out)
    }

    fn encode(&self, input: Vec<u8>) -> Result<Vec<u8>> {
        let n = input.len() / self.dtype.size;
        let mut out = vec![0u8; n * self.astype.size];
        for (s, d) in input
            .chunks_exact(self.dtype.size)
            .zip(out.chunks_exact_mut(self.astype.size))
        {
            let v = self.dtype.read_f64(s);
            let v = if let Some((scale, offset)) = self.linear {
                ((v - offset) * scale).round_ties_even()
            } else if let Some(digits) = self.digits {
                let precision = 10f64.powi(-digits);
                let exp = precision.log10().floor();
                let bits = (-exp * 10f64.log2()).ceil();
                let scale = 2f64.powf(bits);
                (v * scale).round_ties_even() / scale
            } else if let (Some(keep), 4) = (self.keepbits, self.dtype.size) {
                let bits = (v as f32).to_bits();
                let drop = 23u32.saturating_sub(keep);
                let half = if drop > 0 {
                    (1u32 << (drop - 1)) - 1
                } else {
                    0
                };
                let rounded = (bits + half + ((bits >> drop) & 1)) & !((1u32 << drop) - 1);
                f32::from_bits(rounded) as f64
            } else {
                v
            };
            self.astype.write_f64(v, d);
        }
        Ok(out)
    }

    fn encoded_len(&self, decoded: usize) -> usize {
        decoded / self.dtype.size * self.astype.size
    }

    fn encoded_repr(&self, decoded: &UnitRepr) -> Result<UnitRepr> {
        Ok(retyped(decoded, self.astype))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fixedscaleoffset_matches_numcodecs() {
        // numcodecs.FixedScaleOffset(offset=1000, scale=10, dtype='<f8', astype='<u1')
        let c = json!({"offset": 1000, "scale": 10, "dtype": "<f8", "astype": "|u1"});
        let f = Cast::build("fixedscaleoffset", c.as_object().unwrap(), None).unwrap();
        let data: Vec<u8> = [1000.0f64, 1000.1, 1012.3]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let enc = f.encode(data).unwrap();
        assert_eq!(enc, vec![0, 1, 123]);
        let dec = f.decode(enc, 24).unwrap();
        assert_eq!(f64::from_le_bytes(dec[16..24].try_into().unwrap()), 1012.3);
        assert!(f.decode(vec![0, 1, 2], 23).is_err());
    }

    #[test]
    fn astype_converts() {
        let c = json!({"encode_dtype": "<f4", "decode_dtype": "<f8"});
        let f = Cast::build("astype", c.as_object().unwrap(), None).unwrap();
        assert_eq!(
            f.decode(1.5f32.to_le_bytes().to_vec(), 8).unwrap(),
            1.5f64.to_le_bytes()
        );
    }
}
