//! The serving core both fronts call, free of fuser and HTTP types: how each open is read
//! (page cache or direct, see [`mode`]), the materialized copies hot arrays are served
//! from (see `materialize/`), and reads: answered inline when their bytes are all
//! decoded, else on a pool of read workers (see [`read`](Serving::read)). Lookups,
//! attributes, listings and xattrs run on a pool of their own, so that slow reads never
//! hold up `ls` or `stat`. A job that panics fails its request alone (see
//! [`crate::pool`]) and the pools keep serving.
//!
//! The front answers what needs its own types: a copy handed to the kernel is registered
//! by a function the front passes to [`Serving::open`] (`Id` is the kernel's handle of a
//! backing file), and a read's bytes go to the answer the front passes to
//! [`Serving::read`].

mod fault;
mod materialize;
pub mod mode;
mod read;
pub use read::Owned;
pub mod setup;

use std::fs::File;
use std::io;
use std::sync::Arc;

use crate::fs::{PerInode, ZarrFs};
use crate::pool::{FairPool, Pool};
use crate::Result;
use fault::Faults;
use materialize::{Materializer, Opened, PASSTHROUGH_FH};
use mode::IoPolicy;
pub use mode::{IoMode, OpenIo};

/// Threads answering lookups, attributes, listings and xattrs.
const META_THREADS: usize = 2;

/// Threads staging writes and committing them (a commit waits on its store): lookups and
/// reads never wait behind them.
const WRITE_THREADS: usize = 2;

/// Threads opening files for writing (an open may wait for another writer's close,
/// whose commit runs on the write threads).
const WRITE_OPEN_THREADS: usize = 4;

/// Read workers beyond the reads one file may have in flight: a file whose reads hang on
/// its store never holds up the reads of other files.
const SPARE_READ_THREADS: usize = 2;

/// How an open was answered.
pub enum Opening<Id> {
    /// Read through the front with handle `fh`, through the page cache or direct.
    Daemon { fh: u64, io: OpenIo },
    /// Read by the kernel from the backing file `id` (FUSE passthrough): the front
    /// answers with `fh` and reads never reach the daemon.
    Passthrough { fh: u64, id: Arc<Id> },
}

/// The serving core of one mount: the filesystem, its worker pools, its io decisions and
/// its materialized copies.
pub struct Serving<Id> {
    fs: Arc<ZarrFs>,
    io: IoPolicy,
    copies: Arc<Materializer<Id>>,
    reads: Arc<FairPool>,
    meta: Pool,
    writes: Pool,
    write_opens: Pool,
    faults: Faults,
}

