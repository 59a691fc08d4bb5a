//! The TIFF family: `view.rs` the `.tif` view of an array (tiled by its chunks, or in
//! strips, `strips.rs`, with `geotiff.rs`'s tags when the array is georeferenced),
//! `ome.rs` the tiled pyramidal OME-TIFF of an OME-Zarr image, `pyramid.rs` the tiled
//! (pyramid) layout both are written in, `tiles.rs` how a tile maps to rows of a flat
//! view, and `ifd.rs` TIFF's building blocks (byte order, entries, classic and BigTIFF).

mod geotiff;
mod ifd;
pub mod ome;
mod pyramid;
mod strips;
pub mod tiles;
pub mod view;
