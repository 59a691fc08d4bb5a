//! How many units are decoded at once, and in which order: at most one decode per core,
//! whatever the number of threads that fetch units, and the most urgent first. A remote
//! store is read by many threads at once so that their requests overlap (see
//! `store::Caps::concurrency`); once their stored bytes are at hand (a warm disk cache, a
//! fast network), as many decodes at once as threads would only share the cores, each
//! chunk's memory in flight, every unit of a readahead window finishing late together.
//! A thread that has fetched its unit waits here for a core instead, and a free core goes
//! to a reader's own decode first, then to the prefetch queued earliest (readahead queues
//! a file's units in the order they are read). Decoding is pure computation: a thread
//! holds its turn only while it decodes, never while it waits for a store or a lock.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::LazyLock;
use std::thread::Thread;

use parking_lot::Mutex;

/// Decodes that may run at once, those running, and the threads waiting for a turn by
/// (urgency, arrival).
struct Turns {
    state: Mutex<State>,
    limit: usize,
}

struct State {
    running: usize,
    waiting: BTreeMap<(u64, u64), Thread>,
    arrivals: u64,
}

static TURNS: LazyLock<Turns> = LazyLock::new(|| Turns::new(crate::pool::cores()));

thread_local! {
    /// The urgency of this thread's decodes: 0 (a reader waiting for them) unless a
    /// prefetch job runs with its ticket ([`as_prefetch`]).
    static URGENCY: Cell<u64> = const { Cell::new(0) };
}

/// Tickets of prefetch jobs, in the order they were queued (0 is a reader's).
static TICKETS: AtomicU64 = AtomicU64::new(1);

/// A ticket for a prefetch job queued now: decodes of jobs queued earlier go first.
pub fn ticket() -> u64 {
    TICKETS.fetch_add(1, Ordering::Relaxed)
}

/// Run `job` with the decodes it makes ranked by `ticket`.
pub fn as_prefetch<T>(ticket: u64, job: impl FnOnce() -> T) -> T {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            URGENCY.set(0);
        }
    }
    URGENCY.set(ticket);
    let _reset = Reset;
    job()
}

impl Turns {
    fn new(limit: usize) -> Turns {
        Turns {
            state: Mutex::new(State {
                running: 0,
                waiting: BTreeMap::new(),
                arrivals: 0,
            }),
            limit,
        }
    }

    /// Run `decode` in its turn: at once while fewer than `limit` run, else when a turn
    /// passes to it (the lowest `urgency` first, then the earliest to come).
    fn run<T>(&self, urgency: u64, decode: impl FnOnce() -> T) -> T {
        let mut state = self.state.lock();
        if state.running < self.limit {
            state.running += 1;
        } else {
            let place = (urgency, state.arrivals);
            state.arrivals += 1;
            state.waiting.insert(place, std::thread::current());
            // Parked until the turn is passed (a wake-up while still listed is spurious).
            while state.waiting.contains_key(&place) {
                drop(state);
                std::thread::park();
                state = self.state.lock();
            }
        }
        drop(state);
        let turn = Turn(self);
        let out = decode();
        drop(turn);
        out
    }
}

/// A turn to decode. When dropped (a decode that panics included) it passes to the most
/// urgent waiting thread, or is given back.
struct Turn<'a>(&'a Turns);

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        let mut state = self.0.state.lock();
        match state.waiting.pop_first() {
            // The turn passes on: the waiter finds itself gone from the waiting list.
            Some((_, next)) => next.unpark(),
            None => state.running -= 1,
        }
    }
}

/// Decodes of at most this many bytes (decoded) run at once, without a turn: they take
/// less time than waiting for one and handing it on.
pub const WITHOUT_TURN: usize = 16 << 10;

/// Run `decode`, of `bytes` decoded bytes, in its turn: at once while fewer decodes than
/// cores run or when it is small ([`WITHOUT_TURN`]), else when a turn passes to it (a
/// reader's first, then prefetches by ticket).
pub fn decode_sized<T>(bytes: usize, decode: impl FnOnce() -> T) -> T {
    if bytes <= WITHOUT_TURN {
        return decode();
    }
    self::decode(decode)
}

/// Run `decode` in its turn: at once while fewer decodes than cores run, else when a
/// turn passes to it (a reader's first, then prefetches by ticket).
pub fn decode<T>(decode: impl FnOnce() -> T) -> T {
    TURNS.run(URGENCY.get(), decode)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn no_more_decodes_run_at_once_than_the_limit() {
        let turns = Arc::new(Turns::new(2));
        let now = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..11u64)
            .map(|i| {
                let (turns, now, most) = (turns.clone(), now.clone(), most.clone());
                std::thread::spawn(move || {
                    for _ in 0..20 {
                        turns.run(i % 3, || {
                            let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                            most.fetch_max(n, Ordering::SeqCst);
                            std::thread::sleep(Duration::from_millis(1));
                            now.fetch_sub(1, Ordering::SeqCst);
                        })
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(most.load(Ordering::SeqCst), 2);
        // A decode that panics passes its turn on.
        for _ in 0..3 {
            let run = std::panic::AssertUnwindSafe(|| turns.run(0, || panic!("a bug")));
            let _ = std::panic::catch_unwind(run);
        }
        assert_eq!(turns.run(0, || 7), 7);
        assert_eq!(turns.state.lock().running, 0);
    }

    #[test]
    fn a_free_turn_goes_to_the_most_urgent_waiter() {
        let turns = Arc::new(Turns::new(1));
        let order = Arc::new(Mutex::new(Vec::new()));
        let (hold, release) = std::sync::mpsc::channel::<()>();
        let holder = {
            let turns = turns.clone();
            std::thread::spawn(move || turns.run(0, || release.recv().unwrap()))
        };
        while turns.state.lock().running == 0 {
            std::thread::yield_now();
        }
        // Waiters come in the order 30, 10, 20 (each listed before the next starts).
        let waiters: Vec<_> = [30u64, 10, 20]
            .into_iter()
            .enumerate()
            .map(|(i, urgency)| {
                let (mine, order) = (turns.clone(), order.clone());
                let waiter =
                    std::thread::spawn(move || mine.run(urgency, || order.lock().push(urgency)));
                while turns.state.lock().waiting.len() < i + 1 {
                    std::thread::yield_now();
                }
                waiter
            })
            .collect();
        hold.send(()).unwrap();
        holder.join().unwrap();
        for w in waiters {
            w.join().unwrap();
        }
        assert_eq!(*order.lock(), vec![10, 20, 30]);
    }

    #[test]
    fn a_prefetch_ticket_ranks_its_decodes_and_only_them() {
        let t = ticket();
        assert!(t > 0 && ticket() > t);
        assert_eq!(as_prefetch(t, || URGENCY.get()), t);
        assert_eq!(URGENCY.get(), 0);
        let _ = std::panic::catch_unwind(|| as_prefetch(t, || panic!("a bug")));
        assert_eq!(URGENCY.get(), 0);
    }
}
