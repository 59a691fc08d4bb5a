//! Coalesced reads of a shard's inner chunks, for stores where a request costs more than
//! its bytes (remote ones). Inner chunks are grouped in the order they lie in the shard
//! (zarr-python writes them in Morton order, so a group is a compact block of the shard);
//! a group holds as many as fit the store's preferred request size, by the shard's mean
//! inner-chunk size. The first read of any chunk of a group fetches the group's whole byte run in one
//! ranged request, once, however many readers ask at the same time, and later reads of the
//! group are served from it. Runs are kept up to a byte budget, oldest out first.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use crate::codec::sharding::EMPTY;
use crate::error::{Error, Result};

/// Bytes of fetched runs kept per array.
const BUDGET: u64 = 64 << 20;

/// A run being fetched or fetched: its bytes, or why they could not be had.
type Slot = Arc<OnceLock<std::result::Result<Arc<Run>, String>>>;

/// A fetched run: the bytes of the shard from `start`.
struct Run {
    start: u64,
    bytes: Vec<u8>,
}

/// The runs of one array.
#[derive(Default)]
pub struct ShardSpans {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Each shard's chunks in file order.
    layouts: HashMap<String, Arc<Layout>>,
    runs: HashMap<(String, usize), Slot>,
    order: VecDeque<((String, usize), u64)>,
    bytes: u64,
}

/// Shards with a layout kept at most (the set starts over when full).
const MAX_LAYOUTS: usize = 1024;

/// A shard's stored chunks in file order, the rank of each index entry in that order, and
/// the chunks per group.
struct Layout {
    sorted: Vec<(u64, u64)>,
    rank: Vec<usize>,
    size: usize,
}

impl Layout {
    fn new(index: &[(u64, u64)], request: u64) -> Layout {
        let mut order: Vec<usize> = (0..index.len())
            .filter(|&i| index[i] != (EMPTY, EMPTY))
            .collect();
        order.sort_unstable_by_key(|&i| index[i]);
        let mut rank = vec![usize::MAX; index.len()];
        for (r, &i) in order.iter().enumerate() {
            rank[i] = r;
        }
        let sorted: Vec<(u64, u64)> = order.iter().map(|&i| index[i]).collect();
        let total = sorted.iter().fold(0u64, |t, e| t.saturating_add(e.1));
        let mean = total / (sorted.len() as u64).max(1);
        let size = (request / mean.max(1)).clamp(1, sorted.len().max(1) as u64) as usize;
        Layout { sorted, rank, size }
    }
}

/// The byte run `[start, end)` of group `group`: its chunks, when they lie back to back in
/// the shard and span at most `limit` bytes (else `None`: read chunk by chunk).
fn group_run(layout: &Layout, group: usize, limit: u64) -> Option<(u64, u64)> {
    let size = layout.size;
    let filled = layout
        .sorted
        .get(group * size..((group + 1) * size).min(layout.sorted.len()))?;
    let (start, first_len) = *filled.first()?;
    let mut end = start.checked_add(first_len)?;
    for &(o, n) in &filled[1..] {
        if o != end {
            return None;
        }
        end = end.checked_add(n)?;
    }
    (end - start <= limit).then_some((start, end))
}

impl ShardSpans {
    fn layout(&self, key: &str, index: &[(u64, u64)], request: u64) -> Arc<Layout> {
        if let Some(hit) = self.state.lock().layouts.get(key) {
            return hit.clone();
        }
        let layout = Arc::new(Layout::new(index, request));
        let mut state = self.state.lock();
        if state.layouts.len() >= MAX_LAYOUTS {
            state.layouts.clear();
        }
        state.layouts.insert(key.to_string(), layout.clone());
        layout
    }

