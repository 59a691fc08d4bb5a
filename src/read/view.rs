//! A flat byte view of one array: the elements in C or F order, little- or big-endian.
//! Decoded read units are cached already in the file's layout (transposed for F order,
//! byte-swapped for big-endian), so a byte range maps to runs that are each one copy out
//! of a cached unit (fill value for missing chunks, edge units clipped). Each reader
//! brings its own readahead [`Cursor`]; `view/stream.rs` streams a whole file for `cat`.
//! Variable-length arrays have no flat view: their text is `text.rs`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::codec::region::Region;
use crate::codec::{reverse_axes, swap_elements, UnitData};
use crate::error::{Error, Result};
use crate::metadata::SwapUnits;
use crate::read::array::Array;
use crate::read::cache::{UnitCache, UnitKey};
use crate::read::geometry::Geometry;
pub use crate::read::geometry::{Layout, Order};
use crate::read::prefetch::Prefetcher;
use crate::read::readahead::{Cursor, MIN_WINDOW};

mod stream;

/// Requests of a remote store the readahead window spans, at least.
const REQUESTS_AHEAD: u64 = 16;

/// Units queued for prefetch per read, at most: this many, or as many small units as
/// hold [`MAX_PREFETCH_BYTES`] (a read of a few MiB of 1 KiB chunks spans thousands).
const MAX_PREFETCH_UNITS: usize = 256;

/// Decoded bytes of the units queued for prefetch per read, at most, when that is more
/// than [`MAX_PREFETCH_UNITS`] units.
const MAX_PREFETCH_BYTES: usize = 8 << 20;

/// Decoded bytes of the units one prefetch job decodes, at most (one unit when larger).
const BATCH_BYTES: usize = 64 << 10;

/// Units one job of the hint threads names to the store.
const HINTS_PER_JOB: usize = 16;

/// Units a read answered from the cache alone ([`View::read_now`]) may gather, at most.
const MAX_NOW_UNITS: usize = 64;

/// Decodes read units into the file's layout; shared with prefetch jobs.
struct UnitLoader {
    array: Arc<Array>,
    layout: Layout,
    item: usize,
    swap: SwapUnits,
    /// Whether units are transposed from C to the file's F order.
    reverse: bool,
}

impl UnitLoader {
    fn key(&self, idx: &[u64]) -> UnitKey {
        (self.array.unit_id(idx), self.tag(), idx.to_vec())
    }

    /// [`UnitLoader::key`] when it is known without asking the store (a thread that
    /// answers at once does no store I/O); `None` when it is not.
    fn key_now(&self, idx: &[u64]) -> Option<UnitKey> {
        Some((self.array.unit_id_now(idx)?, self.tag(), idx.to_vec()))
    }

    /// How the view lays out a unit's bytes: its order and byte order.
    fn tag(&self) -> u8 {
        (self.layout.order == Order::F) as u8 | (self.layout.big_endian as u8) << 1
    }

    /// Whether a decoded unit is what the view copies from: the bytes of a whole unit, or
    /// one element of fill value.
    fn check(&self, chunk: &UnitData) -> Result<()> {
        match chunk {
            UnitData::Fixed(b) if b.len() == self.array.unit_bytes() => Ok(()),
            UnitData::Fill(one) if one.len() == self.item => Ok(()),
            _ => Err(Error::corrupt(
                &self.array.meta.meta_key,
                "decoded chunk has the wrong size",
            )),
        }
    }

    fn load(&self, idx: &[u64]) -> Result<UnitData> {
        let mut bytes = match self.array.read_unit_or_fill(idx)? {
            // One element in the file's byte order; nothing to transpose.
            UnitData::Fill(mut one) => {
                swap_elements(&mut one, self.item, &self.swap);
                return Ok(UnitData::Fill(one));
            }
            data => data.into_fixed()?,
        };
        if self.reverse {
            bytes = reverse_axes(&bytes, self.item, self.array.unit_shape());
        }
        swap_elements(&mut bytes, self.item, &self.swap);
        Ok(UnitData::Fixed(bytes))
    }
}

