//! Streaming a whole flat file to a writer (`zarrfs cat`). Where the runs of consecutive
//! file bytes inside one unit are long, each block goes out as vectored writes straight
//! from the decoded units (and from a pattern of the fill value), with no copy into a
//! block buffer first; short runs are assembled into a buffer as [`View::read_at`] does.

use std::io::{IoSlice, Write};
use std::sync::Arc;

use super::View;
use crate::codec::UnitData;
use crate::error::{output_error, Error, Result};
use crate::read::cache::UnitKey;
use crate::read::readahead::Cursor;

/// Runs shorter than this are assembled: per piece, a vectored write costs more than
/// copying it.
const MIN_PIECE: usize = 512;

/// Bytes of repeated fill value that fill runs are written from.
const FILL_PATTERN: usize = 64 << 10;

/// One stretch of a block: `len` bytes of held unit `unit` from byte `start` on, or of
/// fill value when the unit is a fill unit.
struct Piece {
    unit: usize,
    start: usize,
    len: usize,
}

impl View {
    /// Stream the whole file to `out` in blocks of about `block` bytes.
    pub fn write_all(&self, out: &mut impl Write, block: usize) -> Result<()> {
        self.write_pieces(out, block, MIN_PIECE)
    }

    /// [`View::write_all`], writing runs in place when the file's contiguous runs in one
    /// unit are at least `min_piece` bytes long, else assembling each block.
    pub fn write_pieces(&self, out: &mut impl Write, block: usize, min_piece: usize) -> Result<()> {
        let item = self.loader.item.max(1);
        let block = (block / item).max(1) * item;
        let size = self.size();
        let in_place = self.geometry.run_bytes() >= min_piece;
        let mut buf = Vec::new();
        let mut offset = 0u64;
        // The stream is one reader, front to back.
        let cursor = Cursor::default();
        while offset < size {
            let len = (block as u64).min(size - offset);
            if !(in_place && self.write_block(&cursor, out, offset, len)?) {
                buf.resize(block, 0);
                let n = self.read_at(&cursor, offset, &mut buf[..len as usize])?;
                out.write_all(&buf[..n]).map_err(output_error)?;
            }
            offset += len;
        }
        Ok(())
    }

    /// Write file bytes `[offset, offset + len)` (whole elements) from the units that
    /// hold them, holding each until the block is written; false (nothing written) when
    /// those units would take more than half the cache at once.
    fn write_block(
        &self,
        cursor: &Cursor,
        out: &mut impl Write,
        offset: u64,
        len: u64,
    ) -> Result<bool> {
        let loader = &self.loader;
        let meta = &loader.array.meta;
        let item = loader.item;
        let (first, last) = (offset / item as u64, (offset + len) / item as u64);
        let unit_len = loader.array.unit_bytes();
        let units = self.units(first, last, usize::MAX);
        if (units.len() as u64).saturating_mul(unit_len as u64) > self.cache.budget() as u64 / 2 {
            return Ok(false);
        }
        self.plan(cursor, offset, len, false);
        let mut held: Vec<(UnitKey, Arc<UnitData>)> = Vec::new();
        let mut fill: Option<Vec<u8>> = None;
        for idx in units {
            let key = loader.key(&idx);
            let chunk = self.load_unit(&key, &idx)?;
            loader.check(&chunk)?;
            if let UnitData::Fill(one) = chunk.as_ref() {
                let pattern = fill.get_or_insert_with(|| one.repeat(FILL_PATTERN / item + 1));
                if !pattern.starts_with(one) {
                    return Err(Error::corrupt(&meta.meta_key, "two fill values"));
                }
            }
            held.push((key, chunk));
        }
        let is_fill = |u: usize| matches!(held[u].1.as_ref(), UnitData::Fill(_));
        let mut pieces: Vec<Piece> = Vec::new();
        let mut served = vec![0usize; held.len()];
        let table = UnitTable::new(held.iter().map(|(key, _)| key.2.as_slice()));
        self.geometry
            .runs(loader.layout.order, first, last, |run| {
                let at = table
                    .find(run.unit)
                    .ok_or_else(|| Error::Internal("a unit the write needs was not held".into()))?;
                let (start, bytes) = (run.offset * item, run.len as usize * item);
                served[at] += bytes;
                match pieces.last_mut() {
                    Some(p) if is_fill(p.unit) && is_fill(at) => p.len += bytes,
                    Some(p) if p.unit == at && p.start + p.len == start => p.len += bytes,
                    _ => pieces.push(Piece {
                        unit: at,
                        start,
                        len: bytes,
                    }),
                }
                Ok(())
            })?;
        let pattern = fill.as_deref().unwrap_or(&[]);
        let mut slices: Vec<IoSlice> = Vec::with_capacity(pieces.len());
        for p in &pieces {
            match held[p.unit].1.as_ref() {
                UnitData::Fixed(b) => slices.push(IoSlice::new(&b[p.start..p.start + p.len])),
                _ => {
                    let mut left = p.len;
                    while left > 0 {
                        let n = left.min(pattern.len());
                        slices.push(IoSlice::new(&pattern[..n]));
                        left -= n;
                    }
                }
            }
        }
        write_all_vectored(out, &mut slices)?;
        for ((key, _), bytes) in held.iter().zip(served) {
            self.served(key, bytes);
        }
        Ok(true)
    }
}

