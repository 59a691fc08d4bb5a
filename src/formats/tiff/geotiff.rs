//! What a TIFF view of a georeferenced array (see `conventions/geo`) carries on every
//! page: the GeoTIFF tags (ModelPixelScale and ModelTiepoint, or ModelTransformation for
//! rows that run south to north; the GeoKeys of its EPSG code, or a user-defined model
//! with GDAL's ESRI PE citation of a WKT 1 text without one), and GDAL's own tags for
//! nodata, scale and offset. Every tag is numbered past SampleFormat (339), so they follow
//! a page's own entries.

use super::ifd::{Endian, Tag};
use crate::formats::conventions::crs::CrsKind;
use crate::formats::conventions::geo::{number, Georef, Raster};

/// The GeoTIFF and GDAL tags of `raster` (of the array whose metadata is at `key`), in
/// ascending order; none for an array that is not placed on the Earth and has no
/// nodata, scale or offset.
pub fn tags(o: Endian, raster: &Raster, key: &str) -> Vec<Tag> {
    let mut tags = match &raster.georef {
        Some(g) => geotiff_tags(o, g, key),
        None => Vec::new(),
    };
    tags.extend(band_tags(raster));
    tags
}

/// GeoTIFF's tags for a georeference: where the pixels lie, and the CRS as GeoKeys.
fn geotiff_tags(o: Endian, g: &Georef, key: &str) -> Vec<Tag> {
    let t = &g.transform;
    let mut tags = Vec::new();
    if t[2] == 0.0 && t[4] == 0.0 && t[5] < 0.0 {
        tags.push(Tag::doubles(o, 33550, &[t[1], -t[5], 0.0]));
        tags.push(Tag::doubles(o, 33922, &[0.0, 0.0, 0.0, t[0], t[3], 0.0]));
    } else {
        let m = [
            t[1], t[2], 0.0, t[0], t[4], t[5], 0.0, t[3], 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0,
        ];
        tags.push(Tag::doubles(o, 34264, &m));
    }
    let model = match g.crs.kind {
        CrsKind::Projected => 1,
        CrsKind::Geographic => 2,
    };
    // (key, location, count, value): GTModelType, GTRasterType (pixel is area), then the
    // CRS by code, or user-defined with the WKT in the citation.
    let mut keys: Vec<[u16; 4]> = vec![[1024, 0, 1, model], [1025, 0, 1, 1]];
    let mut ascii = String::new();
    if let Some(code) = g.crs.epsg {
        let geokey = match g.crs.kind {
            CrsKind::Projected => 3072,
            CrsKind::Geographic => 2048,
        };
        keys.push([geokey, 0, 1, code]);
    } else if let Some(wkt) = g.crs.wkt1().filter(|w| w.len() < 60_000) {
        // GDAL reads the WKT of a user-defined model from the PCS citation.
        ascii = format!("ESRI PE String = {wkt}|");
        keys[0][3] = 32767;
        keys.push([3073, 34737, ascii.len() as u16, 0]);
    } else {
        log::info!("/{key}: the TIFF has no CRS: no EPSG code, and no WKT 1 text of it fits");
    }
    keys.sort_by_key(|k| k[0]);
    let mut dir: Vec<u16> = vec![1, 1, 0, keys.len() as u16];
    dir.extend(keys.iter().flatten());
    tags.push(Tag::short(o, 34735, &dir));
    if !ascii.is_empty() {
        tags.push(Tag::ascii(34737, &ascii));
    }
    tags
}

/// GDAL's own tags: GDAL_METADATA (scale and offset) and GDAL_NODATA.
fn band_tags(raster: &Raster) -> Vec<Tag> {
    let band = &raster.band;
    let mut tags = Vec::new();
    let mut items = String::new();
    for (name, role, value) in [
        ("OFFSET", "offset", band.offset),
        ("SCALE", "scale", band.scale),
    ] {
        if let Some(v) = value {
            items.push_str(&format!(
                "  <Item name=\"{name}\" sample=\"0\" role=\"{role}\">{}</Item>\n",
                number(v)
            ));
        }
    }
    if !items.is_empty() {
        tags.push(Tag::ascii(
            42112,
            &format!("<GDALMetadata>\n{items}</GDALMetadata>"),
        ));
    }
    if let Some(v) = band.nodata {
        tags.push(Tag::ascii(42113, &number(v)));
    }
    tags
}
