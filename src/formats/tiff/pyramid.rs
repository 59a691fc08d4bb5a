//! A tiled pyramidal TIFF (BigTIFF when it needs 64-bit offsets) over arrays' C-order
//! flat views: the full-resolution planes are the main IFDs, each pointing to its
//! reduced-resolution planes as SubIFDs (NewSubfileType 1), as OME-TIFF and libtiff
//! read pyramids. Every plane's tiles are one segment of its level's flat view (see
//! `tiles`), and the header (every IFD with its own tile offsets) is held in memory.
//! The first IFD carries the description. The data runs from the smallest level to the
//! full resolution, so that what a reader of the header reads ahead is the overview,
//! not the largest level's chunks.

use serde_json::Value;

use super::ifd::{sample, Endian, Flavour, Tag};
use crate::formats::scalar::Scalar;
use crate::formats::{Absent, Segment, TileGrid, MAX_PLANES};
use crate::metadata::ArrayMetadata;

/// The most bytes a pyramid's header may hold.
const MAX_HEADER: u64 = 64 << 20;

/// The data starts on a page boundary of the file.
const DATA_ALIGN: u64 = 4096;

/// Where the data starts after a header that ends at `end`: on a page boundary; after a
/// header under 1 MiB, at the next power of two (at least 64 KiB). A reader by URL that
/// fetches the header in doubling blocks (GDAL's `/vsicurl/`: 16 KiB, 32 KiB, 64 KiB, ...)
/// then mostly stops before the first tile, and tiles whose size is a multiple of its
/// blocks start on a block, so a window's blocks hold no neighbouring tile (whose chunks
/// would be decoded for nothing).
fn data_start(end: u64) -> u64 {
    if end <= 1 << 20 {
        end.next_power_of_two().max(64 << 10)
    } else {
        end.next_multiple_of(DATA_ALIGN)
    }
}

/// One resolution level: an array of `planes` planes of `rows` × `cols` elements, cut
/// into tiles of `tile` (rows, columns).
#[derive(Debug, Clone)]
pub struct Level {
    pub path: String,
    pub rows: u64,
    pub cols: u64,
    pub tile: (u64, u64),
}

/// What a pyramid is made of.
pub struct Pyramid<'a> {
    /// Planes per level (the product of the leading dimensions).
    pub planes: u64,
    pub scalar: Scalar,
    pub big_endian: bool,
    /// The first IFD's ImageDescription.
    pub description: &'a str,
    /// Full resolution first.
    pub levels: &'a [Level],
    /// Entries every full-resolution IFD carries besides its own (a GeoTIFF's), each
    /// numbered past SampleFormat (339).
    pub extra: &'a [Tag],
}

impl Pyramid<'_> {
    /// The tiles of a plane of level `level`, as if it were the first.
    fn tiling(&self, level: usize) -> TileGrid {
        let l = &self.levels[level];
        TileGrid {
            plane_at: 0,
            rows: l.rows,
            cols: l.cols,
            item: self.scalar.size() as u64,
            tile_rows: l.tile.0,
            tile_cols: l.tile.1,
        }
    }

    /// Plane `plane` of level `level` as tiles.
    fn grid(&self, level: usize, plane: u64) -> Option<TileGrid> {
        let tiling = self.tiling(level);
        let plane_bytes = tiling
            .rows
            .checked_mul(tiling.cols)?
            .checked_mul(tiling.item)?;
        let grid = TileGrid {
            plane_at: plane.checked_mul(plane_bytes)?,
            ..tiling
        };
        grid.checked_len()?;
        Some(grid)
    }

    /// Every IFD as (plane, level), in the order they are written: the main IFDs,
    /// then each plane's reduced levels.
    fn ifds(&self) -> impl Iterator<Item = (u64, usize)> + '_ {
        let main = (0..self.planes).map(|p| (p, 0));
        let subs = (0..self.planes).flat_map(move |p| (1..self.levels.len()).map(move |l| (p, l)));
        main.chain(subs)
    }

    /// Where IFD (plane, level) of `ifds()` order sits among them.
    fn index(&self, plane: u64, level: usize) -> usize {
        if level == 0 {
            plane as usize
        } else {
            let reduced = self.levels.len() - 1;
            self.planes as usize + plane as usize * reduced + level - 1
        }
    }

    /// The entries of IFD (plane, level), with its tiles at `tiles_at` and its reduced
    /// levels' IFDs at `subs`.
    fn tags(
        &self,
        o: Endian,
        f: Flavour,
        plane: u64,
        level: usize,
        tiles_at: u64,
        subs: &[u64],
    ) -> Vec<Tag> {
        let l = &self.levels[level];
        let (bits, format) = sample(self.scalar);
        // Sizes checked by `segments` before any IFD is made.
        let tiling = self.tiling(level);
        let tile_bytes = tiling.tile_bytes().unwrap_or(0);
        let count = tiling.across() * tiling.down();
        let mut tags = vec![
            Tag::long(o, 254, u32::from(level > 0)),
            Tag::long(o, 256, l.cols as u32),
            Tag::long(o, 257, l.rows as u32),
            Tag::short(o, 258, &[bits]),
            Tag::short(o, 259, &[1]),
            Tag::short(o, 262, &[1]),
        ];
        if plane == 0 && level == 0 {
            tags.push(Tag::ascii(270, self.description));
        }
        tags.extend([
            Tag::short(o, 277, &[1]),
            Tag::short(o, 284, &[1]),
            Tag::long(o, 322, l.tile.1 as u32),
            Tag::long(o, 323, l.tile.0 as u32),
            Tag::words(o, f.big, 324, (0..count).map(|t| tiles_at + t * tile_bytes)),
            Tag::words(o, f.big, 325, (0..count).map(|_| tile_bytes)),
        ]);
        if !subs.is_empty() {
            tags.push(Tag::words(o, f.big, 330, subs.iter().copied()));
        }
        tags.push(Tag::short(o, 339, &[format]));
        if level == 0 {
            tags.extend(self.extra.iter().cloned());
        }
        tags
    }
}

