//! The mount: startup checks, the FUSE session and its options, serving until unmounted
//! (by a signal, see [`crate::daemon::background`], or by `zarrfs umount`), and `umount`
//! itself (stale mounts of killed daemons included).

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use fuser::{Config, MountOption, SessionACL};

use crate::daemon::background;
use crate::daemon::descriptor;
use crate::daemon::fuse::FuseAdapter;
use crate::daemon::invalidate::Invalidator;
use crate::daemon::mountinfo::{is_mounted, mounted_device};
use crate::fs::io::{setup, IoMode, Serving};
use crate::fs::{FsOptions, ZarrFs};
use crate::hierarchy::Hierarchy;
use crate::store::{Location, StoreConfig};
use crate::{Error, Result};

/// Kernel readahead for the mount: two requests of 1 MiB in flight for a sequential reader
/// (the daemon decodes further ahead itself). A deeper window buys a lone reader nothing
/// and costs concurrent readers: with 16 MiB, four readers took 1.6 times as long, most of
/// it kernel time spent copying into page-cache pages written long before they are read.
const READAHEAD_KIB: u32 = 2048;

/// Everything `zarrfs mount` needs.
pub struct MountConfig {
    /// The STORE argument: a folder, a URL, a zip archive.
    pub store: String,
    pub store_cfg: StoreConfig,
    pub mountpoint: PathBuf,
    pub foreground: bool,
    /// `prefetch_threads` of 0: sized from the read threads.
    pub fs: FsOptions,
    /// Read worker threads; default: what the store can use at once.
    pub threads: Option<usize>,
    /// Page-cache or direct-IO reads.
    pub io: IoMode,
    /// The budget of arrays served by the kernel from backing files (0: off; `None`:
    /// [`default_materialize`]).
    pub materialize: Option<u64>,
    /// How long what was read of the store stays good (`Some(None)`: for the mount's
    /// life; `None`: [`setup::default_refresh`]).
    pub refresh: Option<Option<Duration>>,
    /// Whether a local folder that refreshes is watched with inotify (see
    /// [`crate::daemon::watch`]).
    pub watch: bool,
    /// FUSE mount options.
    pub options: Vec<String>,
}

/// The session's configuration: mount options, who may use the mount, and `threads`
/// loops reading requests from the kernel, each on its own cloned `/dev/fuse` descriptor
/// (where `/dev/fuse` can be opened).
/// A mount that refreshes or takes writes is not flagged read-only to the kernel, which
/// would refuse the `setxattr` of `user.zarrfs.refresh` and every write itself; the
/// daemon refuses what it does not take.
fn session_config(store: &str, extra: &[String], threads: usize, not_ro: bool) -> Config {
    let mut config = Config::default();
    config.n_threads = Some(threads.max(1));
    config.clone_fd = true;
    let mut options = vec![
        MountOption::FSName(format!("zarrfs:{store}")),
        MountOption::Subtype("zarrfs".into()),
        MountOption::NoDev,
        MountOption::NoSuid,
    ];
    if !not_ro {
        options.insert(0, MountOption::RO);
    }
    for o in extra
        .iter()
        .flat_map(|o| o.split(','))
        .filter(|o| !o.is_empty())
    {
        options.push(match o {
            "allow_other" => {
                config.acl = SessionACL::All;
                continue;
            }
            "allow_root" => {
                if config.acl != SessionACL::All {
                    config.acl = SessionACL::RootAndOwner;
                }
                continue;
            }
            "auto_unmount" => MountOption::AutoUnmount,
            "default_permissions" => MountOption::DefaultPermissions,
            "ro" | "nodev" | "nosuid" => continue,
            "exec" => MountOption::Exec,
            "noexec" => MountOption::NoExec,
            "noatime" => MountOption::NoAtime,
            other => MountOption::CUSTOM(other.to_string()),
        });
    }
    config.mount_options = options;
    config
}

