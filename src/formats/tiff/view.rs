//! The `.tif` view of an array: an uncompressed TIFF (BigTIFF past 4 GiB) whose pages are
//! the array's planes (the last two axes; every leading index a page, C order). A plane
//! that spans more than one of the array's chunks is cut into tiles the size of its
//! chunks (see `pyramid`), so that a reader of one window (GDAL, QGIS, by URL too) reads
//! and decodes only the chunks under it; else each page is one strip of the flat view
//! (see `strips`). Every page of a georeferenced array carries its GeoTIFF tags.

use super::ifd::Endian;
use super::pyramid::{self, Pyramid};
use super::{geotiff, strips};
use crate::formats::conventions::geo;
use crate::formats::{Built, Context, Format, Segment};

pub struct Tiff;

impl Format for Tiff {
    fn name(&self) -> &'static str {
        "tiff"
    }

    fn aliases(&self) -> &'static [&'static str] {
        &["tif"]
    }

    fn suffix(&self) -> &'static str {
        ".tif"
    }

    fn build(&self, ctx: &Context) -> crate::Result<Built> {
        Ok(ctx.flat_array()?.and_then(|meta| {
            let layout = ctx.layout();
            let pages = strips::pages(&meta, layout)?;
            let raster = geo::raster(ctx, &meta);
            let level = pyramid::level_of(ctx.path(), &meta);
            let tiles = pages.rows.div_ceil(level.tile.0) * pages.cols.div_ceil(level.tile.1);
            if tiles > 1 {
                let o = Endian {
                    big_endian: layout.big_endian,
                };
                let extra = geotiff::tags(o, &raster, &meta.meta_key);
                let tiled = pyramid::segments(&Pyramid {
                    planes: pages.pages,
                    scalar: pages.scalar,
                    big_endian: layout.big_endian,
                    description: &pages.description,
                    levels: std::slice::from_ref(&level),
                    extra: &extra,
                });
                match tiled {
                    Ok(segments) => return Ok(segments),
                    // Too many tiles for a header in memory: strips, which need none.
                    Err(why) => log::debug!("/{}: a TIFF in strips: {why}", ctx.path()),
                }
            }
            let header = strips::header(&meta, layout, &raster)?;
            Ok(vec![Segment::Bytes(header), Segment::array(ctx.path())])
        }))
    }
}
