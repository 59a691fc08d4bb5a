//! The thin fuser adapter: each handler calls the filesystem core, replies, or maps the
//! error to an errno in one place (logging one line). Reads run on a worker pool.

use std::ffi::OsStr;
use std::sync::mpsc::{channel, Sender};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use fuser::consts::FOPEN_KEEP_CACHE;
use fuser::{
    FileAttr, FileType, Filesystem, KernelConfig, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr,
    Request, TimeOrNow,
};
use parking_lot::Mutex;

use crate::error::Error;
use crate::fs::{Attr, FileKind, ZarrFs};

/// Entries and attributes never change while mounted.
const TTL: Duration = Duration::from_secs(24 * 3600);

type Job = Box<dyn FnOnce() + Send>;

/// The FUSE side of a mount.
pub struct FuseAdapter {
    fs: Arc<ZarrFs>,
    jobs: Sender<Job>,
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

impl FuseAdapter {
    pub fn new(fs: Arc<ZarrFs>, threads: usize) -> FuseAdapter {
        let (jobs, rx) = channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        for _ in 0..threads.max(1) {
            let rx = rx.clone();
            std::thread::spawn(move || loop {
                let job = rx.lock().recv();
                match job {
                    Ok(job) => job(),
                    Err(_) => return,
                }
            });
        }
        FuseAdapter {
            fs,
            jobs,
            uid: unsafe { libc::getuid() },
            gid: unsafe { libc::getgid() },
            mounted_at: SystemTime::now(),
        }
    }

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
        let result = self.fs.lookup(parent, &name.to_string_lossy());
        reply!(reply, "lookup", result, |a| reply.entry(
            &TTL,
            &self.attr(&a),
            0
        ))
    }

    fn getattr(&mut self, _req: &Request<'_>, ino: u64, _fh: Option<u64>, reply: ReplyAttr) {
        reply!(reply, "getattr", self.fs.getattr(ino), |a| reply
            .attr(&TTL, &self.attr(&a)))
    }

    fn open(&mut self, _req: &Request<'_>, ino: u64, flags: i32, reply: ReplyOpen) {
        if flags & libc::O_ACCMODE != libc::O_RDONLY || flags & libc::O_TRUNC != 0 {
            return reply.error(libc::EROFS);
        }
        reply!(reply, "open", self.fs.open(ino), |_v| reply
            .opened(0, FOPEN_KEEP_CACHE))
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
        let job: Job = Box::new(move || {
            let result = fs.read(ino, offset.max(0) as u64, size as usize);
            reply!(reply, "read", result, |data| reply.data(&data))
        });
        if let Err(e) = self.jobs.send(job) {
            (e.0)();
        }
    }

    fn readdir(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        mut reply: ReplyDirectory,
    ) {
        let (entries, parent) = match (self.fs.readdir(ino), self.fs.parent(ino)) {
            (Ok(e), Ok(p)) => (e.into_iter().map(|e| (e.ino, e.kind, e.name)), p),
            (Err(e), _) | (_, Err(e)) => return reply.error(errno("readdir", &e)),
        };
        let dots = [(ino, FileKind::Directory, ".".to_string())];
        let parent = [(parent, FileKind::Directory, "..".to_string())];
        let all = dots.into_iter().chain(parent).chain(entries);
        for (i, (child, kind, name)) in all.enumerate().skip(offset.max(0) as usize) {
            let kind = match kind {
                FileKind::Directory => FileType::Directory,
                FileKind::File => FileType::RegularFile,
            };
            if reply.add(child, (i + 1) as i64, kind, &name) {
                break;
            }
        }
        reply.ok();
    }

    fn getxattr(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        name: &OsStr,
        size: u32,
        reply: ReplyXattr,
    ) {
        reply!(
            reply,
            "getxattr",
            self.fs.getxattr(ino, &name.to_string_lossy()),
            |value| {
                if size == 0 {
                    reply.size(value.len() as u32)
                } else if value.len() > size as usize {
                    reply.error(libc::ERANGE)
                } else {
                    reply.data(&value)
                }
            }
        )
    }

    fn listxattr(&mut self, _req: &Request<'_>, ino: u64, size: u32, reply: ReplyXattr) {
        reply!(reply, "listxattr", self.fs.xattrs(ino), |attrs| {
            let mut names = Vec::new();
            for (name, _) in attrs {
                names.extend_from_slice(name.as_bytes());
                names.push(0);
            }
            if size == 0 {
                reply.size(names.len() as u32)
            } else if names.len() > size as usize {
                reply.error(libc::ERANGE)
            } else {
                reply.data(&names)
            }
        })
    }

    fn statfs(&mut self, _req: &Request<'_>, _ino: u64, reply: ReplyStatfs) {
        reply.statfs(0, 0, 0, 0, 0, 4096, 255, 4096);
    }

    fn setattr(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        _mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        _size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<u64>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<u32>,
        reply: ReplyAttr,
    ) {
        reply.error(libc::EROFS)
    }

    fn mknod(
        &mut self,
        _r: &Request<'_>,
        _p: u64,
        _n: &OsStr,
        _m: u32,
        _u: u32,
        _d: u32,
        reply: ReplyEntry,
    ) {
        reply.error(libc::EROFS)
    }

    fn mkdir(
        &mut self,
        _r: &Request<'_>,
        _p: u64,
        _n: &OsStr,
        _m: u32,
        _u: u32,
        reply: ReplyEntry,
    ) {
        reply.error(libc::EROFS)
    }

    fn unlink(&mut self, _r: &Request<'_>, _p: u64, _n: &OsStr, reply: ReplyEmpty) {
        reply.error(libc::EROFS)
    }

    fn rmdir(&mut self, _r: &Request<'_>, _p: u64, _n: &OsStr, reply: ReplyEmpty) {
        reply.error(libc::EROFS)
    }

    fn symlink(
        &mut self,
        _r: &Request<'_>,
        _p: u64,
        _n: &OsStr,
        _l: &std::path::Path,
        reply: ReplyEntry,
    ) {
        reply.error(libc::EROFS)
    }

    fn rename(
        &mut self,
        _r: &Request<'_>,
        _p: u64,
        _n: &OsStr,
        _np: u64,
        _nn: &OsStr,
        _f: u32,
        reply: ReplyEmpty,
    ) {
        reply.error(libc::EROFS)
    }

    fn link(&mut self, _r: &Request<'_>, _i: u64, _np: u64, _nn: &OsStr, reply: ReplyEntry) {
        reply.error(libc::EROFS)
    }

    fn write(
        &mut self,
        _r: &Request<'_>,
        _i: u64,
        _fh: u64,
        _o: i64,
        _d: &[u8],
        _wf: u32,
        _f: i32,
        _l: Option<u64>,
        reply: ReplyWrite,
    ) {
        reply.error(libc::EROFS)
    }

    fn create(
        &mut self,
        _r: &Request<'_>,
        _p: u64,
        _n: &OsStr,
        _m: u32,
        _u: u32,
        _f: i32,
        reply: ReplyCreate,
    ) {
        reply.error(libc::EROFS)
    }

    fn setxattr(
        &mut self,
        _r: &Request<'_>,
        _i: u64,
        _n: &OsStr,
        _v: &[u8],
        _f: i32,
        _p: u32,
        reply: ReplyEmpty,
    ) {
        reply.error(libc::EROFS)
    }

    fn removexattr(&mut self, _r: &Request<'_>, _i: u64, _n: &OsStr, reply: ReplyEmpty) {
        reply.error(libc::EROFS)
    }
}