/// The default budget of materialized arrays: a quarter of the memory, at most 4 GiB,
/// when running as root (the only case the kernel allows backing files).
pub fn default_materialize() -> u64 {
    // SAFETY: geteuid only reads the process's user id.
    let root = unsafe { libc::geteuid() } == 0;
    if root {
        (crate::process::memory::physical() / 4).min(4 << 30)
    } else {
        0
    }
}

/// Loops reading requests from the kernel: one per core (they answer reads of decoded
/// bytes themselves and hand everything else to the worker pools of [`Serving`]).
fn request_loops() -> usize {
    crate::pool::cores()
}

/// Let the kernel read ahead `kib` KiB on this mount (its default is 128 KiB, which also
/// caps FUSE read requests). Best effort: it needs root and sysfs.
fn raise_readahead(mountpoint: &Path, kib: u32) {
    let Some(device) = mounted_device(mountpoint) else {
        return;
    };
    let knob = format!("/sys/class/bdi/{device}/read_ahead_kb");
    if let Err(e) = std::fs::write(&knob, kib.to_string()) {
        log::info!("{knob}: {e} (kernel readahead stays at its default)");
    }
}

/// The checks that must fail before going to the background.
fn preflight(cfg: &MountConfig) -> Result<(PathBuf, Hierarchy)> {
    let refresh = setup::refresh_of(&cfg.store, cfg.refresh);
    let mp = &cfg.mountpoint;
    if let Some(fd) = descriptor::number(mp) {
        // Mounted already, by whoever passed the descriptor.
        descriptor::check(fd)?;
        let hierarchy = setup::open_hierarchy(&cfg.store, &cfg.store_cfg, refresh)?;
        return Ok((mp.clone(), hierarchy));
    }
    let hierarchy = setup::open_hierarchy(&cfg.store, &cfg.store_cfg, refresh)?;
    // A mount whose daemon died answers every stat with ENOTCONN.
    let not_usable = |e: std::io::Error| match e.raw_os_error() {
        Some(libc::ENOTCONN) => Error::Startup {
            message: format!(
                "mountpoint {}: a dead zarrfs/FUSE mount is there (its daemon has ended: \
                 transport endpoint is not connected); run `zarrfs umount {}` first",
                mp.display(),
                mp.display()
            ),
            source: Some(Box::new(e)),
        },
        _ => Error::startup_from(format_args!("mountpoint {}", mp.display()), e),
    };
    let abs = std::fs::canonicalize(mp).map_err(not_usable)?;
    if !std::fs::metadata(&abs).map_err(not_usable)?.is_dir() {
        return Err(Error::startup(format!(
            "mountpoint {}: not a directory",
            mp.display()
        )));
    }
    if is_mounted(&abs) {
        return Err(Error::startup(format!(
            "mountpoint {}: already mounted (busy)",
            mp.display()
        )));
    }
    // No check that opens /dev/fuse here: a normal user mounts through fusermount3. A
    // failed mount says why (crate::daemon::mount_failure).
    if let Some(message) = crate::daemon::mount_failure::check_allow_other(&cfg.options) {
        return Err(Error::startup(message));
    }
    Ok((abs, hierarchy))
}

