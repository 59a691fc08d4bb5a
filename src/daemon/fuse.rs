//! The thin fuser adapter: each handler calls the filesystem core, replies, or maps the
//! error to an errno in one place (logging one line). Requests run on worker pools, not
//! on the thread that talks to the kernel: reads on one, lookups, attributes, listings and
//! xattrs on another, so that slow reads never hold up `ls` or `stat`. The exception is a
//! read whose bytes are all decoded in memory: a bounded copy, answered at once. A
//! request that panics answers EIO (see [`crate::pool`]) and the mount keeps serving.

use std::ffi::OsStr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::fault::Faults;
use crate::daemon::io_mode::{IoMode, IoPolicy, OpenIo};
use crate::daemon::materialize::{Materializer, Opened, PASSTHROUGH_FH};
use crate::error::Error;
use crate::fs::Now;
use crate::fs::{Attr, FileKind, ZarrFs};
use crate::pool::{caught, FairPool, Pool};
use fuser::{
    BackingId, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo,
    InitFlags, KernelConfig, LockOwner, OpenAccMode, OpenFlags, RenameFlags, ReplyAttr,
    ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs,
    ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};

/// The extended attribute whose `setxattr` reads a node and all below it from the store
/// again (`zarrfs refresh PATH`).
pub const REFRESH_XATTR: &str = "user.zarrfs.refresh";

/// Threads answering lookups, attributes, listings and xattrs.
const META_THREADS: usize = 2;

/// Whether a file is served by the kernel from a backing file (see [`crate::daemon::materialize`]).
const MATERIALIZED_XATTR: &str = "user.zarrfs.materialized";

/// Requests the kernel keeps in flight (background reads, readahead) before it throttles.
const MAX_BACKGROUND: u16 = 64;

/// Read workers beyond the reads one file may have in flight: a file whose reads hang on
/// its store never holds up the reads of other files.
const SPARE_READ_THREADS: usize = 2;

