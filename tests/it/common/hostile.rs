//! Running the bad-input corpus (`scripts/make_hostile.py`): its manifest, `zarrfs`
//! commands under an address-space limit with their peak memory, a foreground daemon
//! under the same limit, and a time guard around every operation that could hang.
//!
//! Limits (see `tests/it/hostile.rs` for why these numbers):
//! - every `zarrfs` process runs under `prlimit --as=AS_LIMIT` (1 GiB): a runaway
//!   allocation fails inside the process (and shows up as an abort or an error) instead
//!   of taking the machine;
//! - the daemon mounts with `--cache-size 64MiB`; its peak RSS (VmHWM) and that of `cat`
//!   and `inspect` (ru_maxrss) must stay within `RSS_BOUND` = 64 MiB + 256 MiB.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::common::mount::{
    mount_dir, mounted, peak_rss, spawn_foreground, umount_command, wait_exit,
};
use crate::common::{hex, zarrfs_limited, TempDir};

/// The address-space limit of every `zarrfs` process. The daemon's normal virtual size
/// with `--cache-size 64MiB` is 145–175 MiB (VmPeak, fixture stores), `cat`'s the same;
/// 1 GiB leaves room for the cache, the allowed RSS and thread stacks, and still stops
/// any attempt to allocate a gigabyte-sized buffer a hostile header asked for.
pub const AS_LIMIT: u64 = 1 << 30;
/// The daemon's decoded-chunk cache.
pub const CACHE: &str = "64MiB";
pub const CACHE_BYTES: u64 = 64 << 20;
/// Peak resident memory allowed to any `zarrfs` process of the corpus run.
pub const RSS_BOUND: u64 = CACHE_BYTES + (256 << 20);
/// How long one small operation may take before it counts as hung.
pub const GUARD: Duration = Duration::from_secs(20);
/// How long `inspect` of a whole store may take before it counts as hung.
pub const INSPECT_GUARD: Duration = Duration::from_secs(60);
/// How long a large operation (a 1 GiB stream) may take before it counts as hung.
pub const BIG_GUARD: Duration = Duration::from_secs(180);
/// The most of `cat`'s output a check reads; past it the pipe is closed.
pub const CAT_CAP: u64 = 1 << 30;

/// The corpus folder: `$ZARRFS_HOSTILE` or `target/hostile`.
pub fn corpus_dir() -> PathBuf {
    let dir = std::env::var_os("ZARRFS_HOSTILE")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::common::repo().join("target/hostile"));
    assert!(
        dir.join("manifest.json").is_file(),
        "no bad-input corpus at {}: run scripts/test.sh (it writes it with \
         scripts/make_hostile.py)",
        dir.display()
    );
    dir
}

pub struct Corpus {
    pub dir: PathBuf,
    pub cases: Vec<Case>,
}

impl Corpus {
    pub fn load() -> Corpus {
        let dir = corpus_dir();
        let text = std::fs::read_to_string(dir.join("manifest.json")).expect("read manifest");
        let doc: Value = serde_json::from_str(&text).expect("parse manifest");
        // The unreadable-file cases expect what the writer's user could read.
        let euid = unsafe { libc::geteuid() } as u64;
        assert_eq!(
            doc["euid"].as_u64(),
            Some(euid),
            "the corpus was written by another user than the one running the tests: \
             regenerate it with scripts/make_hostile.py"
        );
        let cases = doc["cases"]
            .as_array()
            .expect("cases")
            .iter()
            .map(Case::parse)
            .collect();
        Corpus { dir, cases }
    }

    pub fn category(&self, category: &str) -> Vec<&Case> {
        self.cases
            .iter()
            .filter(|c| c.category == category)
            .collect()
    }
}

pub struct Case {
    pub name: String,
    pub category: String,
    pub format: String,
    pub store: String,
    pub what: String,
    pub root_unusable: bool,
    pub good: Vec<Good>,
    pub expect: Vec<Expect>,
    pub listings: Vec<Listing>,
}

pub struct Good {
    pub path: String,
    pub nbytes: u64,
    pub sha256: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Meta,
    Fail,
    Chunk,
    Bytes,
    Uniform,
    Refused,
    Optional,
}

pub struct Expect {
    pub path: String,
    pub kind: Kind,
    pub keys: Vec<String>,
    pub errnos: Vec<i32>,
    pub nbytes: u64,
    pub sha256: String,
    pub vlen: bool,
    pub broken: Vec<(u64, u64)>,
    pub intact: Vec<(u64, u64, String)>,
    pub pattern: Vec<u8>,
    pub regions: Vec<(u64, u64, String)>,
}

