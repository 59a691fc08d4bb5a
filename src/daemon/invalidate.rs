//! Telling the kernel to drop what it caches of refreshed nodes: their attributes and
//! pages (the next `stat` and `open` ask again) and their names (the next use of a name
//! looks it up again), through the session's notifier. Names of a refresh asked for by
//! `setxattr` are dropped after it is answered, since the kernel holds the directory's
//! lock until then; a read of `user.zarrfs.refresh` waits for them, so that
//! `zarrfs refresh` returns once a path looked up next finds what the store holds now.

use std::ffi::OsStr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use fuser::{INodeNo, Notifier};

/// The kernel's caches of one mount.
#[derive(Default)]
pub struct Invalidator {
    /// Set once the session is made.
    notifier: OnceLock<Notifier>,
    /// Refreshes answered whose names the kernel has not dropped yet.
    dropping: Arc<Dropping>,
}

impl Invalidator {
    pub fn new() -> Arc<Invalidator> {
        Arc::default()
    }

    /// The session is made: its notifier reaches the kernel.
    pub fn connect(&self, notifier: Notifier) {
        let _ = self.notifier.set(notifier);
    }

    /// Have the kernel drop the attributes and pages it holds of `inodes` (refreshed).
    pub fn drop_inodes(&self, inodes: &[u64]) {
        if let Some(n) = self.notifier.get() {
            for ino in inodes {
                let _ = n.inval_inode(INodeNo(*ino), 0, 0);
            }
        }
    }

    /// Have the kernel drop its entries of the names `names` gives (parent and name;
    /// refreshed), so that the next use of each looks it up again.
    pub fn drop_names(&self, names: impl FnOnce() -> Vec<(u64, String)>) {
        if let Some(n) = self.notifier.get() {
            drop_names(n, &names());
        }
    }

    /// A refresh asked for by `setxattr`: the kernel drops the attributes and pages of
    /// `inodes` now, `answer` replies to the request, and the names `names` gives are
    /// dropped after it on a thread of their own (the kernel holds the directory's lock
    /// until the answer). They are counted from before the answer, so that a read of
    /// the refresh attribute that the answer lets the caller make waits for them (see
    /// [`Invalidator::wait`]).
    pub fn refreshed(
        &self,
        inodes: &[u64],
        names: impl FnOnce() -> Vec<(u64, String)>,
        answer: impl FnOnce(),
    ) {
        self.drop_inodes(inodes);
        let pending = Pending::start(self.dropping.clone());
        let notifier = self.notifier.get().cloned();
        let names = if notifier.is_some() {
            names()
        } else {
            Vec::new()
        };
        answer();
        if let Some(n) = notifier {
            std::thread::spawn(move || {
                drop_names(&n, &names);
                drop(pending);
            });
        }
    }

    /// Wait until no names are being dropped (at most half a minute).
    pub fn wait(&self) {
        self.dropping.wait()
    }
}

fn drop_names(n: &Notifier, names: &[(u64, String)]) {
    for (parent, name) in names {
        let _ = n.inval_entry(INodeNo(*parent), OsStr::new(name));
    }
}

/// One refresh's names, counted as being dropped until this is dropped.
struct Pending(Arc<Dropping>);

impl Pending {
    fn start(dropping: Arc<Dropping>) -> Pending {
        dropping.start();
        Pending(dropping)
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.0.end()
    }
}

/// Refreshes whose names are still being dropped from the kernel's cache.
#[derive(Default)]
struct Dropping {
    count: parking_lot::Mutex<u64>,
    done: parking_lot::Condvar,
}

impl Dropping {
    /// Longest wait for the names to be dropped.
    const WAIT: Duration = Duration::from_secs(30);

    fn start(&self) {
        *self.count.lock() += 1;
    }

    fn end(&self) {
        let mut count = self.count.lock();
        *count = count.saturating_sub(1);
        self.done.notify_all();
    }

    /// Wait until no names are being dropped (at most [`Dropping::WAIT`]).
    fn wait(&self) {
        let deadline = std::time::Instant::now() + Self::WAIT;
        let mut count = self.count.lock();
        while *count > 0 {
            if self.done.wait_until(&mut count, deadline).timed_out() {
                log::warn!("refresh: names still being dropped after {:?}", Self::WAIT);
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refresh_is_counted_before_it_is_answered_and_until_its_names_are_dropped() {
        let kernel = Invalidator::new();
        let mut counted_at_answer = None;
        kernel.refreshed(&[2, 3], Vec::new, || {
            counted_at_answer = Some(*kernel.dropping.count.lock());
        });
        // The caller's next request (the read that waits) may come before anything
        // after the answer ran: the refresh is counted by then.
        assert_eq!(counted_at_answer, Some(1));
        // With no kernel to tell, nothing is left to wait for once it returns.
        assert_eq!(*kernel.dropping.count.lock(), 0);
        kernel.wait();
    }
}
