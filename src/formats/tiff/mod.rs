//! The TIFF family: `strips.rs` the plain TIFF of an array (a page of one strip per
//! leading index, GeoTIFF tags when the array is georeferenced), `ome.rs` the tiled
//! pyramidal OME-TIFF of an OME-Zarr image, `pyramid.rs` the pyramid layout it is written
//! in, `tiles.rs` how a tile maps to rows of a flat view, and `ifd.rs` TIFF's building
//! blocks (byte order, entries, classic and BigTIFF).

mod ifd;
pub mod ome;
mod pyramid;
pub mod strips;
pub mod tiles;
