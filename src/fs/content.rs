//! What a file serves: an array's flat view, an array's JSON-lines text (variable-length
//! types), or a sidecar JSON document.

use std::sync::Arc;

use serde_json::{json, Value};

use super::describe::describe_array;
use crate::formats::TileGrid;
use crate::hierarchy::{Hierarchy, Node};
use crate::metadata::ArrayMetadata;
use crate::read::array::Array;
use crate::read::cache::UnitCache;
use crate::read::prefetch::Prefetcher;
use crate::read::readahead::{Cursor, NO_READAHEAD};
use crate::read::text::write_var_lines;
use crate::read::view::{Layout, Now, Order, Partial, UnitSlice, View};
use crate::{Error, Result};

/// The largest text a variable-length array's file may be: it is held whole in memory.
const MAX_TEXT: usize = 256 << 20;

/// The most read units a variable-length array's text view is made of.
const MAX_TEXT_UNITS: u64 = 1 << 20;

/// A text buffer that refuses to grow past [`MAX_TEXT`].
struct BoundedText(Vec<u8>);

impl std::io::Write for BoundedText {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.0.len() + buf.len() > MAX_TEXT {
            return Err(std::io::ErrorKind::FileTooLarge.into());
        }
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

pub enum Content {
    /// A fixed-size array, read chunk by chunk.
    Flat(View),
    /// Bytes held whole: variable-length text, a sidecar or a detached header.
    Bytes(Vec<u8>),
    /// A file made of pieces (a header in front of an array's flat file, several arrays
    /// one after the other): an array's bytes come from its raw file's own content, so
    /// every file of an array shares one view and its cached chunks.
    Pieces { pieces: Vec<Piece>, size: u64 },
}

/// A piece of a [`Content::Pieces`] file and where it starts in the file.
pub struct Piece {
    start: u64,
    part: Part,
}

/// What a piece holds.
pub enum Part {
    /// Bytes held whole.
    Bytes(Vec<u8>),
    /// `len` bytes from `offset` of another content (an array's flat file).
    Range {
        data: Arc<Content>,
        offset: u64,
        len: u64,
    },
    /// A plane of another content (an array's flat file) cut into tiles.
    Tiles { data: Arc<Content>, grid: TileGrid },
}

impl Part {
    /// `len` bytes of `data` from `offset`, clipped to its size (all of it: `None`).
    pub fn range(data: Arc<Content>, range: Option<(u64, u64)>) -> Part {
        let size = data.size();
        let (offset, len) = range.map_or((0, size), |(offset, len)| {
            let offset = offset.min(size);
            (offset, len.min(size - offset))
        });
        Part::Range { data, offset, len }
    }

    fn len(&self) -> u64 {
        match self {
            Part::Bytes(b) => b.len() as u64,
            Part::Range { len, .. } => *len,
            Part::Tiles { grid, .. } => grid.bytes(),
        }
    }
}

impl Content {
    /// A file of `parts` one after the other; an error when its size overflows.
    pub fn of_parts(parts: Vec<Part>) -> Result<Content> {
        let mut pieces = Vec::with_capacity(parts.len());
        let mut size = 0u64;
        for part in parts {
            let len = part.len();
            pieces.push(Piece { start: size, part });
            size = size
                .checked_add(len)
                .ok_or_else(|| Error::Internal("a file larger than 16 EiB".into()))?;
        }
        Ok(Content::Pieces { pieces, size })
    }

    pub fn size(&self) -> u64 {
        match self {
            Content::Flat(v) => v.size(),
            Content::Bytes(b) => b.len() as u64,
            Content::Pieces { size, .. } => *size,
        }
    }

    /// Fill `buf` from `offset`; the bytes written (short or none at end of file). A read
    /// that runs into a unit that cannot be read fills the bytes before it (see
    /// [`Partial`]).
    pub fn read_into(
        &self,
        cursor: &Cursor,
        offset: u64,
        buf: &mut [u8],
    ) -> std::result::Result<usize, Partial> {
        match self {
            Content::Flat(view) => view.read_at(cursor, offset, buf),
            Content::Bytes(b) => Ok(copy_from(b, offset, buf)),
            Content::Pieces { pieces, size } => {
                let read = |data: &Content, at, out: &mut [u8], tiles: bool| {
                    data.read_into(of_part(cursor, tiles), at, out).map(Some)
                };
                Ok(fill_pieces(pieces, *size, offset, buf, read)?.unwrap_or(0))
            }
        }
    }

    /// A read answered from a cached unit without a copy (see
    /// [`View::read_in_place`]); `None` when it must be assembled.
    pub fn read_in_place(
        &self,
        cursor: &Cursor,
        offset: u64,
        len: usize,
    ) -> Result<Option<UnitSlice>> {
        match self {
            Content::Flat(view) => view.read_in_place(cursor, offset, len),
            Content::Pieces { pieces, size } => {
                let mut covered = covering(pieces, *size, offset, len);
                match (covered.next(), covered.next()) {
                    (Some((piece, within, room)), None) if room == len => match &piece.part {
                        Part::Range { data, offset, .. } => {
                            data.read_in_place(cursor, offset + within, len)
                        }
                        Part::Bytes(_) | Part::Tiles { .. } => Ok(None),
                    },
                    _ => Ok(None),
                }
            }
            Content::Bytes(_) => Ok(None),
        }
    }

