//! One read through a front. A read whose bytes are all decoded (or already in the
//! array's materialized copy) is answered inline, on the thread that took it: a bounded
//! copy, or none, with no store I/O and no decode, so it holds up the front's request
//! loop only briefly and skips the hand-off to a worker. Every other read goes to the read
//! workers, a file's reads at most `threads` at a time. Each thread keeps one buffer for
//! the bytes it answers with: no allocation per read. A front that sends the answer on
//! after the call (HTTP) gives a buffer of its own instead and takes it away with the
//! bytes ([`Serving::read_owned`]), so they are not copied out again. What a reader is
//! given is copied into the array's materialized copy on the way out.
//!
//! A read that runs into a chunk that cannot be read (corrupt, or its fetch refused or
//! failed) fails only as far as it must. Where the front hands the answer to the reader
//! as it is (the kernel's direct IO), a read that starts in good bytes is answered with
//! those before the bad chunk: the reader sees a short read, and its next read, which
//! starts in the bad bytes, fails with `EIO`, as at a disk's bad sector. A read into the
//! kernel's page cache fails whole instead: FUSE takes a short answer there for the end
//! of the file (it zero-fills the rest of the page, marks it read, and shrinks the size
//! it holds of the file to it; only with a writeback cache does it not), so a good prefix
//! would turn the bad bytes into zeros and cut the file short. The kernel then reads the
//! pages of a failed readahead one at a time, so through the page cache every page wholly
//! before the bad chunk still reads, and the page that straddles it fails whole; a file
//! that failed once is therefore opened direct from then on (see [`super::mode`]).

use std::cell::RefCell;
use std::sync::Arc;

use super::Serving;
use crate::fs::{Now, Partial, UnitSlice};
use crate::pool::caught;
use crate::{Error, Result};

thread_local! {
    static READ_BUFFER: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// What a read gave: bytes of a cached unit, in place; the first bytes of the buffer it
/// was given; or the error it ended with.
enum Step {
    InPlace(UnitSlice),
    Filled(usize),
    Failed(Error),
}

/// An answer a front takes away whole ([`Serving::read_owned`]): bytes of a cached
/// unit, in place, or the buffer it gave with its first `n` bytes read.
pub enum Owned {
    Unit(UnitSlice),
    Buffer(Vec<u8>, usize),
}

/// `buf`, grown to at least `size` bytes, cut to `size`.
fn sized(buf: &mut Vec<u8>, size: usize) -> &mut [u8] {
    if buf.len() < size {
        buf.resize(size, 0);
    }
    &mut buf[..size]
}

/// Hand a step's bytes (in `buf` when copied there) to `answer`.
fn give<A>(step: Step, buf: &[u8], answer: A)
where
    A: for<'a> FnOnce(Result<&'a [u8]>),
{
    match step {
        Step::InPlace(slice) => answer(Ok(slice.bytes())),
        Step::Filled(n) => answer(Ok(&buf[..n])),
        Step::Failed(e) => answer(Err(e)),
    }
}