/// What a read answered from decoded units alone ([`View::read_now`]) gave.
pub enum Now {
    /// The bytes lie in one cached unit: here they are, without a copy.
    InPlace(UnitSlice),
    /// This many bytes were copied into the buffer.
    Copied(usize),
    /// A unit the read needs is not decoded yet: read it with [`View::read_at`].
    Later,
}

/// A read that ran into a unit that could not be read (a corrupt chunk, a failed fetch):
/// its first `read` bytes, those before the first byte of such a unit in file order, are
/// in the buffer; the rest failed with `error`. A read that starts in such a unit has
/// `read` 0.
#[derive(Debug)]
pub struct Partial {
    pub read: usize,
    pub error: Error,
}

impl From<Error> for Partial {
    /// A failure before any byte was read.
    fn from(error: Error) -> Partial {
        Partial { read: 0, error }
    }
}

impl From<Partial> for Error {
    /// The failure, whatever was read before it.
    fn from(partial: Partial) -> Error {
        partial.error
    }
}

/// Where [`View::fill_elements`] stopped: file element `from` is the first of the range
/// that lies in a unit which could not be read (every element before it was written).
struct Unreadable {
    from: u64,
    error: Error,
}

/// Bytes of a cached unit, handed out in place.
pub struct UnitSlice {
    chunk: Arc<UnitData>,
    range: std::ops::Range<usize>,
}

impl AsRef<[u8]> for UnitSlice {
    fn as_ref(&self) -> &[u8] {
        self.bytes()
    }
}

impl UnitSlice {
    pub fn bytes(&self) -> &[u8] {
        match self.chunk.as_ref() {
            UnitData::Fixed(b) => &b[self.range.clone()],
            UnitData::Var(_) | UnitData::Fill(_) => &[],
        }
    }
}

/// The flat file of a fixed-size array.
pub struct View {
    geometry: Geometry,
    loader: Arc<UnitLoader>,
    cache: Arc<UnitCache>,
    elements: u64,
    prefetcher: Option<Arc<Prefetcher>>,
    max_window: u64,
    /// Open files reading this view: with more than one, a unit one of them read whole
    /// stays cached for the others.
    readers: AtomicUsize,
}

impl View {
    pub fn new(array: Arc<Array>, cache: Arc<UnitCache>, layout: Layout) -> Result<View> {
        let item = array.meta.dtype.size().ok_or_else(|| {
            Error::Internal(format!(
                "{}: variable-length array has no flat view",
                array.meta.meta_key
            ))
        })?;
        let swap = if layout.big_endian {
            array.meta.dtype.swap_units()
        } else {
            vec![]
        };
        let reverse = layout.order == Order::F && array.meta.shape.len() > 1;
        let elements = array.meta.shape.iter().product();
        let geometry = Geometry::new(&array.meta.shape, array.unit_shape(), layout.order, item);
        // How far ahead of a sequential reader units are decoded, at most: two slabs, so
        // that the next slab decodes while this one is read, and on a remote store
        // enough for several requests in flight (a request fetches neighbouring chunks
        // together, so a window of one request's chunks waits for each in turn); within
        // half the cache budget, which holds the slab being read.
        let max_window = geometry
            .slab_bytes()
            .saturating_mul(2)
            .max(array.request_bytes().saturating_mul(REQUESTS_AHEAD))
            .min(cache.budget() as u64 / 2)
            .max(MIN_WINDOW);
        Ok(View {
            geometry,
            loader: Arc::new(UnitLoader {
                array,
                layout,
                item,
                swap,
                reverse,
            }),
            cache,
            elements,
            prefetcher: None,
            max_window,
            readers: AtomicUsize::new(0),
        })
    }

    /// Decode the units a read needs in parallel, and those ahead of sequential reads.
    pub fn with_prefetch(mut self, prefetcher: Arc<Prefetcher>) -> View {
        self.prefetcher = Some(prefetcher);
        self
    }

