//! ENVI `.hdr` beside the raw file (GDAL's ENVI driver finds `NAME.hdr` for `NAME`):
//! band-sequential, samples the fastest file axis, lines the next, bands the rest. A
//! georeferenced array (see `geo`) in C order gets its `map info` and, from a WKT 1 text
//! of its CRS, `coordinate system string`; nodata, scale and offset go to `data ignore
//! value`, `data gain values` and `data offset values`.

use std::fmt::Write;

use crate::formats::conventions::crs::CrsKind;
use crate::formats::conventions::geo::{self, number, Georef, Raster};
use crate::formats::scalar::Scalar;
use crate::formats::{file_shape, non_empty, Absent, Built, Context, Format, MAX_PLANES};
use crate::metadata::ArrayMetadata;
use crate::read::view::{Layout, Order};

pub struct Envi;

impl Format for Envi {
    fn name(&self) -> &'static str {
        "envi"
    }

    fn aliases(&self) -> &'static [&'static str] {
        &["hdr"]
    }

    fn suffix(&self) -> &'static str {
        ".hdr"
    }

    fn needs_raw(&self) -> bool {
        true
    }

    fn build(&self, ctx: &Context) -> crate::Result<Built> {
        ctx.detached(|meta, layout, _| header(meta, layout, &geo::raster(ctx, meta)))
    }
}

/// ENVI's `data type` code of each element type it has.
fn code(scalar: Scalar) -> Option<u8> {
    Some(match scalar {
        Scalar::Bool | Scalar::UInt(1) => 1,
        Scalar::Int(2) => 2,
        Scalar::Int(4) => 3,
        Scalar::Float(4) => 4,
        Scalar::Float(8) => 5,
        Scalar::Complex(8) => 6,
        Scalar::Complex(16) => 9,
        Scalar::UInt(2) => 12,
        Scalar::UInt(4) => 13,
        Scalar::Int(8) => 14,
        Scalar::UInt(8) => 15,
        _ => return None,
    })
}

/// (samples, lines, bands) of a file shape, slowest axis first.
pub fn planes(shape: &[u64]) -> (u64, u64, u64) {
    match shape {
        [] => (1, 1, 1),
        [n] => (*n, 1, 1),
        [lead @ .., lines, samples] => (*samples, *lines, lead.iter().product()),
    }
}

pub fn header(meta: &ArrayMetadata, layout: Layout, raster: &Raster) -> Result<Vec<u8>, Absent> {
    let scalar = Scalar::of(&meta.dtype)?;
    let code = code(scalar).ok_or_else(|| scalar.unsupported("ENVI"))?;
    non_empty(meta)?;
    // GDAL's ENVI driver reads the first two bytes of the raw file before it looks for the
    // header, and refuses a file of one byte.
    let elements: u64 = meta.shape.iter().product();
    if code == 1 && elements < 2 {
        return Err("GDAL's ENVI driver does not open a raw file of one byte".into());
    }
    let (samples, lines, bands) = planes(&file_shape(meta, layout));
    let mut text = format!(
        "ENVI\n\
         description = {{zarrfs view of {key}, shape [{shape}]}}\n\
         samples = {samples}\n\
         lines = {lines}\n\
         bands = {bands}\n\
         header offset = 0\n\
         file type = ENVI Standard\n\
         data type = {code}\n\
         interleave = bsq\n\
         byte order = {order}\n",
        key = meta.meta_key.replace(['{', '}'], ""),
        shape = meta
            .shape
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        order = u8::from(layout.big_endian),
    );
    if let Some(g) = &raster.georef {
        if layout.order == Order::C {
            map_info(&mut text, g, &meta.meta_key);
        } else {
            log::info!(
                "/{}: the ENVI header is not georeferenced: an F-order file's lines are the \
                 array's columns",
                meta.meta_key
            );
        }
    }
    let band = &raster.band;
    if let Some(v) = band.nodata {
        let _ = writeln!(text, "data ignore value = {}", number(v));
    }
    if bands <= MAX_PLANES {
        for (field, value) in [
            ("data gain values", band.scale),
            ("data offset values", band.offset),
        ] {
            if let Some(v) = value {
                let list = vec![number(v); bands as usize].join(", ");
                let _ = writeln!(text, "{field} = {{{list}}}");
            }
        }
    }
    Ok(text.into_bytes())
}

/// `map info` (the top-left corner of the first pixel, pixel sizes; the y size is
/// positive for north-up rows) and the CRS: by name for WGS 84 and its UTM zones, which
/// ENVI names itself, else as `coordinate system string` (WKT 1, which GDAL reads).
fn map_info(text: &mut String, g: &Georef, key: &str) {
    let t = &g.transform;
    let corner = format!(
        "1, 1, {}, {}, {}, {}",
        number(t[0]),
        number(t[3]),
        number(t[1]),
        number(-t[5])
    );
    let info = match (g.crs.epsg, g.crs.kind) {
        (Some(4326), _) => format!("Geographic Lat/Lon, {corner}, WGS-84"),
        (Some(code @ 32601..=32660), _) => {
            format!("UTM, {corner}, {}, North, WGS-84", code - 32600)
        }
        (Some(code @ 32701..=32760), _) => {
            format!("UTM, {corner}, {}, South, WGS-84", code - 32700)
        }
        (_, kind) => {
            let name = match kind {
                CrsKind::Geographic => "Geographic Lat/Lon",
                CrsKind::Projected => "Arbitrary",
            };
            format!("{name}, {corner}")
        }
    };
    let _ = writeln!(text, "map info = {{{info}}}");
    match g.crs.wkt1() {
        Some(wkt) => {
            let _ = writeln!(
                text,
                "coordinate system string = {{{}}}",
                wkt.replace(['{', '}'], "")
            );
        }
        None => log::info!("/{key}: the ENVI header has no CRS: no WKT 1 text of it is known"),
    }
}
