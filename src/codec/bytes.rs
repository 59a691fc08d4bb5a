//! The v3 `bytes` codec (and v2's typestring byte order): fixed-size elements, little-
//! or big-endian, to and from the chunk's little-endian in-memory form.

use serde_json::Value;

use super::{ArrayToBytes, UnitData, UnitRepr};
use crate::error::{corrupt, Error, Result};
use crate::metadata::{CodecSpec, SwapUnits};

pub struct Bytes {
    /// Units to reverse in every element (empty for little-endian).
    swap: SwapUnits,
    item: usize,
    len: usize,
}

impl Bytes {
    pub fn build(spec: &CodecSpec, repr: &UnitRepr) -> Result<Bytes> {
        let item = repr.dtype.size().ok_or_else(|| {
            Error::unsupported("", format!("bytes codec on {}", repr.dtype.name()))
        })?;
        let swap = match (spec.config.get("endian"), spec.config.get("swap_units")) {
            (_, Some(Value::Array(units))) => units
                .iter()
                .map(|u| swap_unit(u, item))
                .collect::<Result<SwapUnits>>()?,
            (Some(Value::String(e)), _) if e == "big" => repr.dtype.swap_units(),
            (Some(Value::String(e)), _) if e == "little" => vec![],
            (None | Some(Value::Null), _) => vec![],
            (Some(other), _) => return Err(Error::metadata("", format!("bad endian {other}"))),
        };
        Ok(Bytes {
            swap,
            item,
            len: repr.fixed_len()?,
        })
    }
}

/// One `[offset, length]` swap unit, which must lie inside an element of `item` bytes.
fn swap_unit(unit: &Value, item: usize) -> Result<(usize, usize)> {
    let field = |i: usize| unit.get(i).and_then(Value::as_u64);
    let (Some(o), Some(l)) = (field(0), field(1)) else {
        return Err(Error::metadata(
            "",
            format!("bytes codec: bad swap unit {unit}"),
        ));
    };
    match o.checked_add(l) {
        Some(end) if end <= item as u64 => Ok((o as usize, l as usize)),
        _ => Err(Error::metadata(
            "",
            format!(
                "bytes codec: swap unit beyond the element size ({unit}, {item}-byte elements)"
            ),
        )),
    }
}

/// Reverse each swap unit of every element in `buf`.
pub fn swap_elements(buf: &mut [u8], item: usize, swap: &[(usize, usize)]) {
    if swap.is_empty() || item == 0 {
        return;
    }
    for element in buf.chunks_exact_mut(item) {
        for &(o, l) in swap {
            element[o..o + l].reverse();
        }
    }
}

impl ArrayToBytes for Bytes {
    fn decode(&self, mut bytes: Vec<u8>) -> Result<UnitData> {
        if bytes.len() != self.len {
            return Err(corrupt(format!(
                "chunk has {} bytes, expected {}",
                bytes.len(),
                self.len
            )));
        }
        swap_elements(&mut bytes, self.item, &self.swap);
        Ok(UnitData::Fixed(bytes))
    }

    fn encode(&self, data: UnitData) -> Result<Vec<u8>> {
        let mut bytes = data.into_fixed()?;
        swap_elements(&mut bytes, self.item, &self.swap);
        Ok(bytes)
    }

    fn max_encoded_len(&self) -> Option<usize> {
        Some(self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::{DataType, FillValue};
    use serde_json::json;

    fn build(units: Value) -> Result<Bytes> {
        let repr = UnitRepr {
            shape: vec![4],
            dtype: DataType::Int(4),
            fill: FillValue::Fixed(vec![0; 4]),
        };
        Bytes::build(
            &CodecSpec::new("bytes", json!({ "swap_units": units })),
            &repr,
        )
    }

    #[test]
    fn swap_units_beyond_the_element_are_refused_at_build() {
        for units in [
            json!([[u64::MAX, 2]]),
            json!([[2, u64::MAX]]),
            json!([[3, 2]]),
            json!([[0, 4], [4, 1]]),
        ] {
            let err = build(units.clone()).err().map(|e| e.to_string());
            assert!(
                err.as_deref()
                    .is_some_and(|e| e.contains("swap unit beyond the element size")),
                "{units}: {err:?}"
            );
        }
        assert!(build(json!([["a", 2]])).is_err());
        let ok = build(json!([[0, 4]])).unwrap();
        let decoded = ok.decode(vec![1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert!(matches!(decoded, Ok(UnitData::Fixed(b)) if b[..8] == [4, 3, 2, 1, 8, 7, 6, 5]));
    }
}