    /// An open file reads this view from now on.
    pub fn opened(&self) {
        self.readers.fetch_add(1, Ordering::Relaxed);
    }

    /// An open file of this view was closed.
    pub fn closed(&self) {
        let _ = self
            .readers
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
    }

    /// Note that `bytes` of the unit at `key` were handed out: a unit read whole leaves
    /// the cache, unless other open files read this view too or the cache keeps files
    /// of this size (see [`UnitCache::keeps`]). Units named by their bytes (shared by
    /// the versions of an array that hold them) stay while the file fits: another
    /// version's file, which the kernel caches apart, may read them next.
    fn served(&self, key: &UnitKey, bytes: usize) {
        let alone = self.readers.load(Ordering::Relaxed) <= 1;
        let size = self.size();
        let keep =
            self.cache.keeps(size) || (self.loader.array.shares_units() && self.cache.fits(size));
        self.cache.served_by(key, bytes, alone && !keep);
    }

    /// The file size: prod(shape) × itemsize.
    pub fn size(&self) -> u64 {
        self.elements * self.loader.item as u64
    }

    pub fn array(&self) -> &Arc<Array> {
        &self.loader.array
    }

    /// What a front-to-back read of the file cycles through: the bytes of the decoded
    /// units of one layer along the slowest file axis that a unit spans more than one
    /// element of, and that span. The read returns to every unit of the layer once per
    /// element of the span, so when the layer does not fit the cache, each unit is
    /// decoded that many times or more.
    pub fn sequential_working_set(&self) -> (u64, u64) {
        let unit_bytes = self.loader.array.unit_bytes() as u64;
        self.geometry.working_set(unit_bytes)
    }

    fn units(&self, first: u64, last: u64, limit: usize) -> Vec<Vec<u64>> {
        self.geometry.units(first, last, limit)
    }

    /// Queue background decodes of `units` that are neither cached, loading nor queued;
    /// false when the queue was full. `inline`: on a thread that answers at once, units
    /// whose cache key the store would have to be asked for are left to later reads.
    /// Small units of a local store go in batches of about [`BATCH_BYTES`], one job each,
    /// so that a job's hand-over to a worker is not paid per unit; a remote store's units
    /// go one a job, so that their requests are in flight side by side.
    fn prefetch(&self, prefetcher: &Prefetcher, units: Vec<Vec<u64>>, inline: bool) -> bool {
        let array = &self.loader.array;
        let per_batch = if array.request_bytes() == 0 {
            (BATCH_BYTES / array.unit_bytes().max(1)).max(1)
        } else {
            1
        };
        let mut queued = Vec::new();
        let mut batch: Vec<(UnitKey, Vec<u64>)> = Vec::new();
        let mut all = true;
        let mut units = units.into_iter().peekable();
        while let Some(unit) = units.next() {
            let key = if inline {
                match self.loader.key_now(&unit) {
                    Some(key) => key,
                    None => continue,
                }
            } else {
                self.loader.key(&unit)
            };
            if self.cache.claim_prefetch(&key) {
                batch.push((key, unit));
            }
            if batch.is_empty() || (batch.len() < per_batch && units.peek().is_some()) {
                continue;
            }
            let jobs = Arc::new(std::mem::take(&mut batch));
            let (loader, cache, mine) = (self.loader.clone(), self.cache.clone(), jobs.clone());
            let size = loader.array.load_bytes();
            let job = move || {
                for (key, unit) in mine.iter() {
                    cache.prefetch(key, size, || loader.load(unit));
                }
            };
            if !prefetcher.submit(job) {
                jobs.iter()
                    .for_each(|(key, _)| self.cache.unclaim_prefetch(key));
                all = false;
                break;
            }
            queued.extend(jobs.iter().map(|(_, unit)| unit.clone()));
        }
        // The store starts reading what the queued decodes need, a few units a job, so
        // that the hint threads wait for a cold disk's reads side by side.
        for hints in queued.chunks(HINTS_PER_JOB) {
            let (array, hints) = (self.loader.array.clone(), hints.to_vec());
            prefetcher.hint(move || hints.iter().for_each(|unit| array.will_need(unit)));
        }
        all
    }

