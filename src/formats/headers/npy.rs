//! `.npy` (format 1.0, or 2.0 when the header needs it): the magic, the version, the
//! header length and the dict `{'descr', 'fortran_order', 'shape'}` as a Python literal,
//! padded with spaces and a newline so that the data starts at a multiple of 64.

use std::fmt::Write;

use crate::formats::Absent;
use crate::formats::{Built, Context, Format};
use crate::metadata::{ArrayMetadata, DataType, Field};
use crate::read::view::{Layout, Order};

pub struct Npy;

impl Format for Npy {
    fn name(&self) -> &'static str {
        "npy"
    }

    fn suffix(&self) -> &'static str {
        ".npy"
    }

    fn build(&self, ctx: &Context) -> crate::Result<Built> {
        ctx.headed(header)
    }
}

const MAGIC: &[u8] = b"\x93NUMPY";
/// numpy aligns the data start to this.
const ALIGN: usize = 64;

pub fn header(meta: &ArrayMetadata, layout: Layout) -> Result<Vec<u8>, Absent> {
    let descr = descr(&meta.dtype, layout.big_endian)?;
    let fortran = if layout.order == Order::F {
        "True"
    } else {
        "False"
    };
    let dict = format!(
        "{{'descr': {descr}, 'fortran_order': {fortran}, 'shape': {}, }}",
        shape_tuple(&meta.shape)
    );
    // Version 1.0 has a 2-byte header length; 2.0 a 4-byte one.
    let (version, len_bytes) = if padded(dict.len(), 10) <= u16::MAX as usize + 10 {
        (1u8, 2)
    } else {
        (2u8, 4)
    };
    let preamble = MAGIC.len() + 2 + len_bytes;
    let total = padded(dict.len(), preamble);
    let text_len = total - preamble;
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[version, 0]);
    if len_bytes == 2 {
        out.extend_from_slice(&(text_len as u16).to_le_bytes());
    } else {
        let len = u32::try_from(text_len).map_err(|_| "header too long for .npy")?;
        out.extend_from_slice(&len.to_le_bytes());
    }
    out.extend_from_slice(dict.as_bytes());
    out.resize(total - 1, b' ');
    out.push(b'\n');
    Ok(out)
}

/// The whole header's length: `preamble` + `dict` + at least the newline, rounded up to
/// [`ALIGN`].
fn padded(dict: usize, preamble: usize) -> usize {
    (preamble + dict + 1).div_ceil(ALIGN) * ALIGN
}

fn shape_tuple(shape: &[u64]) -> String {
    match shape {
        [] => "()".into(),
        [n] => format!("({n},)"),
        _ => {
            let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
            format!("({})", dims.join(", "))
        }
    }
}

/// numpy's `descr` of `dtype` as a Python literal: a quoted typestr, or for a structured
/// type a list of `(name, descr[, shape])` with unnamed `|V` padding where fields leave gaps.
fn descr(dtype: &DataType, big: bool) -> Result<String, Absent> {
    let DataType::Struct(fields) = dtype else {
        return Ok(py_str(&dtype.typestr(big)));
    };
    let size = dtype.size().ok_or("variable-length field")?;
    let mut items = Vec::new();
    let mut at = 0usize;
    let mut names = std::collections::HashSet::new();
    for f in fields {
        if f.offset < at {
            return Err("structured type with overlapping or unordered fields".into());
        }
        if f.name.is_empty() || !names.insert(f.name.as_str()) {
            return Err(format!("structured type with a field named {:?}", f.name));
        }
        if f.offset > at {
            items.push(format!("('', '|V{}')", f.offset - at));
        }
        items.push(field(f, big)?);
        at = f.offset + field_size(f)?;
    }
    if size > at {
        items.push(format!("('', '|V{}')", size - at));
    }
    Ok(format!("[{}]", items.join(", ")))
}

fn field_size(f: &Field) -> Result<usize, Absent> {
    let item = f.dtype.size().ok_or("variable-length field")?;
    f.shape
        .iter()
        .try_fold(item, |a, &d| a.checked_mul(d))
        .ok_or_else(|| "field size overflows".into())
}

fn field(f: &Field, big: bool) -> Result<String, Absent> {
    let name = py_str(&f.name);
    let inner = descr(&f.dtype, big)?;
    Ok(if f.shape.is_empty() {
        format!("({name}, {inner})")
    } else {
        let dims: Vec<u64> = f.shape.iter().map(|&d| d as u64).collect();
        format!("({name}, {inner}, {})", shape_tuple(&dims))
    })
}

/// A Python string literal of `s`, in ASCII (escapes for quotes, controls and non-ASCII).
fn py_str(s: &str) -> String {
    let mut out = String::from("'");
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            ' '..='~' => out.push(c),
            c if (c as u32) < 0x100 => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if (c as u32) < 0x10000 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => {
                let _ = write!(out, "\\U{:08x}", c as u32);
            }
        }
    }
    out.push('\'');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::TimeUnit;

    #[test]
    fn literals_escape_what_python_needs() {
        assert_eq!(py_str("a'b\\c"), r"'a\'b\\c'");
        assert_eq!(py_str("é\n"), r"'\xe9\n'");
        assert_eq!(py_str("温"), r"'\u6e29'");
        assert_eq!(shape_tuple(&[]), "()");
        assert_eq!(shape_tuple(&[5]), "(5,)");
        assert_eq!(shape_tuple(&[2, 3]), "(2, 3)");
    }

    #[test]
    fn structured_types_get_padding_fields() {
        let t = DataType::Struct(vec![
            Field {
                name: "a".into(),
                dtype: DataType::Int(4),
                offset: 0,
                shape: vec![],
            },
            Field {
                name: "t".into(),
                dtype: DataType::DateTime(TimeUnit {
                    unit: "ns".into(),
                    scale: 1,
                }),
                offset: 8,
                shape: vec![2],
            },
        ]);
        assert_eq!(
            descr(&t, false).unwrap(),
            "[('a', '<i4'), ('', '|V4'), ('t', '<M8[ns]', (2,))]"
        );
        assert_eq!(descr(&DataType::Float(8), true).unwrap(), "'>f8'");
    }
}
