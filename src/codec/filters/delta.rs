//! numcodecs `delta`: differences between neighbouring elements, undone by a running sum
//! in the decoded type (integers wrap, floats accumulate at their own precision).

use serde_json::{Map, Value};

use super::{retyped, Filter};
use crate::codec::num::{Kind, Num};
use crate::codec::{check_len, UnitRepr};
use crate::error::Result;

pub struct Delta {
    dtype: Num,
    astype: Num,
}

impl Delta {
    pub fn build(c: &Map<String, Value>, native: Option<Num>) -> Result<Delta> {
        let dtype = Num::from_config(c.get("dtype"), native)?;
        let astype = Num::from_config(c.get("astype"), Some(dtype))?;
        Ok(Delta { dtype, astype })
    }
}

impl Filter for Delta {
    fn decode(&self, input: Vec<u8>, limit: usize) -> Result<Vec<u8>> {
        let n = input.len() / self.astype.size;
        check_len(n * self.dtype.size, limit, "delta")?;
        let mut out = vec![0u8; n * self.dtype.size];
        let src = input.chunks_exact(self.astype.size);
        let dst = out.chunks_exact_mut(self.dtype.size);
        match (self.dtype.kind, self.dtype.size) {
            (Kind::Float, size) => {
                let mut acc = 0.0f64;
                for (s, d) in src.zip(dst) {
                    acc += self.astype.read_f64(s);
                    // Round to the decoded precision at each step, as numpy's cumsum does.
                    acc = match size {
                        2 => half::f16::from_f64(acc).to_f64(),
                        4 => acc as f32 as f64,
                        _ => acc,
                    };
                    self.dtype.write_f64(acc, d);
                }
            }
            _ => {
                let mut acc: i128 = 0;
                let modulus = 1i128 << (self.dtype.size * 8);
                for (s, d) in src.zip(dst) {
                    acc = (acc + self.astype.read_i128(s)).rem_euclid(modulus);
                    self.dtype.write_i128(acc, d);
                }
            }
        }
        Ok(out)
    }

    fn encode(&self, input: Vec<u8>) -> Result<Vec<u8>> {
        let n = input.len() / self.dtype.size;
        let mut out = vec![0u8; n * self.astype.size];
        let float = self.dtype.kind == Kind::Float;
        let mut prev_f = 0.0f64;
        let mut prev_i = 0i128;
        for (s, d) in input
            .chunks_exact(self.dtype.size)
            .zip(out.chunks_exact_mut(self.astype.size))
        {
            if float {
                let v = self.dtype.read_f64(s);
                self.astype.write_f64(v - prev_f, d);
                prev_f = v;
            } else {
                let v = self.dtype.read_i128(s);
                self.astype.write_i128(v - prev_i, d);
                prev_i = v;
            }
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
    fn running_sum_wraps_and_round_trips() {
        let c = json!({"dtype": "<u1"});
        let d = Delta::build(c.as_object().unwrap(), None).unwrap();
        // numcodecs.Delta('u1').encode(np.array([250, 3, 7], 'u1')) == [250, 9, 4]
        assert_eq!(d.encode(vec![250, 3, 7]).unwrap(), vec![250, 9, 4]);
        assert_eq!(d.decode(vec![250, 9, 4], 3).unwrap(), vec![250, 3, 7]);
        let c = json!({"dtype": ">i4", "astype": "<i2"});
        let d = Delta::build(c.as_object().unwrap(), None).unwrap();
        let data: Vec<u8> = [100i32, 90, 300]
            .iter()
            .flat_map(|v| v.to_be_bytes())
            .collect();
        let enc = d.encode(data.clone()).unwrap();
        assert_eq!(
            enc,
            [100i16, -10, 210]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect::<Vec<_>>()
        );
        assert_eq!(d.decode(enc, 12).unwrap(), data);
    }
}
