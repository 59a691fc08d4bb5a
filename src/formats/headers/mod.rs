//! The formats that put a header in front of an array's flat bytes or beside them: the
//! raw file itself, `.npy` (header in front), and the detached headers that name the raw
//! file: ENVI `.hdr`, MetaImage `.mhd`, NRRD `.nhdr` and GDAL `.vrt`. One file per format.

pub mod envi;
pub mod mhd;
pub mod npy;
pub mod nrrd;
pub mod raw;
pub mod vrt;