/// Run `zarrfs mount`: in front with `foreground`, else in the background once mounted.
pub fn mount(cfg: MountConfig) -> Result<()> {
    let (mountpoint, hierarchy) = preflight(&cfg)?;
    if !cfg.foreground && !background::is_daemon() {
        return background::spawn_daemon(&mountpoint);
    }
    background::block_signals();
    crate::process::memory::tune_allocator();
    crate::process::memory::return_free_memory();
    let refresh = setup::refresh_of(&cfg.store, cfg.refresh);
    let (fs, threads) = setup::build(hierarchy, cfg.fs, &cfg.store, cfg.threads, refresh);
    let watched_fs = fs.clone();
    let writable = fs.writable();
    if writable {
        log::info!("writable: arrays' raw files take writes, committed at each close");
    }
    // A passthrough copy would serve bytes from before a write: a writable mount makes
    // none.
    let materialize = match writable {
        true => 0,
        false => cfg.materialize.unwrap_or_else(default_materialize),
    };
    // The session's /dev/fuse descriptor, to tell at the end whether the kernel has ended
    // the connection.
    let device = Arc::new(std::sync::OnceLock::<OwnedFd>::new());
    let end_device = device.clone();
    let end_mountpoint = mountpoint.clone();
    // Only direct-IO reads reach the daemon again on a re-read (the page cache answers
    // the others).
    let serving = Serving::new(fs, threads, cfg.io, materialize, cfg.io == IoMode::Direct);
    let kernel = Invalidator::new();
    let adapter = FuseAdapter::new(serving, kernel.clone()).on_end(move || {
        // Once the session ends, fuser (0.18) unmounts the mountpoint path even when the
        // kernel has already ended the connection (its check that the mount is still up
        // always says yes), which removes whatever is mounted there now: a new mount of
        // the same folder, made while this daemon was finishing (after `umount -l`, or a
        // quick remount). When the connection is over there is nothing of ours left to
        // unmount, so the daemon ends here.
        if end_device
            .get()
            .is_some_and(|fd| connection_ended(fd.as_fd()))
        {
            log::info!("unmounted {}", end_mountpoint.display());
            log::logger().flush();
            std::process::exit(0);
        }
    });
    let mut config = session_config(
        &cfg.store,
        &cfg.options,
        request_loops(),
        refresh.is_some() || writable,
    );
    let inherited = descriptor::number(&mountpoint);
    // A request loop's own descriptor is a clone made by opening `/dev/fuse`, which a
    // process serving an inherited descriptor may not have (an unprivileged container
    // is given the descriptor alone): there, the loops share the inherited one.
    if inherited.is_some() && !descriptor::device_openable() {
        config.clone_fd = false;
    }
    let mut session = match inherited {
        // Whoever mounted it chose who may use it (allow_other or not): the kernel checks.
        Some(fd) => {
            fuser::Session::from_fd(adapter, descriptor::take(fd)?, SessionACL::All, config)
                .map_err(|e| Error::startup_from(format_args!("/dev/fd/{fd}"), e))?
        }
        None => fuser::Session::new(adapter, &mountpoint, &config).map_err(|e| Error::Startup {
            message: crate::daemon::mount_failure::explain(&mountpoint, &e),
            source: Some(Box::new(e)),
        })?,
    };
    kernel.connect(session.notifier());
    match session.as_fd().try_clone_to_owned() {
        Ok(fd) => {
            let _ = device.set(fd);
        }
        Err(e) => log::warn!("/dev/fuse descriptor: {e}"),
    }
    // The kernel has taken the INIT reply (which sets readahead): raise it now (on a
    // mount made elsewhere, the mountpoint is not known here).
    if inherited.is_none() {
        raise_readahead(&mountpoint, READAHEAD_KIB);
    }
    let _watch = match local_folder(&cfg.store) {
        Some(root) if refresh.is_some() && cfg.watch => watch_folder(&root, watched_fs, kernel),
        _ => None,
    };
    log::info!("mounted {} at {}", cfg.store, mountpoint.display());
    background::report_ready();
    let mut unmounter = session.unmount_callable();
    let signal_mountpoint = mountpoint.clone();
    let stopping = Arc::new(AtomicBool::new(false));
    let stop_requested = stopping.clone();
    background::on_stop_signal(move |signal| {
        stop_requested.store(true, Ordering::SeqCst);
        if inherited.is_some() {
            // The mount is its maker's to unmount: the daemon ends, and with it the
            // connection (the mount answers ENOTCONN until it is unmounted).
            log::info!(
                "signal {signal}: ending the session of {}",
                signal_mountpoint.display()
            );
            log::logger().flush();
            std::process::exit(0);
        }
        log::info!("signal {signal}: unmounting");
        if let Err(e) = unmounter.unmount() {
            log::warn!("unmount: {e}");
        }
        // A plain unmount fails with EBUSY while any process holds a file open on the
        // mount (even briefly, as a child between fork and exec does): detach instead,
        // so that the signal always ends the daemon.
        if is_mounted(&signal_mountpoint) {
            if let Err(e) = unmount(&signal_mountpoint) {
                log::warn!("{e}");
            }
        }
    });
    // Ends once unmounted (signal or `zarrfs umount`); a mount still up is unmounted.
    match session.run() {
        // After a stop signal the kernel may end a detached mount's connection as aborted
        // (ECONNABORTED) rather than gone (ENODEV) once the last file closes: the end
        // that was asked for.
        Err(e)
            if e.raw_os_error() == Some(libc::ECONNABORTED) && stopping.load(Ordering::SeqCst) =>
        {
            log::info!("fuse session ended: {e}");
        }
        other => other.map_err(|e| Error::Invalid(format!("fuse session: {e}")))?,
    }
    log::info!("unmounted {}", mountpoint.display());
    Ok(())
}

