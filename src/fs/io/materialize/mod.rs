//! Hot arrays at native speed: an array file whose bytes fit the budget is copied into a
//! backing file (see [`tmpfs`]) as the daemon serves it: every read's bytes are written
//! into the copy on the way out (see [`copy`]), and reads of ranges already copied are
//! answered from it, so nothing is decoded twice. Once a read reaches the end, or the
//! file is opened a second time, a background build decodes only the ranges no read has
//! copied yet (none, after one front-to-back read). Once complete, later opens hand the
//! copy to the kernel (FUSE passthrough), so their reads and mmaps never reach the
//! daemon. The budget is an LRU over the copies; the kernel must offer passthrough and
//! the daemon must be root (the backing-file ioctl needs CAP_SYS_ADMIN).
//!
//! The kernel refuses a passthrough open of an inode while a page-cache open of it is
//! live (and the other way round), so opens are counted per inode: a new open goes
//! through passthrough only when no page-cache open is counted, and every open while a
//! passthrough one is counted goes through it too.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use crate::fs::{PerInode, ZarrFs};
use crate::pool::Pool;

mod copy;
mod tmpfs;

use copy::Copy;
use tmpfs::Backings;

/// Bytes the background build reads per request to the filesystem.
const BLOCK: usize = 8 << 20;

/// The file handle of a passthrough open (opens served by the daemon have the handles
/// the filesystem numbers from 1).
pub const PASSTHROUGH_FH: u64 = u64::MAX;

/// How an open is answered.
pub enum Opened<Id> {
    /// Through the daemon (page cache or direct IO).
    Daemon,
    /// By the kernel from this backing file.
    Passthrough(Arc<Id>),
}

enum Backing<Id> {
    None,
    /// Filled by the reads served and, once `building`, by a background build of the gaps.
    Filling {
        copy: Copy,
        building: bool,
    },
    Ready {
        file: Arc<File>,
        id: Option<Arc<Id>>,
    },
    /// Copying failed: reads keep going through the daemon, and it is not tried again.
    Failed,
}

struct Inode<Id> {
    daemon_opens: u32,
    passthrough_opens: u32,
    /// Opens seen; the second one asks for the copy to be completed.
    opens: u32,
    /// The array file's size when a copy of it fits the budget, else 0 (set at open).
    fits: u64,
    /// Bytes of the budget this inode holds (filling or ready).
    size: u64,
    backing: Backing<Id>,
    last_use: u64,
    /// Opens answered by passthrough so far.
    served: u64,
}

impl<Id> Default for Inode<Id> {
    fn default() -> Self {
        Inode {
            daemon_opens: 0,
            passthrough_opens: 0,
            opens: 0,
            fits: 0,
            size: 0,
            backing: Backing::None,
            last_use: 0,
            served: 0,
        }
    }
}

impl<Id> Inode<Id> {
    /// Whether nothing uses this copy: it may be dropped to make room.
    fn idle(&self) -> bool {
        match &self.backing {
            Backing::Ready { .. } => self.passthrough_opens == 0,
            Backing::Filling { building, .. } => {
                !building && self.daemon_opens == 0 && self.passthrough_opens == 0
            }
            _ => false,
        }
    }
}

struct State<Id> {
    inodes: HashMap<u64, Inode<Id>>,
    used: u64,
    tick: u64,
}

impl<Id> State<Id> {
    /// Whether `ino` has no copy, or one nothing uses: no open counted, no build running.
    fn unused(&self, ino: u64) -> bool {
        self.inodes.get(&ino).is_none_or(|n| {
            n.daemon_opens == 0
                && n.passthrough_opens == 0
                && !matches!(n.backing, Backing::Filling { building: true, .. })
        })
    }

    /// Make room for `size` more bytes by dropping the least recently opened idle copies
    /// of inodes other than `ino`; `take_ready` allows dropping complete copies too.
    fn make_room(&mut self, ino: u64, size: u64, budget: u64, take_ready: bool) -> bool {
        while self.used.saturating_add(size) > budget {
            let victim = self
                .inodes
                .iter()
                .filter(|(k, n)| {
                    **k != ino
                        && n.idle()
                        && (take_ready || matches!(n.backing, Backing::Filling { .. }))
                })
                .min_by_key(|(_, n)| n.last_use)
                .map(|(k, _)| *k);
            let Some(node) = victim.and_then(|v| self.inodes.get_mut(&v)) else {
                return false;
            };
            node.backing = Backing::None;
            let freed = std::mem::take(&mut node.size);
            self.used -= freed;
            log::debug!("materialize: dropped a copy ({freed} bytes)");
        }
        true
    }
}

