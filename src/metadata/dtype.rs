//! The normalized data type model and its parsers: v3 names (core and registered
//! extensions), v2 / draft numpy typestrings (with byte order) and structured descriptions.

use serde_json::{json, Value};

use crate::error::{Error, Result};

use crate::limits::MAX_ITEM;

/// `n` bytes as an element size, or an error naming `at` when it passes [`MAX_ITEM`].
fn item_size(n: Option<u64>, what: &str, at: &str) -> Result<usize> {
    match n {
        Some(n) if n <= MAX_ITEM as u64 => Ok(n as usize),
        _ => Err(Error::metadata(
            at,
            format!("{what}: elements larger than {MAX_ITEM} bytes are not supported"),
        )),
    }
}

/// One element type, independent of how it is stored. Sizes are in bytes.
#[derive(Debug, Clone, PartialEq)]
pub enum DataType {
    Bool,
    Int(usize),
    UInt(usize),
    Float(usize),
    /// Total size: two floats of half this size.
    Complex(usize),
    DateTime(TimeUnit),
    TimeDelta(TimeUnit),
    /// numpy `U`: this many UTF-32 code units.
    Utf32(usize),
    /// numpy `S`: fixed-length, null-padded bytes.
    Bytes(usize),
    /// numpy `V` / v3 `r<bits>`: opaque bytes.
    Raw(usize),
    Struct(Vec<Field>),
    /// Variable-length UTF-8 text.
    String,
    /// Variable-length bytes.
    VarBytes,
}

/// A datetime64 / timedelta64 unit such as `ns` or `10s`.
#[derive(Debug, Clone, PartialEq)]
pub struct TimeUnit {
    pub unit: String,
    pub scale: u64,
}

/// A member of a structured type; `count` > 1 for a sub-array field.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub name: String,
    pub dtype: DataType,
    pub offset: usize,
    pub shape: Vec<usize>,
}

impl Field {
    fn count(&self) -> usize {
        self.shape.iter().product()
    }
}

/// Byte ranges (offset, length) inside one element whose byte order must be reversed
/// to switch between little- and big-endian.
pub type SwapUnits = Vec<(usize, usize)>;

impl DataType {
    /// Bytes per element, or `None` for variable-length types.
    pub fn size(&self) -> Option<usize> {
        Some(match self {
            DataType::Bool => 1,
            DataType::Int(n)
            | DataType::UInt(n)
            | DataType::Float(n)
            | DataType::Complex(n)
            | DataType::Bytes(n)
            | DataType::Raw(n) => *n,
            DataType::DateTime(_) | DataType::TimeDelta(_) => 8,
            DataType::Utf32(n) => 4 * n,
            DataType::Struct(fields) => fields
                .iter()
                .map(|f| Some(f.offset + f.dtype.size()? * f.count()))
                .try_fold(0usize, |acc, end| end.map(|e| acc.max(e)))?,
            DataType::String | DataType::VarBytes => return None,
        })
    }

    pub fn is_var(&self) -> bool {
        matches!(self, DataType::String | DataType::VarBytes)
    }

    /// Every multi-byte scalar inside one element, as swap units.
    pub fn swap_units(&self) -> SwapUnits {
        let mut out = Vec::new();
        self.push_swap_units(0, &mut out);
        out
    }

    fn push_swap_units(&self, base: usize, out: &mut SwapUnits) {
        match self {
            DataType::Int(n) | DataType::UInt(n) | DataType::Float(n) if *n > 1 => {
                out.push((base, *n))
            }
            DataType::Complex(n) => {
                out.push((base, n / 2));
                out.push((base + n / 2, n / 2));
            }
            DataType::DateTime(_) | DataType::TimeDelta(_) => out.push((base, 8)),
            DataType::Utf32(n) => out.extend((0..*n).map(|i| (base + 4 * i, 4))),
            DataType::Struct(fields) => {
                for f in fields {
                    let size = f.dtype.size().unwrap_or(0);
                    for i in 0..f.count() {
                        f.dtype.push_swap_units(base + f.offset + i * size, out);
                    }
                }
            }
            _ => {}
        }
    }

