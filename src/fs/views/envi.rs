//! ENVI `.hdr` beside the raw file (GDAL's ENVI driver finds `NAME.hdr` for `NAME`):
//! band-sequential, samples the fastest file axis, lines the next, bands the rest.

use super::scalar::Scalar;
use super::{file_shape, non_empty, Absent, Built, Context, ViewFormat};
use crate::metadata::ArrayMetadata;
use crate::read::view::Layout;

pub struct Envi;

impl ViewFormat for Envi {
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
        ctx.detached(|meta, layout, _| header(meta, layout))
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

pub fn header(meta: &ArrayMetadata, layout: Layout) -> Result<Vec<u8>, Absent> {
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
    let text = format!(
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
    Ok(text.into_bytes())
}
