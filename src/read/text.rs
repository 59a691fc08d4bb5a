//! The text of a variable-length array (strings, bytes): one JSON value per element, one
//! element per line, in the file's order. Read unit by unit through the decoded-unit
//! cache.

use std::io::Write;

use base64::Engine;

use crate::codec::UnitData;
use crate::error::{output_error, Error, Result};
use crate::metadata::DataType;
use crate::read::array::Array;
use crate::read::cache::UnitCache;
use crate::read::geometry::{Geometry, Order};

/// One JSON value for a variable-length element: text as a string, bytes as base64.
pub fn json_value(dtype: &DataType, element: &Option<Vec<u8>>) -> String {
    match element {
        None => "null".into(),
        Some(b) if *dtype == DataType::String => {
            serde_json::to_string(&String::from_utf8_lossy(b)).unwrap_or_else(|_| "null".into())
        }
        Some(b) => format!(
            "\"{}\"",
            base64::engine::general_purpose::STANDARD.encode(b)
        ),
    }
}

/// Write a variable-length array as one JSON value per line, in `order`.
pub fn write_var_lines(
    array: &Array,
    cache: &UnitCache,
    order: Order,
    out: &mut impl Write,
) -> Result<()> {
    let meta = &array.meta;
    let elements: u64 = meta.shape.iter().product();
    let mut line = String::new();
    // Units stay in C order here; runs step through them.
    let geometry = Geometry::new(&meta.shape, array.unit_shape(), order, 0);
    geometry.runs(Order::C, 0, elements, |run| {
        let key = (array.unit_id(run.unit), 0, run.unit.to_vec());
        let chunk = cache.get_or_load(&key, 0, || array.read_unit(run.unit))?;
        let UnitData::Var(items) = chunk.as_ref() else {
            return Err(Error::corrupt(
                &meta.meta_key,
                "fixed-size chunk in a text view",
            ));
        };
        for k in 0..run.len as usize {
            let e = items
                .get(run.offset + k * run.step)
                .ok_or_else(|| Error::corrupt(&meta.meta_key, "decoded chunk too small"))?;
            line.clear();
            line.push_str(&json_value(&meta.dtype, e));
            line.push('\n');
            out.write_all(line.as_bytes()).map_err(output_error)?;
        }
        Ok(())
    })
}
