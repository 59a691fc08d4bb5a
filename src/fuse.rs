//! The thin fuser adapter: each handler calls the filesystem core, replies, or maps the
//! error to an errno in one place (logging one line). Requests run on worker pools, never
//! on the thread that talks to the kernel: reads on one, lookups, attributes, listings and
//! xattrs on another, so that slow reads never hold up `ls` or `stat`. A request that
//! panics answers EIO (see [`crate::pool`]) and the mount keeps serving.

use std::ffi::OsStr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::error::Error;
use crate::fs::{Attr, FileKind, ZarrFs};
use crate::pool::{FairPool, Pool};
use fuser::consts::FOPEN_KEEP_CACHE;
use fuser::{
    FileAttr, FileType, Filesystem, KernelConfig, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr,
    Request, TimeOrNow,
};

/// Entries and attributes never change while mounted.
const TTL: Duration = Duration::from_secs(24 * 3600);

type Job = Box<dyn FnOnce() + Send>;

/// Threads answering lookups, attributes, listings and xattrs.
const META_THREADS: usize = 2;

/// Read workers beyond the reads one file may have in flight: a file whose reads hang on
/// its store never holds up the reads of other files.
const SPARE_READ_THREADS: usize = 2;

thread_local! {
    static READ_BUFFER: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The FUSE side of a mount.
pub struct FuseAdapter {
    fs: Arc<ZarrFs>,
    reads: Arc<FairPool>,
    meta: Pool,
    /// Run once, on the first request after the kernel has taken the INIT reply.
    after_init: Option<Job>,
    owner: Owner,
}

/// Who owns every file, and when they were made.
#[derive(Clone, Copy)]
struct Owner {
    uid: u32,
    gid: u32,
    mounted_at: SystemTime,
}

/// Log an error once and turn it into its errno.
fn errno(op: &str, err: &Error) -> i32 {
    match err {
        Error::NotFound(_) | Error::NoAttribute => log::debug!("{op}: {err}"),
        _ => log::warn!("{op}: {err}"),
    }
    err.errno()
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
        reply.error(libc::ERANGE)
    } else {
        reply.data(value)
    }
}

/// Handlers for every call that would change the store: each answers `EROFS`.
macro_rules! read_only {
    ($(fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $reply:ty;)*) => {
        $(
            fn $name(&mut self, _req: &Request<'_>, $($arg: $ty,)* reply: $reply) {
                reply.error(libc::EROFS)
            }
        )*
    };
}

impl FuseAdapter {
    /// An adapter whose reads run on `threads` workers per file (plus spares).
    pub fn new(fs: Arc<ZarrFs>, threads: usize) -> FuseAdapter {
        FuseAdapter {
            fs,
            reads: FairPool::new(threads + SPARE_READ_THREADS, threads, "read"),
            meta: Pool::new(META_THREADS, "lookup"),
            after_init: None,
            owner: Owner {
                // SAFETY: getuid and getgid cannot fail.
                uid: unsafe { libc::getuid() },
                gid: unsafe { libc::getgid() },
                mounted_at: SystemTime::now(),
            },
        }
    }

    /// Run `job` with the filesystem on the metadata pool.
    fn meta(&self, job: impl FnOnce(&ZarrFs, Owner) + Send + 'static) {
        let (fs, owner) = (self.fs.clone(), self.owner);
        self.meta.run(move || job(&fs, owner));
    }

    /// Something to do once the mount is fully set up (kernel settings that INIT resets).
    pub fn after_init(mut self, job: impl FnOnce() + Send + 'static) -> Self {
        self.after_init = Some(Box::new(job));
        self
    }

    fn started(&mut self) {
        if let Some(job) = self.after_init.take() {
            job();
        }
    }
}

