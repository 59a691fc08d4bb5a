//! Coalesced reads of one object's members, for stores where a request costs more than
//! its bytes (remote ones): the inner chunks of a shard, the entries of a zip archive,
//! the chunks a reference set keeps in one target file. Members are grouped in the order
//! they lie in the object (zarr-python writes a shard's chunks in Morton order, so a group
//! is a compact block of it); a group holds as many as fit the store's preferred request
//! size, by the object's mean member size. The first read of any member of a group
//! fetches the group's whole byte run in one ranged request, once, however many readers
//! ask at the same time, and later reads of the group are served from it. Runs are filed
//! under the object's key and version (a changed object never serves an old run) and kept
//! up to a byte budget, oldest out first. One budget serves every reader of a store (each
//! array, through [`Spans::share_read_once`]): however many arrays are read at once, their
//! runs together hold at most it. A run whose members are each read once hands each
//! member's bytes to its read and holds only the members not read yet.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::store::{Value, Version};

/// Bytes of fetched runs kept by default.
pub const BUDGET: u64 = 64 << 20;
/// Objects with a layout kept at most (the set starts over when full).
const MAX_LAYOUTS: usize = 1024;
/// A run spans at most this many times the preferred request size.
const MAX_RUN_REQUESTS: u64 = 4;
/// Bytes between two neighbouring members that a run reads through rather than split
/// (a reference set's target file may hold other data between its chunks).
const MAX_GAP: u64 = 256 << 10;

/// An object of one reader (see [`Spans::share_read_once`]): the reader, the object's key
/// and version.
type Object = (u64, String, Version);
/// A group of an object's members.
type Group = (Object, usize);

/// A run being fetched or fetched: its bytes, or why they could not be had.
type Slot = Arc<OnceLock<std::result::Result<Arc<Run>, Arc<Error>>>>;

/// A fetched run: its bytes and the version they came from.
struct Run {
    version: Version,
    bytes: RunBytes,
}

/// The bytes of a run.
enum RunBytes {
    /// The object's bytes from `start`: its members are read any number of times.
    Whole { start: u64, bytes: Vec<u8> },
    /// Each member's bytes, in the order of the group, handed to its one read.
    Members(Mutex<Vec<Piece>>),
}

/// One member's bytes in a read-once run.
enum Piece {
    Unread(Vec<u8>),
    /// Handed to its read: a second read reads the member alone.
    Read,
    /// The member lies past the end of what the fetch returned.
    Outside,
}

/// The runs fetched of one store's objects, for one reader (an array, an archive, a
/// reference set), within a budget it may share with the store's other readers.
pub struct Spans {
    shared: Arc<Shared>,
    /// Which reader: its runs and layouts are its own (two arrays' objects never serve
    /// each other, whatever their keys and versions).
    reader: u64,
    /// Whether each member is read once (see [`Spans::read_once`]).
    once: bool,
}

/// What the readers sharing a budget hold.
struct Shared {
    budget: u64,
    readers: AtomicU64,
    state: Mutex<State>,
    /// `state.bytes`, read without the lock.
    held: AtomicU64,
}

/// Bytes of fetched runs kept for `requests` requests in flight of `request_bytes` each:
/// a run is not pushed out by the others in flight before it is read (at least
/// [`BUDGET`]).
pub fn budget_for(requests: usize, request_bytes: u64) -> u64 {
    (requests as u64).saturating_mul(request_bytes).max(BUDGET)
}

impl Default for Spans {
    fn default() -> Self {
        Spans::new(BUDGET)
    }
}

#[derive(Default)]
struct State {
    /// Each object's members in the order they lie in it.
    layouts: HashMap<Object, Arc<Layout>>,
    /// Each run, and the bytes it holds (or will once fetched).
    runs: HashMap<Group, (Slot, u64)>,
    /// The runs, oldest first.
    order: VecDeque<Group>,
    bytes: u64,
}

impl State {
    /// Let go of run `group`: its slot, and the bytes it holds.
    fn remove(&mut self, group: &Group) {
        if let Some((_, n)) = self.runs.remove(group) {
            self.bytes = self.bytes.saturating_sub(n);
        }
        if let Some(at) = self.order.iter().position(|g| g == group) {
            self.order.remove(at);
        }
    }
}