    /// The numpy typestr of this type in the given byte order (`|` where order is moot).
    pub fn typestr(&self, big: bool) -> String {
        let e = if big { '>' } else { '<' };
        match self {
            DataType::Bool => "|b1".into(),
            DataType::Int(1) => "|i1".into(),
            DataType::UInt(1) => "|u1".into(),
            DataType::Int(n) => format!("{e}i{n}"),
            DataType::UInt(n) => format!("{e}u{n}"),
            DataType::Float(n) => format!("{e}f{n}"),
            DataType::Complex(n) => format!("{e}c{n}"),
            DataType::DateTime(u) => format!("{e}M8[{}]", u.label()),
            DataType::TimeDelta(u) => format!("{e}m8[{}]", u.label()),
            DataType::Utf32(n) => format!("{e}U{n}"),
            DataType::Bytes(n) => format!("|S{n}"),
            DataType::Raw(n) => format!("|V{n}"),
            DataType::Struct(_) => format!("|V{}", self.size().unwrap_or(0)),
            DataType::String | DataType::VarBytes => "|O".into(),
        }
    }

    /// numpy's description of a structured type (`[["a", "<i4"], ...]`), else the typestr.
    pub fn descr(&self, big: bool) -> Value {
        match self {
            DataType::Struct(fields) => Value::Array(
                fields
                    .iter()
                    .map(|f| {
                        let mut v = vec![Value::from(f.name.clone()), f.dtype.descr(big)];
                        if !f.shape.is_empty() {
                            v.push(Value::from(f.shape.clone()));
                        }
                        Value::Array(v)
                    })
                    .collect(),
            ),
            _ => Value::from(self.typestr(big)),
        }
    }

    /// The v3 `data_type` of this type (what [`parse_v3`] reads back), where v3 has one:
    /// none for variable-length types and for structs with padding or sub-arrays.
    pub fn to_v3(&self) -> Option<Value> {
        let sized =
            |name: &str, n: usize| json!({"name": name, "configuration": {"length_bytes": n}});
        let time = |name: &str, u: &TimeUnit| {
            let base = TimeUnit::parse(&u.unit)?;
            Some(
                json!({"name": name, "configuration": {"unit": base.unit, "scale_factor": u.scale}}),
            )
        };
        Some(match self {
            DataType::Bool
            | DataType::Int(_)
            | DataType::UInt(_)
            | DataType::Float(_)
            | DataType::Complex(_) => Value::from(self.name()),
            DataType::DateTime(u) => time("numpy.datetime64", u)?,
            DataType::TimeDelta(u) => time("numpy.timedelta64", u)?,
            DataType::Utf32(n) => sized("fixed_length_utf32", n.checked_mul(4)?),
            DataType::Bytes(n) => sized("null_terminated_bytes", *n),
            DataType::Raw(n) => Value::from(format!("r{}", n.checked_mul(8)?)),
            DataType::Struct(fields) => {
                let mut offset = 0;
                let mut out = Vec::with_capacity(fields.len());
                for f in fields {
                    if !f.shape.is_empty() || f.offset != offset {
                        return None;
                    }
                    offset += f.dtype.size()?;
                    out.push(json!([f.name, f.dtype.to_v3()?]));
                }
                json!({"name": "structured", "configuration": {"fields": out}})
            }
            DataType::String | DataType::VarBytes => return None,
        })
    }

