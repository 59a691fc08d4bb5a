//! Where an array lies on the Earth and what its values mean, read from the conventions
//! of its hierarchy, for the image views (`.tif`, `.vrt`, ENVI `.hdr`) to carry:
//!
//! - the grid: the array's last two dimensions named (v3 `dimension_names`, xarray's
//!   `_ARRAY_DIMENSIONS`) and each given by a regularly spaced 1-D sibling array of that
//!   name (its values the pixel centres, as GDAL's Zarr driver reads them);
//! - the CRS: CF `grid_mapping` (its variable's `crs_wkt` or `spatial_ref`, or a
//!   `latitude_longitude` mapping on WGS 84), GDAL's `_CRS`, the GeoZarr `proj:code` /
//!   `proj:wkt2` attributes, or, with none of them, `lat`/`lon` dimension names
//!   (EPSG:4326);
//! - the band: nodata from `_FillValue` (xarray writes it for v3 arrays as base64 of the
//!   little-endian value), else, for a georeferenced array, a v2 or 2020-draft fill value
//!   that is not `null` (as GDAL's Zarr driver reads both) or a v3 fill value that is NaN (v3 has no "no fill value", and zarr-python's
//!   default 0 is no nodata); CF `scale_factor` / `add_offset`.
//!
//! Absent, contradictory or irregular conventions leave the array without a georeference
//! (never a wrong one), and one log line at info level says why.

use base64::Engine;
use serde_json::{Map, Value};

use super::crs::{Crs, CrsKind};
use crate::codec::num::{Kind, Num};
use crate::formats::scalar::Scalar;
use crate::formats::Context;
use crate::hierarchy::join;
use crate::metadata::{ArrayMetadata, FillValue, Format};

/// The largest coordinate array read (bytes): 16 MiB is two million float64 values.
const COORD_LIMIT: u64 = 16 << 20;

/// Coordinates are regular when every step is within this fraction of the mean step
/// (GDAL's rule for its Zarr and netCDF drivers).
const REGULAR: f64 = 1e-3;

/// An array's place: GDAL's geotransform and the CRS.
#[derive(Debug, Clone, PartialEq)]
pub struct Georef {
    /// x of the top-left corner, pixel width, row rotation, y of the top-left corner,
    /// column rotation, pixel height (negative for north-up rows).
    pub transform: [f64; 6],
    pub crs: Crs,
}

/// What the values of an array mean.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Band {
    pub nodata: Option<f64>,
    pub scale: Option<f64>,
    pub offset: Option<f64>,
}

/// An array's georeference (when its conventions give one) and band metadata.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Raster {
    pub georef: Option<Georef>,
    pub band: Band,
}

/// A number as GDAL's headers write it: the shortest text that reads back the same.
pub fn number(v: f64) -> String {
    if v.is_nan() {
        "nan".into()
    } else if v.is_infinite() {
        if v > 0.0 { "inf" } else { "-inf" }.into()
    } else {
        format!("{v:?}")
    }
}

/// The raster of the array of `ctx`.
pub fn raster(ctx: &Context, meta: &ArrayMetadata) -> Raster {
    let georef = match georef(ctx, meta) {
        Ok(g) => Some(g),
        Err(why) => {
            // A 0-d or 1-d array is no raster: nothing to say.
            if meta.shape.len() >= 2 {
                log_once(ctx.path(), &why);
            }
            None
        }
    };
    let attrs = &meta.attributes;
    let nodata =
        fill_attribute(attrs, meta).or_else(|| georef.as_ref().and_then(|_| fill_value(meta)));
    Raster {
        band: Band {
            nodata,
            scale: attrs.get("scale_factor").and_then(Value::as_f64),
            offset: attrs.get("add_offset").and_then(Value::as_f64),
        },
        georef,
    }
}

/// Says once per array and reason why it has no georeference.
fn log_once(path: &str, why: &str) {
    crate::formats::log_once(format!("/{path}: not georeferenced: {why}"));
}