impl<Id: Send + Sync + 'static> Serving<Id> {
    /// A core whose reads run on `threads` workers per file (plus spares), its opens read
    /// as `io` says. `materialize`: the budget of files served by the kernel (0: off).
    /// `rereads`: whether a reader asks the core again for bytes it read (the kernel's
    /// direct IO does; its page cache, and HTTP clients that keep what they fetched, do
    /// not): then, with no copies to serve them, the chunks of arrays read whole stay.
    pub fn new(
        fs: Arc<ZarrFs>,
        threads: usize,
        io: IoMode,
        materialize: u64,
        rereads: bool,
    ) -> Arc<Self> {
        // A copy is of one inode, and an inode of one reading of its array (a reading
        // after a change is another inode; a number goes to another reading only once
        // its copy is let go): copies are good under a refresh interval too.
        let copies = Materializer::new(fs.clone(), materialize, rereads);
        let keeper: Arc<dyn PerInode> = copies.clone();
        fs.keep_per_inode(Arc::downgrade(&keeper));
        Arc::new(Serving {
            copies,
            fs,
            io: IoPolicy::new(io),
            reads: FairPool::new(threads + SPARE_READ_THREADS, threads, "read"),
            meta: Pool::new(META_THREADS, "lookup"),
            writes: Pool::new(WRITE_THREADS, "write"),
            write_opens: Pool::new(WRITE_OPEN_THREADS, "write-open"),
            faults: Faults::from_env(),
        })
    }

    pub fn fs(&self) -> &Arc<ZarrFs> {
        &self.fs
    }

    /// How the mount's opens are read (`--io`).
    pub fn io_mode(&self) -> IoMode {
        self.io.mode()
    }

    /// Whether files may still be materialized (a budget, and not turned off).
    pub fn materializes(&self) -> bool {
        self.copies.enabled()
    }

    /// Materialize nothing from now on, saying why once (the kernel cannot take copies).
    pub fn stop_materializing(&self, why: &str) {
        self.copies.disable(why)
    }

    /// The state of `ino`'s materialized copy, in words (`user.zarrfs.materialized`).
    pub fn materialized(&self, ino: u64) -> String {
        self.copies.describe(ino)
    }

    /// Run `job` on the pool of lookups, attributes, listings and xattrs.
    pub fn meta(self: &Arc<Self>, job: impl FnOnce(&Self) + Send + 'static) {
        let me = self.clone();
        self.meta.run(move || job(&me));
    }

    /// Open `ino` for reading: served by the kernel from its materialized copy when one
    /// is complete (`register` hands a backing file to the kernel, once per copy), else
    /// through the front, read as the io policy decides. Each open must be followed by
    /// [`Serving::release`] with the handle it answered.
    pub fn open(
        &self,
        ino: u64,
        register: impl FnOnce(&File) -> io::Result<Id>,
    ) -> Result<Opening<Id>> {
        let fh = self.fs.open(ino)?;
        Ok(match self.copies.open(ino, register) {
            Opened::Passthrough(id) => {
                // The kernel reads the copy: the filesystem's handle is not needed.
                self.fs.release(fh);
                Opening::Passthrough {
                    fh: PASSTHROUGH_FH,
                    id,
                }
            }
            Opened::Daemon => {
                let copied = self.copies.will_copy(ino);
                let io = self.io.open(ino, copied, self.fs.tiled(fh));
                Opening::Daemon { fh, io }
            }
        })
    }

    /// The open of `ino` answered with handle `fh` was released (a writer's on the
    /// write pool: it commits what is left).
    pub fn release(self: &Arc<Self>, ino: u64, fh: u64) {
        self.copies.release(ino, fh);
        if fh == PASSTHROUGH_FH {
            return;
        }
        if self.fs.is_writer(fh) {
            let me = self.clone();
            return self.writes.run(move || {
                me.fs.release(fh);
                me.io.release(ino);
            });
        }
        self.fs.release(fh);
        self.io.release(ino);
    }

    /// Open `ino` for writing (see [`ZarrFs::open_write`]), on a pool of its own (it
    /// may wait for another writer of the array): read direct, so that every write and read
    /// of the handle reaches the daemon. `answer` gets the handle's number.
    pub fn open_write(
        self: &Arc<Self>,
        ino: u64,
        answer: impl FnOnce(Result<u64>) + Send + 'static,
    ) {
        let me = self.clone();
        self.write_opens.run(move || {
            let opened = me.fs.open_write(ino);
            if opened.is_ok() {
                me.io.open(ino, false, false);
            }
            answer(opened)
        });
    }

    /// Make file `name` in directory `parent` (see [`ZarrFs::create`]) on the pool of
    /// opens for writing; `answer` gets its inode, looked up, and the handle writing it.
    pub fn create(
        self: &Arc<Self>,
        parent: u64,
        name: String,
        answer: impl FnOnce(&ZarrFs, Result<(crate::fs::Lookup, u64)>) + Send + 'static,
    ) {
        let me = self.clone();
        self.write_opens.run(move || {
            let made = me.fs.create(parent, &name);
            if let Ok((found, _)) = &made {
                me.io.open(found.attr.ino, false, false);
            }
            answer(&me.fs, made)
        });
    }

    /// Stage `data` at `offset` of writer `fh`, on the write pool; `answer` gets the bytes
    /// taken.
    pub fn write(
        self: &Arc<Self>,
        fh: u64,
        offset: u64,
        data: Vec<u8>,
        answer: impl FnOnce(Result<usize>) + Send + 'static,
    ) {
        let me = self.clone();
        self.writes.run(move || {
            answer(me.fs.write(fh, offset, &data).map(|()| data.len()));
        });
    }

    /// Make array file `ino` `size` bytes (a `truncate`; `None`: only times change, which
    /// are the mount's), on the write pool; `answer` gets its attributes after and the
    /// inodes whose cached attributes, pages and names are stale now.
    pub fn resize(
        self: &Arc<Self>,
        ino: u64,
        size: Option<u64>,
        fh: Option<u64>,
        answer: impl FnOnce(&ZarrFs, Result<(crate::fs::Attr, Vec<u64>)>) + Send + 'static,
    ) {
        let me = self.clone();
        self.writes.run(move || {
            let fs = me.fs.as_ref();
            let result = (|| {
                let attr = fs.getattr(ino)?;
                match size {
                    // The node read again after its shape changed: the size it has now.
                    Some(size) if size != attr.size => {
                        let inodes = fs.set_size(ino, size, fh)?;
                        Ok((crate::fs::Attr { size, ..attr }, inodes))
                    }
                    _ => Ok((attr, Vec::new())),
                }
            })();
            answer(fs, result)
        });
    }

    /// Run `job` (a node made or removed) on the write pool.
    pub fn change_nodes(self: &Arc<Self>, job: impl FnOnce(&ZarrFs) + Send + 'static) {
        let me = self.clone();
        self.writes.run(move || job(&me.fs));
    }

    /// Commit what writer `fh` staged (a close or an `fsync`), on the write pool;
    /// `answer` gets the inodes whose cached attributes and pages are stale now.
    pub fn commit(
        self: &Arc<Self>,
        fh: u64,
        answer: impl FnOnce(Result<Vec<u64>>) + Send + 'static,
    ) {
        if !self.fs.is_writer(fh) {
            return answer(Ok(Vec::new()));
        }
        let me = self.clone();
        self.writes.run(move || answer(me.fs.commit(fh)));
    }

    /// The front forgot `nlookup` lookups of `ino`; once none is left, its copy goes too.
    pub fn forget(&self, ino: u64, nlookup: u64) {
        if self.fs.forget(ino, nlookup) {
            self.copies.forget(ino);
            self.io.forget(ino);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use super::*;
    use crate::fs::ROOT;
    use crate::read::view::Order;

    /// What a read through `s` answers (a direct one, else into the page cache).
    fn read_as(
        s: &Arc<Serving<()>>,
        ino: u64,
        fh: u64,
        offset: u64,
        size: usize,
        direct: bool,
    ) -> Result<Vec<u8>> {
        let (tx, rx) = mpsc::channel();
        s.read(ino, fh, offset, size, direct, move |r| {
            let _ = tx.send(r.map(<[u8]>::to_vec));
        });
        rx.recv().expect("every read is answered")
    }

    fn read(s: &Arc<Serving<()>>, ino: u64, fh: u64, offset: u64, size: usize) -> Result<Vec<u8>> {
        read_as(s, ino, fh, offset, size, true)
    }

    #[test]
    fn a_direct_read_into_a_bad_chunk_gives_the_good_bytes_and_the_file_opens_direct_after() {
        let dir = std::env::temp_dir().join(format!("zarrfs-io-bad-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        // Ten uint16 elements 0..10 in chunks of four; the second chunk cut short.
        let doc = serde_json::json!({
            "zarr_format": 3, "node_type": "array", "shape": [10], "data_type": "uint16",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4]}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "fill_value": 0, "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}]
        });
        let data: Vec<u8> = (0u16..10).flat_map(|v| v.to_le_bytes()).collect();
        crate::hierarchy::demo::v3_array(&dir, "a", doc, &data).unwrap();
        std::fs::write(dir.join("a/c/1"), [1u8, 2, 3]).unwrap();
        let fs = crate::fs::tests::fs_over(&dir, Order::C, false);
        let s = Serving::<()>::new(Arc::new(fs), 1, IoMode::Cache, 0, false);
        let no_backing = |_: &File| -> io::Result<()> { unreachable!("nothing is materialized") };
        let a = s.fs().lookup(ROOT, "a").unwrap().ino;
        let Opening::Daemon { fh, io } = s.open(a, no_backing).unwrap() else {
            panic!("passthrough with materializing off");
        };
        assert_eq!(io, OpenIo::Cache, "before any read failed");
        let eio = |r: Result<Vec<u8>>| r.map_err(|e| e.errno());
        // Into the page cache a short answer would be taken for the end of the file.
        assert_eq!(eio(read_as(&s, a, fh, 0, 20, false)), Err(libc::EIO));
        assert_eq!(
            eio(read_as(&s, a, fh, 2, 20, true)),
            Ok(data[2..8].to_vec())
        );
        assert_eq!(eio(read(&s, a, fh, 8, 4)), Err(libc::EIO), "the bad bytes");
        assert_eq!(eio(read(&s, a, fh, 16, 20)), Ok(data[16..].to_vec()));
        s.release(a, fh);
        let Opening::Daemon { fh, io } = s.open(a, no_backing).unwrap() else {
            panic!("passthrough with materializing off");
        };
        assert_eq!(io, OpenIo::Direct, "after a read failed, with --io cache");
        s.release(a, fh);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn opens_get_the_io_decision_and_reads_answer_what_the_filesystem_reads() {
        let (dir, fs) = crate::fs::tests::demo_fs(Order::C, false);
        let s = Serving::<()>::new(Arc::new(fs), 1, IoMode::Auto, 0, false);
        assert!(!s.materializes());
        let no_backing = |_: &File| -> io::Result<()> { unreachable!("nothing is materialized") };
        let temperature = s.fs().lookup(ROOT, "temperature").unwrap().ino;
        let sidecar = s.fs().lookup(ROOT, ".temperature.json").unwrap().ino;
        let Opening::Daemon { fh, io } = s.open(temperature, no_backing).unwrap() else {
            panic!("passthrough with materializing off");
        };
        assert_eq!(io, OpenIo::Cache, "a lone file");
        let Opening::Daemon { fh: other, io } = s.open(sidecar, no_backing).unwrap() else {
            panic!("passthrough with materializing off");
        };
        assert_eq!(io, OpenIo::Direct, "while another file is read");
        // Twice: a read of decoded bytes is answered inline, the first on a worker.
        for _ in 0..2 {
            assert_eq!(
                read(&s, temperature, fh, 8, 100).unwrap(),
                s.fs().read(fh, 8, 100).unwrap()
            );
        }
        assert!(!read(&s, sidecar, other, 0, 8).unwrap().is_empty());
        assert!(read(&s, temperature, 999, 0, 8).is_err(), "not open");
        assert_eq!(s.materialized(temperature), "off");
        s.release(temperature, fh);
        s.release(sidecar, other);
        assert_eq!(s.fs().open_count(), 0);
        let _ = std::fs::remove_dir_all(dir);
    }

    /// Read `ino` front to back through `s`, then release it: its copy completes.
    fn read_through(s: &Arc<Serving<()>>, ino: u64) {
        let Opening::Daemon { fh, .. } = s.open(ino, |_| Ok(())).unwrap() else {
            panic!("passthrough before the copy is made");
        };
        let size = s.fs().getattr(ino).unwrap().size;
        for offset in (0..size).step_by(1 << 18) {
            assert!(!read(s, ino, fh, offset, 1 << 18).unwrap().is_empty());
        }
        s.release(ino, fh);
        let ready = || s.materialized(ino).starts_with("ready");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !ready() {
            assert!(
                std::time::Instant::now() < deadline,
                "{}",
                s.materialized(ino)
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    #[test]
    fn a_number_goes_to_a_new_reading_only_once_its_copy_is_let_go() {
        // Every look reads the store again.
        let refresh = Some(std::time::Duration::ZERO);
        let (dir, fs) = crate::fs::tests::demo_refreshing(refresh);
        let s = Serving::<()>::new(Arc::new(fs), 1, IoMode::Direct, 64 << 20, true);
        let ino = s.fs().lookup(ROOT, "temperature").unwrap().ino;
        read_through(&s, ino);
        let Opening::Passthrough { fh, .. } = s.open(ino, |_| Ok(())).unwrap() else {
            panic!("the copy is complete: {}", s.materialized(ino));
        };
        // Read again while the kernel reads the copy: another inode.
        let next = s.fs().lookup_entry(ROOT, "temperature").unwrap();
        assert_ne!(next.attr.ino, ino);
        assert!(!next.renewed);
        assert!(s.materialized(ino).starts_with("ready"));
        s.release(ino, fh);
        s.forget(ino, 1);
        assert_eq!(s.materialized(ino), "no", "forgotten, its copy goes");
        // With nothing open, a reading again renews the number and lets its copy go: the
        // next open is read through the daemon, from the new reading.
        read_through(&s, next.attr.ino);
        let renewed = s.fs().lookup_entry(ROOT, "temperature").unwrap();
        assert_eq!((renewed.attr.ino, renewed.renewed), (next.attr.ino, true));
        assert_eq!(s.materialized(next.attr.ino), "no");
        let Opening::Daemon { fh, .. } = s.open(next.attr.ino, |_| Ok(())).unwrap() else {
            panic!("a copy of the older reading served");
        };
        s.release(next.attr.ino, fh);
        let _ = std::fs::remove_dir_all(dir);
    }
}