    /// Units queued for prefetch per read, at most (see [`MAX_PREFETCH_UNITS`]).
    fn prefetch_cap(&self) -> usize {
        let unit_bytes = self.loader.array.unit_bytes().max(1);
        MAX_PREFETCH_UNITS.max(MAX_PREFETCH_BYTES / unit_bytes)
    }

    /// Before a read of `[offset, offset + len)`: start decoding what it needs (beyond the
    /// first unit, which the reader decodes itself) and, while reads stay sequential (in
    /// any order within the window, as kernel readahead sends them), what comes next.
    /// `inline`: planned by a thread that answers at once (see [`View::prefetch`]).
    fn plan(&self, cursor: &Cursor, offset: u64, len: u64, inline: bool) {
        let Some(prefetcher) = &self.prefetcher else {
            return;
        };
        let item = self.loader.item as u64;
        let mut needed = self.units(
            offset / item,
            (offset + len).div_ceil(item),
            self.prefetch_cap(),
        );
        if needed.len() > 1 {
            needed.remove(0);
            self.prefetch(prefetcher, needed, inline);
        }
        let Some((from, to)) = cursor.advance(offset, len, self.max_window, self.size()) else {
            return;
        };
        let cap = self.prefetch_cap();
        let units = self.units(from / item, to.div_ceil(item), cap);
        let truncated = units.len() >= cap;
        if !self.prefetch(prefetcher, units, inline) || truncated {
            cursor.unplan(from, to);
        }
    }

    /// A read of `[offset, offset + len)` that lies within one unit, contiguous in the
    /// unit's memory (the unit spans the whole file extent of every axis faster than the
    /// slowest one the read crosses): the cached unit itself, to be handed out without a
    /// copy. `None` when the read must be assembled with [`View::read_at`].
    pub fn read_in_place(
        &self,
        cursor: &Cursor,
        offset: u64,
        len: usize,
    ) -> Result<Option<UnitSlice>> {
        self.in_place(cursor, offset, len, false)
    }

    /// A read answered from units already decoded in the cache, with no store I/O, no
    /// decode and no waiting for either, so that any thread may answer it at once:
    /// in place (as [`View::read_in_place`]), or copied into `buf` (as [`View::read_at`])
    /// when it gathers at most [`MAX_NOW_UNITS`] units; else [`Now::Later`].
    pub fn read_now(&self, cursor: &Cursor, offset: u64, buf: &mut [u8]) -> Result<Now> {
        let size = self.size();
        if offset >= size || buf.is_empty() {
            return Ok(Now::Copied(0));
        }
        if let Some(slice) = self.in_place(cursor, offset, buf.len(), true)? {
            return Ok(Now::InPlace(slice));
        }
        let len = (buf.len() as u64).min(size - offset);
        let item = self.loader.item as u64;
        if !offset.is_multiple_of(item) || !len.is_multiple_of(item) {
            return Ok(Now::Later);
        }
        let (first, last) = (offset / item, (offset + len) / item);
        let units = self.units(first, last, MAX_NOW_UNITS + 1);
        if units.len() > MAX_NOW_UNITS {
            return Ok(Now::Later);
        }
        // Hold every unit first: none can be evicted while the read copies.
        let mut held = Vec::with_capacity(units.len());
        for idx in &units {
            let Some(key) = self.loader.key_now(idx) else {
                return Ok(Now::Later);
            };
            match self.cache.peek(&key) {
                Some(chunk) => held.push((key, chunk)),
                None => return Ok(Now::Later),
            }
        }
        self.plan(cursor, offset, len, true);
        let dst = &mut buf[..len as usize];
        self.fill_elements(first, last, dst, false, |key, _| {
            held.iter()
                .find(|(k, _)| k == key)
                .map(|(_, chunk)| chunk.clone())
                .ok_or_else(|| Error::Internal("a unit the read needs was not held".into()))
        })
        .map_err(|bad| bad.error)?;
        Ok(Now::Copied(len as usize))
    }