impl Owner {
    fn attr(&self, a: &Attr) -> FileAttr {
        FileAttr {
            ino: a.ino,
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
    fn init(&mut self, _req: &Request<'_>, config: &mut KernelConfig) -> Result<(), libc::c_int> {
        let _ = config.set_max_readahead(4 << 20);
        let _ = config.set_max_background(64);
        Ok(())
    }

    fn lookup(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEntry) {
        self.started();
        let name = name.to_string_lossy().into_owned();
        self.meta(move |fs, owner| {
            reply!(reply, "lookup", fs.lookup(parent, &name), |a| reply.entry(
                &TTL,
                &owner.attr(&a),
                0
            ))
        })
    }

    fn getattr(&mut self, _req: &Request<'_>, ino: u64, _fh: Option<u64>, reply: ReplyAttr) {
        self.started();
        self.meta(move |fs, owner| {
            reply!(reply, "getattr", fs.getattr(ino), |a| reply
                .attr(&TTL, &owner.attr(&a)))
        })
    }

    fn open(&mut self, _req: &Request<'_>, ino: u64, flags: i32, reply: ReplyOpen) {
        if flags & libc::O_ACCMODE != libc::O_RDONLY || flags & libc::O_TRUNC != 0 {
            return reply.error(libc::EROFS);
        }
        self.meta(move |fs, _| {
            reply!(reply, "open", fs.open(ino), |_v| reply
                .opened(0, FOPEN_KEEP_CACHE))
        })
    }

    fn read(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        size: u32,
        _flags: i32,
        _lock: Option<u64>,
        reply: ReplyData,
    ) {
        let fs = self.fs.clone();
        self.reads.run(ino, move || {
            // A range inside one cached unit goes out as it is, without a copy.
            match fs.read_in_place(ino, offset.max(0) as u64, size as usize) {
                Ok(Some(slice)) => return reply.data(slice.bytes()),
                Ok(None) => {}
                Err(e) => return reply.error(errno("read", &e)),
            }
            // Each worker keeps one reply buffer: no allocation per request.
            READ_BUFFER.with_borrow_mut(|buf| {
                buf.resize(buf.len().max(size as usize), 0);
                let buf = &mut buf[..size as usize];
                let result = fs.read_into(ino, offset.max(0) as u64, buf);
                reply!(reply, "read", result, |n| reply.data(&buf[..n]))
            })
        });
    }

    fn readdir(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        reply: ReplyDirectory,
    ) {
        self.meta(move |fs, _| readdir_reply(fs, ino, offset, reply))
    }

    fn getxattr(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        name: &OsStr,
        size: u32,
        reply: ReplyXattr,
    ) {
        let name = name.to_string_lossy().into_owned();
        self.meta(move |fs, _| {
            reply!(reply, "getxattr", fs.getxattr(ino, &name), |value| {
                xattr_reply(reply, size, &value)
            })
        })
    }

    fn listxattr(&mut self, _req: &Request<'_>, ino: u64, size: u32, reply: ReplyXattr) {
        self.meta(move |fs, _| {
            reply!(reply, "listxattr", fs.xattrs(ino), |attrs| {
                let mut names = Vec::new();
                for (name, _) in attrs {
                    names.extend_from_slice(name.as_bytes());
                    names.push(0);
                }
                xattr_reply(reply, size, &names)
            })
        })
    }

    fn statfs(&mut self, _req: &Request<'_>, _ino: u64, reply: ReplyStatfs) {
        reply.statfs(0, 0, 0, 0, 0, 4096, 255, 4096);
    }

    read_only! {
        fn setattr(
            _ino: u64, _mode: Option<u32>, _uid: Option<u32>, _gid: Option<u32>,
            _size: Option<u64>, _atime: Option<TimeOrNow>, _mtime: Option<TimeOrNow>,
            _ctime: Option<SystemTime>, _fh: Option<u64>, _crtime: Option<SystemTime>,
            _chgtime: Option<SystemTime>, _bkuptime: Option<SystemTime>, _flags: Option<u32>
        ) -> ReplyAttr;
        fn mknod(_parent: u64, _name: &OsStr, _mode: u32, _umask: u32, _rdev: u32) -> ReplyEntry;
        fn mkdir(_parent: u64, _name: &OsStr, _mode: u32, _umask: u32) -> ReplyEntry;
        fn unlink(_parent: u64, _name: &OsStr) -> ReplyEmpty;
        fn rmdir(_parent: u64, _name: &OsStr) -> ReplyEmpty;
        fn symlink(_parent: u64, _name: &OsStr, _link: &std::path::Path) -> ReplyEntry;
        fn rename(_parent: u64, _name: &OsStr, _newparent: u64, _newname: &OsStr, _flags: u32) -> ReplyEmpty;
        fn link(_ino: u64, _newparent: u64, _newname: &OsStr) -> ReplyEntry;
        fn write(
            _ino: u64, _fh: u64, _offset: i64, _data: &[u8], _write_flags: u32, _flags: i32,
            _lock_owner: Option<u64>
        ) -> ReplyWrite;
        fn create(_parent: u64, _name: &OsStr, _mode: u32, _umask: u32, _flags: i32) -> ReplyCreate;
        fn setxattr(_ino: u64, _name: &OsStr, _value: &[u8], _flags: i32, _position: u32) -> ReplyEmpty;
        fn removexattr(_ino: u64, _name: &OsStr) -> ReplyEmpty;
    }
}

/// Answer a directory listing from `offset` on: `.`, `..`, then the entries.
fn readdir_reply(fs: &ZarrFs, ino: u64, offset: i64, mut reply: ReplyDirectory) {
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
    for (i, (child, kind, name)) in all.enumerate().skip(offset.max(0) as usize) {
        let kind = match kind {
            FileKind::Directory => FileType::Directory,
            FileKind::File => FileType::RegularFile,
        };
        if reply.add(child, (i + 1) as i64, kind, name) {
            break;
        }
    }
    reply.ok();
}
