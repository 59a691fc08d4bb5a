//! The tiles of one image plane: how a tiled TIFF's data maps to rows of an array's
//! C-order flat view. The tiles follow one another row of tiles by row of tiles, each
//! held row by row; a tile reaching past the plane's right or bottom edge is padded with
//! zeros, as TIFF wants every tile whole.

use crate::Result;

/// One plane of an array's flat view cut into tiles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TileGrid {
    /// Where the plane starts in the flat view, in bytes.
    pub plane_at: u64,
    pub rows: u64,
    pub cols: u64,
    /// Bytes per element.
    pub item: u64,
    pub tile_rows: u64,
    pub tile_cols: u64,
}

impl TileGrid {
    /// Tiles in a row of tiles.
    pub fn across(&self) -> u64 {
        self.cols.div_ceil(self.tile_cols)
    }

    /// Rows of tiles.
    pub fn down(&self) -> u64 {
        self.rows.div_ceil(self.tile_rows)
    }

    /// Bytes of one tile; `None` when it overflows.
    pub fn tile_bytes(&self) -> Option<u64> {
        self.tile_rows
            .checked_mul(self.tile_cols)?
            .checked_mul(self.item)
    }

    /// Bytes of every tile; `None` when it overflows.
    pub fn checked_len(&self) -> Option<u64> {
        self.across()
            .checked_mul(self.down())?
            .checked_mul(self.tile_bytes()?)
    }

    /// Bytes of every tile (0 for a grid whose size overflows, which the views never
    /// build).
    pub fn bytes(&self) -> u64 {
        self.checked_len().unwrap_or(0)
    }

    /// Fill `out` from byte `within` of the tiles: each stretch inside the plane is read
    /// with `read(offset in the flat view, out)`, which gives the bytes it read, or
    /// `None` when they are not at hand (then so is this). The bytes written.
    pub fn fill(
        &self,
        within: u64,
        out: &mut [u8],
        mut read: impl FnMut(u64, &mut [u8]) -> Result<Option<usize>>,
    ) -> Result<Option<usize>> {
        let row_bytes = self.tile_cols * self.item;
        let tile_bytes = row_bytes * self.tile_rows;
        let plane_row = self.cols * self.item;
        let (across, len) = (self.across(), self.bytes());
        let mut done = 0usize;
        while done < out.len() {
            let at = within + done as u64;
            if at >= len {
                break;
            }
            let (tile, in_tile) = (at / tile_bytes, at % tile_bytes);
            let (r, c) = (in_tile / row_bytes, in_tile % row_bytes);
            let y = (tile / across) * self.tile_rows + r;
            let x = (tile % across) * row_bytes + c;
            let n = (row_bytes - c).min((out.len() - done) as u64) as usize;
            let part = &mut out[done..done + n];
            let inside = if y < self.rows {
                plane_row.saturating_sub(x).min(n as u64) as usize
            } else {
                0
            };
            if inside > 0 {
                match read(self.plane_at + y * plane_row + x, &mut part[..inside])? {
                    Some(k) if k == inside => {}
                    Some(k) => return Ok(Some(done + k)),
                    None => return Ok(None),
                }
            }
            part[inside..].fill(0);
            done += n;
        }
        Ok(Some(done))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tiles of `grid` over `flat`, assembled element by element.
    fn tiles_of(grid: &TileGrid, flat: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        for ty in 0..grid.down() {
            for tx in 0..grid.across() {
                for r in 0..grid.tile_rows {
                    for c in 0..grid.tile_cols {
                        let (y, x) = (ty * grid.tile_rows + r, tx * grid.tile_cols + c);
                        for b in 0..grid.item {
                            out.push(if y < grid.rows && x < grid.cols {
                                let at = grid.plane_at + (y * grid.cols + x) * grid.item + b;
                                flat[at as usize]
                            } else {
                                0
                            });
                        }
                    }
                }
            }
        }
        out
    }

    #[test]
    fn tiles_read_in_any_pieces_equal_the_plane_cut_into_tiles() {
        let flat: Vec<u8> = (0..=255u8).cycle().take(3 * 5 * 7 * 2).collect();
        let grid = TileGrid {
            plane_at: 5 * 7 * 2,
            rows: 5,
            cols: 7,
            item: 2,
            tile_rows: 2,
            tile_cols: 3,
        };
        let whole = tiles_of(&grid, &flat);
        assert_eq!(whole.len() as u64, grid.bytes());
        assert_eq!((grid.across(), grid.down()), (3, 3));
        let read = |at: u64, out: &mut [u8]| {
            let at = at as usize;
            out.copy_from_slice(&flat[at..at + out.len()]);
            Ok(Some(out.len()))
        };
        for start in 0..whole.len() {
            for len in [1, 2, 5, 12, 13, 40, whole.len()] {
                let mut out = vec![0xEE; len];
                let n = grid.fill(start as u64, &mut out, read).unwrap().unwrap();
                let expect = &whole[start..(start + len).min(whole.len())];
                assert_eq!(&out[..n], expect, "{len} bytes at {start}");
            }
        }
        let mut out = [0u8; 4];
        assert_eq!(grid.fill(0, &mut out, |_, _| Ok(None)).unwrap(), None);
    }
}