fn georef(ctx: &Context, meta: &ArrayMetadata) -> Result<Georef, String> {
    let n = meta.shape.len();
    if n < 2 {
        return Err(format!("rank {n} (a raster needs 2 or more dimensions)"));
    }
    let names = dimension_names(meta).ok_or("its dimensions have no names")?;
    let (y_name, x_name) = (&names[n - 2], &names[n - 1]);
    if is_lat(x_name) || is_lon(y_name) {
        return Err(format!(
            "its last axis is {x_name:?} and the one before {y_name:?}: the raster would be \
             transposed"
        ));
    }
    let parent = ctx.parent().unwrap_or("");
    let (x0, dx) = regular(ctx, parent, x_name, meta.shape[n - 1])?;
    let (y0, dy) = regular(ctx, parent, y_name, meta.shape[n - 2])?;
    let crs = crs(ctx, meta, parent)?;
    let crs = match crs {
        Some(crs) => crs,
        None if is_lat(y_name) && is_lon(x_name) => Crs::from_epsg(4326)?,
        None => return Err("no CRS (grid_mapping, _CRS, proj:code or lat/lon names)".into()),
    };
    if crs.kind == CrsKind::Projected && (is_lat(y_name) || is_lon(x_name)) {
        return Err(format!(
            "its dimensions {y_name:?}, {x_name:?} are latitude and longitude but its CRS \
             is projected"
        ));
    }
    Ok(Georef {
        transform: [x0 - dx / 2.0, dx, 0.0, y0 - dy / 2.0, 0.0, dy],
        crs,
    })
}

fn is_lat(name: &str) -> bool {
    matches!(name.to_ascii_lowercase().as_str(), "lat" | "latitude")
}

fn is_lon(name: &str) -> bool {
    matches!(
        name.to_ascii_lowercase().as_str(),
        "lon" | "long" | "longitude"
    )
}

/// The names of every dimension, when all are named.
fn dimension_names(meta: &ArrayMetadata) -> Option<Vec<String>> {
    let values = match &meta.dimension_names {
        Some(v) => v.clone(),
        None => meta
            .attributes
            .get("_ARRAY_DIMENSIONS")?
            .as_array()?
            .clone(),
    };
    let names: Vec<String> = values
        .iter()
        .map(|v| v.as_str().map(str::to_string))
        .collect::<Option<_>>()?;
    (names.len() == meta.shape.len()).then_some(names)
}

/// The first value and the step of the coordinate array `name` beside the array, when
/// it is 1-D of `len` numbers spaced regularly.
fn regular(ctx: &Context, parent: &str, name: &str, len: u64) -> Result<(f64, f64), String> {
    let path = join(parent, name);
    let meta = ctx
        .array(&path)
        .map_err(|_| format!("no coordinate array {name:?} beside it"))?;
    if meta.shape != [len] {
        return Err(format!(
            "coordinate {name:?} has shape {:?}, not [{len}]",
            meta.shape
        ));
    }
    if len < 2 {
        return Err(format!("coordinate {name:?} has one value: no spacing"));
    }
    let scalar = Scalar::of(&meta.dtype).map_err(|why| format!("coordinate {name:?}: {why}"))?;
    let num = real(&meta.dtype, ctx.layout().big_endian)
        .ok_or_else(|| format!("coordinate {name:?}: not real numbers"))?;
    let bytes = ctx
        .array_bytes(&path, COORD_LIMIT)
        .map_err(|e| format!("coordinate {name:?} could not be read: {e}"))?;
    let scale = meta.attributes.get("scale_factor").and_then(Value::as_f64);
    let offset = meta.attributes.get("add_offset").and_then(Value::as_f64);
    let values: Vec<f64> = bytes
        .chunks_exact(scalar.size())
        .map(|b| num.read_f64(b) * scale.unwrap_or(1.0) + offset.unwrap_or(0.0))
        .collect();
    if values.len() as u64 != len || values.iter().any(|v| !v.is_finite()) {
        return Err(format!(
            "coordinate {name:?} holds values that are not finite"
        ));
    }
    let first = values[0];
    let step = (values[values.len() - 1] - first) / (values.len() - 1) as f64;
    if step == 0.0 || !step.is_finite() {
        return Err(format!("coordinate {name:?} does not advance"));
    }
    let irregular = values
        .windows(2)
        .position(|w| ((w[1] - w[0]) - step).abs() > REGULAR * step.abs());
    if let Some(i) = irregular {
        return Err(format!(
            "coordinate {name:?} is irregular (step {} at {i}, mean {step})",
            values[i + 1] - values[i]
        ));
    }
    Ok((first, step))
}

