//! The thin fuser adapter: each handler calls the serving core ([`crate::fs::io`]) or the
//! filesystem, replies, or maps the error to an errno in one place (logging one line).
//! Lookups, attributes, listings and xattrs run on the core's metadata pool, reads on its
//! read path; what needs fuser stays here: the passthrough registration of a backing
//! file, and the kernel's caches dropped on a refresh (see [`super::invalidate`]).

use std::ffi::OsStr;
use std::sync::Arc;
use std::time::SystemTime;

use crate::daemon::invalidate::Invalidator;
use crate::error::Error;
use crate::fs::io::{IoMode, OpenIo, Opening, Serving};
use crate::fs::{Attr, FileKind, ZarrFs};
use fuser::{
    BackingId, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo,
    InitFlags, KernelConfig, LockOwner, OpenAccMode, OpenFlags, RenameFlags, ReplyAttr,
    ReplyCreate, ReplyData, ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyOpen,
    ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};

/// The extended attribute whose `setxattr` reads a node and all below it from the store
/// again (`zarrfs refresh PATH`).
pub const REFRESH_XATTR: &str = "user.zarrfs.refresh";

/// Whether a file is served by the kernel from a backing file (see [`Serving::materialized`]).
const MATERIALIZED_XATTR: &str = "user.zarrfs.materialized";

/// Requests the kernel keeps in flight (background reads, readahead) before it throttles.
const MAX_BACKGROUND: u16 = 64;

/// The FUSE side of a mount.
pub struct FuseAdapter {
    serving: Arc<Serving<BackingId>>,
    owner: Owner,
    /// How the kernel is told to drop what it caches of a refreshed node.
    kernel: Arc<Invalidator>,
    /// Called once when the session ends, before fuser tears the mount down.
    on_end: Option<Box<dyn FnOnce() + Send + Sync>>,
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
    /// The adapter of `serving`, whose refreshes drop the kernel's caches through `kernel`.
    pub fn new(serving: Arc<Serving<BackingId>>, kernel: Arc<Invalidator>) -> FuseAdapter {
        FuseAdapter {
            serving,
            owner: Owner {
                // SAFETY: getuid and getgid cannot fail.
                uid: unsafe { libc::getuid() },
                gid: unsafe { libc::getgid() },
                mounted_at: SystemTime::now(),
            },
            kernel,
            on_end: None,
        }
    }

    /// Run `end` when the session has ended (all request loops returned), before the
    /// session's own teardown.
    pub fn on_end(mut self, end: impl FnOnce() + Send + Sync + 'static) -> FuseAdapter {
        self.on_end = Some(Box::new(end));
        self
    }

    /// An open for writing: refused on a read-only mount (`EROFS`); else staged by the
    /// daemon, read and written direct. (The kernel truncates an `O_TRUNC` open with a
    /// `setattr` of its own once it is open: staged like a write.)
    fn open_write(&self, ino: INodeNo, reply: ReplyOpen) {
        if !self.serving.fs().writable() {
            return reply.error(Errno::EROFS);
        }
        self.serving.open_write(ino.0, move |opened| {
            reply!(reply, "open", opened, |fh| reply
                .opened(FileHandle(fh), FopenFlags::FOPEN_DIRECT_IO))
        })
    }

    /// Commit what writer `fh` staged, then have the kernel drop what it holds of the
    /// array's files (a flush or an fsync).
    fn commit(&self, op: &'static str, fh: FileHandle, reply: ReplyEmpty) {
        let kernel = self.kernel.clone();
        let fs = self.serving.fs().clone();
        self.serving.commit(fh.0, move |result| {
            reply!(reply, op, result, |inodes| {
                // Dropped before the answer (a close or fsync holds no directory lock):
                // a path opened once it returns finds the array as it is now.
                kernel.drop_inodes(&inodes);
                kernel.drop_names(|| fs.names_of(&inodes));
                reply.ok();
            })
        })
    }