pub struct Listing {
    pub dir: String,
    /// (name, "file" | "dir")
    pub present: Vec<(String, String)>,
    pub absent: Vec<String>,
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .map(|s| s.as_str().expect("string").to_string())
                .collect()
        })
        .unwrap_or_default()
}

fn ranges(v: &Value) -> Vec<(u64, u64)> {
    v.as_array()
        .map(|a| {
            a.iter()
                .map(|r| (r[0].as_u64().expect("offset"), r[1].as_u64().expect("len")))
                .collect()
        })
        .unwrap_or_default()
}

fn hashed_ranges(v: &Value) -> Vec<(u64, u64, String)> {
    v.as_array()
        .map(|a| {
            a.iter()
                .map(|r| {
                    (
                        r[0].as_u64().expect("offset"),
                        r[1].as_u64().expect("len"),
                        r[2].as_str().expect("sha256").to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

pub fn errno_of(name: &str) -> i32 {
    match name {
        "EIO" => libc::EIO,
        "ENOMEM" => libc::ENOMEM,
        other => panic!("unknown errno {other} in the manifest"),
    }
}

pub fn errno_name(e: Option<i32>) -> String {
    let Some(e) = e else {
        return "no errno".into();
    };
    let name = match e {
        libc::EIO => "EIO",
        libc::ENOMEM => "ENOMEM",
        libc::ENOENT => "ENOENT",
        libc::ENOTCONN => "ENOTCONN",
        libc::ECONNABORTED => "ECONNABORTED",
        libc::EACCES => "EACCES",
        libc::EINVAL => "EINVAL",
        libc::EISDIR => "EISDIR",
        libc::EFBIG => "EFBIG",
        libc::ENAMETOOLONG => "ENAMETOOLONG",
        libc::EOVERFLOW => "EOVERFLOW",
        _ => return format!("errno {e}"),
    };
    name.into()
}

impl Case {
    fn parse(v: &Value) -> Case {
        let s = |k: &str| v[k].as_str().unwrap_or_default().to_string();
        let good = v["good"]
            .as_array()
            .expect("good")
            .iter()
            .map(|g| Good {
                path: g["path"].as_str().expect("path").into(),
                nbytes: g["nbytes"].as_u64().expect("nbytes"),
                sha256: g["sha256"].as_str().expect("sha256").into(),
            })
            .collect();
        let expect = v["expect"]
            .as_array()
            .expect("expect")
            .iter()
            .map(|e| Expect {
                path: e["path"].as_str().expect("path").into(),
                kind: match e["kind"].as_str().expect("kind") {
                    "meta" => Kind::Meta,
                    "fail" => Kind::Fail,
                    "chunk" => Kind::Chunk,
                    "bytes" => Kind::Bytes,
                    "uniform" => Kind::Uniform,
                    "refused" => Kind::Refused,
                    "optional" => Kind::Optional,
                    other => panic!("unknown expectation kind {other}"),
                },
                keys: strings(&e["keys"]),
                errnos: {
                    let names = strings(&e["errnos"]);
                    if names.is_empty() {
                        vec![libc::EIO]
                    } else {
                        names.iter().map(|n| errno_of(n)).collect()
                    }
                },
                nbytes: e["nbytes"].as_u64().unwrap_or(0),
                sha256: e["sha256"].as_str().unwrap_or_default().into(),
                vlen: e["vlen"].as_bool().unwrap_or(false),
                broken: ranges(&e["broken"]),
                intact: hashed_ranges(&e["intact"]),
                pattern: e["pattern"]
                    .as_str()
                    .map(|h| {
                        (0..h.len() / 2)
                            .map(|i| u8::from_str_radix(&h[2 * i..2 * i + 2], 16).expect("hex"))
                            .collect()
                    })
                    .unwrap_or_default(),
                regions: hashed_ranges(&e["regions"]),
            })
            .collect();
        let listings = v["listings"]
            .as_array()
            .expect("listings")
            .iter()
            .map(|l| Listing {
                dir: l["dir"].as_str().expect("dir").into(),
                present: l["present"]
                    .as_object()
                    .expect("present")
                    .iter()
                    .map(|(k, v)| (k.clone(), v.as_str().expect("kind").to_string()))
                    .collect(),
                absent: strings(&l["absent"]),
            })
            .collect();
        Case {
            name: s("name"),
            category: s("category"),
            format: s("format"),
            store: s("store"),
            what: s("what"),
            root_unusable: v["root_unusable"].as_bool().unwrap_or(false),
            good,
            expect,
            listings,
        }
    }
}

/// Runs `f` on its own thread; `Err` if it has not returned within `guard` (the thread
/// is left behind: a hung FUSE call returns once the daemon is killed).
pub fn guarded<T: Send + 'static>(
    guard: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ()> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(guard).map_err(|_| ())
}

/// What to do with a command's stdout: keep it whole (up to `keep` bytes), hash it,
/// compare it with a repeating pattern, capture regions; stop reading after `cap` bytes.
#[derive(Clone, Default)]
pub struct StdoutSpec {
    pub keep: usize,
    pub cap: u64,
    pub hash: bool,
    pub pattern: Option<Vec<u8>>,
    pub regions: Vec<(u64, u64)>,
}

#[derive(Default)]
pub struct StdoutSeen {
    pub len: u64,
    pub sha256: String,
    pub kept: Vec<u8>,
    /// The first offset whose byte differs from the pattern.
    pub pattern_mismatch: Option<u64>,
    pub regions: Vec<Vec<u8>>,
    /// Reading stopped at `cap`.
    pub capped: bool,
}

fn consume(mut pipe: impl Read, spec: StdoutSpec) -> StdoutSeen {
    let mut seen = StdoutSeen {
        regions: vec![Vec::new(); spec.regions.len()],
        ..Default::default()
    };
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    // The pattern repeated past one buffer, so any offset compares as one slice.
    let tiled: Vec<u8> = match &spec.pattern {
        Some(p) if !p.is_empty() => p
            .iter()
            .copied()
            .cycle()
            .take(buf.len() + p.len())
            .collect(),
        _ => Vec::new(),
    };
    loop {
        if seen.len >= spec.cap {
            seen.capped = true;
            break;
        }
        let want = (spec.cap - seen.len).min(buf.len() as u64) as usize;
        let n = match pipe.read(&mut buf[..want]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        let chunk = &buf[..n];
        let at = seen.len;
        if spec.hash {
            hasher.update(chunk);
        }
        if seen.kept.len() < spec.keep {
            let room = spec.keep - seen.kept.len();
            seen.kept.extend_from_slice(&chunk[..n.min(room)]);
        }
        if let Some(p) = spec.pattern.as_ref().filter(|p| !p.is_empty()) {
            if seen.pattern_mismatch.is_none() {
                let phase = (at % p.len() as u64) as usize;
                let want = &tiled[phase..phase + n];
                if chunk != want {
                    let i = chunk
                        .iter()
                        .zip(want)
                        .position(|(a, b)| a != b)
                        .unwrap_or(0);
                    seen.pattern_mismatch = Some(at + i as u64);
                }
            }
        }
        for (k, &(off, len)) in spec.regions.iter().enumerate() {
            let (lo, hi) = (off.max(at), (off + len).min(at + n as u64));
            if lo < hi {
                seen.regions[k].extend_from_slice(&chunk[(lo - at) as usize..(hi - at) as usize]);
            }
        }
        seen.len += n as u64;
    }
    if spec.hash {
        seen.sha256 = hex(&hasher.finalize());
    }
    seen
}

/// One `zarrfs` command run under the address-space limit.
pub struct Run {
    pub args: String,
    /// Exit code; `None` when killed by a signal or hung.
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub hung: bool,
    /// Peak resident memory in bytes (ru_maxrss).
    pub max_rss: u64,
    pub stdout: StdoutSeen,
    pub stderr: String,
}

impl Run {
    pub fn describe(&self) -> String {
        let status = if self.hung {
            "hung (killed after the guard)".to_string()
        } else if let Some(s) = self.signal {
            format!("killed by signal {s}")
        } else {
            format!("exit {}", self.code.unwrap_or(-1))
        };
        let stderr: String = self.stderr.chars().take(1500).collect();
        format!(
            "`zarrfs {}`: {status}, {} bytes out, peak RSS {} MiB, stderr: {:?}",
            self.args,
            self.stdout.len,
            self.max_rss >> 20,
            stderr.trim_end()
        )
    }

    /// A run that ended on its own, not by a signal or the guard.
    pub fn exited(&self) -> bool {
        !self.hung && self.signal.is_none() && self.code.is_some()
    }
}

/// `prlimit --as=AS_LIMIT zarrfs ARGS`, stdin closed, stdout handled per `spec`, under
/// `guard`.
pub fn run_zarrfs(args: &[&str], spec: StdoutSpec, guard: Duration) -> Run {
    let mut child = zarrfs_limited(AS_LIMIT)
        .args(args)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn prlimit zarrfs (prlimit is in util-linux)");
    let pid = child.id() as libc::pid_t;
    let out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let out = std::thread::spawn(move || consume(out, spec));
    let err = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.by_ref().take(1 << 20).read_to_end(&mut v);
        // Drain the rest so the process never blocks on a full stderr pipe.
        let _ = std::io::copy(&mut err, &mut std::io::sink());
        v
    });
    let deadline = Instant::now() + guard;
    let mut status = 0;
    // SAFETY: rusage is plain data, filled in by wait4.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let mut hung = false;
    loop {
        // SAFETY: waiting for our own child; status and usage are valid pointers.
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if r == pid {
            break;
        }
        assert!(r == 0, "wait4: {}", std::io::Error::last_os_error());
        if Instant::now() > deadline {
            hung = true;
            // SAFETY: killing and reaping our own child.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::wait4(pid, &mut status, 0, &mut usage);
            }
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    // The child is reaped here; `Child` must not wait for it again.
    std::mem::forget(child);
    let stdout = out.join().unwrap_or_default();
    let stderr = String::from_utf8_lossy(&err.join().unwrap_or_default()).into_owned();
    let (code, signal) = if hung {
        (None, Some(libc::SIGKILL))
    } else if libc::WIFEXITED(status) {
        (Some(libc::WEXITSTATUS(status)), None)
    } else if libc::WIFSIGNALED(status) {
        (None, Some(libc::WTERMSIG(status)))
    } else {
        (None, None)
    };
    Run {
        args: args.join(" "),
        code,
        signal: if hung { None } else { signal },
        hung,
        max_rss: usage.ru_maxrss.max(0) as u64 * 1024,
        stdout,
        stderr,
    }
}

/// A `zarrfs mount -f` daemon under the address-space limit, a child of the test.
/// Dropping it kills the daemon and clears its mount, so that no failing case leaves a
/// mount behind.
pub struct Daemon {
    pub mountpoint: PathBuf,
    pub log: PathBuf,
    child: Option<std::process::Child>,
    _dir: TempDir,
}

pub enum Started {
    Mounted(Daemon),
    /// The daemon exited before mounting: its status and log.
    Exited(Option<i32>, Option<i32>, String),
    /// Neither mounted nor exited within the guard (killed).
    Hung(String),
}

impl Daemon {
    pub fn start(store: &Path) -> Started {
        let (dir, mountpoint, log) = mount_dir("hostile");
        let child = spawn_foreground(
            zarrfs_limited(AS_LIMIT),
            store,
            &mountpoint,
            &["--cache-size", CACHE, "--threads", "2"],
            &log,
        )
        .expect("spawn prlimit zarrfs mount -f");
        let mut daemon = Daemon {
            mountpoint,
            log,
            child: Some(child),
            _dir: dir,
        };
        let deadline = Instant::now() + GUARD;
        loop {
            if mounted(&daemon.mountpoint) {
                return Started::Mounted(daemon);
            }
            if let Some(status) = daemon.try_wait() {
                use std::os::unix::process::ExitStatusExt;
                daemon.child = None;
                return Started::Exited(status.code(), status.signal(), daemon.log());
            }
            if Instant::now() > deadline {
                daemon.kill();
                return Started::Hung(daemon.log());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn path(&self, p: &str) -> PathBuf {
        if p.is_empty() {
            self.mountpoint.clone()
        } else {
            self.mountpoint.join(p)
        }
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The daemon's peak RSS so far (VmHWM), while it runs.
    pub fn peak_rss(&self) -> Option<u64> {
        self.pid().and_then(peak_rss)
    }

    /// `Some(status)` once the daemon has exited.
    pub fn try_wait(&mut self) -> Option<std::process::ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().expect("wait for zarrfs"))
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        clear_mount(&self.mountpoint);
    }

    /// `zarrfs umount`, then the daemon's exit status (code, signal); `Err` with what
    /// went wrong if the unmount or the exit did not happen within the guard.
    pub fn unmount(mut self) -> Result<(Option<i32>, Option<i32>), String> {
        let mp = self.mountpoint.clone();
        let status = guarded(GUARD, move || {
            umount_command(&mp)
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .output()
        });
        match status {
            Err(()) => return Err("`zarrfs umount` hung".into()),
            Ok(Ok(out)) if !out.status.success() => {
                return Err(format!(
                    "`zarrfs umount` failed: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ))
            }
            Ok(Err(e)) => return Err(format!("run zarrfs umount: {e}")),
            Ok(Ok(_)) => {}
        }
        match self.child.as_mut().and_then(|c| wait_exit(c, GUARD)) {
            Some(status) => {
                use std::os::unix::process::ExitStatusExt;
                self.child = None;
                Ok((status.code(), status.signal()))
            }
            None => Err("the daemon did not exit within the guard after `zarrfs umount`".into()),
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Clears a mount left behind (killed daemon) with `zarrfs umount`, under a guard.
pub fn clear_mount(mountpoint: &Path) {
    if !mounted(mountpoint) {
        return;
    }
    let mp = mountpoint.to_path_buf();
    let _ = guarded(GUARD, move || {
        umount_command(&mp)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
    });
}