/// An object's members in the order they lie in it, the rank of each member in that
/// order, and the members per group.
struct Layout {
    sorted: Vec<(u64, u64)>,
    rank: Vec<usize>,
    size: usize,
}

impl Layout {
    fn new(members: &[Option<(u64, u64)>], request: u64) -> Layout {
        let mut order: Vec<usize> = (0..members.len())
            .filter(|&i| members[i].is_some())
            .collect();
        order.sort_unstable_by_key(|&i| members[i]);
        let mut rank = vec![usize::MAX; members.len()];
        for (r, &i) in order.iter().enumerate() {
            rank[i] = r;
        }
        let sorted: Vec<(u64, u64)> = order.iter().filter_map(|&i| members[i]).collect();
        let total = sorted.iter().fold(0u64, |t, e| t.saturating_add(e.1));
        let mean = total / (sorted.len() as u64).max(1);
        let size = (request / mean.max(1)).clamp(1, sorted.len().max(1) as u64) as usize;
        Layout { sorted, rank, size }
    }

    /// The members of group `group`, in the order they lie in the object.
    fn members(&self, group: usize) -> &[(u64, u64)] {
        let from = group.saturating_mul(self.size).min(self.sorted.len());
        let to = from.saturating_add(self.size).min(self.sorted.len());
        &self.sorted[from..to]
    }

    /// The byte run `[start, end)` of group `group`: its members, when they lie near
    /// each other in the object (at most [`MAX_GAP`] apart; members may overlap) and span
    /// at most `limit` bytes (else `None`: read one by one).
    fn run(&self, group: usize, limit: u64) -> Option<(u64, u64)> {
        let members = self.members(group);
        let (start, first_len) = *members.first()?;
        let mut end = start.checked_add(first_len)?;
        for &(o, n) in &members[1..] {
            if o > end.saturating_add(MAX_GAP) {
                return None;
            }
            end = end.max(o.checked_add(n)?);
        }
        (end - start <= limit).then_some((start, end))
    }
}

impl Spans {
    /// Runs kept up to `budget` bytes (the last one fetched is kept whatever its size).
    pub fn new(budget: u64) -> Spans {
        Spans {
            shared: Arc::new(Shared {
                budget,
                readers: AtomicU64::new(1),
                state: Mutex::new(State::default()),
                held: AtomicU64::new(0),
            }),
            reader: 0,
            once: false,
        }
    }

    /// Runs whose members are each read once (their readers cache what they decode): a
    /// member's bytes go to its read, and a run all read is let go at once rather than
    /// when the budget pushes it out, so that many runs in flight do not push out each
    /// other before they are read, and a run holds only what is still to be read.
    pub fn read_once(budget: u64) -> Spans {
        let mut spans = Spans::new(budget);
        spans.once = true;
        spans
    }

    /// Another reader's runs (another array of the same store), read once as
    /// [`Spans::read_once`], within this one's budget: the runs of all the readers that
    /// share it hold at most the budget together.
    pub fn share_read_once(&self) -> Spans {
        Spans {
            shared: self.shared.clone(),
            reader: self.shared.readers.fetch_add(1, Ordering::Relaxed),
            once: true,
        }
    }

    /// Bytes the runs of every reader sharing this budget hold (or will once fetched).
    pub fn held(&self) -> u64 {
        self.shared.held.load(Ordering::Relaxed)
    }