    /// A short human name for listings (`float32`, `datetime64[ns]`, `struct{a:int32,..}`).
    pub fn name(&self) -> String {
        match self {
            DataType::Bool => "bool".into(),
            DataType::Int(n) => format!("int{}", n * 8),
            DataType::UInt(n) => format!("uint{}", n * 8),
            DataType::Float(n) => format!("float{}", n * 8),
            DataType::Complex(n) => format!("complex{}", n * 8),
            DataType::DateTime(u) => format!("datetime64[{}]", u.label()),
            DataType::TimeDelta(u) => format!("timedelta64[{}]", u.label()),
            DataType::Utf32(n) => format!("utf32[{n}]"),
            DataType::Bytes(n) => format!("bytes[{n}]"),
            DataType::Raw(n) => format!("r{}", n * 8),
            DataType::Struct(fields) => {
                let inner: Vec<String> = fields
                    .iter()
                    .map(|f| format!("{}:{}", f.name, f.dtype.name()))
                    .collect();
                format!("struct{{{}}}", inner.join(","))
            }
            DataType::String => "string".into(),
            DataType::VarBytes => "bytes".into(),
        }
    }
}

impl TimeUnit {
    fn label(&self) -> String {
        if self.scale == 1 {
            self.unit.clone()
        } else {
            format!("{}{}", self.scale, self.unit)
        }
    }

    /// Parse `ns`, `10s`, `generic` ...
    fn parse(s: &str) -> Option<TimeUnit> {
        let digits: String = s.chars().take_while(|c| c.is_ascii_digit()).collect();
        let unit = &s[digits.len()..];
        let known = [
            "Y", "M", "W", "D", "h", "m", "s", "ms", "us", "μs", "ns", "ps", "fs", "as", "generic",
        ];
        if !known.contains(&unit) {
            return None;
        }
        let scale = if digits.is_empty() {
            1
        } else {
            digits.parse().ok()?
        };
        Some(TimeUnit {
            unit: unit.to_string(),
            scale,
        })
    }
}

/// A v3 `data_type`: a core name, `r<bits>`, or an extension object `{name, configuration}`.
pub fn parse_v3(value: &Value, at: &str) -> Result<DataType> {
    let (name, config) = match value {
        Value::String(s) => (s.as_str(), None),
        Value::Object(o) => match o.get("name").and_then(Value::as_str) {
            Some(n) => (n, o.get("configuration")),
            None => return Err(Error::metadata(at, "data_type object without a name")),
        },
        _ => {
            return Err(Error::metadata(
                at,
                "data_type is neither a string nor an object",
            ))
        }
    };
    let unsupported = || Error::unsupported(at, format!("data type {value}"));
    let cfg_usize = |key: &str| -> Result<usize> {
        let value = config
            .and_then(|c| c.get(key))
            .ok_or_else(|| Error::metadata(at, format!("data type {name} needs {key}")))?;
        let n = value.as_u64().ok_or_else(|| {
            Error::metadata(at, format!("data type {name}: {key} is not a count"))
        })?;
        item_size(Some(n), name, at)
    };
    let time_unit = || -> Result<TimeUnit> {
        let unit = config
            .and_then(|c| c.get("unit"))
            .and_then(Value::as_str)
            .ok_or_else(|| Error::metadata(at, format!("{name} needs a unit")))?;
        let scale = config
            .and_then(|c| c.get("scale_factor"))
            .and_then(Value::as_u64)
            .unwrap_or(1);
        let base = TimeUnit::parse(unit).ok_or_else(unsupported)?;
        Ok(TimeUnit {
            unit: base.unit,
            scale: scale * base.scale,
        })
    };
    Ok(match name {
        "bool" => DataType::Bool,
        "int8" => DataType::Int(1),
        "int16" => DataType::Int(2),
        "int32" => DataType::Int(4),
        "int64" => DataType::Int(8),
        "uint8" => DataType::UInt(1),
        "uint16" => DataType::UInt(2),
        "uint32" => DataType::UInt(4),
        "uint64" => DataType::UInt(8),
        "float16" => DataType::Float(2),
        "float32" => DataType::Float(4),
        "float64" => DataType::Float(8),
        "complex64" => DataType::Complex(8),
        "complex128" => DataType::Complex(16),
        "numpy.datetime64" => DataType::DateTime(time_unit()?),
        "numpy.timedelta64" => DataType::TimeDelta(time_unit()?),
        "fixed_length_utf32" => {
            let bytes = cfg_usize("length_bytes")?;
            if bytes % 4 != 0 {
                return Err(Error::metadata(
                    at,
                    "fixed_length_utf32 length not a multiple of 4",
                ));
            }
            DataType::Utf32(bytes / 4)
        }
        "null_terminated_bytes" | "fixed_length_bytes" => {
            DataType::Bytes(cfg_usize("length_bytes")?)
        }
        "raw_bytes" => DataType::Raw(cfg_usize("length_bytes")?),
        "string" | "variable_length_utf8" => DataType::String,
        "bytes" | "variable_length_bytes" => DataType::VarBytes,
        "struct" | "structured" => parse_v3_struct(config, at)?,
        _ => match name
            .strip_prefix('r')
            .filter(|b| b.bytes().all(|c| c.is_ascii_digit()))
        {
            Some(bits) if !bits.is_empty() => {
                let bits: Option<u64> = bits.parse().ok();
                match bits {
                    Some(b) if b % 8 == 0 && b > 0 => {
                        DataType::Raw(item_size(Some(b / 8), name, at)?)
                    }
                    Some(_) => return Err(unsupported()),
                    None => item_size(None, name, at).map(DataType::Raw)?,
                }
            }
            _ => return Err(unsupported()),
        },
    })
}

