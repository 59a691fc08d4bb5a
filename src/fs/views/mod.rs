//! The files an array shows besides (or instead of) its raw flat file: a complete `.npy`
//! or TIFF (a header in front of the raw bytes) and detached headers beside the raw file
//! (ENVI `.hdr`, MetaImage `.mhd`, NRRD `.nhdr`, GDAL `.vrt`), so that numpy, GDAL,
//! ImageJ, ITK and ENVI open an array with no parameters. Headers are built from the
//! normalized metadata here, one small file per format; data bytes always come from the
//! array's one flat view.

mod envi;
mod mhd;
mod npy;
mod nrrd;
mod scalar;
mod tiff;
mod vrt;

use std::fmt;
use std::str::FromStr;

use crate::metadata::ArrayMetadata;
use crate::read::view::Layout;

/// Image planes (TIFF pages, VRT bands) a header may describe at most: the header is held
/// in memory, about 250 bytes a plane.
pub const MAX_PLANES: u64 = 1 << 16;

/// One way of showing an array as a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ViewKind {
    Raw,
    Npy,
    Tiff,
    Envi,
    Mhd,
    Nrrd,
    Vrt,
}

impl ViewKind {
    pub const ALL: [ViewKind; 7] = [
        ViewKind::Raw,
        ViewKind::Npy,
        ViewKind::Tiff,
        ViewKind::Envi,
        ViewKind::Mhd,
        ViewKind::Nrrd,
        ViewKind::Vrt,
    ];

    /// The name used in `--views` and `--as`.
    pub fn label(self) -> &'static str {
        match self {
            ViewKind::Raw => "raw",
            ViewKind::Npy => "npy",
            ViewKind::Tiff => "tiff",
            ViewKind::Envi => "envi",
            ViewKind::Mhd => "mhd",
            ViewKind::Nrrd => "nrrd",
            ViewKind::Vrt => "vrt",
        }
    }

    /// What the view's file name adds to the array's name.
    pub fn suffix(self) -> &'static str {
        match self {
            ViewKind::Raw => "",
            ViewKind::Npy => ".npy",
            ViewKind::Tiff => ".tif",
            ViewKind::Envi => ".hdr",
            ViewKind::Mhd => ".mhd",
            ViewKind::Nrrd => ".nhdr",
            ViewKind::Vrt => ".vrt",
        }
    }

    /// The view's file name for the array file `name`.
    pub fn file_name(self, name: &str) -> String {
        format!("{name}{}", self.suffix())
    }

    /// A header in front of the raw bytes, in one file (`.npy`, `.tif`).
    pub fn is_headed(self) -> bool {
        matches!(self, ViewKind::Npy | ViewKind::Tiff)
    }

    /// A header file that points at the raw file, which must then be shown too.
    pub fn is_detached(self) -> bool {
        matches!(
            self,
            ViewKind::Envi | ViewKind::Mhd | ViewKind::Nrrd | ViewKind::Vrt
        )
    }

    fn bit(self) -> u8 {
        1 << self as u8
    }
}

impl FromStr for ViewKind {
    type Err = String;

    fn from_str(s: &str) -> Result<ViewKind, String> {
        let s = s.trim().to_ascii_lowercase();
        let s = match s.as_str() {
            "tif" => "tiff",
            "hdr" => "envi",
            "nhdr" => "nrrd",
            other => other,
        };
        ViewKind::ALL
            .into_iter()
            .find(|k| k.label() == s)
            .ok_or_else(|| {
                format!("unknown view {s:?}: one of raw, npy, tiff, envi, mhd, nrrd, vrt, all")
            })
    }
}

/// The views a mount shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ViewSet(u8);

impl Default for ViewSet {
    /// The raw file only.
    fn default() -> ViewSet {
        ViewSet(ViewKind::Raw.bit())
    }
}

impl ViewSet {
    pub fn contains(self, kind: ViewKind) -> bool {
        self.0 & kind.bit() != 0
    }