    /// [`View::read_in_place`]; with `cached_only`, `None` unless the unit is decoded.
    fn in_place(
        &self,
        cursor: &Cursor,
        offset: u64,
        len: usize,
        cached_only: bool,
    ) -> Result<Option<UnitSlice>> {
        let size = self.size();
        let item = self.loader.item as u64;
        if offset >= size || len == 0 || !offset.is_multiple_of(item) {
            return Ok(None);
        }
        let len = (len as u64).min(size - offset);
        if !len.is_multiple_of(item) {
            return Ok(None);
        }
        let Some((idx, start)) = self
            .geometry
            .contiguous_unit(offset / item, (offset + len) / item)
        else {
            return Ok(None);
        };
        let loader = &self.loader;
        let key = if cached_only {
            match loader.key_now(&idx) {
                Some(key) => key,
                None => return Ok(None),
            }
        } else {
            loader.key(&idx)
        };
        let chunk = if cached_only {
            // A fill unit is not handed out in place: the caller gathers it, and plans.
            match self.cache.peek(&key) {
                Some(chunk) if !matches!(chunk.as_ref(), UnitData::Fill(_)) => {
                    self.plan(cursor, offset, len, true);
                    chunk
                }
                _ => return Ok(None),
            }
        } else {
            self.plan(cursor, offset, len, false);
            self.cache
                .get_or_load(&key, loader.array.load_bytes(), || loader.load(&idx))?
        };
        if matches!(chunk.as_ref(), UnitData::Fill(_)) {
            // Nothing to hand out in place: the read writes the fill value.
            return Ok(None);
        }
        let range = start * loader.item..start * loader.item + len as usize;
        if !matches!(chunk.as_ref(), UnitData::Fixed(b) if b.len() == loader.array.unit_bytes() && range.end <= b.len())
        {
            return Err(Error::corrupt(
                &loader.array.meta.meta_key,
                "decoded chunk has the wrong size",
            ));
        }
        self.served(&key, len as usize);
        Ok(Some(UnitSlice { chunk, range }))
    }

    /// Fill `buf` from file offset `offset`; returns the bytes written (short at EOF). A
    /// read that runs into a unit that cannot be read still fills the bytes before it
    /// (see [`Partial`]), so that a front may answer them.
    pub fn read_at(
        &self,
        cursor: &Cursor,
        offset: u64,
        buf: &mut [u8],
    ) -> std::result::Result<usize, Partial> {
        let size = self.size();
        if offset >= size || buf.is_empty() {
            return Ok(0);
        }
        let len = (buf.len() as u64).min(size - offset) as usize;
        self.plan(cursor, offset, len as u64, false);
        let item = self.loader.item as u64;
        let (first, last) = (offset / item, (offset + len as u64).div_ceil(item));
        // The bytes of the read before element `from`.
        let before = |from: u64| (from * item).saturating_sub(offset).min(len as u64) as usize;
        let partial = |bad: Unreadable| Partial {
            read: before(bad.from),
            error: bad.error,
        };
        if offset == first * item && offset + len as u64 == last * item {
            self.fill_elements(first, last, &mut buf[..len], false, |key, idx| {
                self.load_unit(key, idx)
            })
            .map_err(partial)?;
        } else {
            // A request that splits elements: whole elements first, then the part asked.
            // A split element counts as served by the read holding its first byte.
            let mut whole = vec![0u8; ((last - first) * item) as usize];
            let split = offset != first * item;
            let filled = self.fill_elements(first, last, &mut whole, split, |key, idx| {
                self.load_unit(key, idx)
            });
            let good = match &filled {
                Ok(()) => len,
                Err(bad) => before(bad.from),
            };
            let skip = (offset - first * item) as usize;
            buf[..good].copy_from_slice(&whole[skip..skip + good]);
            filled.map_err(partial)?;
        }
        Ok(len)
    }

