//! The file formats: what files an array (or a group) shows, its raw flat file and the
//! others (the CLI calls them views: `--views`, `cat --as`): a complete `.npy` or TIFF (a
//! header in front of the raw bytes), detached headers beside the raw file (ENVI `.hdr`,
//! MetaImage `.mhd`, NRRD `.nhdr`, GDAL `.vrt`) and OME-TIFF pyramids of OME-Zarr images,
//! so that numpy, GDAL, ImageJ, ITK and ENVI open an array with no parameters. The layer
//! sits between `fs`, which serves the files, and `read`, whose flat views they cut up;
//! `cat` builds them here too.
//!
//! `headers/` holds the header writers, `tiff/` the TIFF family, `conventions/` what the
//! formats read of a hierarchy's conventions (georeference, CRS, OME-NGFF), `scalar.rs`
//! an element type as the headers name it. Each format is one small file holding a
//! [`Format`] and one line in [`FORMATS`]:
//! its name, suffix, aliases, where its file sits, and how it builds the file from a
//! [`Context`] (the node, its parents' attributes, sibling arrays). A file is a list of
//! [`Segment`]s: literal bytes, byte ranges of arrays' flat views, or a plane of one cut
//! into tiles, which the filesystem serves from the arrays' one shared view each.

mod context;
mod conventions;
mod headers;
mod scalar;
#[cfg(test)]
mod test_concat;
mod tiff;

use std::fmt;
use std::str::FromStr;

pub use context::{too_large, Context};
pub use tiff::tiles::TileGrid;

use crate::metadata::ArrayMetadata;
use crate::read::view::Layout;
use crate::Result;

/// Image planes (TIFF pages, VRT bands) a header may describe at most: the header is held
/// in memory, about 250 bytes a plane.
pub const MAX_PLANES: u64 = 1 << 16;

/// Every format, in the order listings and `--views all` name them. A new format is
/// one file and one line here.
static FORMATS: &[&dyn Format] = &[
    &headers::raw::Raw,
    &headers::npy::Npy,
    &tiff::view::Tiff,
    &headers::envi::Envi,
    &headers::mhd::Mhd,
    &headers::nrrd::Nrrd,
    &headers::vrt::Vrt,
    &tiff::ome::OmeTiff,
    #[cfg(test)]
    &test_concat::Concat,
];

/// Why a format has no file for a node.
pub type Absent = String;

/// What a format builds for a node: the file's segments, or why it has no file.
pub type Built = std::result::Result<Vec<Segment>, Absent>;

/// A piece of a format's file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    /// Bytes held whole (a header, a trailer).
    Bytes(Vec<u8>),
    /// `len` bytes from `offset` of the flat view of the array at node path `path`
    /// (`None`: the whole view).
    Array {
        path: String,
        range: Option<(u64, u64)>,
    },
    /// One plane of the flat view of the array at `path`, as tiles (see [`TileGrid`]).
    Tiles { path: String, grid: TileGrid },
}

impl Segment {
    /// The whole flat view of the array at `path`.
    pub fn array(path: &str) -> Segment {
        Segment::Array {
            path: path.to_string(),
            range: None,
        }
    }
}

/// Where a format's file sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Placement {
    /// Beside an array's raw file: the array's name and the suffix.
    Array,
    /// Beside a group's folder, in the group's parent: the group's name and the suffix.
    Group,
}

/// One way of showing a node as a file.
pub trait Format: Send + Sync {
    /// The name used in `--views` and `--as`.
    fn name(&self) -> &'static str;
    /// Other names accepted for it.
    fn aliases(&self) -> &'static [&'static str] {
        &[]
    }
    /// What the file's name adds to the node's name.
    fn suffix(&self) -> &'static str;
    /// Where the file sits.
    fn placement(&self) -> Placement {
        Placement::Array
    }
    /// A header file that names the raw file, which must then be shown too.
    fn needs_raw(&self) -> bool {
        false
    }
    /// The file for the node of `ctx`, or why there is none; an error when what the
    /// format needs to know could not be read.
    fn build(&self, ctx: &Context) -> Result<Built>;
}

