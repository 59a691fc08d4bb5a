//! Background decoding ahead of readers: a pool of worker threads (two per core by
//! default) fed through a bounded queue. Jobs that do not fit are dropped: prefetch is a
//! hint, and a reader that needs the unit decodes it itself. As many more threads tell
//! the store which values the queued decodes will read, so that a local disk reads them
//! in the background while the decoders are busy with earlier ones: on a cold disk, each
//! of a small chunk's files waits for its inode, and several wait at once.

use std::sync::Arc;

use crate::pool::Pool;
use crate::read::decoding;

/// Prefetch threads per core: a unit's read from a cold disk overlaps another's decode.
pub const PREFETCH_PER_CORE: usize = 2;

/// Jobs that may wait in the queue.
const QUEUE_LIMIT: usize = 256;

pub struct Prefetcher {
    pool: Pool,
    hints: Pool,
}

impl Prefetcher {
    /// A pool of `threads` workers with room for 256 queued jobs, and as many hint
    /// threads.
    pub fn new(threads: usize) -> Arc<Prefetcher> {
        Arc::new(Prefetcher {
            pool: Pool::new(threads, "prefetch"),
            hints: Pool::new(threads, "readahead"),
        })
    }

    /// Queue `job`; false (and nothing queued) when the queue is full. Its decodes
    /// wait for a core behind those of jobs queued before it (see [`decoding`]).
    pub fn submit(&self, job: impl FnOnce() + Send + 'static) -> bool {
        let ticket = decoding::ticket();
        self.pool
            .try_run(QUEUE_LIMIT, move || decoding::as_prefetch(ticket, job))
    }

    /// Queue `job`, which hints the store about reads to come, on a hint thread;
    /// dropped when their queue is full.
    pub fn hint(&self, job: impl FnOnce() + Send + 'static) {
        self.hints.try_run(QUEUE_LIMIT, job);
    }
}
