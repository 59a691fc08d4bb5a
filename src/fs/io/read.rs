//! One read through a front. A read whose bytes are all decoded (or already in the
//! array's materialized copy) is answered inline, on the thread that took it: a bounded
//! copy, or none, with no store I/O and no decode, so it holds up the front's request
//! loop only briefly and skips the hand-off to a worker. Every other read goes to the read
//! workers, a file's reads at most `threads` at a time. Each thread keeps one buffer for
//! the bytes it answers with: no allocation per read. What a reader is given is copied
//! into the array's materialized copy on the way out.
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
use crate::fs::{Now, Partial};
use crate::pool::caught;
use crate::{Error, Result};

thread_local! {
    static READ_BUFFER: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
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
        let faults = self.faults;
        let inline = caught("read", || {
            READ_BUFFER.with_borrow_mut(|buf| {
                faults.inline_read(offset);
                buf.resize(buf.len().max(size), 0);
                let buf = &mut buf[..size];
                // Bytes already in the array's copy are not decoded again.
                if let Some(n) = self.copies.read_copy(ino, offset, buf) {
                    answer(Ok(&buf[..n]));
                    return None;
                }
                match self.fs.read_now(fh, offset, buf) {
                    Ok(Now::InPlace(slice)) => {
                        self.served(ino, fh, offset, slice.bytes());
                        answer(Ok(slice.bytes()));
                        None
                    }
                    Ok(Now::Copied(n)) => {
                        self.served(ino, fh, offset, &buf[..n]);
                        answer(Ok(&buf[..n]));
                        None
                    }
                    Ok(Now::Later) => Some(answer),
                    Err(e) => {
                        self.failed(ino, &e);
                        answer(Err(e));
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
            // A range inside one cached unit goes out as it is, without a copy.
            match me.fs.read_in_place(fh, offset, size) {
                Ok(Some(slice)) => {
                    me.served(ino, fh, offset, slice.bytes());
                    return answer(Ok(slice.bytes()));
                }
                Ok(None) => {}
                Err(e) => {
                    me.failed(ino, &e);
                    return answer(Err(e));
                }
            }
            READ_BUFFER.with_borrow_mut(|buf| {
                buf.resize(buf.len().max(size), 0);
                let buf = &mut buf[..size];
                match me.fs.read_into(fh, offset, buf) {
                    Ok(n) => {
                        me.served(ino, fh, offset, &buf[..n]);
                        answer(Ok(&buf[..n]))
                    }
                    Err(Partial { read, error }) => {
                        me.failed(ino, &error);
                        if direct && read > 0 {
                            // The reader's next read starts in the bad bytes and fails
                            // (and is logged) there.
                            log::debug!(
                                "read of inode {ino}: {read} bytes at {offset}, then {error}"
                            );
                            me.served(ino, fh, offset, &buf[..read]);
                            answer(Ok(&buf[..read]))
                        } else {
                            answer(Err(error))
                        }
                    }
                }
            })
        });
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