    /// The bytes `[offset, offset + len)` of shard `key`, inner chunk `inner` of `index`:
    /// from its group's run (fetched with `fetch(start, len)` when not yet there), or
    /// `None` when the group's chunks are not back to back.
    pub fn read(
        &self,
        key: &str,
        index: &[(u64, u64)],
        inner: usize,
        request: u64,
        fetch: impl FnOnce(u64, u64) -> Result<Vec<u8>>,
    ) -> Result<Option<Vec<u8>>> {
        let layout = self.layout(key, index, request);
        let Some(group) = layout.rank.get(inner).map(|r| r / layout.size) else {
            return Ok(None);
        };
        let Some((start, end)) = group_run(&layout, group, request.saturating_mul(4)) else {
            return Ok(None);
        };
        let Some(&(offset, len)) = index.get(inner) else {
            return Ok(None);
        };
        let slot = {
            let mut state = self.state.lock();
            let id = (key.to_string(), group);
            match state.runs.get(&id) {
                Some(slot) => slot.clone(),
                None => {
                    let slot = Slot::default();
                    state.runs.insert(id.clone(), slot.clone());
                    state.order.push_back((id, end - start));
                    state.bytes += end - start;
                    while state.bytes > BUDGET && state.order.len() > 1 {
                        if let Some((old, n)) = state.order.pop_front() {
                            state.runs.remove(&old);
                            state.bytes -= n;
                        }
                    }
                    slot
                }
            }
        };
        // One fetch per run; readers of the same run wait for it (no lock of ours held).
        let got = slot
            .get_or_init(|| {
                fetch(start, end - start)
                    .map(|bytes| Arc::new(Run { start, bytes }))
                    .map_err(|e| e.to_string())
            })
            .clone();
        if got.is_err() {
            // A failure is not kept: the next read asks the store again.
            let mut state = self.state.lock();
            let id = (key.to_string(), group);
            if state.runs.get(&id).is_some_and(|s| Arc::ptr_eq(s, &slot)) {
                state.runs.remove(&id);
            }
        }
        let run = got.map_err(|why| Error::Io {
            key: key.to_string(),
            source: std::io::Error::other(why),
        })?;
        let from = offset
            .checked_sub(run.start)
            .and_then(|f| usize::try_from(f).ok());
        let to = from.and_then(|f| f.checked_add(usize::try_from(len).ok()?));
        match (from, to) {
            (Some(f), Some(t)) if t <= run.bytes.len() => Ok(Some(run.bytes[f..t].to_vec())),
            _ => Err(Error::corrupt(key, "inner chunk lies outside the shard")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn one_request_per_group_and_gaps_read_alone() {
        let shard: Vec<u8> = (0..=255u8).cycle().take(4000).collect();
        // Eight chunks of 100 bytes back to back but not in index order, one empty, then
        // two more with a gap between them.
        let mut index: Vec<(u64, u64)> = [3, 0, 7, 1, 2, 6, 4, 5]
            .iter()
            .map(|i| (i * 100, 100))
            .collect();
        index.push((EMPTY, EMPTY));
        index.push((1000, 100));
        index.push((1500, 100));
        let spans = ShardSpans::default();
        let calls = AtomicUsize::new(0);
        let fetch = |start: u64, len: u64| {
            calls.fetch_add(1, Ordering::Relaxed);
            Ok(shard[start as usize..(start + len) as usize].to_vec())
        };
        assert_eq!(Layout::new(&index, 400).size, 4);
        for i in 0..8 {
            let got = spans.read("s", &index, i, 400, fetch).unwrap().unwrap();
            let (o, n) = index[i];
            assert_eq!(got, &shard[o as usize..(o + n) as usize]);
        }
        assert_eq!(calls.load(Ordering::Relaxed), 2, "two groups of four");
        // The third group (1000, 1500) is not back to back; the empty entry has none.
        assert!(spans.read("s", &index, 10, 400, fetch).unwrap().is_none());
        assert!(spans.read("s", &index, 8, 400, fetch).unwrap().is_none());
        // A lying index entry is an error, not a panic.
        let bad = vec![(0, 100), (100, u64::MAX - 50)];
        assert!(spans.read("t", &bad, 1, 400, fetch).unwrap().is_none());
    }
}
