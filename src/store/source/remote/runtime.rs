//! The store layer's own tokio runtime: remote requests run on it while their callers
//! (FUSE workers, `cat`, prefetch threads) wait synchronously, so the `Store` trait stays
//! synchronous for the layers above. A response body is received by a task of the
//! runtime ([`on_runtime`]): polled where the network events arrive, it wakes its waiting
//! caller once, when complete, rather than once for every piece the server sends.

use std::future::Future;
use std::sync::{Arc, OnceLock};

use tokio::runtime::Runtime;

use crate::error::{Error, Result};
use crate::store::StoreError;

/// Threads driving the network: requests are async, so two carry hundreds in flight.
const IO_THREADS: usize = 2;

static RUNTIME: OnceLock<std::result::Result<Runtime, Arc<std::io::Error>>> = OnceLock::new();

fn runtime() -> Result<&'static Runtime> {
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(IO_THREADS)
                .thread_name("zarrfs-io")
                .enable_all()
                .build()
                .map_err(Arc::new)
        })
        .as_ref()
        .map_err(|e| StoreError::Runtime(e.clone()).at("store runtime"))
}

/// Run `future` on the store runtime and wait for it on this (non-runtime) thread.
pub fn block_on<F>(future: F) -> Result<F::Output>
where
    F: Future + Send,
    F::Output: Send,
{
    Ok(runtime()?.block_on(future))
}

/// Await `future` as a task of the store runtime (from a future that [`block_on`] runs):
/// it is polled on the runtime's threads, so a body that arrives in many small pieces
/// (a server writing 4 KiB at a time) does not wake the waiting thread for each of them.
pub async fn on_runtime<F>(future: F) -> Result<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    match tokio::spawn(future).await {
        Ok(out) => Ok(out),
        // A panic inside the task is the caller's, as if it had run here.
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => Err(Error::Invalid(format!("store task: {e}"))),
    }
}