/// A level of the array of `meta` at `path`: its planes, tiled by the last two sides of
/// its chunks (inner chunks when sharded), each rounded up to TIFF's multiple of 16 and
/// at most 1024, so that a tile's bytes come from as few chunks as can be.
pub fn level_of(path: &str, meta: &ArrayMetadata) -> Level {
    let rank = meta.shape.len();
    let inner = meta
        .codecs
        .first()
        .filter(|c| c.name == "sharding_indexed")
        .and_then(|c| c.config.get("chunk_shape"))
        .and_then(Value::as_array)
        .map(|v| v.iter().filter_map(Value::as_u64).collect::<Vec<u64>>())
        .filter(|v| v.len() == rank);
    let chunk = inner.as_deref().unwrap_or(&meta.chunk_shape);
    let side = |axis: usize| {
        let c = chunk.get(axis).copied().unwrap_or(256);
        c.min(meta.shape[axis]).clamp(16, 1024).next_multiple_of(16)
    };
    Level {
        path: path.to_string(),
        rows: meta.shape[rank - 2],
        cols: meta.shape[rank - 1],
        tile: (side(rank - 2), side(rank - 1)),
    }
}

/// Where each IFD and the data go in one flavour.
struct Plan {
    flavour: Flavour,
    ifd_at: Vec<u64>,
    data_at: u64,
}

/// The file's segments: the header, then every level's planes as tiles.
pub fn segments(p: &Pyramid) -> Result<Vec<Segment>, Absent> {
    let too_large = || "larger than a TIFF can address".to_string();
    if p.levels.is_empty() || p.planes == 0 {
        return Err("no image".into());
    }
    if p.planes > MAX_PLANES {
        return Err(format!("{} planes (at most {MAX_PLANES})", p.planes));
    }
    if p.extra.iter().any(|t| t.tag <= 339) {
        return Err("an extra entry numbered before SampleFormat".into());
    }
    let extra: u64 = p.extra.iter().map(|t| t.bytes.len() as u64 + 20).sum();
    let mut header_estimate = extra
        .checked_mul(p.planes)
        .and_then(|e| e.checked_add(p.description.len() as u64))
        .ok_or_else(too_large)?;
    let mut data_bytes = 0u64;
    let mut level_at = vec![0; p.levels.len()];
    for (i, l) in p.levels.iter().enumerate().rev() {
        if u32::try_from(l.rows.max(l.cols).max(l.tile.0).max(l.tile.1)).is_err() {
            return Err(format!("level {i}: wider or taller than 2^32"));
        }
        let grid = p.grid(i, p.planes - 1).ok_or_else(too_large)?;
        let tiles = grid.across() * grid.down();
        header_estimate = tiles
            .checked_mul(16)
            .and_then(|t| t.checked_add(512))
            .and_then(|t| t.checked_mul(p.planes))
            .and_then(|t| t.checked_add(header_estimate))
            .ok_or_else(too_large)?;
        level_at[i] = data_bytes;
        data_bytes = grid
            .bytes()
            .checked_mul(p.planes)
            .and_then(|n| n.checked_add(data_bytes))
            .ok_or_else(too_large)?;
    }
    if header_estimate > MAX_HEADER {
        return Err(format!(
            "its tile tables would take {} MiB (at most {} MiB)",
            header_estimate >> 20,
            MAX_HEADER >> 20
        ));
    }
    let o = Endian {
        big_endian: p.big_endian,
    };
    let plan = [false, true]
        .into_iter()
        .map(|big| plan(p, o, Flavour { big }))
        .find(|plan| {
            plan.flavour.big
                || plan
                    .data_at
                    .checked_add(data_bytes)
                    .is_some_and(|end| end <= u32::MAX as u64)
        })
        .ok_or_else(too_large)?;
    plan.data_at.checked_add(data_bytes).ok_or_else(too_large)?;
    let f = plan.flavour;
    let tiles_at = |plane: u64, level: usize| {
        let grid_len = p.grid(level, plane).map_or(0, |g| g.bytes());
        plan.data_at + level_at[level] + plane * grid_len
    };
    let mut out = o.file_header(f, plan.ifd_at[0]);
    for (plane, level) in p.ifds() {
        let subs: Vec<u64> = if level == 0 {
            (1..p.levels.len())
                .map(|l| plan.ifd_at[p.index(plane, l)])
                .collect()
        } else {
            Vec::new()
        };
        let tags = p.tags(o, f, plane, level, tiles_at(plane, level), &subs);
        let next = if level == 0 && plane + 1 < p.planes {
            plan.ifd_at[p.index(plane + 1, 0)]
        } else {
            0
        };
        f.write_ifd(o, &mut out, plan.ifd_at[p.index(plane, level)], &tags, next);
    }
    out.resize(plan.data_at as usize, 0);
    let mut segments = vec![Segment::Bytes(out)];
    for (level, l) in p.levels.iter().enumerate().rev() {
        for plane in 0..p.planes {
            let grid = p.grid(level, plane).ok_or_else(too_large)?;
            segments.push(Segment::Tiles {
                path: l.path.clone(),
                grid,
            });
        }
    }
    Ok(segments)
}

