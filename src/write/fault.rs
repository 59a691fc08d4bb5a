//! A fault the tests inject into a commit through `ZARRFS_FAULT`, to check what a daemon
//! killed in the middle of one leaves in the store: `kill-after-puts:N` has the daemon
//! kill itself with SIGKILL just after its Nth chunk or document put or delete (counted
//! over the process's life; 0 is before the first). Unset, nothing is injected.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// The prefix of the fault's `ZARRFS_FAULT` value.
pub const KILL_AFTER_PUTS: &str = "kill-after-puts:";

static PUTS: AtomicU64 = AtomicU64::new(0);

fn limit() -> Option<u64> {
    static LIMIT: OnceLock<Option<u64>> = OnceLock::new();
    *LIMIT.get_or_init(|| {
        std::env::var("ZARRFS_FAULT")
            .ok()?
            .strip_prefix(KILL_AFTER_PUTS)?
            .parse()
            .ok()
    })
}

/// Before a store write: the daemon dies here when as many were made as the fault says.
pub fn before_put() {
    let Some(limit) = limit() else {
        return;
    };
    if PUTS.fetch_add(1, Ordering::SeqCst) == limit {
        log::warn!("injected fault: killed after {limit} puts");
        log::logger().flush();
        // SAFETY: kill on our own process id, with a signal that cannot be caught.
        unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
    }
}
