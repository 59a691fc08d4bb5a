//! The store layer's own tokio runtime: remote requests run on it while their callers
//! (FUSE workers, `cat`, prefetch threads) wait synchronously, so the `Store` trait stays
//! synchronous for the layers above.

use std::future::Future;
use std::sync::OnceLock;

use tokio::runtime::Runtime;

use crate::error::{Error, Result};

/// Threads driving the network: requests are async, so two carry hundreds in flight.
const IO_THREADS: usize = 2;

static RUNTIME: OnceLock<std::result::Result<Runtime, String>> = OnceLock::new();

fn runtime() -> Result<&'static Runtime> {
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(IO_THREADS)
                .thread_name("zarrfs-io")
                .enable_all()
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| Error::Invalid(format!("store runtime: {e}")))
}

/// Run `future` on the store runtime and wait for it on this (non-runtime) thread.
pub fn block_on<F>(future: F) -> Result<F::Output>
where
    F: Future + Send,
    F::Output: Send,
{
    Ok(runtime()?.block_on(future))
}
