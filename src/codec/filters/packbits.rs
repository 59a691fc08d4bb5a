//! numcodecs `packbits`: booleans packed eight to a byte (most significant bit first)
//! after one byte giving the number of padding bits.

use super::Filter;
use crate::codec::{check_len, UnitRepr};
use crate::error::{corrupt, Result};
use crate::metadata::{DataType, FillValue};

pub struct PackBits;

impl Filter for PackBits {
    fn decode(&self, input: Vec<u8>, limit: usize) -> Result<Vec<u8>> {
        let (&pad, packed) = input
            .split_first()
            .ok_or_else(|| corrupt("packbits: empty"))?;
        let n = (packed.len() * 8)
            .checked_sub(pad as usize)
            .filter(|_| pad < 8)
            .ok_or_else(|| corrupt("packbits: bad padding"))?;
        check_len(n, limit, "packbits")?;
        Ok((0..n).map(|i| (packed[i / 8] >> (7 - i % 8)) & 1).collect())
    }

    fn encode(&self, input: Vec<u8>) -> Result<Vec<u8>> {
        let pad = (8 - input.len() % 8) % 8;
        let mut out = vec![pad as u8];
        for group in input.chunks(8) {
            let mut byte = 0u8;
            for (i, b) in group.iter().enumerate() {
                byte |= ((*b != 0) as u8) << (7 - i);
            }
            out.push(byte);
        }
        Ok(out)
    }

    fn encoded_len(&self, decoded: usize) -> usize {
        1 + decoded.div_ceil(8)
    }

    fn encoded_repr(&self, decoded: &UnitRepr) -> Result<UnitRepr> {
        Ok(UnitRepr {
            shape: vec![self.encoded_len(decoded.num_elements() as usize) as u64],
            dtype: DataType::UInt(1),
            fill: FillValue::Fixed(vec![0]),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packs_like_numpy() {
        // numcodecs.PackBits().encode(np.array([1,0,1,1,0,0,0,0,1], bool)) == [7, 0xb0, 0x80]
        let bits = vec![1, 0, 1, 1, 0, 0, 0, 0, 1];
        assert_eq!(PackBits.encode(bits.clone()).unwrap(), vec![7, 0xb0, 0x80]);
        assert_eq!(PackBits.decode(vec![7, 0xb0, 0x80], 9).unwrap(), bits);
        assert!(PackBits.decode(vec![9, 0], 9).is_err());
    }
}