/// The materialized files of one mount. `Id` is the kernel's handle of a backing file.
pub struct Materializer<Id> {
    fs: Arc<ZarrFs>,
    budget: u64,
    keep_when_off: bool,
    enabled: AtomicBool,
    state: Mutex<State<Id>>,
    jobs: Pool,
    /// Where copies are made, set up with the first one.
    backings: OnceLock<Backings>,
}

impl<Id: Send + Sync + 'static> Materializer<Id> {
    /// Materialized files of at most `budget` bytes together (0: off). `keep_when_off`:
    /// while there are no copies, the decoded cache keeps what was read instead (see
    /// [`ZarrFs::keep_read_arrays`]).
    pub fn new(fs: Arc<ZarrFs>, budget: u64, keep_when_off: bool) -> Arc<Self> {
        fs.keep_read_arrays(budget == 0 && keep_when_off);
        Arc::new(Materializer {
            fs,
            budget,
            keep_when_off,
            enabled: AtomicBool::new(budget > 0),
            state: Mutex::new(State {
                inodes: HashMap::new(),
                used: 0,
                tick: 0,
            }),
            jobs: Pool::new(1, "materialize"),
            backings: OnceLock::new(),
        })
    }

    pub fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    /// Turn materialization off for good, saying why once.
    pub fn disable(&self, why: &str) {
        if self.enabled.swap(false, Ordering::Relaxed) {
            log::info!("materialize: off: {why}");
            self.fs.keep_read_arrays(self.keep_when_off);
        }
    }

    /// The size of `ino`'s file when a copy of it fits the budget.
    fn fitting_size(&self, ino: u64) -> Option<u64> {
        self.fs
            .array_file_size(ino)
            .filter(|&size| size > 0 && size <= self.budget)
    }

    /// Decide how to answer an open of `ino`; `make_id` registers a backing file with the
    /// kernel (once per materialized file).
    pub fn open(
        self: &Arc<Self>,
        ino: u64,
        make_id: impl FnOnce(&File) -> io::Result<Id>,
    ) -> Opened<Id> {
        if !self.enabled() {
            return Opened::Daemon;
        }
        let fits = self.fitting_size(ino).unwrap_or(0);
        let (file, id) = {
            let mut st = self.state.lock();
            st.tick += 1;
            let tick = st.tick;
            let node = st.inodes.entry(ino).or_default();
            node.opens = node.opens.saturating_add(1);
            node.last_use = tick;
            node.fits = fits;
            let ready = match &node.backing {
                Backing::Ready { file, id } => Some((file.clone(), id.clone())),
                _ => None,
            };
            match ready {
                Some((file, id)) if node.daemon_opens == 0 => {
                    node.passthrough_opens += 1;
                    node.served += 1;
                    (file, id)
                }
                _ => {
                    node.daemon_opens += 1;
                    let second = node.opens >= 2;
                    drop(st);
                    if second {
                        self.request(ino);
                    }
                    return Opened::Daemon;
                }
            }
        };
        if let Some(id) = id {
            return Opened::Passthrough(id);
        }
        // The first passthrough open of this file registers it, outside the lock.
        match make_id(&file) {
            Ok(id) => {
                let id = Arc::new(id);
                let mut st = self.state.lock();
                if let Some(Inode {
                    backing: Backing::Ready { id: slot, .. },
                    ..
                }) = st.inodes.get_mut(&ino)
                {
                    return Opened::Passthrough(slot.get_or_insert(id).clone());
                }
                Opened::Passthrough(id)
            }
            Err(e) => {
                self.disable(&format!("the kernel refused a backing file: {e}"));
                let mut st = self.state.lock();
                if let Some(node) = st.inodes.get_mut(&ino) {
                    node.passthrough_opens -= 1;
                    node.served -= 1;
                    node.daemon_opens += 1;
                }
                Opened::Daemon
            }
        }
    }

    /// Whether `ino`, just opened, will be copied and served by the kernel once read
    /// through (from what its open found).
    pub fn will_copy(&self, ino: u64) -> bool {
        self.enabled()
            && self
                .state
                .lock()
                .inodes
                .get(&ino)
                .is_some_and(|n| n.fits > 0 && !matches!(n.backing, Backing::Failed))
    }

    /// The kernel forgot `ino`: no open of it can come again (a lookup of its name makes
    /// it anew), so its copy goes and gives its bytes back to the budget, unless an open
    /// is still counted or a build runs (they end on their own; the copy goes when the
    /// number is given again, see [`PerInode::let_go`]).
    pub fn forget(&self, ino: u64) {
        self.let_go(ino);
    }

    /// An open of `ino` answered with file handle `fh` was released.
    pub fn release(&self, ino: u64, fh: u64) {
        if let Some(node) = self.state.lock().inodes.get_mut(&ino) {
            if fh == PASSTHROUGH_FH {
                node.passthrough_opens = node.passthrough_opens.saturating_sub(1);
            } else {
                node.daemon_opens = node.daemon_opens.saturating_sub(1);
            }
        }
    }

    /// Answer a read of `ino` at `offset` from its copy when the copy holds every byte
    /// of it (up to the file's end): the bytes read into `buf`, or `None` to read
    /// through the filesystem.
    pub fn read_copy(&self, ino: u64, offset: u64, buf: &mut [u8]) -> Option<usize> {
        if !self.enabled() || buf.is_empty() {
            return None;
        }
        let end = offset.saturating_add(buf.len() as u64);
        let (file, range) = {
            let st = self.state.lock();
            let node = st.inodes.get(&ino)?;
            match &node.backing {
                Backing::Ready { file, .. } => {
                    (file.clone(), offset.min(node.size)..end.min(node.size))
                }
                Backing::Filling { copy, .. } => {
                    let range = copy.clip(offset..end);
                    if !copy.holds(&range) {
                        return None;
                    }
                    (copy.file().clone(), range)
                }
                _ => return None,
            }
        };
        let n = usize::try_from(range.end - range.start).ok()?;
        if n == 0 {
            return None;
        }
        file.read_exact_at(&mut buf[..n], offset).ok()?;
        Some(n)
    }

    /// `bytes` of `ino` at `offset` were served to a reader: copy them in.
    pub fn fill(&self, ino: u64, offset: u64, bytes: &[u8]) {
        if !self.enabled() || bytes.is_empty() {
            return;
        }
        if let Err(e) = self.write(ino, offset, bytes, true) {
            self.fail(ino, &e);
        }
    }

    /// Write `bytes` at `offset` into `ino`'s copy; with `start`, start the copy first
    /// when there is room for it without dropping a complete one.
    fn write(&self, ino: u64, offset: u64, bytes: &[u8], start: bool) -> Result<(), String> {
        let Some(end) = offset.checked_add(bytes.len() as u64) else {
            return Ok(());
        };
        let range = offset..end;
        let file = match self.writable(ino, &range) {
            Some(file) => file,
            None if start && self.start(ino, false) => match self.writable(ino, &range) {
                Some(file) => file,
                None => return Ok(()),
            },
            None => return Ok(()),
        };
        file.write_all_at(bytes, offset)
            .map_err(|e| format!("backing file: {e}"))?;
        self.mark(ino, &file, range);
        Ok(())
    }

    /// The copy's file when `ino` is filling and `range` is not all in it yet.
    fn writable(&self, ino: u64, range: &Range<u64>) -> Option<Arc<File>> {
        let st = self.state.lock();
        match &st.inodes.get(&ino)?.backing {
            Backing::Filling { copy, .. } if !copy.holds(&copy.clip(range.clone())) => {
                Some(copy.file().clone())
            }
            _ => None,
        }
    }

    /// `range` of `file` holds `ino`'s bytes; a copy complete now is ready for the kernel.
    fn mark(&self, ino: u64, file: &Arc<File>, range: Range<u64>) {
        let mut st = self.state.lock();
        let Some(node) = st.inodes.get_mut(&ino) else {
            return;
        };
        let Backing::Filling { copy, .. } = &mut node.backing else {
            return;
        };
        // A copy dropped and started again since the write is another file.
        if !Arc::ptr_eq(copy.file(), file) {
            return;
        }
        copy.mark(range);
        if copy.complete() {
            log::info!(
                "materialize: inode {ino} ({} bytes) served by the kernel",
                node.size
            );
            node.backing = Backing::Ready {
                file: copy.file().clone(),
                id: None,
            };
        }
    }

    /// Copying `ino` failed: it is not tried again.
    fn fail(&self, ino: u64, why: &str) {
        log::warn!("materialize: inode {ino}: {why}");
        let mut st = self.state.lock();
        if let Some(node) = st.inodes.get_mut(&ino) {
            node.backing = Backing::Failed;
            let freed = std::mem::take(&mut node.size);
            st.used -= freed;
        }
    }

    /// Start an empty copy of `ino` when it fits (dropping complete copies to make room
    /// only when `take_ready`); whether `ino` has a filling copy now.
    fn start(&self, ino: u64, take_ready: bool) -> bool {
        let size = {
            let st = self.state.lock();
            match st.inodes.get(&ino) {
                Some(n) if matches!(n.backing, Backing::Filling { .. }) => return true,
                Some(n) if matches!(n.backing, Backing::None) && n.fits > 0 => n.fits,
                _ => return false,
            }
        };
        // The file is made outside the lock; a copy started meanwhile wins.
        let file = self
            .backings
            .get_or_init(|| Backings::new(self.budget))
            .create()
            .and_then(|f| f.set_len(size).map(|_| f));
        let file = match file {
            Ok(file) => file,
            Err(e) => {
                self.fail(ino, &format!("backing file: {e}"));
                return false;
            }
        };
        let mut st = self.state.lock();
        match st.inodes.get(&ino).map(|n| &n.backing) {
            Some(Backing::None) => {}
            Some(Backing::Filling { .. }) => return true,
            _ => return false,
        }
        if !st.make_room(ino, size, self.budget, take_ready) {
            return false;
        }
        st.used += size;
        let Some(node) = st.inodes.get_mut(&ino) else {
            return false;
        };
        node.size = size;
        node.backing = Backing::Filling {
            copy: Copy::new(file, size),
            building: false,
        };
        true
    }

    /// A read of `ino` reached its end: it has been read through.
    pub fn read_to_end(self: &Arc<Self>, ino: u64) {
        if self.enabled() {
            self.request(ino);
        }
    }

    /// `user.zarrfs.materialized`: the state of `ino`'s copy.
    pub fn describe(&self, ino: u64) -> String {
        if !self.enabled() {
            return "off".into();
        }
        match self.state.lock().inodes.get(&ino) {
            Some(Inode {
                backing: Backing::Ready { .. },
                served,
                ..
            }) => format!("ready ({served} opens served by the kernel)"),
            Some(Inode {
                backing: Backing::Filling { copy, building },
                size,
                ..
            }) => format!(
                "{} ({} of {size} bytes copied)",
                if *building { "building" } else { "filling" },
                copy.filled_bytes()
            ),
            _ => "no".into(),
        }
    }

    /// Complete `ino`'s copy in the background: start it if it fits (dropping the least
    /// recently opened idle copies to make room), then decode what no read has copied.
    fn request(self: &Arc<Self>, ino: u64) {
        if !self.start(ino, true) {
            return;
        }
        {
            let mut st = self.state.lock();
            match st.inodes.get_mut(&ino).map(|n| &mut n.backing) {
                Some(Backing::Filling { building, .. }) if !*building => *building = true,
                _ => return,
            }
        }
        let me = self.clone();
        self.jobs.run(move || {
            if let Err(e) = me.build(ino) {
                me.fail(ino, &e);
            }
            let mut st = me.state.lock();
            if let Some(Backing::Filling { building, .. }) =
                st.inodes.get_mut(&ino).map(|n| &mut n.backing)
            {
                *building = false;
            }
        });
    }

    /// Read the gaps of `ino`'s copy through the filesystem (and its cache) into it.
    fn build(&self, ino: u64) -> Result<(), String> {
        // An open of its own: its reads keep their own readahead.
        let fh = self.fs.open(ino).map_err(|e| e.to_string())?;
        let filled = self.fill_gaps(ino, fh);
        self.fs.release(fh);
        filled
    }

    fn fill_gaps(&self, ino: u64, fh: u64) -> Result<(), String> {
        let mut buf = Vec::new();
        loop {
            let gap = {
                let st = self.state.lock();
                match st.inodes.get(&ino).map(|n| &n.backing) {
                    Some(Backing::Filling { copy, .. }) => copy.first_gap(),
                    _ => None,
                }
            };
            let Some(gap) = gap else {
                return Ok(());
            };
            let len = (gap.end - gap.start).min(BLOCK as u64) as usize;
            buf.resize(len, 0);
            let n = self
                .fs
                .read_into(fh, gap.start, &mut buf[..len])
                .map_err(|failed| failed.error.to_string())?;
            if n == 0 {
                return Err(format!("short read at {}", gap.start));
            }
            self.write(ino, gap.start, &buf[..n], false)?;
        }
    }
}

/// A copy is of one reading of its array: before an inode number stands for another
/// reading (renewed, or given again after the kernel forgot it), its copy goes.
impl<Id: Send + Sync + 'static> PerInode for Materializer<Id> {
    fn let_go(&self, ino: u64) -> bool {
        let mut st = self.state.lock();
        if !st.unused(ino) {
            return false;
        }
        if let Some(node) = st.inodes.remove(&ino) {
            st.used = st.used.saturating_sub(node.size);
        }
        true
    }
}
