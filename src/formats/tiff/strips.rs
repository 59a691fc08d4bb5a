//! The header of a TIFF in strips (BigTIFF past 4 GiB) over the C-order flat bytes: the
//! last two axes are the image plane and every leading index is a page (IFD) of one strip
//! pointing into the data, which follows the header block unchanged. The first page's
//! ImageDescription carries the array's shape as JSON, so readers can restore it. Every
//! page of a georeferenced array carries the GeoTIFF and GDAL tags of `geotiff`.

use super::geotiff;
use super::ifd::{sample, Endian, Flavour, Tag};
use crate::formats::conventions::geo::Raster;
use crate::formats::scalar::Scalar;
use crate::formats::{non_empty, Absent, MAX_PLANES};
use crate::metadata::ArrayMetadata;
use crate::read::view::{Layout, Order};

/// The data starts on a page boundary of the file, so reads of the data part line up
/// with the raw file's pages.
const DATA_ALIGN: u64 = 4096;

const STRIP_OFFSETS: u16 = 273;
const DESCRIPTION: u16 = 270;

/// Where everything goes: first IFD, the shared values (each tag's offset, 0 when the
/// value sits in its entry), later IFDs, data.
struct Plan {
    flavour: Flavour,
    value_at: Vec<u64>,
    later_ifds_at: u64,
    data_at: u64,
}

/// `tags`: the first page's entries (the description among them); later pages have
/// every entry but the description.
fn plan(flavour: Flavour, pages: u64, tags: &[Tag], data_bytes: u64) -> Option<Plan> {
    let mut at = flavour.header() + flavour.ifd(tags.len());
    let mut value_at = Vec::with_capacity(tags.len());
    for t in tags {
        let len = t.bytes.len() as u64;
        if len > flavour.inline() {
            at = at.next_multiple_of(8);
            value_at.push(at);
            at = at.checked_add(len)?;
        } else {
            value_at.push(0);
        }
    }
    let later_ifds_at = at.next_multiple_of(8);
    let later = flavour.ifd(tags.len() - 1);
    let ifds_end = later_ifds_at.checked_add((pages - 1).checked_mul(later)?)?;
    let data_at = ifds_end.next_multiple_of(DATA_ALIGN);
    data_at.checked_add(data_bytes)?;
    Some(Plan {
        flavour,
        value_at,
        later_ifds_at,
        data_at,
    })
}

/// The planes of an array as TIFF pages: what every TIFF view of it has to say.
pub struct Pages {
    pub scalar: Scalar,
    pub rows: u64,
    pub cols: u64,
    /// The product of the leading dimensions.
    pub pages: u64,
    /// The first page's ImageDescription: the array's shape as JSON.
    pub description: String,
}

/// The pages of the array of `meta` in `layout`, or why a TIFF cannot show it.
pub fn pages(meta: &ArrayMetadata, layout: Layout) -> Result<Pages, Absent> {
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
    if u32::try_from(rows.max(cols)).is_err() {
        return Err("an image plane wider or taller than 2^32".into());
    }
    let pages: u64 = shape[..shape.len() - 2].iter().product();
    if pages > MAX_PLANES {
        return Err(format!("{pages} pages (at most {MAX_PLANES})"));
    }
    let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
    Ok(Pages {
        scalar,
        rows,
        cols,
        pages,
        description: format!("{{\"shape\": [{}]}}", dims.join(", ")),
    })
}

