//! Coalesced reads of one object's members, for stores where a request costs more than
//! its bytes (remote ones): the inner chunks of a shard, the entries of a zip archive,
//! the chunks a reference set keeps in one target file. Members are grouped in the order
//! they lie in the object (zarr-python writes a shard's chunks in Morton order, so a group
//! is a compact block of it); a group holds as many as fit the store's preferred request
//! size, by the object's mean member size. The first read of any member of a group
//! fetches the group's whole byte run in one ranged request, once, however many readers
//! ask at the same time, and later reads of the group are served from it. Runs are filed
//! under the object's key and version (a changed object never serves an old run) and kept
//! up to a byte budget, oldest out first.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
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

/// An object: its key and version.
type Object = (String, Version);
/// A group of an object's members.
type Group = (Object, usize);

/// A run being fetched or fetched: its bytes, or why they could not be had.
type Slot = Arc<OnceLock<std::result::Result<Arc<Run>, Arc<Error>>>>;

/// A fetched run: the bytes of the object from `start`, the version they came from, and
/// how many of its members are still to be read (a read-once run is let go when none is).
struct Run {
    start: u64,
    bytes: Vec<u8>,
    version: Version,
    unread: AtomicUsize,
}

/// The runs fetched of one store's objects.
pub struct Spans {
    budget: u64,
    /// Whether each member is read once (see [`Spans::read_once`]).
    once: bool,
    state: Mutex<State>,
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
    runs: HashMap<Group, Slot>,
    order: VecDeque<(Group, u64)>,
    bytes: u64,
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

    /// How many members group `group` holds.
    fn members(&self, group: usize) -> usize {
        let from = group.saturating_mul(self.size).min(self.sorted.len());
        (self.sorted.len() - from).min(self.size)
    }

    /// The byte run `[start, end)` of group `group`: its members, when they lie near
    /// each other in the object (at most [`MAX_GAP`] apart; members may overlap) and span
    /// at most `limit` bytes (else `None`: read one by one).
    fn run(&self, group: usize, limit: u64) -> Option<(u64, u64)> {
        let from = group.checked_mul(self.size)?;
        let to = from.saturating_add(self.size).min(self.sorted.len());
        let members = self.sorted.get(from..to)?;
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
            budget,
            once: false,
            state: Mutex::new(State::default()),
        }
    }

    /// Runs whose members are each read once (their readers cache what they decode): a
    /// run all read is let go at once rather than when the budget pushes it out, so that
    /// many runs in flight do not push out each other before they are read.
    pub fn read_once(budget: u64) -> Spans {
        Spans {
            once: true,
            ..Spans::new(budget)
        }
    }

    fn layout(
        &self,
        object: &Object,
        members: impl FnOnce() -> Vec<Option<(u64, u64)>>,
        request: u64,
    ) -> Arc<Layout> {
        if let Some(hit) = self.state.lock().layouts.get(object) {
            return hit.clone();
        }
        let layout = Arc::new(Layout::new(&members(), request));
        let mut state = self.state.lock();
        if state.layouts.len() >= MAX_LAYOUTS {
            state.layouts.clear();
        }
        state.layouts.insert(object.clone(), layout.clone());
        layout
    }

    /// The slot of run `group`, made (and the oldest runs let go past the budget) when
    /// there is none.
    fn slot(&self, group: &Group, len: u64) -> Slot {
        let mut state = self.state.lock();
        if let Some(slot) = state.runs.get(group) {
            return slot.clone();
        }
        let slot = Slot::default();
        state.runs.insert(group.clone(), slot.clone());
        state.order.push_back((group.clone(), len));
        state.bytes = state.bytes.saturating_add(len);
        while state.bytes > self.budget && state.order.len() > 1 {
            if let Some((old, n)) = state.order.pop_front() {
                state.runs.remove(&old);
                state.bytes = state.bytes.saturating_sub(n);
            }
        }
        slot
    }

    /// Let go of run `group` when it is still `slot`.
    fn forget(&self, group: &Group, slot: &Slot) {
        let mut state = self.state.lock();
        if state.runs.get(group).is_some_and(|s| Arc::ptr_eq(s, slot)) {
            state.runs.remove(group);
            if let Some(at) = state.order.iter().position(|(g, _)| g == group) {
                if let Some((_, n)) = state.order.remove(at) {
                    state.bytes = state.bytes.saturating_sub(n);
                }
            }
        }
    }

    /// The bytes of member `member` of object `key` at `version`, whose members (their
    /// `(offset, len)` in the object, `None` for one that has no bytes) `members` gives
    /// when the object's layout is not known yet: from its group's run, fetched with
    /// `fetch(start, len)` when not yet there. `None` (read the member alone) when
    /// `request` is 0, the member has no bytes, its group's members lie apart, or the run
    /// came from another version of the object (with `version` unknown, a run of any
    /// version serves: the members are known by place alone).
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
        let object = (key.to_string(), version.clone());
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
        let members = layout.members(group);
        let group = (object, group);
        let slot = self.slot(&group, end - start);
        // One fetch per run; readers of the same run wait for it (no lock of ours held).
        let got = slot
            .get_or_init(|| {
                fetch(start, end - start)
                    .map(|value| {
                        Arc::new(Run {
                            start,
                            bytes: value.bytes,
                            version: value.version,
                            unread: AtomicUsize::new(members),
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
        let from = offset
            .checked_sub(run.start)
            .and_then(|f| usize::try_from(f).ok());
        let to = from.and_then(|f| f.checked_add(usize::try_from(len).ok()?));
        match (from, to) {
            (Some(f), Some(t)) if t <= run.bytes.len() => {
                let bytes = run.bytes[f..t].to_vec();
                if self.once
                    && run
                        .unread
                        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                        == Ok(1)
                {
                    self.forget(&group, &slot);
                }
                Ok(Some(bytes))
            }
            _ => {
                self.forget(&group, &slot);
                Err(Error::corrupt(
                    key,
                    "a member lies past the end of the object",
                ))
            }
        }
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
}
