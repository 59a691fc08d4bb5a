//! Faults the tests inject into a commit through `ZARRFS_FAULT`, to check what a daemon
//! leaves in the store when it is killed in the middle of one, and what another writer
//! between a commit's read and its put leads to. Unset, nothing is injected.
//!
//! - `kill-after-puts:N`: the daemon kills itself with SIGKILL just before its store
//!   write number N (a chunk or document put or delete, counted over the process's
//!   life; 0 is the first).
//! - `wait-before-put:PATH`: before its first store write, the daemon makes
//!   `PATH.waiting` and waits (up to a minute) until `PATH` exists.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The prefixes of the faults' `ZARRFS_FAULT` values.
pub const KILL_AFTER_PUTS: &str = "kill-after-puts:";
pub const WAIT_BEFORE_PUT: &str = "wait-before-put:";

static PUTS: AtomicU64 = AtomicU64::new(0);

enum Fault {
    KillAfter(u64),
    WaitFor(PathBuf),
}

fn fault() -> Option<&'static Fault> {
    static FAULT: OnceLock<Option<Fault>> = OnceLock::new();
    FAULT
        .get_or_init(|| {
            let spec = std::env::var("ZARRFS_FAULT").ok()?;
            if let Some(n) = spec.strip_prefix(KILL_AFTER_PUTS) {
                return n.parse().ok().map(Fault::KillAfter);
            }
            spec.strip_prefix(WAIT_BEFORE_PUT)
                .map(|p| Fault::WaitFor(PathBuf::from(p)))
        })
        .as_ref()
}

/// Before a store write: the daemon dies, or waits, here when a fault says so.
pub fn before_put() {
    let Some(fault) = fault() else {
        return;
    };
    let n = PUTS.fetch_add(1, Ordering::SeqCst);
    match fault {
        Fault::KillAfter(limit) if n == *limit => {
            log::warn!("injected fault: killed after {limit} puts");
            log::logger().flush();
            // SAFETY: kill on our own process id, with a signal that cannot be caught.
            unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
        }
        Fault::WaitFor(path) if n == 0 => {
            let mut waiting = path.clone().into_os_string();
            waiting.push(".waiting");
            let _ = std::fs::write(&waiting, b"");
            let deadline = Instant::now() + Duration::from_secs(60);
            while !path.exists() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        _ => {}
    }
}