/// The position of each of a block's units in its list, by grid index: a dense table
/// over the units' bounding box, or a search of the list when that box is much larger
/// than the list (a block whose head and tail are far apart in some axis).
struct UnitTable<'a> {
    units: Vec<&'a [u64]>,
    lo: Vec<u64>,
    strides: Vec<u64>,
    /// Position + 1 of the unit in each cell of the box, 0 for none; empty: search.
    slots: Vec<usize>,
}

impl<'a> UnitTable<'a> {
    fn new(units: impl Iterator<Item = &'a [u64]>) -> UnitTable<'a> {
        let units: Vec<&[u64]> = units.collect();
        let rank = units.first().map_or(0, |u| u.len());
        let mut lo = vec![u64::MAX; rank];
        let mut hi = vec![0u64; rank];
        for u in &units {
            for d in 0..rank.min(u.len()) {
                lo[d] = lo[d].min(u[d]);
                hi[d] = hi[d].max(u[d]);
            }
        }
        let mut strides = vec![0u64; rank];
        let mut cells = 1u64;
        for d in (0..rank).rev() {
            strides[d] = cells;
            cells = cells.saturating_mul(hi[d].saturating_sub(lo[d]) + 1);
        }
        let mut table = UnitTable {
            units,
            lo,
            strides,
            slots: vec![],
        };
        if cells <= 4 * table.units.len() as u64 + 64 {
            table.slots = vec![0; cells as usize];
            for (k, u) in table.units.iter().enumerate() {
                if let Some(cell) = table.cell(u) {
                    table.slots[cell] = k + 1;
                }
            }
        }
        table
    }

    fn cell(&self, u: &[u64]) -> Option<usize> {
        if u.len() != self.lo.len() {
            return None;
        }
        let mut cell = 0u64;
        for (d, &i) in u.iter().enumerate() {
            cell = cell.checked_add(i.checked_sub(self.lo[d])?.checked_mul(self.strides[d])?)?;
        }
        usize::try_from(cell).ok()
    }

    fn find(&self, u: &[u64]) -> Option<usize> {
        if self.slots.is_empty() {
            return self.units.iter().position(|v| *v == u);
        }
        let k = *self.slots.get(self.cell(u)?)?;
        (k > 0 && self.units[k - 1] == u).then(|| k - 1)
    }
}

/// Write every byte of `slices`, however many each vectored write takes.
fn write_all_vectored(out: &mut impl Write, mut slices: &mut [IoSlice]) -> Result<()> {
    while !slices.is_empty() {
        match out.write_vectored(slices) {
            Ok(0) => return Err(output_error(std::io::ErrorKind::WriteZero.into())),
            Ok(n) => IoSlice::advance_slices(&mut slices, n),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(output_error(e)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::UnitTable;

    #[test]
    fn unit_table_finds_each_unit_and_nothing_else() {
        // A dense block (a table) and one whose units lie far apart (a search).
        let dense: Vec<Vec<u64>> = (0..3)
            .flat_map(|y| (2..6).map(move |x| vec![7, y, x]))
            .collect();
        let sparse = vec![vec![0, 0], vec![1000, 3], vec![500, 1]];
        for units in [dense, sparse] {
            let table = UnitTable::new(units.iter().map(Vec::as_slice));
            for (k, u) in units.iter().enumerate() {
                assert_eq!(table.find(u), Some(k), "{u:?}");
            }
            let rank = units[0].len();
            for missing in [vec![1; rank], vec![u64::MAX; rank], vec![0; rank + 1]] {
                assert_eq!(table.find(&missing), None, "{missing:?}");
            }
        }
        assert_eq!(UnitTable::new(std::iter::empty()).find(&[]), None);
    }
}
