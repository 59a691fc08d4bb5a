//! The buffers a file's bytes are read into on their way to a client: each goes out as
//! the body's piece itself (no copy after the read), and comes back here when the
//! connection has sent it, so that a stream of pieces reuses a few warm buffers instead
//! of asking the allocator (and the kernel, a page fault per page) for fresh ones.

use bytes::Bytes;
use parking_lot::Mutex;

use crate::fs::io::Owned;

/// Buffers kept for reuse, at most: a few pieces in flight on each of many connections.
const KEPT: usize = 64;

static FREE: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());

/// A buffer for a piece of `size` bytes: a kept one when there is one.
pub fn buffer(size: usize) -> Vec<u8> {
    let mut free = FREE.lock();
    match free.iter().rposition(|b| b.len() >= size) {
        Some(i) => free.swap_remove(i),
        None => Vec::new(),
    }
}

/// The first `len` bytes of a buffer that goes back to [`FREE`] once sent.
struct Piece {
    buf: Vec<u8>,
    len: usize,
}

impl AsRef<[u8]> for Piece {
    fn as_ref(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl Drop for Piece {
    fn drop(&mut self) {
        let mut free = FREE.lock();
        if free.len() < KEPT {
            free.push(std::mem::take(&mut self.buf));
        }
    }
}

/// What a read gave, as a body's piece.
pub fn bytes(owned: Owned) -> Bytes {
    match owned {
        Owned::Unit(slice) => Bytes::from_owner(slice),
        Owned::Buffer(buf, len) => Bytes::from_owner(Piece {
            len: len.min(buf.len()),
            buf,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sent_piece_gives_its_buffer_back_for_the_next() {
        let mut buf = buffer(1 << 20);
        buf.resize(1 << 20, 7);
        let at = buf.as_ptr();
        let piece = bytes(Owned::Buffer(buf, 1000));
        assert_eq!(piece.len(), 1000);
        assert!(piece.iter().all(|&b| b == 7));
        drop(piece);
        // Other tests may take buffers meanwhile: look among those kept.
        let kept: Vec<Vec<u8>> = (0..KEPT).map(|_| buffer(1 << 20)).collect();
        assert!(kept.iter().any(|b| b.as_ptr() == at && b.len() == 1 << 20));
    }
}
