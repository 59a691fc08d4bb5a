//! numcodecs `categorize`: fixed-length text stored as small integer labels; 0 is the
//! empty string, k is `labels[k - 1]`.

use serde_json::{Map, Value};

use super::Filter;
use crate::codec::num::Num;
use crate::codec::{check_len, UnitRepr};
use crate::error::{corrupt, Error, Result};
use crate::metadata::dtype::parse_typestr;
use crate::metadata::DataType;

pub struct Categorize {
    /// Each label's characters as UTF-32 in the decoded byte order, without the padding
    /// to the element size (so that the labels cost what the metadata spells out).
    labels: Vec<Vec<u8>>,
    item: usize,
    astype: Num,
}

impl Categorize {
    pub fn build(c: &Map<String, Value>) -> Result<Categorize> {
        let dtype = c.get("dtype").and_then(Value::as_str).unwrap_or("|O");
        let (dt, big) = parse_typestr(dtype, "")?;
        let DataType::Utf32(chars) = dt else {
            return Err(Error::unsupported("", format!("categorize to {dtype:?}")));
        };
        let astype = Num::from_config(c.get("astype"), Num::parse("|u1").ok())?;
        let labels = c
            .get("labels")
            .and_then(Value::as_array)
            .ok_or_else(|| Error::metadata("", "categorize without labels"))?
            .iter()
            .map(|l| {
                let s = l.as_str().unwrap_or("");
                let mut out = Vec::new();
                for ch in s.chars().take(chars) {
                    let b = (ch as u32).to_le_bytes();
                    out.extend(if big.is_empty() {
                        b
                    } else {
                        (ch as u32).to_be_bytes()
                    });
                }
                out
            })
            .collect();
        Ok(Categorize {
            labels,
            item: chars * 4,
            astype,
        })
    }
}

impl Filter for Categorize {
    fn decode(&self, input: Vec<u8>, limit: usize) -> Result<Vec<u8>> {
        let n = input.len() / self.astype.size;
        check_len(n.saturating_mul(self.item), limit, "categorize")?;
        let mut out = vec![0u8; n * self.item];
        for (s, d) in input
            .chunks_exact(self.astype.size)
            .zip(out.chunks_exact_mut(self.item.max(1)))
        {
            let k = self.astype.read_i128(s);
            if k > 0 {
                let label = self
                    .labels
                    .get(k as usize - 1)
                    .ok_or_else(|| corrupt(format!("categorize: label {k} out of range")))?;
                d[..label.len()].copy_from_slice(label);
            }
        }
        Ok(out)
    }

    fn encode(&self, input: Vec<u8>) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        for e in input.chunks_exact(self.item.max(1)) {
            let is = |l: &Vec<u8>| e.starts_with(l) && e[l.len()..].iter().all(|b| *b == 0);
            let k = self.labels.iter().position(is).map_or(0, |i| i + 1);
            let mut b = vec![0u8; self.astype.size];
            self.astype.write_i128(k as i128, &mut b);
            out.extend(b);
        }
        Ok(out)
    }

    fn encoded_len(&self, decoded: usize) -> usize {
        decoded / self.item.max(1) * self.astype.size
    }

    fn encoded_repr(&self, decoded: &UnitRepr) -> Result<UnitRepr> {
        Ok(super::retyped(decoded, self.astype))
    }
}