/// A format of [`FORMATS`], by its place there.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FormatKind(usize);

impl fmt::Debug for FormatKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

impl FormatKind {
    /// The array's own flat file.
    pub const RAW: FormatKind = FormatKind(0);

    /// Every format.
    pub fn all() -> impl Iterator<Item = FormatKind> {
        (0..FORMATS.len()).map(FormatKind)
    }

    pub fn format(self) -> &'static dyn Format {
        FORMATS[self.0]
    }

    /// The name used in `--views` and `--as`.
    pub fn label(self) -> &'static str {
        self.format().name()
    }

    /// What the format's file name adds to the node's name.
    pub fn suffix(self) -> &'static str {
        self.format().suffix()
    }

    /// The format's file name for the node file `name`.
    pub fn file_name(self, name: &str) -> String {
        format!("{name}{}", self.suffix())
    }

    pub fn placement(self) -> Placement {
        self.format().placement()
    }

    /// The names of every format, for messages.
    fn names() -> String {
        let names: Vec<&str> = Self::all().map(FormatKind::label).collect();
        names.join(", ")
    }
}

impl FromStr for FormatKind {
    type Err = String;

    /// A format by its name or one of its aliases, in any case.
    fn from_str(s: &str) -> std::result::Result<FormatKind, String> {
        let s = s.trim().to_ascii_lowercase();
        FormatKind::all()
            .find(|k| k.label() == s || k.format().aliases().contains(&s.as_str()))
            .ok_or_else(|| format!("unknown view {s:?}: one of {}, all", FormatKind::names()))
    }
}

/// The formats a mount shows (`--views`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormatSet(Vec<FormatKind>);

impl Default for FormatSet {
    /// The raw file only.
    fn default() -> FormatSet {
        FormatSet(vec![FormatKind::RAW])
    }
}

impl FormatSet {
    pub fn contains(&self, kind: FormatKind) -> bool {
        self.0.contains(&kind)
    }

    /// The formats listed, in the registry's order.
    pub fn kinds(&self) -> impl Iterator<Item = FormatKind> + '_ {
        self.0.iter().copied()
    }

    /// Whether the raw file is shown: asked for, or needed by a detached header.
    pub fn shows_raw(&self) -> bool {
        self.kinds()
            .any(|k| k == FormatKind::RAW || k.format().needs_raw())
    }

    /// The formats other than the raw file placed as `placement` says.
    pub fn extra(&self, placement: Placement) -> impl Iterator<Item = FormatKind> + '_ {
        self.kinds()
            .filter(move |k| *k != FormatKind::RAW && k.placement() == placement)
    }
}

impl FromStr for FormatSet {
    type Err = String;

    /// A list such as `raw,npy,tiff` or `all` (`:` also separates, for `-o views=npy:tiff`).
    fn from_str(s: &str) -> std::result::Result<FormatSet, String> {
        let mut kinds = Vec::new();
        for part in s.split([',', ':']).map(str::trim).filter(|p| !p.is_empty()) {
            if part.eq_ignore_ascii_case("all") {
                kinds.extend(FormatKind::all());
            } else {
                kinds.push(part.parse::<FormatKind>()?);
            }
        }
        if kinds.is_empty() {
            return Err("no views listed".into());
        }
        kinds.sort_unstable();
        kinds.dedup();
        Ok(FormatSet(kinds))
    }
}

impl fmt::Display for FormatSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let labels: Vec<&str> = self.kinds().map(FormatKind::label).collect();
        f.write_str(&labels.join(","))
    }
}

/// The shape as the file lays it out, slowest axis first: the shape in C order, reversed
/// in F order.
fn file_shape(meta: &ArrayMetadata, layout: Layout) -> Vec<u64> {
    crate::read::geometry::file_shape(&meta.shape, layout.order)
}

