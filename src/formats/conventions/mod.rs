//! What the image formats read of a hierarchy's conventions: `geo.rs` an array's
//! georeference and band metadata (CF, GDAL, GeoZarr, xarray), `crs.rs` what the formats
//! need of a CRS (WKT 1 or 2, EPSG), `ome.rs` an OME-NGFF multiscale image (its axes,
//! levels, scale and channels).

pub mod crs;
pub mod geo;
pub mod ome;
