//! `cat` and `header`: an array's file written to stdout, its flat view streamed with
//! units decoded ahead, or the segments of one of its views (headers, planes of tiles).

use std::io::{BufWriter, Write};
use std::os::fd::AsFd;
use std::sync::Arc;

use super::progress;
use crate::error::output_error;
use crate::formats::{self, FormatKind, Segment};
use crate::hierarchy::Hierarchy;
use crate::read::array::Array;
use crate::read::cache::UnitCache;
use crate::read::prefetch::{Prefetcher, PREFETCH_PER_CORE};
use crate::read::text::write_var_lines;
use crate::read::view::{Layout, Order, View};
use crate::{Error, Result};

/// The segments of view `kind` of the array `path` whose raw file is `data_file`
/// (default: the array's name), or an error saying why it has none.
pub(super) fn view_segments(
    h: &Hierarchy,
    path: &str,
    kind: FormatKind,
    layout: Layout,
    data_file: Option<String>,
) -> Result<Vec<Segment>> {
    let path = crate::hierarchy::normalize(path);
    let name = data_file.unwrap_or_else(|| {
        let name = path.rsplit('/').next().unwrap_or("");
        if name.is_empty() { "array" } else { name }.to_string()
    });
    let read = |array: &str, limit: u64| {
        let mut out = Vec::new();
        write_array(h, array, layout, &mut out, limit)?;
        Ok(out)
    };
    let ctx = formats::Context::new(h, &path, &name, layout, &read);
    kind.format().build(&ctx)?.map_err(|why| {
        Error::unsupported(format!("/{path}"), format!("{} view: {why}", kind.label()))
    })
}

/// The bytes of the file `segments` make, when they can be counted.
fn segments_size(h: &Hierarchy, segments: &[Segment]) -> Option<u64> {
    segments.iter().try_fold(0u64, |total, segment| {
        let len = match segment {
            Segment::Bytes(bytes) => bytes.len() as u64,
            Segment::Array { path, range } => {
                let meta = h.array(path).ok()?;
                let size = meta
                    .shape
                    .iter()
                    .try_fold(meta.dtype.size()? as u64, |n, &d| n.checked_mul(d))?;
                match range {
                    Some((offset, len)) => (*len).min(size.saturating_sub(*offset)),
                    None => size,
                }
            }
            Segment::Tiles { grid, .. } => grid.checked_len()?,
        };
        total.checked_add(len)
    })
}

pub(super) fn cat(
    h: Hierarchy,
    path: &str,
    layout: Layout,
    kind: FormatKind,
    quiet: bool,
) -> Result<()> {
    // The raw file of an array of variable-length elements is its text: not a flat view.
    let segments = if kind == FormatKind::RAW {
        vec![Segment::array(&crate::hierarchy::normalize(path))]
    } else {
        view_segments(&h, path, kind, layout, None)?
    };
    crate::process::memory::tune_allocator();
    // Straight to file descriptor 1: std's stdout is line-buffered and scans for newlines.
    let fd = std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .map_err(|e| Error::Invalid(format!("stdout: {e}")))?;
    let file = BufWriter::with_capacity(1 << 20, std::fs::File::from(fd));
    let mut out = progress::Counting {
        inner: file,
        bar: progress::bar(segments_size(&h, &segments), quiet),
    };
    let mut tiled: Option<(String, View)> = None;
    for segment in segments {
        match segment {
            Segment::Bytes(bytes) => out.write_all(&bytes).map_err(output_error)?,
            Segment::Array { path, range: None } => {
                write_array(&h, &path, layout, &mut out, u64::MAX)?
            }
            Segment::Tiles { path, grid } => {
                // A TIFF's planes follow one another: one view (and its decoded chunks)
                // serves them all.
                let view = match tiled.take() {
                    Some((p, view)) if p == path => view,
                    _ => {
                        let (array, cache) = array_to_stream(&h, &path, layout)?;
                        flat_view(&h, array, cache, layout)?
                    }
                };
                write_tiles(&view, &path, &grid, &mut out)?;
                tiled = Some((path, view));
            }
            Segment::Array { path, .. } => {
                return Err(Error::unsupported(
                    format!("/{path}"),
                    "a part of an array in a view written by cat (the mount serves it)",
                ))
            }
        }
    }
    out.flush().map_err(output_error)?;
    out.finish();
    Ok(())
}