/// v3 structured types: fields as `[name, type]` pairs or `{name, data_type}` objects.
fn parse_v3_struct(config: Option<&Value>, at: &str) -> Result<DataType> {
    let fields = config
        .and_then(|c| c.get("fields"))
        .and_then(Value::as_array)
        .ok_or_else(|| Error::metadata(at, "struct data type without fields"))?;
    let mut out = Vec::with_capacity(fields.len());
    let mut offset = 0;
    for f in fields {
        let (name, dtype, explicit_offset) = match f {
            Value::Array(pair) if pair.len() == 2 => (pair[0].as_str(), &pair[1], None),
            Value::Object(o) => (
                o.get("name").and_then(Value::as_str),
                o.get("data_type").unwrap_or(&Value::Null),
                o.get("byte_offset").and_then(Value::as_u64),
            ),
            _ => (None, &Value::Null, None),
        };
        let name = name.ok_or_else(|| Error::metadata(at, "struct field without a name"))?;
        let dtype = parse_v3(dtype, at)?;
        let size = dtype
            .size()
            .ok_or_else(|| Error::unsupported(at, "variable-length struct field"))?;
        let field_offset = match explicit_offset {
            Some(o) => item_size(Some(o), "struct field offset", at)?,
            None => offset,
        };
        offset = item_size((field_offset as u64).checked_add(size as u64), "struct", at)?;
        out.push(Field {
            name: name.to_string(),
            dtype,
            offset: field_offset,
            shape: vec![],
        });
    }
    Ok(DataType::Struct(out))
}