/// How to read an element of `dtype` (stored big-endian or not) as a number: plain
/// reals only (no complex, datetime or text).
fn real(dtype: &crate::metadata::DataType, big: bool) -> Option<Num> {
    Scalar::of(dtype)
        .ok()
        .filter(|s| !matches!(s, Scalar::Complex(_)))?;
    Num::of(dtype).map(|n| Num { big, ..n })
}

/// The CRS the attributes give, if any; an error when they name one that cannot be had
/// or two that differ.
fn crs(ctx: &Context, meta: &ArrayMetadata, parent: &str) -> Result<Option<Crs>, String> {
    let attrs = &meta.attributes;
    let group = ctx.attributes(parent).unwrap_or_default();
    let mut found: Vec<(&str, Crs)> = Vec::new();
    if let Some(gm) = attrs.get("grid_mapping") {
        found.push(("grid_mapping", grid_mapping(ctx, parent, gm)?));
    }
    if let Some(c) = attrs.get("_CRS") {
        found.push(("_CRS", gdal_crs(c)?));
    }
    for source in [attrs, &group] {
        if let Some(c) = proj(source)? {
            found.push(("proj:", c));
            break;
        }
    }
    let mut found = found.into_iter();
    let Some((first_source, first)) = found.next() else {
        return Ok(None);
    };
    for (source, other) in found {
        let differ = match (first.epsg, other.epsg) {
            (Some(a), Some(b)) => a != b,
            _ => first.kind != other.kind,
        };
        if differ {
            return Err(format!(
                "{first_source} and {source} give different CRSs ({} and {})",
                describe(&first),
                describe(&other)
            ));
        }
    }
    Ok(Some(first))
}

fn describe(crs: &Crs) -> String {
    match crs.epsg {
        Some(code) => format!("EPSG:{code}"),
        None => format!("{:?} without a code", crs.kind),
    }
}

/// CF: the `grid_mapping` attribute names a variable (the first name of the extended
/// form `crs: x y`) whose attributes hold the CRS.
fn grid_mapping(ctx: &Context, parent: &str, value: &Value) -> Result<Crs, String> {
    let text = value.as_str().ok_or("grid_mapping is not a name")?;
    let name = text
        .split_whitespace()
        .next()
        .map(|n| n.trim_end_matches(':'))
        .filter(|n| !n.is_empty())
        .ok_or("grid_mapping is empty")?;
    let attrs = ctx
        .array(&join(parent, name))
        .map(|m| m.attributes.clone())
        .map_err(|_| format!("grid_mapping names {name:?}, which is not an array beside it"))?;
    for key in ["crs_wkt", "spatial_ref"] {
        if let Some(wkt) = attrs.get(key).and_then(Value::as_str) {
            return Crs::from_wkt(wkt).map_err(|why| format!("grid_mapping {name:?} {key}: {why}"));
        }
    }
    let mapping = attrs.get("grid_mapping_name").and_then(Value::as_str);
    if mapping == Some("latitude_longitude") && wgs84(&attrs) {
        return Crs::from_epsg(4326);
    }
    Err(format!(
        "grid_mapping {name:?} has no crs_wkt or spatial_ref (and is not latitude_longitude on \
         WGS 84)"
    ))
}

/// Whether a CF grid mapping's ellipsoid is WGS 84 (or not given, CF's default sphere
/// aside: GDAL reads a bare `latitude_longitude` as WGS 84).
fn wgs84(attrs: &Map<String, Value>) -> bool {
    let close = |key: &str, want: f64| {
        attrs
            .get(key)
            .and_then(Value::as_f64)
            .is_none_or(|v| (v - want).abs() <= want.abs() * 1e-9)
    };
    close("semi_major_axis", 6378137.0)
        && close("inverse_flattening", 298.257223563)
        && !attrs.contains_key("earth_radius")
        && !attrs.contains_key("semi_minor_axis")
}