/// Write the file of the array at `path` to `out`: its flat view, or the text of an array
/// of variable-length elements; an error when the flat view is larger than `limit`.
fn write_array(
    h: &Hierarchy,
    path: &str,
    layout: Layout,
    out: &mut impl Write,
    limit: u64,
) -> Result<()> {
    let (array, cache) = array_to_stream(h, path, layout)?;
    if array.meta.dtype.is_var() {
        if limit < u64::MAX {
            return Err(formats::too_large(path, u64::MAX, limit));
        }
        return write_var_lines(&array, &cache, layout.order, out);
    }
    let view = flat_view(h, array, cache, layout)?;
    if view.size() > limit {
        return Err(formats::too_large(path, view.size(), limit));
    }
    view.write_all(out, 8 << 20)
}

/// Write tiles `grid` of `view`, the flat view of the array at `path`, to `out` (a
/// plane of a tiled TIFF's data), a row of tiles at a time.
fn write_tiles(
    view: &View,
    path: &str,
    grid: &formats::TileGrid,
    out: &mut impl Write,
) -> Result<()> {
    // Tile rows never run front to back through the flat view (as for the mount).
    let cursor = &crate::read::readahead::NO_READAHEAD;
    let len = grid.bytes();
    let row_of_tiles = grid
        .tile_bytes()
        .and_then(|t| t.checked_mul(grid.across()))
        .unwrap_or(u64::MAX);
    let block = row_of_tiles.clamp(1 << 20, 64 << 20);
    let mut buf = vec![0u8; usize::try_from(block.min(len)).unwrap_or(1 << 20)];
    let mut at = 0u64;
    while at < len {
        let n = usize::try_from(len - at).map_or(buf.len(), |left| left.min(buf.len()));
        let filled = grid.fill(at, &mut buf[..n], |offset, part| {
            view.read_at(cursor, offset, part)
                .map(Some)
                .map_err(Error::from)
        })?;
        if filled != Some(n) {
            return Err(Error::corrupt(path, "a tile read short"));
        }
        out.write_all(&buf[..n]).map_err(output_error)?;
        at += n as u64;
    }
    Ok(())
}

/// The array at `path` and a decoded-unit cache for streaming it: room for the layer of
/// read units being streamed and the next two, decoded ahead.
fn array_to_stream(
    h: &Hierarchy,
    path: &str,
    layout: Layout,
) -> Result<(Arc<Array>, Arc<UnitCache>)> {
    let array = Array::at(h, path)?;
    let grid = array.unit_grid();
    let row_units: u64 = match layout.order {
        Order::C => grid.iter().skip(1).product(),
        Order::F => grid.iter().rev().skip(1).product(),
    };
    let unit = array.unit_bytes().max(1 << 16) as u64;
    // At most half the machine's memory: a huge layer then costs repeated decodes, not
    // the process.
    let half_memory = crate::process::memory::physical() / 2;
    let budget = row_units
        .saturating_mul(4)
        .saturating_mul(unit)
        .min(half_memory)
        .max(64 << 20);
    let cache = Arc::new(
        UnitCache::new(usize::try_from(budget).unwrap_or(usize::MAX))
            .beside(h.spans().held_meter()),
    );
    Ok((array, cache))
}

/// The flat view of `array` with its units decoded ahead by the store's concurrency.
fn flat_view(
    h: &Hierarchy,
    array: Arc<Array>,
    cache: Arc<UnitCache>,
    layout: Layout,
) -> Result<View> {
    let threads = h.store().caps().concurrency;
    Ok(
        View::new(array, cache, layout)?
            .with_prefetch(Prefetcher::new(threads * PREFETCH_PER_CORE)),
    )
}
