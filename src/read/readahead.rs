//! Readahead: where one reader's sequential reading of a file has got to, and how far
//! ahead of it the flat view decodes. A reader gets readahead once two of its reads
//! continue each other; the window, [`MIN_WINDOW`] at first, then doubles with every read
//! that stays sequential (in any order within the window, as kernel readahead sends
//! them), and a read elsewhere starts it again.

use parking_lot::Mutex;

/// The readahead window starts here and doubles while reads stay sequential.
pub const MIN_WINDOW: u64 = 4 << 20;

/// Where one reader's sequential reading of a file has got to: each open file has its
/// own (see `fs/handles.rs`), so readers of one array at different offsets keep their own
/// readahead windows.
#[derive(Default)]
pub struct Cursor(Mutex<Readahead>);

/// The state behind a [`Cursor`].
struct Readahead {
    end: u64,
    window: u64,
    /// Reads in a row that continued the previous ones.
    streak: u32,
    /// Where the units already queued for prefetch end: each read queues only what the
    /// window newly covers.
    planned: u64,
    /// Reads through this cursor never read ahead (see [`NO_READAHEAD`]).
    never: bool,
}

impl Default for Readahead {
    fn default() -> Readahead {
        Readahead {
            end: 0,
            window: MIN_WINDOW,
            streak: 1,
            planned: 0,
            never: false,
        }
    }
}

/// The cursor of reads that do not run through a flat file front to back, whatever
/// their offsets: a tiled file's tile rows, one short stretch of each row of the plane,
/// of which a read from the plane's start would otherwise start a stream.
pub static NO_READAHEAD: Cursor = Cursor(parking_lot::const_mutex(Readahead {
    end: 0,
    window: MIN_WINDOW,
    streak: 0,
    planned: 0,
    never: true,
}));

impl Cursor {
    /// A read of `[offset, offset + len)` of a file of `size` bytes: the part of the file
    /// to decode ahead of it now (what the window, at most `max_window`, newly covers),
    /// or `None` when there is none (no stream yet, or nothing new).
    pub fn advance(&self, offset: u64, len: u64, max_window: u64, size: u64) -> Option<(u64, u64)> {
        let mut ra = self.0.lock();
        if ra.never {
            return None;
        }
        // A stream must be established (two reads that continue each other) before
        // reads may arrive out of order within the window: random readers get no
        // readahead.
        let slack = if ra.streak >= 2 { ra.window } else { len };
        let sequential = offset <= ra.end + slack && offset + len + slack >= ra.end;
        if sequential {
            ra.end = ra.end.max(offset + len);
            ra.streak = ra.streak.saturating_add(1);
            if ra.streak >= 2 {
                ra.window = (ra.window * 2).min(max_window);
            }
        } else {
            ra.end = offset + len;
            ra.window = MIN_WINDOW;
            ra.streak = u32::from(offset == 0);
            ra.planned = 0;
        }
        let from = ra.end.max(ra.planned);
        let to = (ra.end + ra.window).min(size);
        if ra.streak < 2 || from >= to {
            return None;
        }
        ra.planned = to;
        Some((from, to))
    }

    /// Not all of `[from, to)` (what [`Cursor::advance`] gave) was queued: the next read
    /// plans from `from` again.
    pub fn unplan(&self, from: u64, to: u64) {
        let mut ra = self.0.lock();
        if ra.planned == to {
            ra.planned = from;
        }
    }
}
