//! An uncompressed TIFF (BigTIFF past 4 GiB) over the C-order flat bytes: the last two
//! axes are the image plane and every leading index is a page (IFD) of one strip pointing
//! into the data, which follows the header block unchanged. The first page's
//! ImageDescription carries the array's shape as JSON, so readers can restore it.

use super::scalar::Scalar;
use super::{non_empty, Absent, Built, Context, ViewFormat, MAX_PLANES};
use crate::metadata::ArrayMetadata;
use crate::read::view::{Layout, Order};

pub struct Tiff;

impl ViewFormat for Tiff {
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
        ctx.headed(header)
    }
}

/// The data starts on a page boundary of the file, so reads of the data part line up
/// with the raw file's pages.
const DATA_ALIGN: u64 = 4096;

const SHORT: u16 = 3;
const LONG: u16 = 4;
const ASCII: u16 = 2;
const LONG8: u16 = 16;

/// Tags of one page; the description only on the first.
const TAGS: usize = 11;

/// Sizes of the two flavours' structures.
#[derive(Clone, Copy)]
struct Flavour {
    big: bool,
}

impl Flavour {
    fn header(self) -> u64 {
        if self.big {
            16
        } else {
            8
        }
    }
    fn entry(self) -> u64 {
        if self.big {
            20
        } else {
            12
        }
    }
    /// The entry count before and the next-IFD offset after the entries.
    fn frame(self) -> u64 {
        if self.big {
            16
        } else {
            6
        }
    }
    fn ifd(self, entries: usize) -> u64 {
        self.frame() + self.entry() * entries as u64
    }
    /// Values that fit in an entry are stored in it.
    fn inline(self) -> u64 {
        if self.big {
            8
        } else {
            4
        }
    }
}

/// Where everything goes: first IFD, description, later IFDs, data.
struct Plan {
    flavour: Flavour,
    desc_at: u64,
    later_ifds_at: u64,
    data_at: u64,
}

fn plan(flavour: Flavour, pages: u64, desc_len: u64, data_bytes: u64) -> Option<Plan> {
    let first = flavour.header();
    let mut desc_at = first + flavour.ifd(TAGS + 1);
    let desc_out = if desc_len > flavour.inline() {
        desc_len
    } else {
        0
    };
    let later_ifds_at = (desc_at + desc_out).next_multiple_of(8);
    if desc_out == 0 {
        desc_at = 0;
    }
    let ifds_end = later_ifds_at.checked_add((pages - 1).checked_mul(flavour.ifd(TAGS))?)?;
    let data_at = ifds_end.next_multiple_of(DATA_ALIGN);
    data_at.checked_add(data_bytes)?;
    Some(Plan {
        flavour,
        desc_at,
        later_ifds_at,
        data_at,
    })
}

/// Numbers in the file's byte order.
struct Writer {
    out: Vec<u8>,
    big_endian: bool,
}

impl Writer {
    fn put<const N: usize>(&mut self, le: [u8; N], be: [u8; N]) {
        self.out
            .extend_from_slice(if self.big_endian { &be } else { &le });
    }
    fn u16(&mut self, v: u16) {
        self.put(v.to_le_bytes(), v.to_be_bytes())
    }
    fn u32(&mut self, v: u32) {
        self.put(v.to_le_bytes(), v.to_be_bytes())
    }
    fn u64(&mut self, v: u64) {
        self.put(v.to_le_bytes(), v.to_be_bytes())
    }
    /// An offset or count: 4 bytes in TIFF, 8 in BigTIFF.
    fn word(&mut self, f: Flavour, v: u64) {
        if f.big {
            self.u64(v)
        } else {
            self.u32(v as u32)
        }
    }
    fn pad_to(&mut self, at: u64) {
        self.out.resize(at as usize, 0);
    }
    /// One IFD entry of one value (or, for ASCII, `count` bytes at offset `value`).
    fn entry(&mut self, f: Flavour, tag: u16, kind: u16, count: u64, value: u64) {
        self.u16(tag);
        self.u16(kind);
        self.word(f, count);
        let start = self.out.len();
        match kind {
            SHORT => self.u16(value as u16),
            LONG => self.u32(value as u32),
            _ => self.word(f, value),
        }
        self.out.resize(start + f.inline() as usize, 0);
    }
}

