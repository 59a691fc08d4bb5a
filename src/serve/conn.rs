//! The server's connections: at most `--max-connections` at once, each closed when it is
//! idle too long or when its client stops taking the answer, so that no client can
//! starve the others. A connection arriving when all are taken closes the one idle the
//! longest (a client holding connections open without asking anything loses them first);
//! when none is idle, it waits for one to end.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use parking_lot::Mutex;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

use super::Body;

/// How long a connection may wait for its next request.
pub const IDLE: Duration = Duration::from_secs(30);
/// How long an answer may go without its client taking any of it.
pub const STALLED: Duration = Duration::from_secs(30);
/// How often each connection's watchdog looks.
const WATCH_EVERY: Duration = Duration::from_millis(250);

/// One connection's state, shared by its requests' bodies and its watchdog.
pub struct Conn {
    id: u64,
    /// Answers being sent (bodies not yet dropped).
    busy: AtomicUsize,
    /// When something last happened (a request, a piece of an answer taken), in
    /// milliseconds since the server started.
    last: AtomicU64,
    /// Told to close (to make room for a new connection).
    close: Notify,
    epoch: Instant,
}

impl Conn {
    fn now(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    fn touch(&self) {
        self.last.store(self.now(), Ordering::Relaxed);
    }

    fn idle_for(&self) -> Option<Duration> {
        (self.busy.load(Ordering::Relaxed) == 0).then(|| self.quiet_for())
    }

    fn quiet_for(&self) -> Duration {
        Duration::from_millis(self.now().saturating_sub(self.last.load(Ordering::Relaxed)))
    }

    /// A request began: its answer is sent until the body returned is dropped.
    pub fn track(self: &Arc<Self>, body: Body) -> Body {
        self.busy.fetch_add(1, Ordering::Relaxed);
        self.touch();
        http_body_util::BodyExt::boxed_unsync(Tracked {
            inner: body,
            conn: self.clone(),
        })
    }

    /// Whether the watchdog is to close the connection now, and why.
    fn overdue(&self) -> Option<&'static str> {
        let quiet = self.quiet_for();
        match self.busy.load(Ordering::Relaxed) {
            0 if quiet > IDLE => Some("idle"),
            0 => None,
            _ if quiet > STALLED => Some("the client took none of the answer"),
            _ => None,
        }
    }

    /// Ends when the connection is to close: idle too long, stalled, or told to.
    pub async fn watch(&self) -> &'static str {
        loop {
            tokio::select! {
                _ = self.close.notified() => return "closed to make room for a new connection",
                _ = tokio::time::sleep(WATCH_EVERY) => {
                    if let Some(why) = self.overdue() {
                        return why;
                    }
                }
            }
        }
    }
}

/// A body whose progress keeps its connection alive.
struct Tracked {
    inner: Body,
    conn: Arc<Conn>,
}

impl HttpBody for Tracked {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        // Asked for more: the client is taking the answer (when the answer is slow to
        // come, the wait is the store's, not the client's).
        self.conn.touch();
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.conn.touch();
        self.conn.busy.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The open connections and the cap on them.
pub struct Conns {
    slots: Arc<Semaphore>,
    open: Mutex<HashMap<u64, Arc<Conn>>>,
    next: AtomicU64,
    epoch: Instant,
}

/// A connection's place: it leaves the table when dropped.
pub struct Slot {
    pub conn: Arc<Conn>,
    conns: Arc<Conns>,
    _permit: OwnedSemaphorePermit,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.conns.open.lock().remove(&self.conn.id);
    }
}

impl Conns {
    pub fn new(max: usize) -> Arc<Conns> {
        Arc::new(Conns {
            slots: Arc::new(Semaphore::new(max.max(1))),
            open: Mutex::new(HashMap::new()),
            next: AtomicU64::new(0),
            epoch: Instant::now(),
        })
    }

    /// A place for a new connection: when none is free, the connection idle the longest
    /// is told to close, and this waits for a place.
    pub async fn admit(self: &Arc<Self>) -> Slot {
        let permit = match self.slots.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => {
                let longest = self
                    .open
                    .lock()
                    .values()
                    .filter_map(|c| c.idle_for().map(|d| (d, c.clone())))
                    .max_by_key(|(d, _)| *d)
                    .map(|(_, c)| c);
                if let Some(c) = longest {
                    c.close.notify_one();
                }
                loop {
                    // The semaphore is never closed; were it, the next try would wait.
                    if let Ok(p) = self.slots.clone().acquire_owned().await {
                        break p;
                    }
                    tokio::time::sleep(WATCH_EVERY).await;
                }
            }
        };
        let conn = Arc::new(Conn {
            id: self.next.fetch_add(1, Ordering::Relaxed),
            busy: AtomicUsize::new(0),
            last: AtomicU64::new(self.epoch.elapsed().as_millis() as u64),
            close: Notify::new(),
            epoch: self.epoch,
        });
        self.open.lock().insert(conn.id, conn.clone());
        Slot {
            conn,
            conns: self.clone(),
            _permit: permit,
        }
    }
}