/// Where everything goes in flavour `f` (the entries' sizes do not depend on the
/// offsets they hold).
fn plan(p: &Pyramid, o: Endian, f: Flavour) -> Plan {
    let reduced = vec![0; p.levels.len() - 1];
    let mut at = f.header();
    let mut ifd_at = Vec::new();
    for (plane, level) in p.ifds() {
        at = at.next_multiple_of(8);
        ifd_at.push(at);
        let subs = if level == 0 { &reduced[..] } else { &[] };
        at = f.own_values(at, &p.tags(o, f, plane, level, 0, subs)).1;
    }
    Plan {
        flavour: f,
        ifd_at,
        data_at: data_start(at),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn level(path: &str, rows: u64, cols: u64) -> Level {
        Level {
            path: path.into(),
            rows,
            cols,
            tile: (16, 32),
        }
    }

    #[test]
    fn every_plane_of_every_level_is_one_tile_segment_after_the_header() {
        let levels = [level("a/0", 40, 70), level("a/1", 20, 35)];
        let p = Pyramid {
            planes: 3,
            scalar: Scalar::UInt(2),
            big_endian: false,
            description: "<OME/>",
            levels: &levels,
            extra: &[],
        };
        let segments = segments(&p).unwrap();
        assert_eq!(segments.len(), 1 + 2 * 3);
        let Segment::Bytes(header) = &segments[0] else {
            panic!("no header first")
        };
        assert_eq!(header.len() as u64 % DATA_ALIGN, 0);
        assert_eq!(&header[..4], b"II*\0");
        let Segment::Tiles { path, grid } = &segments[2] else {
            panic!("no tiles")
        };
        assert_eq!(path, "a/1", "the smallest level first");
        assert_eq!(grid.plane_at, 20 * 35 * 2);
        assert_eq!((grid.across(), grid.down()), (2, 2));
        assert!(super::segments(&Pyramid { planes: 0, ..p }).is_err());
    }

    #[test]
    fn a_pyramid_past_4_gib_is_a_bigtiff_with_64_bit_tile_offsets() {
        let levels = [level("b/0", 70_000, 70_000), level("b/1", 35_000, 35_000)];
        let levels: Vec<Level> = levels
            .into_iter()
            .map(|l| Level {
                tile: (1024, 1024),
                ..l
            })
            .collect();
        let p = Pyramid {
            planes: 1,
            scalar: Scalar::UInt(1),
            big_endian: true,
            description: "<OME/>",
            levels: &levels,
            extra: &[],
        };
        let segments = segments(&p).unwrap();
        let Segment::Bytes(header) = &segments[0] else {
            panic!("no header first")
        };
        assert_eq!(&header[..4], b"MM\0\x2b", "a big-endian BigTIFF");
        let Segment::Tiles { grid, .. } = &segments[2] else {
            panic!("no tiles")
        };
        // The full resolution comes last: its last tile ends past 4 GiB.
        let end = header.len() as u64 + 35_840 * 35_840 + grid.bytes();
        assert!(end > u32::MAX as u64, "{end}");
        // TileOffsets of the full resolution: LONG8 entries in the first IFD.
        let entries = u64::from_be_bytes(header[16..24].try_into().unwrap());
        let offsets = (0..entries as usize)
            .map(|i| &header[24 + 20 * i..24 + 20 * (i + 1)])
            .find(|e| e[..2] == 324u16.to_be_bytes())
            .expect("TileOffsets");
        assert_eq!(offsets[2..4], 16u16.to_be_bytes(), "LONG8");
        assert_eq!(
            u64::from_be_bytes(offsets[4..12].try_into().unwrap()),
            69 * 69
        );
    }
}