    /// A read answered from what is in memory alone (see [`View::read_now`]).
    pub fn read_now(&self, cursor: &Cursor, offset: u64, buf: &mut [u8]) -> Result<Now> {
        match self {
            Content::Flat(view) => view.read_now(cursor, offset, buf),
            Content::Bytes(b) => Ok(Now::Copied(copy_from(b, offset, buf))),
            Content::Pieces { pieces, size } => {
                let read = |data: &Content, at, out: &mut [u8], tiles: bool| {
                    Ok::<_, Partial>(match data.read_now(of_part(cursor, tiles), at, out)? {
                        Now::InPlace(slice) => {
                            let bytes = slice.bytes();
                            let n = bytes.len().min(out.len());
                            out[..n].copy_from_slice(&bytes[..n]);
                            Some(n)
                        }
                        Now::Copied(n) => Some(n),
                        Now::Later => None,
                    })
                };
                let filled = fill_pieces(pieces, *size, offset, buf, read).map_err(Error::from)?;
                Ok(match filled {
                    Some(n) => Now::Copied(n),
                    None => Now::Later,
                })
            }
        }
    }

    /// Whether the file holds tiles of an array: it is read a tile at a time, and a
    /// front-to-back read of it would visit every array's chunks many times over.
    pub fn tiled(&self) -> bool {
        matches!(self, Content::Pieces { pieces, .. }
            if pieces.iter().any(|p| matches!(p.part, Part::Tiles { .. })))
    }

    /// The array's flat view behind this file, if it has one (the first, for a file of
    /// several arrays).
    pub fn view(&self) -> Option<&View> {
        self.views().next()
    }

    /// Every array's flat view behind this file.
    pub fn views(&self) -> Box<dyn Iterator<Item = &View> + '_> {
        match self {
            Content::Flat(view) => Box::new(std::iter::once(view)),
            Content::Bytes(_) => Box::new(std::iter::empty()),
            Content::Pieces { pieces, .. } => {
                Box::new(pieces.iter().flat_map(|piece| match &piece.part {
                    Part::Range { data, .. } | Part::Tiles { data, .. } => data.views(),
                    Part::Bytes(_) => Box::new(std::iter::empty()),
                }))
            }
        }
    }
}

/// The cursor a part's reads go through: the file's, but none for the rows of tiles,
/// which never run front to back through the array's flat view.
fn of_part(cursor: &Cursor, tiles: bool) -> &Cursor {
    if tiles {
        &NO_READAHEAD
    } else {
        cursor
    }
}

/// Fill `buf` from `offset` of a file of `pieces` (`size` bytes), each array part read
/// with `read(data, at, out, tiles)` (`tiles`: rows of a part's tiles); the bytes written (short at end of file), or `None` as
/// soon as `read` gives `None`. A part that fails part way gives the bytes before it and
/// its own good bytes (see [`Partial`]; a tiled part, none of its own).
fn fill_pieces(
    pieces: &[Piece],
    size: u64,
    offset: u64,
    buf: &mut [u8],
    mut read: impl FnMut(&Content, u64, &mut [u8], bool) -> std::result::Result<Option<usize>, Partial>,
) -> std::result::Result<Option<usize>, Partial> {
    let mut done = 0;
    for (piece, within, room) in covering(pieces, size, offset, buf.len()) {
        let out = &mut buf[done..done + room];
        let failed = |p: Partial| Partial {
            read: done + p.read,
            error: p.error,
        };
        let n = match &piece.part {
            Part::Bytes(b) => copy_from(b, within, out),
            Part::Range { data, offset, .. } => {
                match read(data, offset + within, out, false).map_err(failed)? {
                    Some(n) => n,
                    None => return Ok(None),
                }
            }
            Part::Tiles { data, grid } => {
                let tiles = grid.fill(within, out, |at, o| Ok(read(data, at, o, true)?));
                match tiles.map_err(|e| failed(e.into()))? {
                    Some(n) => n,
                    None => return Ok(None),
                }
            }
        };
        done += n;
        if n < room {
            break;
        }
    }
    Ok(Some(done))
}

/// The pieces a read of `len` bytes from `offset` covers, each with the offset within
/// it and the bytes it gives (the read clipped to the file's `size`).
fn covering(
    pieces: &[Piece],
    size: u64,
    offset: u64,
    len: usize,
) -> impl Iterator<Item = (&Piece, u64, usize)> {
    let end = offset.saturating_add(len as u64).min(size);
    let first = pieces
        .partition_point(|p| p.start <= offset)
        .saturating_sub(1);
    pieces[first.min(pieces.len())..]
        .iter()
        .take_while(move |p| p.start < end)
        .filter_map(move |p| {
            let from = offset.max(p.start);
            let to = end.min(p.start + p.part.len());
            (to > from).then(|| (p, from - p.start, (to - from) as usize))
        })
}

