//! Background decoding ahead of readers: a pool of worker threads (one per core by
//! default) fed through a bounded queue. Jobs that do not fit are dropped: prefetch is a
//! hint, and a reader that needs the chunk decodes it itself.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::Arc;

use parking_lot::Mutex;

type Job = Box<dyn FnOnce() + Send>;

/// Prefetch threads per core: a chunk's read from a cold disk overlaps another's decode.
pub const PREFETCH_PER_CORE: usize = 2;

pub struct Prefetcher {
    jobs: Sender<Job>,
    queued: Arc<AtomicUsize>,
    limit: usize,
}

impl Prefetcher {
    /// A pool of `threads` workers with room for 256 queued jobs.
    pub fn new(threads: usize) -> Arc<Prefetcher> {
        let threads = threads.max(1);
        let (jobs, rx) = channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        let queued = Arc::new(AtomicUsize::new(0));
        for _ in 0..threads {
            let rx = rx.clone();
            let queued = queued.clone();
            std::thread::spawn(move || loop {
                let job = rx.lock().recv();
                match job {
                    Ok(job) => {
                        queued.fetch_sub(1, Ordering::AcqRel);
                        job();
                    }
                    Err(_) => return,
                }
            });
        }
        Arc::new(Prefetcher {
            jobs,
            queued,
            limit: 256,
        })
    }

    /// Queue `job`; false (and nothing queued) when the queue is full.
    pub fn submit(&self, job: impl FnOnce() + Send + 'static) -> bool {
        if self.queued.fetch_add(1, Ordering::AcqRel) >= self.limit {
            self.queued.fetch_sub(1, Ordering::AcqRel);
            return false;
        }
        if self.jobs.send(Box::new(job)).is_err() {
            self.queued.fetch_sub(1, Ordering::AcqRel);
            return false;
        }
        true
    }
}