    /// The unit at `idx` (cache key `key`), decoded now if the cache does not hold it.
    fn load_unit(&self, key: &UnitKey, idx: &[u64]) -> Result<Arc<UnitData>> {
        self.cache
            .get_or_load(key, self.loader.array.load_bytes(), || {
                self.loader.load(idx)
            })
    }

    /// Write file elements `[first, last)` into `dst`: the range splits into boxes, each
    /// box into the units it crosses, and each piece is one strided box copy. Each piece
    /// is reported to the cache as served, except element `first` when `first_not_served`.
    /// `get_unit(key, idx)` gives each unit. When a unit cannot be had, every element
    /// before the first one of the range it holds is still written (see [`Unreadable`]).
    fn fill_elements(
        &self,
        first: u64,
        last: u64,
        dst: &mut [u8],
        first_not_served: bool,
        mut get_unit: impl FnMut(&UnitKey, &[u64]) -> Result<Arc<UnitData>>,
    ) -> std::result::Result<(), Unreadable> {
        let loader = &self.loader;
        // Everything below is in file-axis order, where units and the file are both C order.
        let (shape_f, unit_f) = self.geometry.file_axes_shapes();
        let mut unserved = if first_not_served { loader.item } else { 0 };
        let mut bad: Option<Unreadable> = None;
        let walked = self.geometry.boxes(first, last, |lo, hi, u| {
            // The part of the box inside unit `u`.
            let start: Vec<u64> = (0..u.len()).map(|k| lo[k].max(u[k] * unit_f[k])).collect();
            // Each box is a run of consecutive file elements, so a piece's first element
            // in file order is its corner. Pieces from an unreadable unit's first element
            // on lie past what the read can give: they are skipped (boxes come in file
            // order, and a box's pieces by their first element, so that is all of them).
            let at = start.iter().zip(shape_f).fold(0, |at, (s, n)| at * n + s);
            if bad.as_ref().is_some_and(|bad| at >= bad.from) {
                return Ok(true);
            }
            let idx = self.geometry.unit_index(u);
            let key = loader.key(&idx);
            let chunk = match get_unit(&key, &idx).and_then(|c| loader.check(&c).map(|()| c)) {
                Ok(chunk) => chunk,
                Err(error) => {
                    bad = Some(Unreadable { from: at, error });
                    return Ok(true);
                }
            };
            let src = match chunk.as_ref() {
                UnitData::Fixed(src) => Some(src),
                _ => None,
            };
            let end: Vec<u64> = (0..u.len())
                .map(|k| hi[k].min((u[k] + 1) * unit_f[k]))
                .collect();
            let within: Vec<u64> = (0..u.len()).map(|k| start[k] - u[k] * unit_f[k]).collect();
            let extent: Vec<u64> = (0..u.len()).map(|k| end[k] - start[k]).collect();
            let region = Region {
                src_shape: unit_f,
                src_at: &within,
                dst_shape: shape_f,
                dst_at: &start,
                region: &extent,
                item: loader.item,
                dst_base: first as usize,
            };
            match (src, chunk.as_ref()) {
                (Some(src), _) => region.copy(src, dst),
                (None, UnitData::Fill(one)) => region.fill(one, dst),
                (None, _) => {}
            }
            let piece = extent.iter().product::<u64>() as usize * loader.item;
            let piece = piece - std::mem::take(&mut unserved);
            self.served(&key, piece);
            Ok(true)
        });
        match (walked, bad) {
            (Err(error), _) => Err(Unreadable { from: first, error }),
            (Ok(()), Some(bad)) => Err(bad),
            (Ok(()), None) => Ok(()),
        }
    }
}