impl<Id: Send + Sync + 'static> Serving<Id> {
    /// Read `size` bytes at `offset` of the open `fh` of `ino` and hand them (or the
    /// error) to `answer`: at once when they can be answered inline, else from a read
    /// worker. Inside the same panic guard as the pools: a bug fails this read alone
    /// (`answer` is dropped unused) and the caller goes on. `direct`: the answer goes to
    /// the reader as it is, so a short one is a short read, not the end of the file; a
    /// read that runs from good bytes into a chunk that cannot be read is then answered
    /// with its good bytes, else it fails whole (see the module's documentation).
    pub fn read<A>(
        self: &Arc<Self>,
        ino: u64,
        fh: u64,
        offset: u64,
        size: usize,
        direct: bool,
        answer: A,
    ) where
        A: for<'a> FnOnce(Result<&'a [u8]>) + Send + 'static,
    {
        let inline = caught("read", || {
            READ_BUFFER.with_borrow_mut(|buf| {
                let buf = sized(buf, size);
                match self.inline_step(ino, fh, offset, buf) {
                    None => Some(answer),
                    Some(step) => {
                        give(step, buf, answer);
                        None
                    }
                }
            })
        });
        let Some(Some(answer)) = inline else {
            return;
        };
        let me = self.clone();
        self.reads.run(ino, move || {
            READ_BUFFER.with_borrow_mut(|buf| {
                let buf = sized(buf, size);
                let step = me.worker_step(ino, fh, offset, buf, direct);
                give(step, buf, answer)
            })
        });
    }

    /// The same read as [`Serving::read`] (direct), for a front that sends the answer on
    /// after this call returns: bytes copied go into `buf` (grown to `size` when shorter)
    /// and it is handed to `answer` with them, so they are copied once, and bytes of one
    /// cached unit go as they are, not copied at all.
    pub fn read_owned<A>(
        self: &Arc<Self>,
        ino: u64,
        fh: u64,
        offset: u64,
        size: usize,
        buf: Vec<u8>,
        answer: A,
    ) where
        A: FnOnce(Result<Owned>) + Send + 'static,
    {
        let owned = |step: Step, buf: Vec<u8>| match step {
            Step::InPlace(slice) => Ok(Owned::Unit(slice)),
            Step::Filled(n) => Ok(Owned::Buffer(buf, n)),
            Step::Failed(e) => Err(e),
        };
        let inline = caught("read", move || {
            let mut buf = buf;
            match self.inline_step(ino, fh, offset, sized(&mut buf, size)) {
                None => Some((answer, buf)),
                Some(step) => {
                    answer(owned(step, buf));
                    None
                }
            }
        });
        let Some(Some((answer, mut buf))) = inline else {
            return;
        };
        let me = self.clone();
        self.reads.run(ino, move || {
            let step = me.worker_step(ino, fh, offset, sized(&mut buf, size), true);
            answer(owned(step, buf))
        });
    }

    /// A read answered from what is in memory alone (the array's materialized copy, or
    /// decoded units): no store I/O and no decode, so a front's request thread may take
    /// it. `None`: a unit it needs is not decoded yet (a worker reads it).
    fn inline_step(&self, ino: u64, fh: u64, offset: u64, buf: &mut [u8]) -> Option<Step> {
        self.faults.inline_read(offset);
        // Bytes already in the array's copy are not decoded again.
        if let Some(n) = self.copies.read_copy(ino, offset, buf) {
            return Some(Step::Filled(n));
        }
        Some(match self.fs.read_now(fh, offset, buf) {
            Ok(Now::InPlace(slice)) => {
                self.served(ino, fh, offset, slice.bytes());
                Step::InPlace(slice)
            }
            Ok(Now::Copied(n)) => {
                self.served(ino, fh, offset, &buf[..n]);
                Step::Filled(n)
            }
            Ok(Now::Later) => return None,
            Err(e) => {
                self.failed(ino, &e);
                Step::Failed(e)
            }
        })
    }

    /// A read on a read worker, with whatever store I/O and decodes it needs.
    fn worker_step(&self, ino: u64, fh: u64, offset: u64, buf: &mut [u8], direct: bool) -> Step {
        // A range inside one cached unit goes out as it is, without a copy.
        match self.fs.read_in_place(fh, offset, buf.len()) {
            Ok(Some(slice)) => {
                self.served(ino, fh, offset, slice.bytes());
                return Step::InPlace(slice);
            }
            Ok(None) => {}
            Err(e) => {
                self.failed(ino, &e);
                return Step::Failed(e);
            }
        }
        match self.fs.read_into(fh, offset, buf) {
            Ok(n) => {
                self.served(ino, fh, offset, &buf[..n]);
                Step::Filled(n)
            }
            Err(Partial { read, error }) => {
                self.failed(ino, &error);
                if direct && read > 0 {
                    // The reader's next read starts in the bad bytes and fails (and is
                    // logged) there.
                    log::debug!("read of inode {ino}: {read} bytes at {offset}, then {error}");
                    self.served(ino, fh, offset, &buf[..read]);
                    Step::Filled(read)
                } else {
                    Step::Failed(error)
                }
            }
        }
    }

    /// A read of `ino` failed with `error`: when its bytes are bad (not a handle that
    /// is not open), its later opens are direct.
    fn failed(&self, ino: u64, error: &Error) {
        if error.errno() == libc::EIO {
            self.io.failed(ino);
        }
    }

    /// `bytes` at `offset` of the open `fh` of `ino` went to a reader: they are copied
    /// into the array's materialized copy, and a read that reached the file's end asks
    /// for the copy to be completed.
    fn served(&self, ino: u64, fh: u64, offset: u64, bytes: &[u8]) {
        if self.copies.enabled() {
            self.copies.fill(ino, offset, bytes);
            if self.fs.reaches_end(fh, offset, bytes.len()) {
                self.copies.read_to_end(ino);
            }
        }
    }
}