    /// Remove the node `name` of `parent` (`rmdir` a group, `unlink` an array's file),
    /// then have the kernel drop what it holds of its files (the kernel holds the
    /// directory's lock until the answer, so their names go after it).
    fn remove(&self, op: &'static str, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        if !self.serving.fs().writable() {
            return reply.error(Errno::EROFS);
        }
        let name = name.to_string_lossy().into_owned();
        let kernel = self.kernel.clone();
        self.serving.change_nodes(move |fs| {
            let removed = match op {
                "rmdir" => fs.rmdir(parent.0, &name),
                _ => fs.unlink(parent.0, &name),
            };
            reply!(reply, op, removed, |inodes| {
                kernel.refreshed(&inodes, || fs.names_of(&inodes), || reply.ok())
            })
        })
    }

    /// Run `job` with the filesystem on the metadata pool.
    fn meta(&self, job: impl FnOnce(&ZarrFs, Owner) + Send + 'static) {
        let owner = self.owner;
        self.serving.meta(move |s| job(s.fs(), owner));
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
        if self.serving.materializes() {
            // SAFETY: geteuid cannot fail.
            if unsafe { libc::geteuid() } != 0 {
                self.serving
                    .stop_materializing("backing files need root (CAP_SYS_ADMIN)");
            } else if config
                .add_capabilities(InitFlags::FUSE_PASSTHROUGH)
                .is_err()
            {
                self.serving
                    .stop_materializing("the kernel offers no FUSE passthrough");
            } else {
                // Backing files on a plain filesystem (ext4, tmpfs) under this one.
                let _ = config.set_max_stack_depth(1);
            }
        }
        // Listings carry each entry's attributes (READDIRPLUS, always: `ls -l` reads the
        // whole listing before it stats the first file), so that a listed file's `stat`
        // is answered by the kernel while the attributes last.
        if let Err(missing) = config.add_capabilities(InitFlags::FUSE_DO_READDIRPLUS) {
            log::info!("the kernel lacks {missing:?}: each listed file is looked up apart");
        }
        // mmap of a direct-IO file goes through the page cache (kernel 6.6 and later).
        // With `--io cache` too: a file a read of which failed is opened direct.
        if let Err(missing) = config.add_capabilities(InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP) {
            if self.serving.io_mode() == IoMode::Cache {
                log::info!("the kernel lacks {missing:?}; mmap of a file whose read failed fails");
            } else {
                log::warn!("direct IO: the kernel lacks {missing:?}; mmap of array files fails");
            }
        }
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let name = name.to_string_lossy().into_owned();
        let kernel = self.kernel.clone();
        self.meta(move |fs, owner| {
            reply!(reply, "lookup", fs.lookup_entry(parent.0, &name), |found| {
                // The number the kernel holds stands for a new reading now: the pages it
                // cached of the older one go before it learns of the new one.
                if found.renewed {
                    kernel.drop_inodes(&[found.attr.ino]);
                }
                let generation = Generation(found.attr.generation);
                // Asked last, so that the time the answer took counts against it.
                let ttl = fs.entry_ttl(found.attr.ino);
                reply.entry(&ttl, &owner.attr(&found.attr), generation)
            })
        })
    }

    // fuser's batch_forget calls this once per inode.
    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        self.serving.forget(ino.0, nlookup)
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        self.meta(move |fs, owner| {
            reply!(reply, "getattr", fs.getattr(ino.0), |a| reply
                .attr(&fs.attr_ttl(), &owner.attr(&a)))
        })
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        if flags.acc_mode() != OpenAccMode::O_RDONLY || flags.0 & libc::O_TRUNC != 0 {
            return self.open_write(ino, reply);
        }
        self.serving.meta(move |s| {
            reply!(
                reply,
                "open",
                s.open(ino.0, |file| reply.open_backing(file)),
                |o| {
                    match o {
                        Opening::Passthrough { fh, id } => {
                            reply.opened_passthrough(FileHandle(fh), FopenFlags::empty(), &id)
                        }
                        Opening::Daemon { fh, io } => {
                            let flags = match io {
                                OpenIo::Cache => FopenFlags::FOPEN_KEEP_CACHE,
                                OpenIo::Direct => FopenFlags::FOPEN_DIRECT_IO,
                            };
                            reply.opened(FileHandle(fh), flags)
                        }
                    }
                }
            )
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
        self.serving.release(ino.0, fh.0);
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
        lock: Option<LockOwner>,
        reply: ReplyData,
    ) {
        // The kernel sends the reader's lock owner with a direct-IO read (its answer goes
        // to the reader as it is: a short one is a short read), never with a page-cache
        // read (readahead, a page read for `read` or an `mmap` fault, where a short answer
        // means the end of the file), also on a file opened direct.
        let direct = lock.is_some();
        self.serving
            .read(ino.0, fh.0, offset, size as usize, direct, move |result| {
                reply!(reply, "read", result, |bytes| reply.data(bytes))
            })
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

    fn readdirplus(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        reply: ReplyDirectoryPlus,
    ) {
        let kernel = self.kernel.clone();
        self.meta(move |fs, owner| readdirplus_reply(fs, &kernel, owner, ino.0, offset, reply))
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        let name = name.to_string_lossy().into_owned();
        // Every attribute of zarrfs is a `user.` one. The others, which tools ask of
        // every file (`ls -l`: security.selinux, system.posix_acl_access), are answered
        // here, at the cost of the round trip alone.
        if !name.starts_with("user.") {
            return reply.error(Errno::NO_XATTR);
        }
        if name == MATERIALIZED_XATTR {
            return xattr_reply(reply, size, self.serving.materialized(ino.0).as_bytes());
        }
        if name == REFRESH_XATTR {
            // Answered once the last refresh's names are dropped (`zarrfs refresh`
            // reads it after setting it).
            let kernel = self.kernel.clone();
            return self.meta(move |_, _| {
                kernel.wait();
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
        let kernel = self.kernel.clone();
        self.meta(move |fs, _| {
            reply!(reply, "refresh", fs.refresh(ino.0), |inodes| {
                // The kernel drops the attributes and pages it holds of each, so that
                // the next stat and open ask again, and then their names.
                kernel.refreshed(&inodes, || fs.names_of(&inodes), || reply.ok());
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

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        self.serving
            .write(fh.0, offset, data.to_vec(), move |result| {
                reply!(reply, "write", result, |n| reply.written(n as u32))
            })
    }

    // A close commits what its file staged (so that close reports a failure), as does
    // an fsync; a file not written has nothing to commit.
    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        self.commit("flush", fh, reply)
    }

    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.commit("fsync", fh, reply)
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        if !self.serving.fs().writable() {
            return reply.error(Errno::EROFS);
        }
        if mode.is_some() || uid.is_some() || gid.is_some() {
            return reply.error(Errno::EPERM);
        }
        // Times are the mount's; a size changes the array's slowest axis by whole rows
        // (committed at once, on the write pool).
        let kernel = self.kernel.clone();
        let owner = self.owner;
        self.serving
            .resize(ino.0, size, fh.map(|f| f.0), move |fs, result| {
                reply!(reply, "setattr", result, |done| {
                    let (a, inodes) = done;
                    reply.attr(&fs.attr_ttl(), &owner.attr(&a));
                    kernel.refreshed(&inodes, || fs.names_of(&inodes), || {});
                })
            })
    }

    fn mkdir(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        if !self.serving.fs().writable() {
            return reply.error(Errno::EROFS);
        }
        let name = name.to_string_lossy().into_owned();
        let owner = self.owner;
        self.serving.change_nodes(move |fs| {
            reply!(reply, "mkdir", fs.mkdir(parent.0, &name), |found| {
                let ttl = fs.entry_ttl(found.attr.ino);
                reply.entry(
                    &ttl,
                    &owner.attr(&found.attr),
                    Generation(found.attr.generation),
                )
            })
        })
    }

    // `NAME.npy` and `.NAME.json` make array NAME (see `fs/create.rs`); the file is
    // written direct, its name looked up again at every use until it is an array.
    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        if !self.serving.fs().writable() {
            return reply.error(Errno::EROFS);
        }
        let name = name.to_string_lossy().into_owned();
        let owner = self.owner;
        self.serving.create(parent.0, name, move |fs, made| {
            reply!(reply, "create", made, |made| {
                let (found, fh) = made;
                let ttl = fs.entry_ttl(found.attr.ino);
                reply.created(
                    &ttl,
                    &owner.attr(&found.attr),
                    Generation(found.attr.generation),
                    FileHandle(fh),
                    FopenFlags::FOPEN_DIRECT_IO,
                )
            })
        })
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.remove("rmdir", parent, name, reply)
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.remove("unlink", parent, name, reply)
    }

    // The kernel checks permissions itself.
    answer_ok! {
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
        fn mknod(_parent: INodeNo, _name: &OsStr, _mode: u32, _umask: u32, _rdev: u32) -> ReplyEntry;
        fn symlink(_parent: INodeNo, _name: &OsStr, _link: &std::path::Path) -> ReplyEntry;
        fn rename(
            _parent: INodeNo, _name: &OsStr, _newparent: INodeNo, _newname: &OsStr,
            _flags: RenameFlags
        ) -> ReplyEmpty;
        fn link(_ino: INodeNo, _newparent: INodeNo, _newname: &OsStr) -> ReplyEntry;
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

/// Answer a listing with each entry's attributes (READDIRPLUS) from `offset` on: `.`, `..`,
/// then the entries. The kernel takes every entry of the reply as a lookup of it (or
/// forgets it at once), so each is looked up as a LOOKUP is ([`ZarrFs::lookup_entry`]:
/// counted, its number renewed where its node was read again); one that does not fit
/// the reply gives its lookup back. An entry gone since the listing was made is left out.
fn readdirplus_reply(
    fs: &ZarrFs,
    kernel: &Invalidator,
    owner: Owner,
    ino: u64,
    offset: u64,
    mut reply: ReplyDirectoryPlus,
) {
    let (entries, parent) = match (fs.readdir(ino), fs.parent(ino)) {
        (Ok(e), Ok(p)) => (e, p),
        (Err(e), _) | (_, Err(e)) => return reply.error(errno("readdirplus", &e)),
    };
    // The kernel links no inode for `.` and `..` and counts no lookup of them.
    for (i, (dot, name)) in [(ino, "."), (parent, "..")].into_iter().enumerate() {
        if (i as u64) < offset {
            continue;
        }
        let attr = match fs.getattr(dot) {
            Ok(a) => a,
            Err(e) => return reply.error(errno("readdirplus", &e)),
        };
        let (ttl, generation) = (fs.attr_ttl(), Generation(attr.generation));
        if reply.add(
            INodeNo(dot),
            (i + 1) as u64,
            name,
            &ttl,
            &owner.attr(&attr),
            generation,
        ) {
            return reply.ok();
        }
    }
    for (i, entry) in entries.iter().enumerate() {
        let at = i as u64 + 2;
        if at < offset {
            continue;
        }
        let found = match fs.lookup_entry(ino, &entry.name) {
            Ok(found) => found,
            Err(e) => {
                log::debug!("readdirplus: {}: {e}", entry.name);
                continue;
            }
        };
        if found.renewed {
            kernel.drop_inodes(&[found.attr.ino]);
        }
        let ttl = fs.entry_ttl(found.attr.ino).min(fs.attr_ttl());
        let attr = owner.attr(&found.attr);
        let generation = Generation(found.attr.generation);
        if reply.add(
            INodeNo(found.attr.ino),
            at + 1,
            &entry.name,
            &ttl,
            &attr,
            generation,
        ) {
            fs.unhold(found.attr.ino);
            break;
        }
    }
    reply.ok();
}