    /// [`Spans::held`], for as long as the budget lives: what a cache of what the runs
    /// are decoded into gives up for them.
    pub fn held_meter(&self) -> impl Fn() -> u64 + Send + Sync + 'static {
        let shared = self.shared.clone();
        move || shared.held.load(Ordering::Relaxed)
    }

    fn layout(
        &self,
        object: &Object,
        members: impl FnOnce() -> Vec<Option<(u64, u64)>>,
        request: u64,
    ) -> Arc<Layout> {
        if let Some(hit) = self.shared.state.lock().layouts.get(object) {
            return hit.clone();
        }
        let layout = Arc::new(Layout::new(&members(), request));
        let mut state = self.shared.state.lock();
        if state.layouts.len() >= MAX_LAYOUTS {
            state.layouts.clear();
        }
        state.layouts.insert(object.clone(), layout.clone());
        layout
    }

    /// The slot of run `group`, holding `len` bytes, made (and the oldest runs let go
    /// past the budget) when there is none.
    fn slot(&self, group: &Group, len: u64) -> Slot {
        let mut state = self.shared.state.lock();
        if let Some((slot, _)) = state.runs.get(group) {
            return slot.clone();
        }
        let slot = Slot::default();
        state.runs.insert(group.clone(), (slot.clone(), len));
        state.order.push_back(group.clone());
        state.bytes = state.bytes.saturating_add(len);
        while state.bytes > self.shared.budget && state.order.len() > 1 {
            if let Some(old) = state.order.pop_front() {
                if let Some((_, n)) = state.runs.remove(&old) {
                    state.bytes = state.bytes.saturating_sub(n);
                }
            }
        }
        self.shared.held.store(state.bytes, Ordering::Relaxed);
        slot
    }

    /// Let go of run `group` when it is still `slot`.
    fn forget(&self, group: &Group, slot: &Slot) {
        let mut state = self.shared.state.lock();
        if state
            .runs
            .get(group)
            .is_some_and(|(s, _)| Arc::ptr_eq(s, slot))
        {
            state.remove(group);
            self.shared.held.store(state.bytes, Ordering::Relaxed);
        }
    }

    /// Note that `n` bytes of run `group` (when it is still `slot`) went to their read,
    /// and let go of the run when nothing of it is left to read.
    fn handed(&self, group: &Group, slot: &Slot, n: u64, all_read: bool) {
        let mut state = self.shared.state.lock();
        let State { runs, bytes, .. } = &mut *state;
        match runs.get_mut(group) {
            Some((s, held)) if Arc::ptr_eq(s, slot) => {
                let n = n.min(*held);
                *held -= n;
                *bytes = bytes.saturating_sub(n);
            }
            _ => return,
        }
        if all_read {
            state.remove(group);
        }
        self.shared.held.store(state.bytes, Ordering::Relaxed);
    }

    /// The bytes of member `member` of object `key` at `version`, whose members (their
    /// `(offset, len)` in the object, `None` for one that has no bytes) `members` gives
    /// when the object's layout is not known yet: from its group's run, fetched with
    /// `fetch(start, len)` when not yet there. `None` (read the member alone) when
    /// `request` is 0, the member has no bytes, its group's members lie apart, the run
    /// came from another version of the object (with `version` unknown, a run of any
    /// version serves: the members are known by place alone), or (read once) the member
    /// was read from the run already.
    pub fn read(
        &self,
        key: &str,
        version: &Version,
        members: impl FnOnce() -> Vec<Option<(u64, u64)>>,
        member: usize,
        request: u64,
        fetch: impl FnOnce(u64, u64) -> Result<Value>,
    ) -> Result<Option<Vec<u8>>> {
        if request == 0 {
            return Ok(None);
        }
        let object = (self.reader, key.to_string(), version.clone());
        let layout = self.layout(&object, members, request);
        let Some(&rank) = layout.rank.get(member).filter(|&&r| r != usize::MAX) else {
            return Ok(None);
        };
        let Some((offset, len)) = layout.sorted.get(rank).copied() else {
            return Ok(None);
        };
        let group = rank / layout.size;
        let limit = request.saturating_mul(MAX_RUN_REQUESTS);
        let Some((start, end)) = layout.run(group, limit) else {
            return Ok(None);
        };
        let in_run = layout.members(group);
        // A read-once run holds its members' bytes (overlapping members each their own).
        let held = if self.once {
            in_run.iter().fold(0u64, |t, m| t.saturating_add(m.1))
        } else {
            end - start
        };
        let at = rank - group * layout.size;
        let group = (object, group);
        let slot = self.slot(&group, held);
        // One fetch per run; readers of the same run wait for it (no lock of ours held).
        let got = slot
            .get_or_init(|| {
                fetch(start, end - start)
                    .map(|value| {
                        let bytes = if self.once {
                            RunBytes::Members(Mutex::new(pieces(&value.bytes, start, in_run)))
                        } else {
                            RunBytes::Whole {
                                start,
                                bytes: value.bytes,
                            }
                        };
                        Arc::new(Run {
                            bytes,
                            version: value.version,
                        })
                    })
                    .map_err(Arc::new)
            })
            .clone();
        let run = match got {
            Ok(run) if run.version == *version || *version == Version::Unknown => run,
            Ok(_) => {
                // The object changed since its members were known: the run is not the
                // bytes of this version.
                self.forget(&group, &slot);
                return Ok(None);
            }
            Err(why) => {
                // A failure is not kept: the next read asks the store again.
                self.forget(&group, &slot);
                return Err(Error::shared(key, &why));
            }
        };
        let past_end = || Error::corrupt(key, "a member lies past the end of the object");
        match &run.bytes {
            RunBytes::Whole { start, bytes } => {
                let from = offset
                    .checked_sub(*start)
                    .and_then(|f| usize::try_from(f).ok());
                let to = from.and_then(|f| f.checked_add(usize::try_from(len).ok()?));
                match (from, to) {
                    (Some(f), Some(t)) if t <= bytes.len() => Ok(Some(bytes[f..t].to_vec())),
                    _ => {
                        self.forget(&group, &slot);
                        Err(past_end())
                    }
                }
            }
            RunBytes::Members(pieces) => {
                let (piece, all_read) = {
                    let mut pieces = pieces.lock();
                    let piece = match pieces.get_mut(at) {
                        Some(p @ Piece::Unread(_)) => std::mem::replace(p, Piece::Read),
                        Some(Piece::Read) => Piece::Read,
                        Some(Piece::Outside) | None => Piece::Outside,
                    };
                    let all_read = !pieces.iter().any(|p| matches!(p, Piece::Unread(_)));
                    (piece, all_read)
                };
                match piece {
                    Piece::Unread(bytes) => {
                        self.handed(&group, &slot, len, all_read);
                        Ok(Some(bytes))
                    }
                    Piece::Read => Ok(None),
                    Piece::Outside => {
                        self.forget(&group, &slot);
                        Err(past_end())
                    }
                }
            }
        }
    }
}

