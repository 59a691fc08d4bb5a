//! What a file serves: an array's flat view, an array's JSON-lines text (variable-length
//! types), or a sidecar JSON document.

use std::sync::Arc;

use serde_json::{json, Value};

use super::describe::describe_array;
use crate::hierarchy::{Hierarchy, Node};
use crate::metadata::ArrayMetadata;
use crate::read::array::Array;
use crate::read::cache::ChunkCache;
use crate::read::prefetch::Prefetcher;
use crate::read::view::{write_var_lines, Cursor, Layout, Now, Order, UnitSlice, View};
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
    /// A header in front of an array's flat file (`.npy`, `.tif`): the data is the raw
    /// file's own content, so both share one view and its cached chunks.
    Headed { header: Vec<u8>, data: Arc<Content> },
}

impl Content {
    pub fn size(&self) -> u64 {
        match self {
            Content::Flat(v) => v.size(),
            Content::Bytes(b) => b.len() as u64,
            Content::Headed { header, data } => header.len() as u64 + data.size(),
        }
    }

    /// Fill `buf` from `offset`; the bytes written (short or none at end of file).
    pub fn read_into(&self, cursor: &Cursor, offset: u64, buf: &mut [u8]) -> Result<usize> {
        match self {
            Content::Flat(view) => view.read_at(cursor, offset, buf),
            Content::Bytes(b) => Ok(copy_from(b, offset, buf)),
            Content::Headed { header, data } => {
                let head = copy_from(header, offset, buf);
                let at = (offset + head as u64).saturating_sub(header.len() as u64);
                Ok(head + data.read_into(cursor, at, &mut buf[head..])?)
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
            Content::Headed { header, data } if offset >= header.len() as u64 => {
                data.read_in_place(cursor, offset - header.len() as u64, len)
            }
            _ => Ok(None),
        }
    }

    /// A read answered from what is in memory alone (see [`View::read_now`]).
    pub fn read_now(&self, cursor: &Cursor, offset: u64, buf: &mut [u8]) -> Result<Now> {
        match self {
            Content::Flat(view) => view.read_now(cursor, offset, buf),
            Content::Bytes(b) => Ok(Now::Copied(copy_from(b, offset, buf))),
            Content::Headed { header, data } if offset >= header.len() as u64 => {
                data.read_now(cursor, offset - header.len() as u64, buf)
            }
            Content::Headed { header, data } => {
                let head = copy_from(header, offset, buf);
                Ok(match data.read_now(cursor, 0, &mut buf[head..])? {
                    Now::InPlace(slice) => {
                        let bytes = slice.bytes();
                        buf[head..head + bytes.len()].copy_from_slice(bytes);
                        Now::Copied(head + bytes.len())
                    }
                    Now::Copied(n) => Now::Copied(head + n),
                    Now::Later => Now::Later,
                })
            }
        }
    }

    /// The array's flat view behind this file, if it has one.
    pub fn view(&self) -> Option<&View> {
        match self {
            Content::Flat(view) => Some(view),
            Content::Headed { data, .. } => data.view(),
            Content::Bytes(_) => None,
        }
    }
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
    cache: &Arc<ChunkCache>,
    prefetcher: &Arc<Prefetcher>,
    layout: Layout,
) -> Result<Content> {
    let meta = h.array(path)?;
    let array = Arc::new(Array::open(meta, h.store().clone())?);
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