/// The folder of a store that is a local folder of Zarr (not an Icechunk repository).
fn local_folder(store: &str) -> Option<PathBuf> {
    let Location::Local(path) = Location::parse(store) else {
        return None;
    };
    (path.is_dir() && !crate::store::is_repository(&path)).then_some(path)
}

/// Watch the local folder `root` of `fs`'s store: a node whose metadata changes is read
/// again at once, and the kernel drops what it holds of it.
fn watch_folder(
    root: &Path,
    fs: Arc<ZarrFs>,
    kernel: Arc<Invalidator>,
) -> Option<crate::daemon::watch::Watch> {
    let changed = move |path: &str| match fs.refresh_path(path) {
        Ok(inodes) => {
            log::debug!("refresh: /{path} changed in the folder");
            kernel.drop_inodes(&inodes);
            kernel.drop_names(|| fs.names_of(&inodes));
        }
        Err(e) => log::warn!("refresh: /{path}: {e}"),
    };
    match crate::daemon::watch::watch(root, changed) {
        Ok(w) => Some(w),
        Err(e) => {
            log::warn!("refresh: no inotify watch ({e}): changes show after the interval");
            None
        }
    }
}

/// Whether the kernel has ended the FUSE connection of `device` (unmounted or aborted):
/// its /dev/fuse descriptor then polls as an error.
fn connection_ended(device: BorrowedFd) -> bool {
    let mut poll = libc::pollfd {
        fd: device.as_raw_fd(),
        events: 0,
        revents: 0,
    };
    // SAFETY: one valid pollfd, no waiting.
    let n = unsafe { libc::poll(&mut poll, 1, 0) };
    n == 1 && poll.revents & libc::POLLERR != 0
}

/// `zarrfs umount`: unmount, including a stale mount left by a killed daemon.
pub fn unmount(mountpoint: &Path) -> Result<()> {
    let attempts: [&[&str]; 2] = [&["-u"], &["-u", "-z"]];
    let mut last = String::new();
    for args in attempts {
        match Command::new("fusermount3")
            .args(args)
            .arg(mountpoint)
            .output()
        {
            Ok(out) if out.status.success() => return Ok(()),
            Ok(out) => last = String::from_utf8_lossy(&out.stderr).trim().to_string(),
            Err(e) => last = format!("fusermount3: {e}"),
        }
    }
    // As root, the system call works without fusermount3.
    let path = std::ffi::CString::new(mountpoint.as_os_str().as_encoded_bytes())
        .map_err(|_| Error::Invalid("mountpoint contains NUL".into()))?;
    // SAFETY: a valid C string; MNT_DETACH also clears a dead FUSE connection.
    if unsafe { libc::umount2(path.as_ptr(), libc::MNT_DETACH) } == 0 {
        return Ok(());
    }
    Err(Error::Invalid(format!(
        "umount {}: {last}",
        mountpoint.display()
    )))
}
