//! How each open of a file is read: through the kernel page cache, or straight into the
//! reader's buffer (direct IO, one copy fewer, readahead in the daemon). `auto` decides at
//! open time from what the daemon can tell then:
//! - a file whose bytes the page cache may already hold: the page cache;
//! - a file opened while other files of the mount are being read: direct, since
//!   concurrent cold streams through the page cache spend most of their time in the
//!   kernel copying into page-cache pages that are read much later;
//! - a lone file that will be materialized once read through (see
//!   [`super::materialize`]): direct, since re-reads will come from that copy;
//! - a tiled file (an OME-TIFF pyramid), read a tile at a time: direct, since the
//!   kernel's readahead past a tile would read the tiles after it, of other levels too,
//!   decoding chunks nobody asked for;
//! - any other lone file: the page cache, so that re-reads run at memory speed.
//!
//! In every mode, a file a read of which has failed (a corrupt chunk, a refused or missing
//! target) is opened direct from then on. The kernel fills its page cache a page, or a
//! readahead window, at a time, and one request that spans good bytes and bad ones fails
//! whole, so through the page cache the good bytes beside a bad chunk would be lost too.
//! Direct, each read reaches the daemon as the reader asked it, and one that runs from good
//! bytes into bad ones is answered with its good bytes (see [`super::Serving::read`]):
//! only the bad chunk's own bytes fail, as a disk's bad sector does.

use std::collections::{HashMap, HashSet};

use parking_lot::Mutex;

/// How reads of a mount's files reach the daemon (`--io`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IoMode {
    /// Per open, as described above.
    #[default]
    Auto,
    /// Every open through the kernel page cache (kept between opens), but that of a file
    /// a read of which failed.
    Cache,
    /// Every open direct. `mmap` still goes through the page cache.
    Direct,
}

impl std::str::FromStr for IoMode {
    type Err = String;

    fn from_str(s: &str) -> Result<IoMode, String> {
        match s {
            "auto" => Ok(IoMode::Auto),
            "cache" => Ok(IoMode::Cache),
            "direct" => Ok(IoMode::Direct),
            other => Err(format!("unknown io mode {other:?}: auto, cache or direct")),
        }
    }
}

/// How one open is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenIo {
    Cache,
    Direct,
}

#[derive(Default)]
struct Opens {
    /// Live opens read through the daemon, per inode.
    live: HashMap<u64, u32>,
    /// Inodes opened through the page cache at least once: it may hold their bytes.
    cached: HashSet<u64>,
    /// Inodes a read of which failed: opened direct.
    failed: HashSet<u64>,
}

/// The choice for each open of one mount.
pub struct IoPolicy {
    mode: IoMode,
    opens: Mutex<Opens>,
}

impl IoPolicy {
    pub fn new(mode: IoMode) -> IoPolicy {
        IoPolicy {
            mode,
            opens: Mutex::new(Opens::default()),
        }
    }

    pub fn mode(&self) -> IoMode {
        self.mode
    }

    /// An open of `ino` read through the daemon (`copied`: re-reads will be served from
    /// a materialized copy; `tiled`: a file read a tile at a time): how it is read. Each
    /// open must be followed by [`IoPolicy::release`].
    pub fn open(&self, ino: u64, copied: bool, tiled: bool) -> OpenIo {
        let mut opens = self.opens.lock();
        *opens.live.entry(ino).or_default() += 1;
        let io = match self.mode {
            _ if opens.failed.contains(&ino) => OpenIo::Direct,
            IoMode::Cache => OpenIo::Cache,
            IoMode::Direct => OpenIo::Direct,
            IoMode::Auto if tiled => OpenIo::Direct,
            IoMode::Auto => {
                let others = opens.live.keys().any(|&other| other != ino);
                if opens.cached.contains(&ino) || !(others || copied) {
                    OpenIo::Cache
                } else {
                    OpenIo::Direct
                }
            }
        };
        if io == OpenIo::Cache && self.mode == IoMode::Auto {
            opens.cached.insert(ino);
        }
        io
    }