/// A v2 / draft `dtype`: a typestring or a structured list. Returns the type and the swap
/// units that are stored big-endian.
pub fn parse_v2(value: &Value, at: &str) -> Result<(DataType, SwapUnits)> {
    match value {
        Value::String(s) => parse_typestr(s, at),
        Value::Array(fields) => {
            let mut out = Vec::with_capacity(fields.len());
            let mut big = Vec::new();
            let mut offset = 0;
            for f in fields {
                let parts = f
                    .as_array()
                    .filter(|p| p.len() == 2 || p.len() == 3)
                    .ok_or_else(|| Error::metadata(at, format!("bad structured field {f}")))?;
                let name = parts[0]
                    .as_str()
                    .ok_or_else(|| Error::metadata(at, "structured field name"))?;
                let (dtype, field_big) = parse_v2(&parts[1], at)?;
                let shape: Vec<u64> = match parts.get(2) {
                    Some(Value::Array(dims)) => dims
                        .iter()
                        .map(Value::as_u64)
                        .collect::<Option<_>>()
                        .ok_or_else(|| Error::metadata(at, "structured field shape"))?,
                    Some(Value::Number(n)) => vec![n
                        .as_u64()
                        .ok_or_else(|| Error::metadata(at, "structured field shape"))?],
                    Some(_) => return Err(Error::metadata(at, "structured field shape")),
                    None => vec![],
                };
                let size = dtype
                    .size()
                    .ok_or_else(|| Error::unsupported(at, "object field in structured type"))?;
                // Checked before anything loops over or allocates for the sub-array.
                let count = item_size(
                    shape.iter().try_fold(1u64, |acc, d| acc.checked_mul(*d)),
                    "structured field shape",
                    at,
                )?;
                let field_bytes = item_size(
                    (size as u64).checked_mul(count as u64),
                    "structured field",
                    at,
                )?;
                item_size(
                    (offset as u64).checked_add(field_bytes as u64),
                    "structured type",
                    at,
                )?;
                let shape: Vec<usize> = shape.iter().map(|d| *d as usize).collect();
                for i in 0..count {
                    big.extend(field_big.iter().map(|(o, l)| (offset + i * size + o, *l)));
                }
                out.push(Field {
                    name: name.to_string(),
                    dtype,
                    offset,
                    shape,
                });
                offset += field_bytes;
            }
            Ok((DataType::Struct(out), big))
        }
        _ => Err(Error::metadata(at, format!("bad dtype {value}"))),
    }
}