thread_local! {
    static READ_BUFFER: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The FUSE side of a mount.
pub struct FuseAdapter {
    fs: Arc<ZarrFs>,
    io: Arc<IoPolicy>,
    materializer: Arc<Materializer<BackingId>>,
    reads: Arc<FairPool>,
    meta: Pool,
    owner: Owner,
    faults: Faults,
    /// How the kernel is told to drop what it caches of a refreshed node (set once the
    /// session is made).
    notifier: Arc<std::sync::OnceLock<fuser::Notifier>>,
    /// Refreshes answered whose names the kernel has not dropped yet.
    dropping: Arc<Dropping>,
    /// Called once when the session ends, before fuser tears the mount down.
    on_end: Option<Box<dyn FnOnce() + Send + Sync>>,
}

/// Refreshes whose names are still being dropped from the kernel's cache (after the
/// refresh was answered: the kernel holds the directory's lock until then). A read of
/// `user.zarrfs.refresh` waits for them, so that `zarrfs refresh` returns once a path
/// looked up next finds what the store holds now.
#[derive(Default)]
struct Dropping {
    count: parking_lot::Mutex<u64>,
    done: parking_lot::Condvar,
}

impl Dropping {
    /// Longest wait for the names to be dropped.
    const WAIT: Duration = Duration::from_secs(30);

    fn start(&self) {
        *self.count.lock() += 1;
    }

    fn end(&self) {
        let mut count = self.count.lock();
        *count = count.saturating_sub(1);
        self.done.notify_all();
    }

    /// Wait until no names are being dropped (at most [`Dropping::WAIT`]).
    fn wait(&self) {
        let deadline = std::time::Instant::now() + Self::WAIT;
        let mut count = self.count.lock();
        while *count > 0 {
            if self.done.wait_until(&mut count, deadline).timed_out() {
                log::warn!("refresh: names still being dropped after {:?}", Self::WAIT);
                return;
            }
        }
    }
}

/// Have the kernel drop the attributes and pages it holds of `inodes` (refreshed).
pub fn drop_inodes(n: &fuser::Notifier, inodes: &[u64]) {
    for ino in inodes {
        let _ = n.inval_inode(INodeNo(*ino), 0, 0);
    }
}

/// Have the kernel drop its entries of `names` (parent and name; refreshed), so that the
/// next use of each looks it up again.
pub fn drop_names(n: &fuser::Notifier, names: &[(u64, String)]) {
    for (parent, name) in names {
        let _ = n.inval_entry(INodeNo(*parent), OsStr::new(name));
    }
}

/// Who owns every file, and when they were made.
#[derive(Clone, Copy)]
struct Owner {
    uid: u32,
    gid: u32,
    mounted_at: SystemTime,
}

/// Log an error once and turn it into its errno.
fn errno(op: &str, err: &Error) -> Errno {
    match err {
        Error::NotFound(_) | Error::NoAttribute => log::debug!("{op}: {err}"),
        _ => log::warn!("{op}: {err}"),
    }
    Errno::from_i32(err.errno())
}

/// Reply with the value or the mapped errno.
macro_rules! reply {
    ($reply:expr, $op:expr, $result:expr, |$v:ident| $ok:expr) => {
        match $result {
            Ok($v) => $ok,
            Err(e) => $reply.error(errno($op, &e)),
        }
    };
}

/// The xattr size protocol: the length when asked with size 0, `ERANGE` when the
/// caller's buffer is too small, else the bytes.
fn xattr_reply(reply: ReplyXattr, size: u32, value: &[u8]) {
    if size == 0 {
        reply.size(value.len() as u32)
    } else if value.len() > size as usize {
        reply.error(Errno::ERANGE)
    } else {
        reply.data(value)
    }
}

/// Handlers for every call that would change the store: each answers `EROFS`.
macro_rules! read_only {
    ($(fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $reply:ty;)*) => {
        $(
            fn $name(&self, _req: &Request, $($arg: $ty,)* reply: $reply) {
                reply.error(Errno::EROFS)
            }
        )*
    };
}

/// Handlers that have nothing to do on a read-only mount: each answers success.
macro_rules! answer_ok {
    ($(fn $name:ident($($arg:ident: $ty:ty),* $(,)?);)*) => {
        $(
            fn $name(&self, _req: &Request, $($arg: $ty,)* reply: ReplyEmpty) {
                reply.ok()
            }
        )*
    };
}

impl FuseAdapter {
    /// An adapter whose reads run on `threads` workers per file (plus spares).
    /// `materialize`: the budget of files served by the kernel (0: off).
    pub fn new(fs: Arc<ZarrFs>, threads: usize, io: IoMode, materialize: u64) -> FuseAdapter {
        // Only direct-IO reads reach the daemon again on a re-read (the page cache
        // answers the others): with no copies to serve them, their chunks stay.
        // A copy is of one inode, and an inode of one reading of its array (a reading
        // after a change is another inode): copies are good under a refresh interval too.
        let materializer = Materializer::new(fs.clone(), materialize, io == IoMode::Direct);
        FuseAdapter {
            materializer,
            fs,
            io: Arc::new(IoPolicy::new(io)),
            reads: FairPool::new(threads + SPARE_READ_THREADS, threads, "read"),
            meta: Pool::new(META_THREADS, "lookup"),
            owner: Owner {
                // SAFETY: getuid and getgid cannot fail.
                uid: unsafe { libc::getuid() },
                gid: unsafe { libc::getgid() },
                mounted_at: SystemTime::now(),
            },
            faults: Faults::from_env(),
            notifier: Arc::new(std::sync::OnceLock::new()),
            dropping: Arc::default(),
            on_end: None,
        }
    }

    /// Where the session's notifier goes once the session is made.
    pub fn notifier_slot(&self) -> Arc<std::sync::OnceLock<fuser::Notifier>> {
        self.notifier.clone()
    }

    /// Run `end` when the session has ended (all request loops returned), before the
    /// session's own teardown.
    pub fn on_end(mut self, end: impl FnOnce() + Send + Sync + 'static) -> FuseAdapter {
        self.on_end = Some(Box::new(end));
        self
    }

    /// Run `job` with the filesystem on the metadata pool.
    fn meta(&self, job: impl FnOnce(&ZarrFs, Owner) + Send + 'static) {
        let (fs, owner) = (self.fs.clone(), self.owner);
        self.meta.run(move || job(&fs, owner));
    }
}

impl Owner {
    fn attr(&self, a: &Attr) -> FileAttr {
        FileAttr {
            ino: INodeNo(a.ino),
            size: a.size,
            blocks: a.size.div_ceil(512),
            atime: self.mounted_at,
            mtime: self.mounted_at,
            ctime: self.mounted_at,
            crtime: self.mounted_at,
            kind: match a.kind {
                FileKind::Directory => FileType::Directory,
                FileKind::File => FileType::RegularFile,
            },
            perm: a.perm,
            nlink: a.nlink,
            uid: self.uid,
            gid: self.gid,
            rdev: 0,
            blksize: 1 << 20,
            flags: 0,
        }
    }
}

impl Filesystem for FuseAdapter {
    fn destroy(&mut self) {
        if let Some(end) = self.on_end.take() {
            end();
        }
    }

    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let _ = config.set_max_readahead(4 << 20);
        // Many reads in flight for sequential readers, and the kernel's async readahead
        // never throttled before the queue is full.
        let _ = config.set_max_background(MAX_BACKGROUND);
        let _ = config.set_congestion_threshold(MAX_BACKGROUND);
        if self.materializer.enabled() {
            // SAFETY: geteuid cannot fail.
            if unsafe { libc::geteuid() } != 0 {
                self.materializer
                    .disable("backing files need root (CAP_SYS_ADMIN)");
            } else if config
                .add_capabilities(InitFlags::FUSE_PASSTHROUGH)
                .is_err()
            {
                self.materializer
                    .disable("the kernel offers no FUSE passthrough");
            } else {
                // Backing files on a plain filesystem (ext4, tmpfs) under this one.
                let _ = config.set_max_stack_depth(1);
            }
        }
        if self.io.mode() != IoMode::Cache {
            // mmap of a direct-IO file goes through the page cache (kernel 6.6 and later).
            if let Err(missing) = config.add_capabilities(InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP) {
                log::warn!("direct IO: the kernel lacks {missing:?}; mmap of array files fails");
            }
        }
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let name = name.to_string_lossy().into_owned();
        self.meta(move |fs, owner| {
            reply!(reply, "lookup", fs.lookup(parent.0, &name), |a| reply
                .entry(&fs.attr_ttl(), &owner.attr(&a), Generation(0)))
        })
    }

    // fuser's batch_forget calls this once per inode.
    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        if self.fs.forget(ino.0, nlookup) {
            self.materializer.forget(ino.0);
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        self.meta(move |fs, owner| {
            reply!(reply, "getattr", fs.getattr(ino.0), |a| reply
                .attr(&fs.attr_ttl(), &owner.attr(&a)))
        })
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        if flags.acc_mode() != OpenAccMode::O_RDONLY || flags.0 & libc::O_TRUNC != 0 {
            return reply.error(Errno::EROFS);
        }
        let (materializer, io) = (self.materializer.clone(), self.io.clone());
        self.meta(move |fs, _| {
            reply!(reply, "open", fs.open(ino.0), |fh| {
                match materializer.open(ino.0, |file| reply.open_backing(file)) {
                    Opened::Passthrough(id) => {
                        // The kernel reads the copy: the daemon's handle is not needed.
                        fs.release(fh);
                        reply.opened_passthrough(
                            FileHandle(PASSTHROUGH_FH),
                            FopenFlags::empty(),
                            &id,
                        )
                    }
                    Opened::Daemon => {
                        let copied = materializer.will_copy(ino.0);
                        let flags = match io.open(ino.0, copied, fs.tiled(fh)) {
                            OpenIo::Cache => FopenFlags::FOPEN_KEEP_CACHE,
                            OpenIo::Direct => FopenFlags::FOPEN_DIRECT_IO,
                        };
                        reply.opened(FileHandle(fh), flags)
                    }
                }
            })
        })
    }

    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.materializer.release(ino.0, fh.0);
        if fh.0 != PASSTHROUGH_FH {
            self.fs.release(fh.0);
            self.io.release(ino.0);
        }
        reply.ok()
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let (fs, materializer) = (self.fs.clone(), self.materializer.clone());
        let (ino, fh) = (ino.0, fh.0);
        // What a reader was given is copied into the array's materialized copy.
        let served = move |fs: &ZarrFs, bytes: &[u8]| {
            if materializer.enabled() {
                materializer.fill(ino, offset, bytes);
                if fs.reaches_end(fh, offset, bytes.len()) {
                    materializer.read_to_end(ino);
                }
            }
        };
        let copies = self.materializer.clone();
        // A read whose units are all decoded is answered here, on the thread that took it
        // from the kernel: a bounded copy (or none), with no store I/O and no decode, so
        // it holds up other requests only briefly and skips the hand-off to a worker.
        // Inside the same panic guard as the pools: a bug fails this read alone (the
        // reply, dropped unanswered, sends EIO) and the request loop goes on.
        let faults = self.faults;
        let now = caught("read", || {
            READ_BUFFER.with_borrow_mut(|buf| {
                faults.inline_read(offset);
                buf.resize(buf.len().max(size as usize), 0);
                let buf = &mut buf[..size as usize];
                // Bytes already in the array's copy are not decoded again.
                if let Some(n) = copies.read_copy(ino, offset, buf) {
                    reply.data(&buf[..n]);
                    return None;
                }
                match fs.read_now(fh, offset, buf) {
                    Ok(Now::InPlace(slice)) => {
                        served(&fs, slice.bytes());
                        reply.data(slice.bytes());
                        None
                    }
                    Ok(Now::Copied(n)) => {
                        served(&fs, &buf[..n]);
                        reply.data(&buf[..n]);
                        None
                    }
                    Ok(Now::Later) => Some(reply),
                    Err(e) => {
                        reply.error(errno("read", &e));
                        None
                    }
                }
            })
        });
        let Some(Some(reply)) = now else {
            return;
        };
        self.reads.run(ino, move || {
            let served = |bytes: &[u8]| served(&fs, bytes);
            // A range inside one cached unit goes out as it is, without a copy.
            match fs.read_in_place(fh, offset, size as usize) {
                Ok(Some(slice)) => {
                    served(slice.bytes());
                    return reply.data(slice.bytes());
                }
                Ok(None) => {}
                Err(e) => return reply.error(errno("read", &e)),
            }
            // Each worker keeps one reply buffer: no allocation per request.
            READ_BUFFER.with_borrow_mut(|buf| {
                buf.resize(buf.len().max(size as usize), 0);
                let buf = &mut buf[..size as usize];
                let result = fs.read_into(fh, offset, buf);
                reply!(reply, "read", result, |n| {
                    served(&buf[..n]);
                    reply.data(&buf[..n])
                })
            })
        });
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        reply: ReplyDirectory,
    ) {
        self.meta(move |fs, _| readdir_reply(fs, ino.0, offset, reply))
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        let name = name.to_string_lossy().into_owned();
        if name == MATERIALIZED_XATTR {
            return xattr_reply(reply, size, self.materializer.describe(ino.0).as_bytes());
        }
        if name == REFRESH_XATTR {
            // Answered once the last refresh's names are dropped (`zarrfs refresh`
            // reads it after setting it).
            let dropping = self.dropping.clone();
            return self.meta(move |_, _| {
                dropping.wait();
                xattr_reply(reply, size, b"1")
            });
        }
        self.meta(move |fs, _| {
            reply!(reply, "getxattr", fs.getxattr(ino.0, &name), |value| {
                xattr_reply(reply, size, &value)
            })
        })
    }

    fn setxattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        name: &OsStr,
        _value: &[u8],
        _flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        if name != REFRESH_XATTR {
            return reply.error(Errno::EROFS);
        }
        let (notifier, dropping) = (self.notifier.clone(), self.dropping.clone());
        self.meta(move |fs, _| {
            reply!(reply, "refresh", fs.refresh(ino.0), |inodes| {
                // The kernel drops the attributes and pages it holds of each, so that
                // the next stat and open ask again.
                if let Some(n) = notifier.get() {
                    drop_inodes(n, &inodes);
                }
                reply.ok();
                // Names are dropped after the reply: the kernel holds the directory's
                // lock while the setxattr is answered.
                if let Some(n) = notifier.get().cloned() {
                    let names = fs.names_of(&inodes);
                    dropping.start();
                    std::thread::spawn(move || {
                        drop_names(&n, &names);
                        dropping.end();
                    });
                }
            })
        })
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        self.meta(move |fs, _| {
            reply!(reply, "listxattr", fs.xattrs(ino.0), |attrs| {
                let mut names = Vec::new();
                for (name, _) in attrs {
                    names.extend_from_slice(name.as_bytes());
                    names.push(0);
                }
                xattr_reply(reply, size, &names)
            })
        })
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        reply.statfs(0, 0, 0, 0, 0, 4096, 255, 4096);
    }

    // Nothing is ever written, so there is nothing to flush or sync; the kernel checks
    // permissions itself (and answers EROFS to writes on this read-only mount).
    answer_ok! {
        fn flush(_ino: INodeNo, _fh: FileHandle, _lock_owner: LockOwner);
        fn fsync(_ino: INodeNo, _fh: FileHandle, _datasync: bool);
        fn fsyncdir(_ino: INodeNo, _fh: FileHandle, _datasync: bool);
        fn access(_ino: INodeNo, _mask: fuser::AccessFlags);
    }

    fn ioctl(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: fuser::IoctlFlags,
        _cmd: u32,
        _in_data: &[u8],
        _out_size: u32,
        reply: fuser::ReplyIoctl,
    ) {
        // Array files are not terminals or devices (isatty asks this way).
        reply.error(Errno::ENOTTY)
    }

    fn lseek(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _offset: i64,
        _whence: i32,
        reply: fuser::ReplyLseek,
    ) {
        // SEEK_DATA / SEEK_HOLE: every byte is data; the kernel falls back to its own.
        reply.error(Errno::ENOSYS)
    }

    read_only! {
        fn setattr(
            _ino: INodeNo, _mode: Option<u32>, _uid: Option<u32>, _gid: Option<u32>,
            _size: Option<u64>, _atime: Option<TimeOrNow>, _mtime: Option<TimeOrNow>,
            _ctime: Option<SystemTime>, _fh: Option<FileHandle>, _crtime: Option<SystemTime>,
            _chgtime: Option<SystemTime>, _bkuptime: Option<SystemTime>,
            _flags: Option<fuser::BsdFileFlags>
        ) -> ReplyAttr;
        fn mknod(_parent: INodeNo, _name: &OsStr, _mode: u32, _umask: u32, _rdev: u32) -> ReplyEntry;
        fn mkdir(_parent: INodeNo, _name: &OsStr, _mode: u32, _umask: u32) -> ReplyEntry;
        fn unlink(_parent: INodeNo, _name: &OsStr) -> ReplyEmpty;
        fn rmdir(_parent: INodeNo, _name: &OsStr) -> ReplyEmpty;
        fn symlink(_parent: INodeNo, _name: &OsStr, _link: &std::path::Path) -> ReplyEntry;
        fn rename(
            _parent: INodeNo, _name: &OsStr, _newparent: INodeNo, _newname: &OsStr,
            _flags: RenameFlags
        ) -> ReplyEmpty;
        fn link(_ino: INodeNo, _newparent: INodeNo, _newname: &OsStr) -> ReplyEntry;
        fn write(
            _ino: INodeNo, _fh: FileHandle, _offset: u64, _data: &[u8], _write_flags: WriteFlags,
            _flags: OpenFlags, _lock_owner: Option<LockOwner>
        ) -> ReplyWrite;
        fn create(_parent: INodeNo, _name: &OsStr, _mode: u32, _umask: u32, _flags: i32) -> ReplyCreate;
        fn removexattr(_ino: INodeNo, _name: &OsStr) -> ReplyEmpty;
        fn fallocate(
            _ino: INodeNo, _fh: FileHandle, _offset: u64, _length: u64, _mode: i32
        ) -> ReplyEmpty;
        fn copy_file_range(
            _ino_in: INodeNo, _fh_in: FileHandle, _offset_in: u64, _ino_out: INodeNo,
            _fh_out: FileHandle, _offset_out: u64, _len: u64,
            _flags: fuser::CopyFileRangeFlags
        ) -> ReplyWrite;
    }
}

/// Answer a directory listing from `offset` on: `.`, `..`, then the entries.
fn readdir_reply(fs: &ZarrFs, ino: u64, offset: u64, mut reply: ReplyDirectory) {
    let (entries, parent) = match (fs.readdir(ino), fs.parent(ino)) {
        (Ok(e), Ok(p)) => (e, p),
        (Err(e), _) | (_, Err(e)) => return reply.error(errno("readdir", &e)),
    };
    let dots = [
        (ino, FileKind::Directory, "."),
        (parent, FileKind::Directory, ".."),
    ];
    let listed = entries.iter().map(|e| (e.ino, e.kind, e.name.as_str()));
    let all = dots.into_iter().chain(listed);
    for (i, (child, kind, name)) in all.enumerate().skip(offset as usize) {
        let kind = match kind {
            FileKind::Directory => FileType::Directory,
            FileKind::File => FileType::RegularFile,
        };
        if reply.add(INodeNo(child), (i + 1) as u64, kind, name) {
            break;
        }
    }
    reply.ok();
}
