//! A GDAL `.vrt` over the raw file: one `VRTRawRasterBand` per leading index (C order),
//! the last two axes as the raster, with pixel, line and image offsets that give GDAL the
//! array's own orientation whatever the file's element order. A georeferenced array
//! (see `geo`) gets its `GeoTransform` and `SRS`; every band its nodata, scale and offset.

use std::fmt::Write;

use crate::formats::conventions::geo::{self, Raster};
use crate::formats::scalar::Scalar;
use crate::formats::{non_empty, xml_char, xml_escape, Absent, Built, Context, Format, MAX_PLANES};
use crate::metadata::ArrayMetadata;
use crate::read::view::{Layout, Order};

pub struct Vrt;

impl Format for Vrt {
    fn name(&self) -> &'static str {
        "vrt"
    }

    fn suffix(&self) -> &'static str {
        ".vrt"
    }

    fn needs_raw(&self) -> bool {
        true
    }

    fn build(&self, ctx: &Context) -> crate::Result<Built> {
        ctx.detached(|meta, layout, file| header(meta, layout, file, &geo::raster(ctx, meta)))
    }
}

/// GDAL 3.6's raster data type of each element type it has.
fn data_type(scalar: Scalar) -> Option<&'static str> {
    Some(match scalar {
        Scalar::Bool | Scalar::UInt(1) => "Byte",
        Scalar::Int(2) => "Int16",
        Scalar::UInt(2) => "UInt16",
        Scalar::Int(4) => "Int32",
        Scalar::UInt(4) => "UInt32",
        Scalar::Int(8) => "Int64",
        Scalar::UInt(8) => "UInt64",
        Scalar::Float(4) => "Float32",
        Scalar::Float(8) => "Float64",
        Scalar::Complex(8) => "CFloat32",
        Scalar::Complex(16) => "CFloat64",
        _ => return None,
    })
}

/// Element strides of each axis in the file.
fn strides(shape: &[u64], order: Order) -> Vec<u64> {
    let mut out = vec![0u64; shape.len()];
    let mut step = 1u64;
    let axes: Vec<usize> = match order {
        Order::C => (0..shape.len()).rev().collect(),
        Order::F => (0..shape.len()).collect(),
    };
    for a in axes {
        out[a] = step;
        step = step.saturating_mul(shape[a]);
    }
    out
}

pub fn header(
    meta: &ArrayMetadata,
    layout: Layout,
    data_file: &str,
    raster: &Raster,
) -> Result<Vec<u8>, Absent> {
    let scalar = Scalar::of(&meta.dtype)?;
    let kind = data_type(scalar).ok_or_else(|| scalar.unsupported("GDAL 3.6"))?;
    non_empty(meta)?;
    // The raster is the last two axes (a 1-d array is one row, a 0-d one pixel).
    let mut shape = meta.shape.clone();
    let mut file_strides = strides(&shape, layout.order);
    while shape.len() < 2 {
        shape.insert(0, 1);
        file_strides.insert(0, 0);
    }
    let n = shape.len();
    let (rows, cols) = (shape[n - 2], shape[n - 1]);
    let lead = &shape[..n - 2];
    let bands: u64 = lead.iter().product();
    if bands > MAX_PLANES {
        return Err(format!("{bands} bands (at most {MAX_PLANES})"));
    }
    let item = scalar.size() as u64;
    let limit = i32::MAX as u64;
    let pixel = if cols > 1 {
        item * file_strides[n - 1]
    } else {
        item
    };
    let line = if rows > 1 {
        item * file_strides[n - 2]
    } else {
        item * cols
    };
    if rows > limit || cols > limit || pixel > limit || line > limit {
        return Err("sizes or offsets beyond GDAL's 32-bit range".into());
    }
    let order = if layout.big_endian { "MSB" } else { "LSB" };
    // A name XML cannot hold cannot be named by the VRT (a replaced character would name
    // another file).
    if !data_file.chars().all(xml_char) {
        return Err(format!(
            "the data file's name {data_file:?} has characters XML 1.0 cannot hold"
        ));
    }
    let file = xml_escape(data_file);
    let mut text = format!("<VRTDataset rasterXSize=\"{cols}\" rasterYSize=\"{rows}\">\n");
    if let Some(g) = &raster.georef {
        let gt: Vec<String> = g.transform.iter().map(|v| geo::number(*v)).collect();
        let _ = write!(
            text,
            "  <SRS>{}</SRS>\n  <GeoTransform>{}</GeoTransform>\n",
            xml_escape(&g.crs.user_input()),
            gt.join(", ")
        );
    }
    let mut band_meta = String::new();
    let band = &raster.band;
    for (tag, value) in [
        ("NoDataValue", band.nodata),
        ("Offset", band.offset),
        ("Scale", band.scale),
    ] {
        if let Some(v) = value {
            let _ = writeln!(band_meta, "    <{tag}>{}</{tag}>", geo::number(v));
        }
    }
    let mut idx = vec![0u64; lead.len()];
    for band in 1..=bands {
        let offset: u64 = idx
            .iter()
            .zip(&file_strides)
            .map(|(i, s)| i * s * item)
            .sum();
        let _ = write!(
            text,
            "  <VRTRasterBand dataType=\"{kind}\" band=\"{band}\" subClass=\"VRTRawRasterBand\">\n    \
             <SourceFilename relativeToVRT=\"1\">{file}</SourceFilename>\n    \
             <ImageOffset>{offset}</ImageOffset>\n    \
             <PixelOffset>{pixel}</PixelOffset>\n    \
             <LineOffset>{line}</LineOffset>\n    \
             <ByteOrder>{order}</ByteOrder>\n\
             {band_meta}  \
             </VRTRasterBand>\n"
        );
        // The next leading index, C order.
        for a in (0..idx.len()).rev() {
            idx[a] += 1;
            if idx[a] < lead[a] {
                break;
            }
            idx[a] = 0;
        }
    }
    text.push_str("</VRTDataset>\n");
    Ok(text.into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strides_follow_the_file_order() {
        assert_eq!(strides(&[2, 3, 4], Order::C), [12, 4, 1]);
        assert_eq!(strides(&[2, 3, 4], Order::F), [1, 2, 6]);
    }
}