/// The header of the strips TIFF of the array of `meta` (its data, the flat view, follows).
pub fn header(meta: &ArrayMetadata, layout: Layout, raster: &Raster) -> Result<Vec<u8>, Absent> {
    let Pages {
        scalar,
        rows,
        cols,
        pages,
        description: desc,
    } = pages(meta, layout)?;
    // Checked by `pages`.
    let (rows32, cols32) = (rows as u32, cols as u32);
    let item = scalar.size() as u64;
    let too_large = || "larger than a TIFF can address".to_string();
    let page_bytes = rows
        .checked_mul(cols)
        .and_then(|n| n.checked_mul(item))
        .ok_or_else(too_large)?;
    let data_bytes = page_bytes.checked_mul(pages).ok_or_else(too_large)?;
    let o = Endian {
        big_endian: layout.big_endian,
    };
    let (bits, format) = sample(scalar);
    let tags_of = |big: bool| {
        let mut tags = vec![
            Tag::long(o, 256, cols32),
            Tag::long(o, 257, rows32),
            Tag::short(o, 258, &[bits]),
            Tag::short(o, 259, &[1]),
            Tag::short(o, 262, &[1]),
            Tag::ascii(DESCRIPTION, &desc),
            Tag::word(o, big, STRIP_OFFSETS, 0),
            Tag::short(o, 277, &[1]),
            Tag::long(o, 278, rows32),
            Tag::word(o, big, 279, page_bytes),
            Tag::short(o, 284, &[1]),
            Tag::short(o, 339, &[format]),
        ];
        tags.extend(geotiff::tags(o, raster, &meta.meta_key));
        tags
    };
    let classic_tags = tags_of(false);
    let classic = plan(Flavour { big: false }, pages, &classic_tags, data_bytes)
        .filter(|p| p.data_at + data_bytes <= u32::MAX as u64);
    let (p, tags) = match classic {
        Some(p) => (p, classic_tags),
        None => {
            let tags = tags_of(true);
            let p = plan(Flavour { big: true }, pages, &tags, data_bytes).ok_or_else(too_large)?;
            (p, tags)
        }
    };
    let f = p.flavour;
    let header_len = usize::try_from(p.data_at).map_err(|_| too_large())?;
    let mut out = Vec::with_capacity(header_len);
    out.extend(o.file_header(f, f.header()));
    let word = |v: u64| f.word(o, v);
    for page in 0..pages {
        let first = page == 0;
        let at = if first {
            f.header()
        } else {
            p.later_ifds_at + (page - 1) * f.ifd(tags.len() - 1)
        };
        out.resize(at as usize, 0);
        let next = if page + 1 < pages {
            p.later_ifds_at + page * f.ifd(tags.len() - 1)
        } else {
            0
        };
        let entries: Vec<(usize, &Tag)> = tags
            .iter()
            .enumerate()
            .filter(|(_, t)| first || t.tag != DESCRIPTION)
            .collect();
        if f.big {
            out.extend(o.u64(entries.len() as u64));
        } else {
            out.extend(o.u16s(&[entries.len() as u16]));
        }
        for (i, t) in entries {
            out.extend(o.u16s(&[t.tag, t.kind]));
            out.extend(word(t.count));
            let start = out.len();
            if t.tag == STRIP_OFFSETS {
                out.extend(word(p.data_at + page * page_bytes));
            } else if p.value_at[i] == 0 {
                out.extend_from_slice(&t.bytes);
            } else {
                out.extend(word(p.value_at[i]));
            }
            out.resize(start + f.inline() as usize, 0);
        }
        out.extend(word(next));
        if first {
            for (t, &at) in tags.iter().zip(&p.value_at) {
                if at != 0 {
                    out.resize(at as usize, 0);
                    out.extend_from_slice(&t.bytes);
                }
            }
        }
    }
    out.resize(header_len, 0);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(o: Endian, desc: &str, extra: usize) -> Vec<Tag> {
        let mut tags = vec![Tag::long(o, 256, 1), Tag::ascii(DESCRIPTION, desc)];
        tags.extend((0..extra).map(|i| Tag::doubles(o, 40000 + i as u16, &[1.0, 2.0])));
        tags
    }

    #[test]
    fn big_arrays_switch_to_bigtiff_and_small_ones_stay_classic() {
        let o = Endian { big_endian: false };
        let desc = "x".repeat(29);
        let small = plan(Flavour { big: false }, 3, &tags(o, &desc, 1), 1 << 20).unwrap();
        let first_ifd_end = 8 + 6 + 12 * 3;
        assert_eq!(small.value_at[0], 0, "a LONG sits in its entry");
        assert_eq!(
            small.value_at[1],
            (first_ifd_end as u64).next_multiple_of(8)
        );
        assert_eq!(small.value_at[2] % 8, 0);
        assert!(small.value_at[2] >= small.value_at[1] + 30);
        assert!(small.later_ifds_at >= small.value_at[2] + 16);
        assert_eq!(small.data_at % DATA_ALIGN, 0);
        let big = plan(Flavour { big: true }, 3, &tags(o, &desc, 0), 5 << 30).unwrap();
        assert_eq!(big.value_at[1], 16 + 16 + 20 * 2);
        assert!(plan(Flavour { big: true }, 2, &tags(o, &desc, 0), u64::MAX - 100).is_none());
    }
}