/// The bytes of each of `members` (in the object) out of `bytes`, the object's from
/// `start`.
fn pieces(bytes: &[u8], start: u64, members: &[(u64, u64)]) -> Vec<Piece> {
    members
        .iter()
        .map(|&(offset, len)| {
            let from = offset
                .checked_sub(start)
                .and_then(|f| usize::try_from(f).ok());
            let to = from.and_then(|f| f.checked_add(usize::try_from(len).ok()?));
            match (from, to) {
                (Some(f), Some(t)) if t <= bytes.len() => Piece::Unread(bytes[f..t].to_vec()),
                _ => Piece::Outside,
            }
        })
        .collect()
}

impl Drop for Spans {
    /// A reader that goes lets go of its runs and layouts (the budget's other readers
    /// keep theirs).
    fn drop(&mut self) {
        if Arc::strong_count(&self.shared) == 1 {
            return;
        }
        let reader = self.reader;
        let mut state = self.shared.state.lock();
        let State {
            layouts,
            runs,
            order,
            bytes,
        } = &mut *state;
        layouts.retain(|o, _| o.0 != reader);
        runs.retain(|g, (_, n)| {
            let mine = g.0 .0 == reader;
            if mine {
                *bytes = bytes.saturating_sub(*n);
            }
            !mine
        });
        order.retain(|g| g.0 .0 != reader);
        self.shared.held.store(*bytes, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn tag(t: &str) -> Version {
        Version::Label(t.into())
    }

    #[test]
    fn one_request_per_group_and_gaps_read_alone() {
        let object: Vec<u8> = (0..=255u8).cycle().take(4000).collect();
        // Eight members of 100 bytes back to back but not in member order, one without
        // bytes, then two more farther apart than a run reads through.
        let mut members: Vec<Option<(u64, u64)>> = [3, 0, 7, 1, 2, 6, 4, 5]
            .iter()
            .map(|i| Some((i * 100, 100)))
            .collect();
        members.push(None);
        members.push(Some((1000, 100)));
        members.push(Some((1100 + MAX_GAP + 1, 100)));
        let spans = Spans::default();
        let calls = AtomicUsize::new(0);
        let v1 = tag("1");
        let fetch = |start: u64, len: u64| {
            calls.fetch_add(1, Ordering::Relaxed);
            Ok(Value {
                bytes: object[(start as usize).min(4000)..((start + len) as usize).min(4000)]
                    .to_vec(),
                version: tag("1"),
            })
        };
        let all = || members.clone();
        assert_eq!(Layout::new(&members, 400).size, 4);
        for (i, member) in members.iter().enumerate().take(8) {
            let got = spans.read("s", &v1, all, i, 400, fetch).unwrap().unwrap();
            let (o, n) = member.unwrap();
            assert_eq!(got, &object[o as usize..(o + n) as usize]);
        }
        assert_eq!(calls.load(Ordering::Relaxed), 2, "two groups of four");
        // The third group's members lie apart; the empty member has no bytes.
        assert!(spans.read("s", &v1, all, 10, 400, fetch).unwrap().is_none());
        assert!(spans.read("s", &v1, all, 8, 400, fetch).unwrap().is_none());
        assert!(spans.read("s", &v1, all, 99, 400, fetch).unwrap().is_none());
        // Coalescing off: nothing is fetched.
        assert!(spans.read("s", &v1, all, 0, 0, fetch).unwrap().is_none());
        // A lying member is an error or a read alone, never a panic.
        let bad = || vec![Some((0, 100)), Some((100, u64::MAX - 50))];
        assert!(spans.read("t", &v1, bad, 1, 400, fetch).unwrap().is_none());
        let past = || vec![Some((3900, 100)), Some((4000, 100))];
        assert!(spans.read("u", &v1, past, 1, 400, fetch).is_err());
        assert_eq!(calls.load(Ordering::Relaxed), 3);
    }

    #[test]
    fn near_and_overlapping_members_share_a_run_of_any_version_when_it_is_unknown_read_once_or_kept(
    ) {
        let object: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        // A gap of 50 bytes, and a member that repeats another's bytes.
        let members = || {
            vec![
                Some((0, 100)),
                Some((150, 100)),
                Some((150, 100)),
                Some((250, 50)),
            ]
        };
        let calls = AtomicUsize::new(0);
        let fetch = |start: u64, len: u64| {
            calls.fetch_add(1, Ordering::Relaxed);
            Ok(Value {
                bytes: object[start as usize..(start + len) as usize].to_vec(),
                version: tag("etag"),
            })
        };
        let spans = Spans::default();
        for (m, (o, n)) in [(0, 100), (150, 100), (150, 100), (250, 50)]
            .into_iter()
            .enumerate()
        {
            let got = spans.read("r", &Version::Unknown, members, m, 1000, fetch);
            assert_eq!(got.unwrap().unwrap(), &object[o..o + n]);
        }
        assert_eq!(calls.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn runs_are_filed_by_version_and_a_changed_object_is_read_alone() {
        let spans = Spans::default();
        let members = || vec![Some((0, 4)), Some((4, 4))];
        let calls = AtomicUsize::new(0);
        let serving = |version: &'static str, byte: u8| {
            let calls = &calls;
            move |_: u64, len: u64| {
                calls.fetch_add(1, Ordering::Relaxed);
                Ok(Value {
                    bytes: vec![byte; len as usize],
                    version: tag(version),
                })
            }
        };
        let read = |v: &str, m: usize, f: &dyn Fn(u64, u64) -> Result<Value>| {
            spans.read("k", &tag(v), members, m, 64, f)
        };
        assert_eq!(read("1", 0, &serving("1", 1)).unwrap(), Some(vec![1; 4]));
        assert_eq!(read("1", 1, &serving("1", 9)).unwrap(), Some(vec![1; 4]));
        assert_eq!(calls.load(Ordering::Relaxed), 1);
        // Version 2 of the object gets its own run, never version 1's.
        assert_eq!(read("2", 1, &serving("2", 2)).unwrap(), Some(vec![2; 4]));
        assert_eq!(calls.load(Ordering::Relaxed), 2);
        // A run that comes back from another version than asked is not used or kept.
        assert_eq!(read("3", 0, &serving("4", 4)).unwrap(), None);
        assert_eq!(read("3", 0, &serving("3", 3)).unwrap(), Some(vec![3; 4]));
        // A failed fetch is not kept either.
        let failing = |_: u64, _: u64| Err(Error::Invalid("down".into()));
        assert!(read("5", 0, &failing).is_err());
        assert_eq!(read("5", 0, &serving("5", 5)).unwrap(), Some(vec![5; 4]));
    }

    /// An object of `n` members of 100 bytes back to back, each byte its offset's low
    /// byte, and a fetch of it that counts its calls.
    fn hundreds(n: usize) -> Vec<Option<(u64, u64)>> {
        (0..n as u64).map(|i| Some((i * 100, 100))).collect()
    }

    fn counted(calls: &AtomicUsize) -> impl Fn(u64, u64) -> Result<Value> + '_ {
        move |start, len| {
            calls.fetch_add(1, Ordering::Relaxed);
            Ok(Value {
                bytes: (start..start + len).map(|b| b as u8).collect(),
                version: tag("1"),
            })
        }
    }

    fn bytes_of(member: u64) -> Vec<u8> {
        (member * 100..member * 100 + 100)
            .map(|b| b as u8)
            .collect()
    }

    #[test]
    fn arrays_of_one_store_hold_at_most_its_budget_together() {
        // Runs of four members (400 bytes); the store's budget holds two of them.
        let store = Spans::read_once(800);
        let (a, b) = (store.share_read_once(), store.share_read_once());
        let calls = AtomicUsize::new(0);
        let v1 = tag("1");
        let read = |spans: &Spans, key: &str, m: usize| {
            spans
                .read(key, &v1, || hundreds(8), m, 400, counted(&calls))
                .unwrap()
        };
        // Array a fetches two runs and reads one member of each.
        assert_eq!(read(&a, "a/c/0", 0), Some(bytes_of(0)));
        assert_eq!(read(&a, "a/c/0", 4), Some(bytes_of(4)));
        assert_eq!(calls.load(Ordering::Relaxed), 2);
        assert_eq!(store.held(), 600);
        // Array b's run pushes out a's oldest: together they stay within the budget.
        assert_eq!(read(&b, "b/c/0", 0), Some(bytes_of(0)));
        assert_eq!(calls.load(Ordering::Relaxed), 3);
        assert!(store.held() <= 800, "{} bytes held", store.held());
        assert_eq!(store.held(), 600);
        // a's newer run is still there; its older one is fetched again.
        assert_eq!(read(&a, "a/c/0", 5), Some(bytes_of(5)));
        assert_eq!(calls.load(Ordering::Relaxed), 3);
        assert_eq!(read(&a, "a/c/0", 1), Some(bytes_of(1)));
        assert_eq!(calls.load(Ordering::Relaxed), 4);
        // Two arrays' objects of the same key never serve each other.
        assert_eq!(read(&b, "a/c/0", 2), Some(bytes_of(2)));
        assert_eq!(calls.load(Ordering::Relaxed), 5);
        // An array that goes lets go of its runs.
        let before = store.held();
        drop(a);
        assert!(
            store.held() < before,
            "{} of {before} bytes held",
            store.held()
        );
        drop(b);
        assert_eq!(store.held(), 0);
    }

    #[test]
    fn a_read_once_run_holds_only_its_unread_members() {
        let spans = Spans::read_once(BUDGET);
        let calls = AtomicUsize::new(0);
        let v1 = tag("1");
        // Members 1 and 2 are the same bytes: each read gets its own.
        let members = || {
            let mut m = hundreds(4);
            m[2] = m[1];
            m
        };
        let read = |m: usize| {
            spans
                .read("k", &v1, members, m, 400, counted(&calls))
                .unwrap()
        };
        assert_eq!(read(1), Some(bytes_of(1)));
        assert_eq!(spans.held(), 300);
        assert_eq!(read(2), Some(bytes_of(1)));
        assert_eq!(spans.held(), 200);
        // A member read already is read alone.
        assert_eq!(read(1), None);
        assert_eq!(read(0), Some(bytes_of(0)));
        assert_eq!(spans.held(), 100);
        assert_eq!(calls.load(Ordering::Relaxed), 1);
        // The run all read is let go.
        assert_eq!(read(3), Some(bytes_of(3)));
        assert_eq!(spans.held(), 0);
        assert_eq!(calls.load(Ordering::Relaxed), 1);
    }
}
