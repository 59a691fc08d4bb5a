//! Worker threads fed through a queue, for FUSE requests and background decoding. A job
//! that panics (a bug, never bad input: that is an error) is caught: it is logged in one
//! line, whatever it held is dropped (a FUSE reply dropped unanswered sends EIO), and the
//! worker goes on with the next job.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::Arc;

use parking_lot::Mutex;

type Job = Box<dyn FnOnce() + Send>;

pub struct Pool {
    jobs: Sender<Job>,
    queued: Arc<AtomicUsize>,
}

/// Run `job`, catching a panic and logging it with `what`.
pub fn guarded(what: &str, job: impl FnOnce()) {
    if let Err(panic) = catch_unwind(AssertUnwindSafe(job)) {
        log::error!("{what}: internal error: {}", panic_message(&panic));
    }
}

/// The message a panic was raised with.
pub fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic".to_string()
    }
}

impl Pool {
    /// `threads` workers (at least one) named `name`.
    pub fn new(threads: usize, name: &str) -> Pool {
        let (jobs, rx) = channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        let queued = Arc::new(AtomicUsize::new(0));
        for i in 0..threads.max(1) {
            let (rx, queued, label) = (rx.clone(), queued.clone(), name.to_string());
            let worker = move || loop {
                let job = rx.lock().recv();
                match job {
                    Ok(job) => {
                        queued.fetch_sub(1, Ordering::AcqRel);
                        guarded(&label, job);
                    }
                    Err(_) => return,
                }
            };
            let spawned = std::thread::Builder::new()
                .name(format!("{name}-{i}"))
                .spawn(worker);
            if let Err(e) = spawned {
                log::error!("cannot start a {name} thread: {e}");
            }
        }
        Pool { jobs, queued }
    }

    /// Queue `job`; it runs here and now when no worker is left.
    pub fn run(&self, job: impl FnOnce() + Send + 'static) {
        self.queued.fetch_add(1, Ordering::AcqRel);
        if let Err(e) = self.jobs.send(Box::new(job)) {
            self.queued.fetch_sub(1, Ordering::AcqRel);
            guarded("request", e.0);
        }
    }

    /// Queue `job` unless `limit` jobs wait already; false (and nothing queued) then.
    pub fn try_run(&self, limit: usize, job: impl FnOnce() + Send + 'static) -> bool {
        if self.queued.fetch_add(1, Ordering::AcqRel) >= limit {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panicking_job_leaves_the_worker_serving() {
        let pool = Pool::new(1, "test");
        let (tx, rx) = std::sync::mpsc::channel();
        pool.run(|| panic!("a bug"));
        let tx2 = tx.clone();
        pool.run(move || tx2.send(1).unwrap());
        assert_eq!(rx.recv_timeout(std::time::Duration::from_secs(10)), Ok(1));
        // Dropped state of the panicking job is released (a reply would answer EIO).
        let (dtx, drx) = std::sync::mpsc::channel::<()>();
        pool.run(move || {
            let _held = dtx;
            panic!("another bug");
        });
        assert!(drx
            .recv_timeout(std::time::Duration::from_secs(10))
            .is_err());
        pool.run(move || tx.send(2).unwrap());
        assert_eq!(rx.recv_timeout(std::time::Duration::from_secs(10)), Ok(2));
    }
}