/// Log `line` at info level the first time it comes (a format's file is built again on every
/// refresh of its node).
fn log_once(line: String) {
    use std::collections::HashSet;
    use std::sync::LazyLock;
    static SEEN: LazyLock<parking_lot::Mutex<HashSet<String>>> = LazyLock::new(Default::default);
    let mut seen = SEEN.lock();
    if seen.len() < 100_000 && seen.insert(line.clone()) {
        drop(seen);
        log::info!("{line}");
    }
}

/// Text for a double-quoted XML attribute or element (VRT, OME-XML). XML 1.0 cannot hold
/// C0 control characters other than tab, newline and carriage return, nor U+FFFE and
/// U+FFFF, even as character references: each becomes U+FFFD, the replacement character.
/// Tab, newline and carriage return are written as references so that an attribute keeps
/// them (a parser turns them into spaces otherwise).
pub fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\t' => out.push_str("&#9;"),
            '\n' => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            c if !xml_char(c) => out.push(char::REPLACEMENT_CHARACTER),
            c => out.push(c),
        }
    }
    out
}

/// Whether XML 1.0 can hold `c` (its `Char` production; Rust's `char` has no surrogates).
fn xml_char(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{FFFD}' | '\u{10000}'..)
}

/// Fail for an array with no elements: image formats need every size at least 1.
fn non_empty(meta: &ArrayMetadata) -> std::result::Result<(), Absent> {
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
    fn view_lists_parse_with_commas_colons_aliases_and_all() {
        let set: FormatSet = "npy:tiff".parse().unwrap();
        assert_eq!(set.to_string(), "npy,tiff");
        assert!(!set.shows_raw());
        let set: FormatSet = "npy,envi".parse().unwrap();
        assert!(set.shows_raw(), "a detached header needs the raw file");
        let all: FormatSet = "all".parse().unwrap();
        let every: Vec<&str> = FormatKind::all().map(FormatKind::label).collect();
        assert_eq!(all.to_string(), every.join(","));
        assert!(all
            .to_string()
            .starts_with("raw,npy,tiff,envi,mhd,nrrd,vrt"));
        assert_eq!(
            "TIF,hdr,nhdr".parse::<FormatSet>().unwrap().to_string(),
            "tiff,envi,nrrd"
        );
        assert_eq!(
            "vrt,npy,vrt".parse::<FormatSet>().unwrap().to_string(),
            "npy,vrt"
        );
        assert!("npy,jpeg".parse::<FormatSet>().is_err());
        assert!("".parse::<FormatSet>().is_err());
        assert_eq!(FormatSet::default().to_string(), "raw");
    }

    #[test]
    fn xml_text_holds_only_what_xml_1_0_allows() {
        assert_eq!(xml_escape("a<b>&\"c\""), "a&lt;b&gt;&amp;&quot;c&quot;");
        assert_eq!(xml_escape("t\tn\nr\r"), "t&#9;n&#10;r&#13;");
        assert_eq!(
            xml_escape("bell\u{7}nul\u{0}esc\u{1b}\u{FFFE}\u{FFFF}"),
            "bell\u{FFFD}nul\u{FFFD}esc\u{FFFD}\u{FFFD}\u{FFFD}"
        );
        // Everything else passes as it is: DEL and C1 controls are XML 1.0 characters.
        let kept = "\u{7f}\u{85}é\u{D7FF}\u{E000}\u{FFFD}\u{10000}\u{10FFFF}";
        assert_eq!(xml_escape(kept), kept);
    }

    #[test]
    fn every_format_has_a_distinct_name_suffix_and_aliases() {
        let mut seen = std::collections::HashSet::new();
        for kind in FormatKind::all() {
            let f = kind.format();
            for name in std::iter::once(f.name()).chain(f.aliases().iter().copied()) {
                assert!(seen.insert(name.to_string()), "{name} named twice");
                assert_eq!(name.parse::<FormatKind>().unwrap(), kind);
            }
        }
        let suffixes: std::collections::HashSet<(&str, Placement)> = FormatKind::all()
            .map(|k| (k.suffix(), k.placement()))
            .collect();
        assert_eq!(suffixes.len(), FormatKind::all().count());
    }
}