/// A numpy typestring such as `<f8`, `>M8[ns]`, `|S5`, `<U3`, `|O`, `bool`.
pub fn parse_typestr(s: &str, at: &str) -> Result<(DataType, SwapUnits)> {
    let unsupported = || Error::unsupported(at, format!("data type {s:?}"));
    let (order, rest) = match s.chars().next() {
        Some(c @ ('<' | '>' | '|' | '=')) => (c, &s[1..]),
        _ => ('<', s),
    };
    let mut chars = rest.chars();
    let kind = chars.next().ok_or_else(unsupported)?;
    let tail = chars.as_str();
    let (num, unit) = match tail.find('[') {
        Some(i) if tail.ends_with(']') => (&tail[..i], Some(&tail[i + 1..tail.len() - 1])),
        _ => (tail, None),
    };
    let n: usize = if num.is_empty() && kind == 'O' {
        8
    } else if !num.is_empty() && num.bytes().all(|c| c.is_ascii_digit()) {
        // Counts of characters (U) are checked as their byte size.
        let count: Option<u64> = num.parse().ok();
        let bytes = if kind == 'U' {
            count.and_then(|c| c.checked_mul(4))
        } else {
            count
        };
        item_size(bytes, s, at)?;
        count.map(|c| c as usize).ok_or_else(unsupported)?
    } else {
        return Err(unsupported());
    };
    let dtype = match kind {
        'b' if n == 1 => DataType::Bool,
        'i' if [1, 2, 4, 8].contains(&n) => DataType::Int(n),
        'u' if [1, 2, 4, 8].contains(&n) => DataType::UInt(n),
        'f' if [2, 4, 8].contains(&n) => DataType::Float(n),
        'c' if [8, 16].contains(&n) => DataType::Complex(n),
        'M' | 'm' if n == 8 => {
            let unit = TimeUnit::parse(unit.unwrap_or("generic")).ok_or_else(unsupported)?;
            if kind == 'M' {
                DataType::DateTime(unit)
            } else {
                DataType::TimeDelta(unit)
            }
        }
        'U' => DataType::Utf32(n),
        'S' => DataType::Bytes(n),
        'V' => DataType::Raw(n),
        // Object arrays: the object codec (a filter) decides between text and bytes.
        'O' => DataType::String,
        _ => return Err(unsupported()),
    };
    let big = if order == '>' {
        dtype.swap_units()
    } else {
        vec![]
    };
    Ok((dtype, big))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_core_and_extension_names() {
        assert_eq!(
            parse_v3(&json!("float32"), "a").unwrap(),
            DataType::Float(4)
        );
        assert_eq!(parse_v3(&json!("r24"), "a").unwrap(), DataType::Raw(3));
        let dt = parse_v3(
            &json!({"name": "numpy.datetime64", "configuration": {"unit": "s", "scale_factor": 10}}),
            "a",
        )
        .unwrap();
        assert_eq!(dt.typestr(false), "<M8[10s]");
        let s = parse_v3(
            &json!({"name": "structured", "configuration": {"fields": [["a", "int16"], ["b", "float64"]]}}),
            "a",
        )
        .unwrap();
        assert_eq!(s.size(), Some(10));
        assert_eq!(s.swap_units(), vec![(0, 2), (2, 8)]);
        assert!(matches!(
            parse_v3(&json!("float128"), "a"),
            Err(Error::Unsupported { .. })
        ));
    }

    #[test]
    fn parses_v2_typestrings_with_byte_order() {
        let (dt, big) = parse_typestr(">c8", "a").unwrap();
        assert_eq!(dt, DataType::Complex(8));
        assert_eq!(big, vec![(0, 4), (4, 4)]);
        let (dt, big) = parse_typestr("<U2", "a").unwrap();
        assert_eq!((dt.size(), big.len()), (Some(8), 0));
        let (dt, _) = parse_typestr("<m8[15m]", "a").unwrap();
        assert_eq!(dt.typestr(true), ">m8[15m]");
        let (dt, big) = parse_v2(
            &json!([["x", ">i2"], ["y", [["z", "<f4"], ["w", ">u2", [2]]]]]),
            "a",
        )
        .unwrap();
        assert_eq!(dt.size(), Some(10));
        assert_eq!(big, vec![(0, 2), (6, 2), (8, 2)]);
        assert!(parse_typestr("<q8", "a").is_err());
    }

    #[test]
    fn absurd_element_sizes_fail_before_anything_is_built() {
        let too_big = |r: Result<DataType>| match r {
            Err(Error::Metadata { reason, .. }) => {
                assert!(reason.contains("larger than"), "{reason}")
            }
            other => panic!("expected a size error, got {other:?}"),
        };
        too_big(parse_v3(&json!("r8000000000"), "a"));
        too_big(parse_v3(&json!("r184467440737095516160"), "a"));
        for name in ["raw_bytes", "fixed_length_utf32", "null_terminated_bytes"] {
            too_big(parse_v3(
                &json!({"name": name, "configuration": {"length_bytes": 3_000_000_000u64}}),
                "a",
            ));
        }
        too_big(parse_v3(
            &json!({"name": "struct", "configuration": {"fields": [
                {"name": "a", "data_type": "int8", "byte_offset": u64::MAX}]}}),
            "a",
        ));
        for ts in [
            "|V3000000000",
            "|S3000000000",
            "<U1000000000",
            ">U1000000000",
        ] {
            too_big(parse_typestr(ts, "a").map(|(d, _)| d));
        }
        // Sub-array shapes whose product passes 2^61 (and 2^64) fail before any loop.
        too_big(parse_v2(&json!([["a", ">f8", [1u64 << 31, 1u64 << 31]]]), "a").map(|(d, _)| d));
        too_big(parse_v2(&json!([["a", "<i1", [u64::MAX, u64::MAX, 2]]]), "a").map(|(d, _)| d));
        // Within the limit, a big-endian text type still parses.
        let (dt, big) = parse_typestr(">U1000", "a").unwrap();
        assert_eq!((dt.size(), big.len()), (Some(4000), 1000));
    }
}