    /// The views listed, in a fixed order.
    pub fn kinds(self) -> impl Iterator<Item = ViewKind> {
        ViewKind::ALL.into_iter().filter(move |k| self.contains(*k))
    }

    /// Whether the raw file is shown: asked for, or needed by a detached header.
    pub fn shows_raw(self) -> bool {
        self.kinds().any(|k| k == ViewKind::Raw || k.is_detached())
    }

    /// The views other than the raw file.
    pub fn extra(self) -> impl Iterator<Item = ViewKind> {
        self.kinds().filter(|k| *k != ViewKind::Raw)
    }
}

impl FromStr for ViewSet {
    type Err = String;

    /// A list such as `raw,npy,tiff` or `all` (`:` also separates, for `-o views=npy:tiff`).
    fn from_str(s: &str) -> Result<ViewSet, String> {
        let mut bits = 0u8;
        for part in s.split([',', ':']).map(str::trim).filter(|p| !p.is_empty()) {
            if part.eq_ignore_ascii_case("all") {
                bits |= ViewKind::ALL.iter().map(|k| k.bit()).fold(0, |a, b| a | b);
            } else {
                bits |= part.parse::<ViewKind>()?.bit();
            }
        }
        if bits == 0 {
            return Err("no views listed".into());
        }
        Ok(ViewSet(bits))
    }
}

impl fmt::Display for ViewSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let labels: Vec<&str> = self.kinds().map(ViewKind::label).collect();
        f.write_str(&labels.join(","))
    }
}

/// Why a view is absent for an array.
pub type Absent = String;

/// The header of view `kind` for an array with metadata `meta`, served in `layout`, whose
/// raw file is named `data_file`: the bytes in front of the data for headed views, the
/// whole file for detached ones, nothing for the raw view. An error says why the format
/// cannot describe this array.
pub fn header(
    kind: ViewKind,
    meta: &ArrayMetadata,
    layout: Layout,
    data_file: &str,
) -> Result<Vec<u8>, Absent> {
    if meta.dtype.is_var() {
        return Err("variable-length elements have no flat view".into());
    }
    match kind {
        ViewKind::Raw => Ok(Vec::new()),
        ViewKind::Npy => npy::header(meta, layout),
        ViewKind::Tiff => tiff::header(meta, layout),
        ViewKind::Envi => envi::header(meta, layout),
        ViewKind::Mhd => mhd::header(meta, layout, data_file),
        ViewKind::Nrrd => nrrd::header(meta, layout, data_file),
        ViewKind::Vrt => vrt::header(meta, layout, data_file),
    }
}

/// The shape as the file lays it out, slowest axis first: the shape in C order, reversed
/// in F order.
fn file_shape(meta: &ArrayMetadata, layout: Layout) -> Vec<u64> {
    let mut shape = meta.shape.clone();
    if layout.order == crate::read::view::Order::F {
        shape.reverse();
    }
    shape
}

/// Fail for an array with no elements: image formats need every size at least 1.
fn non_empty(meta: &ArrayMetadata) -> Result<(), Absent> {
    if meta.shape.contains(&0) {
        Err("the array has no elements".into())
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn view_lists_parse_with_commas_colons_and_all() {
        let set: ViewSet = "npy:tiff".parse().unwrap();
        assert_eq!(set.to_string(), "npy,tiff");
        assert!(!set.shows_raw());
        let set: ViewSet = "npy,envi".parse().unwrap();
        assert!(set.shows_raw(), "a detached header needs the raw file");
        let all: ViewSet = "all".parse().unwrap();
        assert_eq!(all.to_string(), "raw,npy,tiff,envi,mhd,nrrd,vrt");
        assert_eq!(
            "TIF,hdr".parse::<ViewSet>().unwrap().to_string(),
            "tiff,envi"
        );
        assert!("npy,jpeg".parse::<ViewSet>().is_err());
        assert!("".parse::<ViewSet>().is_err());
        assert_eq!(ViewSet::default().to_string(), "raw");
    }
}