pub fn header(meta: &ArrayMetadata, layout: Layout) -> Result<Vec<u8>, Absent> {
    if layout.order == Order::F {
        return Err("TIFF pages are C order; the mount is F order".into());
    }
    let scalar = Scalar::of(&meta.dtype)?;
    let shape = &meta.shape;
    if shape.len() < 2 {
        return Err(format!("rank {} (TIFF needs 2 or more)", shape.len()));
    }
    non_empty(meta)?;
    let (rows, cols) = (shape[shape.len() - 2], shape[shape.len() - 1]);
    let (Ok(rows32), Ok(cols32)) = (u32::try_from(rows), u32::try_from(cols)) else {
        return Err("an image plane wider or taller than 2^32".into());
    };
    let pages: u64 = shape[..shape.len() - 2].iter().product();
    if pages > MAX_PLANES {
        return Err(format!("{pages} pages (at most {MAX_PLANES})"));
    }
    let item = scalar.size() as u64;
    let too_large = || "larger than a TIFF can address".to_string();
    let page_bytes = rows
        .checked_mul(cols)
        .and_then(|n| n.checked_mul(item))
        .ok_or_else(too_large)?;
    let data_bytes = page_bytes.checked_mul(pages).ok_or_else(too_large)?;
    let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
    let mut desc = format!("{{\"shape\": [{}]}}", dims.join(", ")).into_bytes();
    desc.push(0);
    let desc_len = desc.len() as u64;
    let classic = plan(Flavour { big: false }, pages, desc_len, data_bytes)
        .filter(|p| p.data_at + data_bytes <= u32::MAX as u64);
    let p = match classic {
        Some(p) => p,
        None => plan(Flavour { big: true }, pages, desc_len, data_bytes).ok_or_else(too_large)?,
    };
    let f = p.flavour;
    let header_len = usize::try_from(p.data_at).map_err(|_| too_large())?;
    let mut w = Writer {
        out: Vec::with_capacity(header_len),
        big_endian: layout.big_endian,
    };
    w.out
        .extend_from_slice(if layout.big_endian { b"MM" } else { b"II" });
    if f.big {
        w.u16(43);
        w.u16(8);
        w.u16(0);
    } else {
        w.u16(42);
    }
    w.word(f, f.header());
    let (bits, format) = match scalar {
        Scalar::Bool => (8, 1),
        Scalar::UInt(n) => (n * 8, 1),
        Scalar::Int(n) => (n * 8, 2),
        Scalar::Float(n) => (n * 8, 3),
        Scalar::Complex(n) => (n * 8, 6),
    };
    for page in 0..pages {
        let first = page == 0;
        let at = if first {
            f.header()
        } else {
            p.later_ifds_at + (page - 1) * f.ifd(TAGS)
        };
        w.pad_to(at);
        let next = if page + 1 < pages {
            p.later_ifds_at + page * f.ifd(TAGS)
        } else {
            0
        };
        let entries = if first { TAGS + 1 } else { TAGS };
        if f.big {
            w.u64(entries as u64);
        } else {
            w.u16(entries as u16);
        }
        let offsets = if f.big { LONG8 } else { LONG };
        w.entry(f, 256, LONG, 1, cols32 as u64);
        w.entry(f, 257, LONG, 1, rows32 as u64);
        w.entry(f, 258, SHORT, 1, bits as u64);
        w.entry(f, 259, SHORT, 1, 1);
        w.entry(f, 262, SHORT, 1, 1);
        if first {
            if p.desc_at == 0 {
                // Short enough to sit in the entry itself.
                w.u16(270);
                w.u16(ASCII);
                w.word(f, desc_len);
                let start = w.out.len();
                w.out.extend_from_slice(&desc);
                w.out.resize(start + f.inline() as usize, 0);
            } else {
                w.entry(f, 270, ASCII, desc_len, p.desc_at);
            }
        }
        w.entry(f, 273, offsets, 1, p.data_at + page * page_bytes);
        w.entry(f, 277, SHORT, 1, 1);
        w.entry(f, 278, LONG, 1, rows32 as u64);
        w.entry(f, 279, offsets, 1, page_bytes);
        w.entry(f, 284, SHORT, 1, 1);
        w.entry(f, 339, SHORT, 1, format);
        w.word(f, next);
        if first && p.desc_at != 0 {
            w.pad_to(p.desc_at);
            w.out.extend_from_slice(&desc);
        }
    }
    w.pad_to(p.data_at);
    Ok(w.out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn big_arrays_switch_to_bigtiff_and_small_ones_stay_classic() {
        let small = plan(Flavour { big: false }, 3, 30, 1 << 20).unwrap();
        assert_eq!(small.desc_at, 8 + 6 + 12 * 12);
        assert_eq!(small.data_at % DATA_ALIGN, 0);
        assert!(small.later_ifds_at >= small.desc_at + 30);
        let big = plan(Flavour { big: true }, 3, 30, 5 << 30).unwrap();
        assert_eq!(big.desc_at, 16 + 16 + 20 * 12);
        assert!(plan(Flavour { big: true }, 2, 30, u64::MAX - 100).is_none());
    }
}
