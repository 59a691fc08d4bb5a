//! Worker threads fed through a queue, for FUSE requests and background decoding. A job
//! that panics (a bug, never bad input: that is an error) is caught: it is logged in one
//! line, whatever it held is dropped (a FUSE reply dropped unanswered sends EIO), and the
//! worker goes on with the next job. A [`FairPool`] keeps one file's jobs from taking
//! every worker: a file whose reads hang on its store leaves the others served. How many
//! cores the process may use, which sizes the pools, is asked of the system once
//! ([`cores`]).

use std::collections::{HashMap, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::Arc;

use parking_lot::Mutex;

type Job = Box<dyn FnOnce() + Send>;

/// The cores the process may use (at least 1; 2 when the system cannot tell), asked of
/// the system once: the standard library reads the cgroup's CPU quota files at every
/// ask, and the count sizes things on paths as hot as each listed member's read.
pub fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(2, usize::from))
}

pub struct Pool {
    jobs: Sender<Job>,
    queued: Arc<AtomicUsize>,
}

/// Run `job`, catching a panic and logging it with `what`.
pub fn guarded(what: &str, job: impl FnOnce()) {
    caught(what, job);
}

/// What `job` returns, or `None` when it panicked: the panic is caught and logged in one
/// line with `what`, and whatever the job held is dropped.
pub fn caught<T>(what: &str, job: impl FnOnce() -> T) -> Option<T> {
    match catch_unwind(AssertUnwindSafe(job)) {
        Ok(value) => Some(value),
        Err(panic) => {
            log::error!("{what}: internal error: {}", panic_message(&panic));
            None
        }
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

/// A pool whose jobs carry a key (a file): at most `per_key` jobs of one key run at once,
/// the others wait in order without holding a worker. With more workers than `per_key`,
/// jobs of other keys always find one.
pub struct FairPool {
    pool: Pool,
    per_key: usize,
    keys: Mutex<HashMap<u64, KeyJobs>>,
}

#[derive(Default)]
struct KeyJobs {
    running: usize,
    waiting: VecDeque<Job>,
}

/// Hands the worker to the key's next waiting job when a job ends, panics included.
struct Finished<'a> {
    pool: &'a Arc<FairPool>,
    key: u64,
}

impl Drop for Finished<'_> {
    fn drop(&mut self) {
        let next = {
            let mut keys = self.pool.keys.lock();
            let Some(jobs) = keys.get_mut(&self.key) else {
                return;
            };
            let next = jobs.waiting.pop_front();
            if next.is_none() {
                jobs.running -= 1;
                if jobs.running == 0 {
                    keys.remove(&self.key);
                }
            }
            next
        };
        if let Some(job) = next {
            self.pool.start(self.key, job);
        }
    }
}

impl FairPool {
    /// `threads` workers; at most `per_key` (at least one) jobs of one key at a time.
    pub fn new(threads: usize, per_key: usize, name: &str) -> Arc<FairPool> {
        Arc::new(FairPool {
            pool: Pool::new(threads, name),
            per_key: per_key.max(1),
            keys: Mutex::new(HashMap::new()),
        })
    }

    /// Run `job` for `key` now, or once fewer than `per_key` of the key's jobs run.
    pub fn run(self: &Arc<Self>, key: u64, job: impl FnOnce() + Send + 'static) {
        let job: Job = Box::new(job);
        {
            let mut keys = self.keys.lock();
            let jobs = keys.entry(key).or_default();
            if jobs.running >= self.per_key {
                jobs.waiting.push_back(job);
                return;
            }
            jobs.running += 1;
        }
        self.start(key, job);
    }

    fn start(self: &Arc<Self>, key: u64, job: Job) {
        let me = self.clone();
        self.pool.run(move || {
            let _finished = Finished { pool: &me, key };
            job();
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_count_of_cores_is_the_systems_and_stays() {
        let asked = std::thread::available_parallelism().map_or(2, usize::from);
        assert_eq!((super::cores(), super::cores()), (asked, asked));
    }

    #[test]
    fn a_key_whose_jobs_hang_leaves_workers_for_the_others() {
        let pool = FairPool::new(3, 2, "test");
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let release_rx = Arc::new(Mutex::new(release_rx));
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        // Ten jobs of key 1 that block until released.
        for i in 0..10 {
            let (rx, tx) = (release_rx.clone(), done_tx.clone());
            pool.run(1, move || {
                let _ = rx.lock().recv();
                tx.send((1, i)).unwrap();
            });
        }
        // Key 2 still runs, one job after another, while key 1 hangs.
        for i in 0..5 {
            let tx = done_tx.clone();
            pool.run(2, move || tx.send((2, i)).unwrap());
        }
        for i in 0..5 {
            let got = done_rx.recv_timeout(std::time::Duration::from_secs(10));
            assert_eq!(got, Ok((2, i)));
        }
        // Released, every job of key 1 runs, in order, and a panicking one frees its slot.
        pool.run(1, || panic!("a bug"));
        for _ in 0..10 {
            release_tx.send(()).unwrap();
        }
        let mut ones: Vec<u64> = (0..10)
            .map(|_| {
                done_rx
                    .recv_timeout(std::time::Duration::from_secs(10))
                    .unwrap()
                    .1
            })
            .collect();
        ones.sort();
        assert_eq!(ones, (0..10).collect::<Vec<_>>());
        let tx = done_tx.clone();
        pool.run(1, move || tx.send((1, 99)).unwrap());
        assert_eq!(
            done_rx.recv_timeout(std::time::Duration::from_secs(10)),
            Ok((1, 99))
        );
    }

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