/// GDAL's `_CRS`: `{"wkt": ..., "url": ".../EPSG/0/CODE", "projjson": ...}`.
fn gdal_crs(value: &Value) -> Result<Crs, String> {
    if let Some(wkt) = value.get("wkt").and_then(Value::as_str) {
        return Crs::from_wkt(wkt).map_err(|why| format!("_CRS wkt: {why}"));
    }
    if let Some(url) = value.get("url").and_then(Value::as_str) {
        if let Some(code) = url.strip_prefix("http://www.opengis.net/def/crs/EPSG/0/") {
            let code = code.parse().map_err(|_| format!("_CRS url {url:?}"))?;
            return Crs::from_epsg(code);
        }
    }
    Err("_CRS holds no wkt or EPSG url".into())
}

/// The GeoZarr convention's `proj:code` (`"EPSG:n"`), `proj:epsg` or `proj:wkt2`.
fn proj(attrs: &Map<String, Value>) -> Result<Option<Crs>, String> {
    if let Some(code) = attrs.get("proj:code").and_then(Value::as_str) {
        let n = code
            .strip_prefix("EPSG:")
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| format!("proj:code {code:?} is not EPSG:n"))?;
        return Crs::from_epsg(n).map(Some);
    }
    if let Some(n) = attrs.get("proj:epsg").and_then(Value::as_u64) {
        return Crs::from_epsg(n).map(Some);
    }
    if let Some(wkt) = attrs.get("proj:wkt2").and_then(Value::as_str) {
        return Crs::from_wkt(wkt).map(Some);
    }
    Ok(None)
}

/// xarray's `_FillValue`: a number, `"NaN"`-like text, or (v3) base64 of the
/// little-endian element.
fn fill_attribute(attrs: &Map<String, Value>, meta: &ArrayMetadata) -> Option<f64> {
    match attrs.get("_FillValue")? {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => match s.as_str() {
            "NaN" | "nan" => Some(f64::NAN),
            "Infinity" | "inf" => Some(f64::INFINITY),
            "-Infinity" | "-inf" => Some(f64::NEG_INFINITY),
            _ => {
                // xarray writes a float's as float64 whatever the array's size.
                let bytes = base64::engine::general_purpose::STANDARD.decode(s).ok()?;
                let num = match real(&meta.dtype, false)? {
                    n if n.kind == Kind::Float && bytes.len() == 8 => Num { size: 8, ..n },
                    n => n,
                };
                (bytes.len() == num.size).then(|| num.read_f64(&bytes))
            }
        },
        _ => None,
    }
}

/// The array's fill value as nodata, as GDAL's Zarr driver takes it: a v2 or 2020-draft one
/// that is not `null` (GDAL 3.6 writes a draft array's nodata only as its fill value), a
/// v3 one that is NaN.
fn fill_value(meta: &ArrayMetadata) -> Option<f64> {
    if meta.fill_json.is_null() {
        return None;
    }
    let value = match &meta.fill {
        FillValue::Fixed(bytes) => real(&meta.dtype, false)?.read_f64(bytes),
        FillValue::Var(_) => return None,
    };
    (matches!(meta.format, Format::V2 | Format::Draft) || value.is_nan()).then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_back_the_same() {
        assert_eq!(number(-9999.0), "-9999.0");
        assert_eq!(number(0.1), "0.1");
        assert_eq!(number(f64::NAN), "nan");
        assert_eq!(number(f64::NEG_INFINITY), "-inf");
        assert_eq!(number(500000.0 - 15.0), "499985.0");
    }

    #[test]
    fn elements_decode_in_either_byte_order() {
        use crate::metadata::DataType;
        let f8 = real(&DataType::Float(8), false).unwrap();
        assert_eq!(f8.read_f64(&(-9999.0f64).to_le_bytes()), -9999.0);
        let i2 = real(&DataType::Int(2), true).unwrap();
        assert_eq!(i2.read_f64(&(-3i16).to_be_bytes()), -3.0);
        assert!(real(&DataType::Complex(8), false).is_none());
        let b64 = base64::engine::general_purpose::STANDARD
            .decode("AAAAAICHw8A=")
            .unwrap();
        assert_eq!(f8.read_f64(&b64), -9999.0);
    }
}
