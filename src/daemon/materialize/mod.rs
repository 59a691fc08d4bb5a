//! Hot arrays at native speed: an array file read to its end, or opened a second time,
//! whose bytes fit the budget is decoded once into a backing file (see [`tmpfs`]); later
//! opens hand that file to the kernel (FUSE passthrough), so their reads and mmaps never
//! reach the daemon. The budget is an LRU over the materialized files; the kernel must
//! offer passthrough and the daemon must be root (the backing-file ioctl needs
//! CAP_SYS_ADMIN).
//!
//! The kernel refuses a passthrough open of an inode while a page-cache open of it is
//! live (and the other way round), so opens are counted per inode: a new open goes
//! through passthrough only when no page-cache open is counted, and every open while a
//! passthrough one is counted goes through it too.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use crate::fs::ZarrFs;
use crate::pool::Pool;

mod tmpfs;

use tmpfs::Backings;

/// Bytes copied into the backing file per read of the array.
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
    Building,
    Ready {
        file: Arc<File>,
        id: Option<Arc<Id>>,
    },
    /// Building failed: reads keep going through the daemon, and it is not tried again.
    Failed,
}

struct Inode<Id> {
    daemon_opens: u32,
    passthrough_opens: u32,
    /// Opens seen; the second one asks for the file to be materialized.
    opens: u32,
    /// Bytes of the budget this inode holds (building or ready).
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
            size: 0,
            backing: Backing::None,
            last_use: 0,
            served: 0,
        }
    }
}

struct State<Id> {
    inodes: HashMap<u64, Inode<Id>>,
    used: u64,
    tick: u64,
}

/// The materialized files of one mount. `Id` is the kernel's handle of a backing file.
pub struct Materializer<Id> {
    fs: Arc<ZarrFs>,
    budget: u64,
    enabled: AtomicBool,
    state: Mutex<State<Id>>,
    jobs: Pool,
    /// Where copies are made, set up with the first one.
    backings: OnceLock<Backings>,
}

impl<Id: Send + Sync + 'static> Materializer<Id> {
    /// Materialized files of at most `budget` bytes together (0: off).
    pub fn new(fs: Arc<ZarrFs>, budget: u64) -> Arc<Self> {
        Arc::new(Materializer {
            fs,
            budget,
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
        }
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
        let (file, id) = {
            let mut st = self.state.lock();
            st.tick += 1;
            let tick = st.tick;
            let node = st.inodes.entry(ino).or_default();
            node.opens = node.opens.saturating_add(1);
            node.last_use = tick;
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

    /// Whether `ino`, once read through, will be copied and served by the kernel.
    pub fn will_copy(&self, ino: u64) -> bool {
        self.enabled()
            && !matches!(
                self.state.lock().inodes.get(&ino).map(|n| &n.backing),
                Some(Backing::Failed)
            )
            && matches!(self.fs.array_file_size(ino), Some(size) if size > 0 && size <= self.budget)
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

    /// A read of `ino` reached its end: it has been read through.
    pub fn read_to_end(self: &Arc<Self>, ino: u64) {
        let wanted = self.enabled()
            && matches!(
                self.state.lock().inodes.get(&ino).map(|n| &n.backing),
                Some(Backing::None) | None
            );
        if wanted {
            self.request(ino);
        }
    }

    /// `user.zarrfs.materialized`: the state of `ino`'s backing file.
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
                backing: Backing::Building,
                ..
            }) => "building".into(),
            _ => "no".into(),
        }
    }

    /// Start materializing `ino` if it is an array file that fits the budget, making
    /// room by dropping the least recently opened files no passthrough open holds.
    fn request(self: &Arc<Self>, ino: u64) {
        let size = match self.fs.array_file_size(ino) {
            Some(size) if size > 0 && size <= self.budget => size,
            _ => return,
        };
        {
            let mut st = self.state.lock();
            match st.inodes.get(&ino).map(|n| &n.backing) {
                Some(Backing::None) | None => {}
                _ => return,
            }
            while st.used + size > self.budget {
                let victim = st
                    .inodes
                    .iter()
                    .filter(|(_, n)| {
                        matches!(n.backing, Backing::Ready { .. }) && n.passthrough_opens == 0
                    })
                    .min_by_key(|(_, n)| n.last_use)
                    .map(|(k, _)| *k);
                let Some(victim) = victim else {
                    return;
                };
                let Some(node) = st.inodes.get_mut(&victim) else {
                    return;
                };
                node.backing = Backing::None;
                let freed = std::mem::take(&mut node.size);
                st.used -= freed;
                log::debug!("materialize: dropped inode {victim} ({freed} bytes)");
            }
            st.used += size;
            let node = st.inodes.entry(ino).or_default();
            node.size = size;
            node.backing = Backing::Building;
        }
        let me = self.clone();
        self.jobs.run(move || {
            let built = me.build(ino, size);
            let mut st = me.state.lock();
            let Some(node) = st.inodes.get_mut(&ino) else {
                return;
            };
            match built {
                Ok(file) => {
                    log::info!("materialize: inode {ino} ({size} bytes) served by the kernel");
                    node.backing = Backing::Ready {
                        file: Arc::new(file),
                        id: None,
                    };
                }
                Err(e) => {
                    log::warn!("materialize: inode {ino}: {e}");
                    node.size = 0;
                    node.backing = Backing::Failed;
                    st.used -= size;
                }
            }
        });
    }

    /// A file holding the array file's bytes, read through the filesystem (and its cache).
    fn build(&self, ino: u64, size: u64) -> Result<File, String> {
        let file = self
            .backings
            .get_or_init(|| Backings::new(self.budget))
            .create()
            .map_err(|e| format!("backing file: {e}"))?;
        file.set_len(size)
            .map_err(|e| format!("backing file: {e}"))?;
        // An open of its own: its reads keep their own readahead.
        let fh = self.fs.open(ino).map_err(|e| e.to_string())?;
        let copied = self.copy(fh, &file, size);
        self.fs.release(fh);
        copied.map(|_| file)
    }

    /// Copy `size` bytes of open file `fh` into `file`.
    fn copy(&self, fh: u64, file: &File, size: u64) -> Result<(), String> {
        let mut buf = vec![0u8; BLOCK.min(size as usize)];
        let mut offset = 0u64;
        while offset < size {
            let n = self
                .fs
                .read_into(fh, offset, &mut buf)
                .map_err(|e| e.to_string())?;
            if n == 0 {
                return Err(format!("short read at {offset} of {size}"));
            }
            file.write_all_at(&buf[..n], offset)
                .map_err(|e| format!("backing file: {e}"))?;
            offset += n as u64;
        }
        Ok(())
    }
}