/// Copy what `bytes` holds from `offset` into `buf`; the bytes copied.
fn copy_from(bytes: &[u8], offset: u64, buf: &mut [u8]) -> usize {
    let start = usize::try_from(offset)
        .unwrap_or(usize::MAX)
        .min(bytes.len());
    let n = buf.len().min(bytes.len() - start);
    buf[..n].copy_from_slice(&bytes[start..start + n]);
    n
}

/// The file of the array at `path`.
pub fn array_file(
    h: &Hierarchy,
    path: &str,
    cache: &Arc<UnitCache>,
    prefetcher: &Arc<Prefetcher>,
    layout: Layout,
) -> Result<Content> {
    let array = Array::at(h, path)?;
    if array.meta.dtype.is_var() {
        // Checked before any chunk is read: every element is a line of at least 3 bytes,
        // and every read unit costs a lookup, so a shape of billions of tiny (missing)
        // chunks fails at once instead of spinning through them on `stat`.
        let elements = array
            .meta
            .shape
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d));
        let units = array
            .unit_grid()
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d));
        match (elements, units) {
            (Some(e), Some(u)) if e <= (MAX_TEXT / 3) as u64 && u <= MAX_TEXT_UNITS => {}
            _ => {
                return Err(Error::unsupported(
                    &array.meta.meta_key,
                    format!(
                        "text view of shape {:?} in chunks of {:?}: more than {} MiB or {} chunks",
                        array.meta.shape,
                        array.unit_shape(),
                        MAX_TEXT >> 20,
                        MAX_TEXT_UNITS
                    ),
                ))
            }
        }
        let mut text = BoundedText(Vec::new());
        write_var_lines(&array, cache, layout.order, &mut text).map_err(|e| match e {
            Error::Io { source, .. } if source.kind() == std::io::ErrorKind::FileTooLarge => {
                Error::unsupported(
                    &array.meta.meta_key,
                    format!("text view larger than {} MiB", MAX_TEXT >> 20),
                )
            }
            other => other,
        })?;
        return Ok(Content::Bytes(text.0));
    }
    let view = View::new(array, cache.clone(), layout)?.with_prefetch(prefetcher.clone());
    let (working_set, span) = view.sequential_working_set();
    if working_set > cache.budget() as u64 {
        let mib = |bytes: u64| bytes.div_ceil(1 << 20);
        log::warn!(
            "{}: a front-to-back read of its file ({:?} order) cycles through {} MiB of decoded \
             chunks, more than the {} MiB the cache keeps, so it decodes each chunk {span} \
             times or more; --cache-size {}MiB or more avoids that",
            view.array().meta.meta_key,
            layout.order,
            mib(working_set),
            cache.budget() >> 20,
            mib(super::cache_size_keeping(working_set)),
        );
    }
    Ok(Content::Flat(view))
}

/// How the file view of `meta` is laid out, as JSON (also the xattr values).
pub fn file_json(meta: &ArrayMetadata, layout: Layout) -> Value {
    let big = layout.big_endian;
    let order = match layout.order {
        Order::C => "C",
        Order::F => "F",
    };
    if meta.dtype.is_var() {
        return json!({"format": "json-lines", "order": order});
    }
    json!({
        "dtype": meta.dtype.typestr(big),
        "descr": meta.dtype.descr(big),
        "order": order,
        "endian": if big { "big" } else { "little" },
        "itemsize": meta.dtype.size(),
    })
}

/// `.NAME.json`: the array's metadata and its file view.
pub fn array_sidecar(h: &Hierarchy, path: &str, layout: Layout) -> Result<Content> {
    let mut doc = match h.array(path) {
        Ok(meta) => {
            let mut doc = describe_array(h, &meta);
            doc["file"] = file_json(&meta, layout);
            doc
        }
        Err(e) => json!({"error": e.to_string()}),
    };
    doc["path"] = json!(format!("/{path}"));
    doc["kind"] = json!("array");
    Ok(Content::Bytes(pretty(&doc)))
}

/// `.group.json`: the group's kind and attributes.
pub fn group_sidecar(h: &Hierarchy, path: &str) -> Result<Content> {
    let node = h.node(path)?;
    let attributes = match &node {
        Node::Group(g) => Value::Object(g.attributes.clone()),
        _ => json!({}),
    };
    let doc = json!({
        "path": format!("/{path}"),
        "kind": node.kind().label(),
        "zarr_format": h.format_label(),
        "attributes": attributes,
    });
    Ok(Content::Bytes(pretty(&doc)))
}

fn pretty(doc: &Value) -> Vec<u8> {
    let mut text = serde_json::to_vec_pretty(doc).unwrap_or_default();
    text.push(b'\n');
    text
}