    /// A read of `ino` failed: its later opens are direct, so that the bytes beside the
    /// ones that failed stay readable.
    pub fn failed(&self, ino: u64) {
        if self.opens.lock().failed.insert(ino) {
            log::info!("inode {ino}: a read failed; its opens are direct from now on");
        }
    }

    /// The front forgot `ino`: it is not opened again.
    pub fn forget(&self, ino: u64) {
        let mut opens = self.opens.lock();
        opens.cached.remove(&ino);
        opens.failed.remove(&ino);
    }

    /// An open of `ino` read through the daemon was released.
    pub fn release(&self, ino: u64) {
        let mut opens = self.opens.lock();
        if let Some(n) = opens.live.get_mut(&ino) {
            *n -= 1;
            if *n == 0 {
                opens.live.remove(&ino);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_reads_a_lone_file_through_the_page_cache_and_concurrent_ones_direct() {
        let p = IoPolicy::new(IoMode::Auto);
        assert_eq!(p.open(1, false, false), OpenIo::Cache, "alone");
        assert_eq!(
            p.open(1, false, false),
            OpenIo::Cache,
            "the same file again"
        );
        assert_eq!(p.open(2, false, false), OpenIo::Direct, "while 1 is read");
        assert_eq!(
            p.open(3, false, false),
            OpenIo::Direct,
            "while 1 and 2 are read"
        );
        p.release(1);
        p.release(1);
        p.release(2);
        p.release(3);
        // Opened again with nothing else open: the page cache.
        assert_eq!(p.open(2, false, false), OpenIo::Cache, "alone again");
        // 1 went through the page cache before: its pages may be warm.
        assert_eq!(
            p.open(1, false, false),
            OpenIo::Cache,
            "cached before, while 2 is read"
        );
        assert_eq!(
            p.open(3, false, false),
            OpenIo::Direct,
            "while 1 and 2 are read"
        );
        p.release(3);
        p.release(3);
        assert_eq!(
            p.open(4, false, false),
            OpenIo::Direct,
            "1 and 2 still open"
        );
        // A lone file that will be materialized is direct; one in the page cache is not.
        let p = IoPolicy::new(IoMode::Auto);
        assert_eq!(
            p.open(5, true, false),
            OpenIo::Direct,
            "re-reads from the copy"
        );
        p.release(5);
        assert_eq!(p.open(6, false, false), OpenIo::Cache);
        p.release(6);
        assert_eq!(
            p.open(6, true, false),
            OpenIo::Cache,
            "its pages may be cached"
        );
        p.release(6);
        assert_eq!(p.open(7, false, true), OpenIo::Direct, "tiled, alone");
        p.release(7);
        assert_eq!(p.open(7, false, true), OpenIo::Direct, "tiled, again");
    }

    #[test]
    fn a_file_whose_read_failed_opens_direct_in_every_mode() {
        for mode in [IoMode::Auto, IoMode::Cache, IoMode::Direct] {
            let p = IoPolicy::new(mode);
            let before = p.open(1, false, false);
            p.release(1);
            p.failed(1);
            assert_eq!(p.open(1, false, false), OpenIo::Direct, "{mode:?}");
            p.release(1);
            assert_eq!(p.open(2, false, false), before, "{mode:?}: another file");
            p.release(2);
            // A forgotten inode is not opened again; its entry goes.
            p.forget(1);
            assert!(p.opens.lock().failed.is_empty(), "{mode:?}");
        }
    }

    #[test]
    fn fixed_modes_ignore_other_opens() {
        for (mode, io) in [
            (IoMode::Cache, OpenIo::Cache),
            (IoMode::Direct, OpenIo::Direct),
        ] {
            let p = IoPolicy::new(mode);
            assert_eq!(p.open(1, false, false), io);
            assert_eq!(p.open(2, true, false), io);
            assert_eq!(p.open(3, false, true), io);
            p.release(3);
            p.release(1);
            p.release(2);
            assert_eq!(p.open(2, false, false), io);
        }
        assert_eq!("auto".parse(), Ok(IoMode::Auto));
        assert!("fast".parse::<IoMode>().is_err());
    }
}
