//! Stress and robustness tests that mount for real (root and /dev/fuse required; a
//! missing prerequisite fails): 16 reader processes doing random preads over every
//! fixed-size array of four fixture stores with a 1 MiB cache while `ls -lR` loops;
//! SIGKILL and SIGTERM of the daemon under streaming readers; reads at and past the end
//! of file and at offsets near 2^63; 20 GiB arrays made only of their fill value; and
//! liveness while one store read is stuck and one chunk is a FIFO.
//!
//! The tests of this file run one at a time (they measure the daemon's memory and load
//! both cores). `ZARRFS_STRESS_SECONDS` sets the length of the random-read run (60 s).

use crate::common;

use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use common::mount::{
    array_file, mounted, peak_rss, python_stdout, test_python, umount, wait_exit, wait_for,
    wait_until, ForegroundMount, Lcg, Mount,
};
use common::{
    assert_no_failures, cat, copy_dir, sha256, zarrfs_limited, CliRun, Manifest, TempDir,
};
use serde_json::Value;

/// Arrays whose codecs zarrfs does not implement (their reads fail with EIO; see
/// tests/it/mount.rs): left out of the random reads.
const UNSUPPORTED: [(&str, &str); 2] = [
    ("v3", "codecs/numcodecs_jenkins_lookup3"),
    ("v2_zarr2", "categorize_object"),
];

/// What the daemon may use beyond its `--cache-size`.
const RSS_HEADROOM: u64 = 256 << 20;

const MIB: u64 = 1 << 20;

/// One test at a time.
fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / MIB as f64)
}

// ---------------------------------------------------------------------------------------
// Expected bytes
// ---------------------------------------------------------------------------------------

/// One fixture array: where it is on the mount and a file of its expected bytes.
struct Expected {
    name: String,
    mounted: PathBuf,
    file: PathBuf,
    size: u64,
    /// Byte distance between chunk boundaries along each dimension (C order).
    strides: Vec<u64>,
}

fn u64s(v: &Value) -> Vec<u64> {
    v.as_array()
        .expect("list")
        .iter()
        .map(|d| d.as_u64().expect("integer"))
        .collect()
}

/// Every fixed-size, supported array of `store` whose path passes `keep`: `zarrfs cat`
/// output, checked against the manifest's sha256 (zarr-python's read-back), written to a
/// file in `dir`.
fn expected_arrays(
    m: &Manifest,
    store: &str,
    mountpoint: &Path,
    dir: &Path,
    keep: impl Fn(&str) -> bool,
) -> Vec<Expected> {
    let mut out = Vec::new();
    for entry in m.arrays().iter().filter(|a| a["store"] == store) {
        let path = entry["path"].as_str().unwrap_or("");
        if entry["vlen"] == true || UNSUPPORTED.contains(&(store, path)) || !keep(path) {
            continue;
        }
        let bytes = cat(&m.store_dir(store), path, &[]);
        assert_eq!(
            sha256(&bytes),
            entry["sha256"]["C_little"],
            "zarrfs cat {store}:{path} differs from zarr-python"
        );
        let file = dir.join(format!("{store}-{}.bin", path.replace('/', "_")));
        std::fs::write(&file, &bytes).expect("write expected bytes");
        let (shape, chunks) = (u64s(&entry["shape"]), u64s(&entry["chunks"]));
        let item = entry["itemsize"].as_u64().expect("itemsize");
        let strides = (0..shape.len())
            .map(|d| chunks[d] * shape[d + 1..].iter().product::<u64>() * item)
            .filter(|&s| s > 0)
            .collect();
        out.push(Expected {
            name: format!("{store}:{path}"),
            mounted: array_file(m, store, path, mountpoint),
            file,
            size: bytes.len() as u64,
            strides,
        });
    }
    out
}

// ---------------------------------------------------------------------------------------
// Child processes with hang guards
// ---------------------------------------------------------------------------------------

/// A child process whose stdout goes to a file that can be read while it runs.
struct Proc {
    label: String,
    child: Child,
    out: PathBuf,
    err: PathBuf,
}

impl Proc {
    fn spawn(label: &str, dir: &Path, command: &mut Command) -> Proc {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let out = dir.join(format!("proc-{n}.out"));
        let err = dir.join(format!("proc-{n}.err"));
        let child = command
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out).expect("stdout file"))
            .stderr(std::fs::File::create(&err).expect("stderr file"))
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {label}: {e}"));
        Proc {
            label: label.to_string(),
            child,
            out,
            err,
        }
    }

    fn python(label: &str, dir: &Path, script: &str, args: &[String]) -> Proc {
        Proc::spawn(
            label,
            dir,
            Command::new(test_python()).arg("-c").arg(script).args(args),
        )
    }

    fn stdout(&self) -> String {
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.err).unwrap_or_default()
    }

    fn running(&mut self) -> bool {
        self.child.try_wait().expect("wait").is_none()
    }

    /// Waits up to `guard`; a process still running then is killed and reported as hung.
    fn finish(&mut self, guard: Duration) -> Result<std::process::ExitStatus, String> {
        if let Some(status) = wait_exit(&mut self.child, guard) {
            return Ok(status);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        Err(format!(
            "{} hung: still running after {guard:?} (killed); stdout {:?}, stderr {:?}",
            self.label,
            tail(&self.stdout()),
            tail(&self.stderr())
        ))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.running() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The last 1,500 characters of `text` (for failure messages).
fn tail(text: &str) -> String {
    common::tail(text, 1500)
}

/// `command` run to completion with a hang guard of `guard` (killed then).
fn run_guarded(label: &str, dir: &Path, command: &mut Command, guard: Duration) -> GuardedRun {
    let mut p = Proc::spawn(label, dir, command);
    let status = p.finish(guard);
    GuardedRun {
        status,
        stdout: p.stdout(),
        stderr: p.stderr(),
    }
}

/// The outcome of `run_guarded`: the exit status, or why it was killed as hung.
struct GuardedRun {
    status: Result<std::process::ExitStatus, String>,
    stdout: String,
    stderr: String,
}

impl GuardedRun {
    fn ok(&self) -> bool {
        matches!(&self.status, Ok(s) if s.success())
    }
}

impl std::fmt::Debug for GuardedRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:?}, stdout {:?}, stderr {:?}",
            self.status,
            tail(&self.stdout),
            tail(&self.stderr)
        )
    }
}

fn signal(pid: u32, sig: i32) {
    // SAFETY: signalling a child process of this test.
    let rc = unsafe { libc::kill(pid as i32, sig) };
    assert_eq!(rc, 0, "kill({pid}, {sig})");
}

// ---------------------------------------------------------------------------------------
// 1. Sixteen random readers and a listing loop
// ---------------------------------------------------------------------------------------

/// A reader process: random preads over the arrays of a JSON list until a deadline,
/// each compared with the same range of the expected-bytes file. Prints its counts as
/// one JSON line.
const RANDOM_READER: &str = r#"
import json, os, random, sys, time
arrays = json.load(open(sys.argv[1]))
rng = random.Random(int(sys.argv[2]))
deadline = time.time() + float(sys.argv[3])
big = [i for i, a in enumerate(arrays) if a["size"] >= (1 << 24)]

def pread_full(fd, off, n):
    parts, got = [], 0
    while got < n:
        b = os.pread(fd, n - got, off + got)
        if not b:
            break
        parts.append(b)
        got += len(b)
    return b"".join(parts)

stats = {"reads": 0, "bytes": 0, "mismatches": 0, "errors": 0, "samples": []}
def note(kind, msg):
    stats[kind] += 1
    if len(stats["samples"]) < 20:
        stats["samples"].append(msg)

want_fds = [os.open(a["expected"], os.O_RDONLY) for a in arrays]
fds = [None] * len(arrays)
while time.time() < deadline:
    i = rng.choice(big) if big and rng.random() < 0.25 else rng.randrange(len(arrays))
    a = arrays[i]
    size = a["size"]
    r = rng.random()
    if size == 0 or r < 0.08:
        what, off, n = "past-eof", size + rng.randint(0, 1 << 20), rng.randint(1, 1 << 16)
    elif r < 0.40:
        what, off, n = "small", rng.randrange(size), rng.randint(1, 4096)
    elif r < 0.62 and a["strides"]:
        stride = rng.choice(a["strides"])
        k = rng.randint(1, max(1, size // stride))
        back = rng.randint(1, min(stride, 1 << 16))
        what, off, n = "chunk-boundary", max(0, k * stride - back), back + rng.randint(1, 1 << 16)
    elif r < 0.78:
        what, off, n = "large", rng.randrange(size), rng.randint(1 << 16, 4 << 20)
    elif r < 0.92:
        back = rng.randint(1, min(size, 1 << 20))
        what, off, n = "across-eof", size - back, back + rng.randint(1, 1 << 20)
    else:
        what, off, n = "whole", 0, size + 4096
    try:
        if fds[i] is None or rng.random() < 0.05:
            if fds[i] is not None:
                os.close(fds[i])
            fds[i] = os.open(a["mounted"], os.O_RDONLY)
        if rng.random() < 0.10:
            # Drop the kernel's cached pages so that the daemon serves the read.
            os.posix_fadvise(fds[i], 0, 0, os.POSIX_FADV_DONTNEED)
        got = pread_full(fds[i], off, n)
    except OSError as e:
        note("errors", f"{a['name']} {what} pread({off}, {n}): {e}")
        continue
    want = pread_full(want_fds[i], off, n)
    stats["reads"] += 1
    stats["bytes"] += len(got)
    if got != want:
        at = next((k for k, (x, y) in enumerate(zip(got, want)) if x != y), min(len(got), len(want)))
        note("mismatches", f"{a['name']} {what} pread({off}, {n}): {len(got)} bytes, want {len(want)}, first difference at +{at}")
print(json.dumps(stats), flush=True)
"#;

fn stress_seconds() -> u64 {
    match std::env::var("ZARRFS_STRESS_SECONDS") {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("ZARRFS_STRESS_SECONDS={v:?} is not a number")),
        Err(_) => 60,
    }
}

#[test]
fn sixteen_random_readers_and_a_listing_loop_over_a_1mib_cache() {
    let _serial = serial();
    let m = Manifest::load();
    let tmp = TempDir::new("stress");
    let seconds = stress_seconds();
    let stores = ["v3", "v2", "draft", "v3_large"];
    let mounts: Vec<ForegroundMount> = stores
        .iter()
        .map(|s| ForegroundMount::new(&m.store_dir(s), &["--cache-size", "1MiB"]))
        .collect();
    let mut arrays = Vec::new();
    for (store, mount) in stores.iter().zip(&mounts) {
        arrays.extend(expected_arrays(
            &m,
            store,
            &mount.mountpoint,
            tmp.path(),
            |_| true,
        ));
    }
    assert!(arrays.len() > 300, "only {} arrays", arrays.len());
    let list: Vec<Value> = arrays
        .iter()
        .map(|a| {
            serde_json::json!({
                "name": a.name, "mounted": a.mounted, "expected": a.file,
                "size": a.size, "strides": a.strides,
            })
        })
        .collect();
    let list_file = tmp.path().join("arrays.json");
    std::fs::write(&list_file, serde_json::to_vec(&list).expect("json")).expect("write list");
    let total: u64 = arrays.iter().map(|a| a.size).sum();
    println!(
        "stress: {} arrays ({}) in {} mounts, 16 readers, {seconds} s",
        arrays.len(),
        mib(total),
        mounts.len()
    );

    // `ls -lRa` over every mount, again and again, until the readers are done.
    let stop = Arc::new(AtomicBool::new(false));
    let lister = {
        let stop = stop.clone();
        let mps: Vec<PathBuf> = mounts.iter().map(|m| m.mountpoint.clone()).collect();
        std::thread::spawn(move || {
            let (mut runs, mut failures) = (0u64, Vec::new());
            while !stop.load(Ordering::Relaxed) {
                for mp in &mps {
                    let run = CliRun::run(Command::new("ls").arg("-lRa").arg(mp));
                    runs += 1;
                    if !run.success() || !run.stderr.is_empty() || run.stdout.is_empty() {
                        failures.push(format!("{run}"));
                    }
                }
            }
            (runs, failures)
        })
    };

    let started = Instant::now();
    let mut readers: Vec<Proc> = (0..16)
        .map(|k| {
            Proc::python(
                &format!("reader {k}"),
                tmp.path(),
                RANDOM_READER,
                &[
                    list_file.to_string_lossy().to_string(),
                    (1000 + k).to_string(),
                    seconds.to_string(),
                ],
            )
        })
        .collect();
    let guard = Duration::from_secs(seconds + 120);
    let mut failures = Vec::new();
    let (mut reads, mut bytes, mut mismatches, mut errors) = (0u64, 0u64, 0u64, 0u64);
    for r in &mut readers {
        match r.finish(guard) {
            Ok(status) if status.success() => {
                let stats: Value = match serde_json::from_str(r.stdout().trim()) {
                    Ok(v) => v,
                    Err(e) => {
                        failures.push(format!("{}: output {:?}: {e}", r.label, r.stdout()));
                        continue;
                    }
                };
                let n = |k: &str| stats[k].as_u64().unwrap_or(0);
                reads += n("reads");
                bytes += n("bytes");
                mismatches += n("mismatches");
                errors += n("errors");
                if n("reads") == 0 {
                    failures.push(format!("{}: no reads", r.label));
                }
                for s in stats["samples"].as_array().into_iter().flatten() {
                    failures.push(format!("{}: {}", r.label, s.as_str().unwrap_or("")));
                }
            }
            Ok(status) => failures.push(format!("{}: {status}: {}", r.label, tail(&r.stderr()))),
            Err(hung) => failures.push(hung),
        }
    }
    let elapsed = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let (ls_runs, ls_failures) = lister.join().expect("ls loop");
    failures.extend(ls_failures.iter().take(10).cloned());
    let mut rss = Vec::new();
    for (store, mount) in stores.iter().zip(&mounts) {
        let mut mount_alive = true;
        if let Some(p) = peak_rss(mount.pid()) {
            rss.push(format!("{store} {}", mib(p)));
            if p > MIB + RSS_HEADROOM {
                failures.push(format!(
                    "{store}: daemon peak RSS {} over --cache-size 1MiB + {}",
                    mib(p),
                    mib(RSS_HEADROOM)
                ));
            }
        } else {
            mount_alive = false;
        }
        if !mount_alive || !mounted(&mount.mountpoint) {
            failures.push(format!("{store}: the daemon is gone: {}", mount.log()));
        }
        if mount.log().contains("panic") {
            failures.push(format!("{store}: daemon log: {}", tail(&mount.log())));
        }
    }
    println!(
        "stress: {reads} reads, {} read, {mismatches} mismatches, {errors} errors in {:.1} s; \
         {ls_runs} `ls -lRa` runs, {} failed; daemon peak RSS: {}",
        mib(bytes),
        elapsed.as_secs_f64(),
        ls_failures.len(),
        rss.join(", ")
    );
    assert!(
        failures.is_empty() && mismatches == 0 && errors == 0,
        "{mismatches} mismatches, {errors} errors, {} ls failures:\n{}",
        ls_failures.len(),
        failures.join("\n")
    );
}

// ---------------------------------------------------------------------------------------
// Large arrays: the fill-only store written by zarr-python, with v3_large's array beside
// ---------------------------------------------------------------------------------------

/// One fill-only array as zarr-python describes it.
struct FillArray {
    path: String,
    shape: Vec<u64>,
    chunks: Vec<u64>,
    size: u64,
    /// One element's bytes, little-endian, from zarr-python's read-back.
    element: Vec<u8>,
}

impl FillArray {
    /// The expected bytes of `[offset, offset + len)`, clipped at the end of the file.
    fn bytes(&self, offset: u64, len: u64) -> Vec<u8> {
        let end = offset.saturating_add(len).min(self.size);
        let n = end.saturating_sub(offset) as usize;
        let phase = (offset % self.element.len() as u64) as usize;
        let mut out = Vec::with_capacity(n + phase + self.element.len());
        while out.len() < n + phase {
            out.extend_from_slice(&self.element);
        }
        out.drain(..phase);
        out.truncate(n);
        out
    }

    /// Byte distance between chunk boundaries along each dimension.
    fn strides(&self) -> Vec<u64> {
        let item = self.element.len() as u64;
        (0..self.shape.len())
            .map(|d| self.chunks[d] * self.shape[d + 1..].iter().product::<u64>() * item)
            .collect()
    }
}

/// A temporary store: scripts/make_fill_fixture.py's fill-only arrays (20 GiB `f32_1d`,
/// 20 GiB `i16_2d`, 2 GiB `f64_small`) plus v3_large's `field` (16 MiB of data).
struct BigStore {
    dir: TempDir,
    store: PathBuf,
    fills: Vec<FillArray>,
    field_sha256: String,
    field_size: u64,
}

impl BigStore {
    fn new(label: &str) -> BigStore {
        let dir = TempDir::new(label);
        let script = crate::common::repo().join("scripts/make_fill_fixture.py");
        let out = python_stdout(
            "make_fill_fixture.py",
            &[script.as_os_str(), dir.path().as_os_str()],
        );
        let doc: Value = serde_json::from_str(&out).expect("fixture JSON");
        let store = PathBuf::from(doc["store"].as_str().expect("store"));
        let fills = doc["arrays"]
            .as_array()
            .expect("arrays")
            .iter()
            .map(|a| {
                let hex = a["element"].as_str().expect("element");
                FillArray {
                    path: a["path"].as_str().expect("path").to_string(),
                    shape: u64s(&a["shape"]),
                    chunks: u64s(&a["chunks"]),
                    size: a["nbytes"].as_u64().expect("nbytes"),
                    element: (0..hex.len())
                        .step_by(2)
                        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
                        .collect(),
                }
            })
            .collect();
        let m = Manifest::load();
        copy_dir(&m.store_dir("v3_large").join("field"), &store.join("field"));
        let entry = m
            .arrays()
            .iter()
            .find(|a| a["store"] == "v3_large" && a["path"] == "field")
            .expect("v3_large field in the manifest");
        BigStore {
            dir,
            store,
            fills,
            field_sha256: entry["sha256"]["C_little"].as_str().expect("sha").into(),
            field_size: entry["nbytes"].as_u64().expect("nbytes"),
        }
    }

    fn fill(&self, path: &str) -> &FillArray {
        self.fills
            .iter()
            .find(|f| f.path == path)
            .unwrap_or_else(|| panic!("{path} not written by make_fill_fixture.py"))
    }
}

/// A streaming reader: sequential preads of BLOCK bytes from START, wrapping around;
/// in `hash` mode each full pass is hashed and printed (`pass <sha256>`), in `fill` mode
/// every block is compared with the repeated element (a short read goes on from where it
/// ended) and a line `span ok` printed every 64 MiB. The first read error prints
/// `error <errno> <message>` and exits 3; the file
/// STOP existing (checked between units) ends it with `stopped`.
const STREAM_READER: &str = r#"
import hashlib, os, sys
path, mode, arg, start, block, stop = sys.argv[1:7]
start, block = int(start), int(block)
fd = os.open(path, os.O_RDONLY)
size = os.fstat(fd).st_size
print("open", flush=True)
def fail(e):
    print(f"error {e.errno} {e.strerror}", flush=True)
    sys.exit(3)
try:
    if mode == "hash":
        while not os.path.exists(stop):
            h = hashlib.sha256()
            for off in range(0, size, block):
                h.update(os.pread(fd, block, off))
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            print("pass", h.hexdigest(), flush=True)
    else:
        element = bytes.fromhex(arg)
        pattern = element * (block // len(element) + 2)
        off, done, spans = start, 0, 0
        while not os.path.exists(stop):
            got = os.pread(fd, block, off)
            # A short read is allowed (POSIX; a daemon killed mid-request returns what
            # had arrived): the next read goes on from there. Every byte must be right,
            # and only the end of the file may return nothing.
            phase = off % len(element)
            if got != pattern[phase : phase + len(got)] or (not got and off != size):
                print(f"BAD at {off}: {len(got)} bytes", flush=True)
                sys.exit(4)
            off = off + len(got) if off + len(got) < size else 0
            done += len(got)
            if done // (64 << 20) != spans:
                spans = done // (64 << 20)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                print("span ok", flush=True)
except OSError as e:
    fail(e)
print("stopped", flush=True)
"#;

fn stream_reader(
    dir: &Path,
    label: &str,
    file: &Path,
    mode: &str,
    arg: &str,
    start: u64,
    stop: &Path,
) -> Proc {
    Proc::python(
        label,
        dir,
        STREAM_READER,
        &[
            file.to_string_lossy().to_string(),
            mode.to_string(),
            arg.to_string(),
            start.to_string(),
            MIB.to_string(),
            stop.to_string_lossy().to_string(),
        ],
    )
}

/// Two readers hashing `field` in passes and two streaming the 20 GiB fill array from
/// different places; returns once each has printed a first unit.
fn start_streaming(big: &BigStore, mount: &ForegroundMount, stop: &Path) -> Vec<Proc> {
    let fill = big.fill("f32_1d");
    let element = common::hex(&fill.element);
    // (label, file, mode, mode argument, start offset)
    let plan = [
        ("field reader 1", "field", "hash", "", 0),
        ("field reader 2", "field", "hash", "", 0),
        ("fill reader 1", "f32_1d", "fill", element.as_str(), 0),
        (
            "fill reader 2",
            "f32_1d",
            "fill",
            element.as_str(),
            fill.size / 2 + 3 * fill.chunks[0] * 4 / 2,
        ),
    ];
    let readers: Vec<Proc> = plan
        .iter()
        .map(|&(label, file, mode, arg, start)| {
            stream_reader(
                big.dir.path(),
                label,
                &mount.path(file),
                mode,
                arg,
                start,
                stop,
            )
        })
        .collect();
    for r in &readers {
        let started = wait_for(Duration::from_secs(60), || {
            r.stdout().lines().count() >= 2 || !r.stderr().is_empty()
        });
        assert!(
            started,
            "{} did not stream: {:?} {:?}",
            r.label,
            r.stdout(),
            r.stderr()
        );
        assert!(
            !r.stdout().contains("BAD") && !r.stdout().contains("error"),
            "{} before any signal: {:?} {:?}",
            r.label,
            r.stdout(),
            tail(&r.stderr())
        );
    }
    readers
}

/// Reads a whole file through a fresh open and returns its sha256.
fn file_sha256(path: &Path) -> String {
    let mut f = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut h = common::HashWriter::default();
    std::io::copy(&mut f, &mut h).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    h.hex()
}

// ---------------------------------------------------------------------------------------
// 2. Signals under streaming readers
// ---------------------------------------------------------------------------------------

#[test]
fn sigkill_under_streaming_readers_fails_them_then_umount_and_remount_work() {
    let _serial = serial();
    let big = BigStore::new("sigkill");
    let stop = big.dir.path().join("stop");
    let mut mount = ForegroundMount::new(&big.store, &[]);
    let mut readers = start_streaming(&big, &mount, &stop);
    signal(mount.pid(), libc::SIGKILL);
    let status = mount.child.wait().expect("wait for the killed daemon");
    println!("sigkill: daemon ended: {status}");
    let mut failures = Vec::new();
    for r in &mut readers {
        // Each reader must end with an error, not hang, within 30 s of the kill.
        match r.finish(Duration::from_secs(30)) {
            Err(hung) => failures.push(hung),
            Ok(_) => {
                let out = r.stdout();
                let errno = out
                    .lines()
                    .find_map(|l| l.strip_prefix("error "))
                    .and_then(|l| l.split(' ').next())
                    .and_then(|n| n.parse::<i32>().ok());
                println!("sigkill: {}: {:?}", r.label, out.lines().last());
                if !matches!(errno, Some(libc::ENOTCONN | libc::ECONNABORTED | libc::EIO)) {
                    failures.push(format!(
                        "{}: want ENOTCONN, ECONNABORTED or EIO, got stdout {:?} stderr {:?}",
                        r.label,
                        tail(&out),
                        tail(&r.stderr())
                    ));
                }
            }
        }
    }
    assert!(
        mounted(&mount.mountpoint),
        "a killed daemon leaves its mount"
    );
    let stale = std::fs::metadata(mount.path("field"))
        .err()
        .and_then(|e| e.raw_os_error());
    assert_eq!(stale, Some(libc::ENOTCONN), "stat on the stale mount");
    assert!(umount(&mount.mountpoint).success(), "zarrfs umount");
    assert!(!mounted(&mount.mountpoint), "still mounted after umount");
    assert!(failures.is_empty(), "{}", failures.join("\n"));

    // A remount of the same store reads byte-exact.
    let again = ForegroundMount::new(&big.store, &[]);
    assert_eq!(
        file_sha256(&again.path("field")),
        big.field_sha256,
        "field after remount"
    );
    let fill = big.fill("f32_1d");
    let file = std::fs::File::open(again.path("f32_1d")).expect("open");
    for offset in [0, fill.size / 3, fill.size - MIB] {
        let mut buf = vec![0u8; MIB as usize];
        file.read_exact_at(&mut buf, offset).expect("read");
        assert!(buf == fill.bytes(offset, MIB), "f32_1d at {offset}");
    }
}

#[test]
fn sigterm_under_streaming_readers_detaches_and_exits_zero_once_they_close() {
    let _serial = serial();
    let big = BigStore::new("sigterm");
    let stop = big.dir.path().join("stop");
    let mut mount = ForegroundMount::new(&big.store, &[]);
    let mut readers = start_streaming(&big, &mount, &stop);
    signal(mount.pid(), libc::SIGTERM);
    wait_until("the mount to leave the namespace", || {
        !mounted(&mount.mountpoint)
    });
    // The open files keep working after the detach: each reader completes two more units
    // (a full pass, or 64 MiB of fill) with the right bytes.
    let seen: Vec<usize> = readers.iter().map(|r| r.stdout().lines().count()).collect();
    let mut failures = Vec::new();
    for (r, before) in readers.iter_mut().zip(seen) {
        let more = wait_for(Duration::from_secs(60), || {
            r.stdout().lines().count() >= before + 2 || !r.running()
        });
        if !more || !r.running() {
            failures.push(format!(
                "{}: no progress after the detach: {:?} {:?}",
                r.label,
                tail(&r.stdout()),
                tail(&r.stderr())
            ));
        }
    }
    std::fs::write(&stop, b"").expect("stop file");
    for r in &mut readers {
        match r.finish(Duration::from_secs(60)) {
            Err(hung) => failures.push(hung),
            Ok(status) => {
                let out = r.stdout();
                let passes_ok = out
                    .lines()
                    .filter_map(|l| l.strip_prefix("pass "))
                    .all(|sha| sha == big.field_sha256);
                if !status.success() || !out.ends_with("stopped\n") || !passes_ok {
                    failures.push(format!(
                        "{}: {status}: {:?} {:?}",
                        r.label,
                        tail(&out),
                        tail(&r.stderr())
                    ));
                }
            }
        }
    }
    drop(readers);
    let status = mount.wait_exit(Duration::from_secs(20));
    println!("sigterm: daemon exit after the readers closed: {status:?}");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(0),
        "the daemon's exit once the last file closed; log: {}",
        mount.log()
    );
}

// ---------------------------------------------------------------------------------------
// 3. Reads at and past the end of file, and near 2^63
// ---------------------------------------------------------------------------------------

/// One pread(2) of `len` bytes at `offset`, repeated until `len` bytes or end of file:
/// the bytes, or the errno of the first failure.
fn pread_raw(file: &std::fs::File, offset: u64, len: usize) -> Result<Vec<u8>, i32> {
    use std::os::fd::AsRawFd;
    let mut buf = vec![0u8; len];
    let mut got = 0usize;
    loop {
        // SAFETY: the buffer holds `len - got` bytes from `got`; the fd is open.
        let n = unsafe {
            libc::pread(
                file.as_raw_fd(),
                buf[got..].as_mut_ptr().cast(),
                len - got,
                (offset + got as u64) as libc::off_t,
            )
        };
        if n < 0 {
            return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0));
        }
        if n == 0 || got + n as usize == len {
            got += n as usize;
            break;
        }
        got += n as usize;
    }
    buf.truncate(got);
    Ok(buf)
}

/// The expected bytes of (offset, length), clipped at the end of the file.
type ExpectRange = Box<dyn Fn(u64, u64) -> Vec<u8>>;

/// The (offset, length) pairs tried on a file of `size` bytes.
fn edge_reads(size: u64) -> Vec<(u64, usize)> {
    let max = i64::MAX as u64;
    let mut reads = Vec::new();
    for len in [1usize, 7, 4096, MIB as usize] {
        for offset in [
            0,
            size.saturating_sub(1),
            size.saturating_sub(len as u64 / 2 + 1),
            size,
            size + 1,
            size + 4096,
            1 << 32,
            1 << 40,
            1 << 62,
            max - len as u64,
            max - len as u64 + 1,
            max,
        ] {
            reads.push((offset, len));
        }
    }
    reads.push((max, 0));
    reads.push((size, 0));
    reads
}

#[test]
fn reads_at_and_past_the_end_and_near_2_pow_63_are_exact() {
    let _serial = serial();
    let m = Manifest::load();
    let big = BigStore::new("eof");
    let tmp = TempDir::new("eof-expected");
    let mut failures = Vec::new();
    let mut checked = 0;

    // The fill store with `field`, and small arrays of three layouts (odd sizes, empty).
    let mount = ForegroundMount::new(&big.store, &[]);
    let field = cat(&big.store, "field", &[]);
    assert_eq!(sha256(&field), big.field_sha256, "cat field");
    let mut cases: Vec<(String, PathBuf, ExpectRange, u64)> = Vec::new();
    let field_len = field.len() as u64;
    cases.push((
        "field".into(),
        mount.path("field"),
        Box::new(move |o, l| {
            let end = o.saturating_add(l).min(field_len);
            field[o.min(end) as usize..end as usize].to_vec()
        }),
        big.field_size,
    ));
    for f in &big.fills {
        let fill = FillArray {
            path: f.path.clone(),
            shape: f.shape.clone(),
            chunks: f.chunks.clone(),
            size: f.size,
            element: f.element.clone(),
        };
        cases.push((
            f.path.clone(),
            mount.path(&f.path),
            Box::new(move |o, l| fill.bytes(o, l)),
            f.size,
        ));
    }
    let mut small_mounts = Vec::new();
    for (store, paths) in [
        ("v3", ["dtypes/int16", "shapes/zero_len"]),
        ("v2", ["dtypes/gt_i2", "shapes/zero_len"]),
        ("draft", ["dtypes/gt_i2", "shapes/zero_len"]),
    ] {
        let sm = Mount::new(&m.store_dir(store), &[]);
        for e in expected_arrays(&m, store, &sm.mountpoint, tmp.path(), |p| {
            paths.contains(&p)
        }) {
            let bytes = std::fs::read(&e.file).expect("expected bytes");
            let len = bytes.len() as u64;
            cases.push((
                e.name.clone(),
                e.mounted.clone(),
                Box::new(move |o, l| {
                    let end = o.saturating_add(l).min(len);
                    bytes[o.min(end) as usize..end as usize].to_vec()
                }),
                e.size,
            ));
        }
        small_mounts.push(sm);
    }
    assert_eq!(cases.len(), 4 + 6, "arrays under test");

    // The kernel's own answer for a regular file of the same size is the reference for
    // requests it refuses before any filesystem sees them (offset + length past 2^63 - 1).
    let reference_dir = TempDir::new("eof-reference");
    for (name, path, expect, size) in &cases {
        let reference_path = reference_dir.path().join("sparse");
        let reference = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&reference_path)
            .expect("reference file");
        reference.set_len(*size).expect("sparse reference");
        for direct in [false, true] {
            let mut opts = std::fs::OpenOptions::new();
            opts.read(true);
            if direct {
                opts.custom_flags(libc::O_DIRECT);
            }
            let file = match opts.open(path) {
                Ok(f) => f,
                Err(e) => {
                    failures.push(format!("{name}: open (O_DIRECT {direct}): {e}"));
                    continue;
                }
            };
            for (offset, len) in edge_reads(*size) {
                checked += 1;
                let what = format!(
                    "{name} (size {size}{}): pread({offset}, {len})",
                    if direct { ", O_DIRECT" } else { "" }
                );
                let got = pread_raw(&file, offset, len);
                if offset
                    .checked_add(len as u64)
                    .is_none_or(|e| e > i64::MAX as u64)
                {
                    let want = pread_raw(&reference, offset, len).map(|b| b.len());
                    let got = got.map(|b| b.len());
                    if got != want {
                        failures.push(format!(
                            "{what}: {got:?}, a regular file gives {want:?} (length or errno)"
                        ));
                    }
                    continue;
                }
                match got {
                    Ok(bytes) => {
                        if bytes != expect(offset, len as u64) {
                            failures.push(format!(
                                "{what}: {} bytes, want {} (or different bytes)",
                                bytes.len(),
                                expect(offset, len as u64).len()
                            ));
                        }
                    }
                    Err(errno) => failures.push(format!(
                        "{what}: {}",
                        std::io::Error::from_raw_os_error(errno)
                    )),
                }
            }
        }
    }

    // The mounts are alive afterwards: fresh lookups answer and data reads back.
    let fresh = std::fs::metadata(mount.path(".group.json"));
    if fresh.is_err() || peak_rss(mount.pid()).is_none() {
        failures.push(format!(
            "mount gone after the edge reads: {fresh:?}: {}",
            mount.log()
        ));
    }
    if file_sha256(&mount.path("field")) != big.field_sha256 {
        failures.push("field differs after the edge reads".into());
    }
    for sm in &small_mounts {
        if let Err(e) = std::fs::read_dir(&sm.mountpoint) {
            failures.push(format!("{}: {e}", sm.mountpoint.display()));
        }
    }
    if mount.log().contains("panic") {
        failures.push(format!("daemon log: {}", tail(&mount.log())));
    }
    println!(
        "eof: {checked} edge reads over {} arrays, {} failures",
        cases.len(),
        failures.len()
    );
    assert_no_failures(&failures);
}

// ---------------------------------------------------------------------------------------
// 4. 20 GiB of fill value
// ---------------------------------------------------------------------------------------

/// The sequential read is ended as hung after this long (a guard, not a benchmark).
const SEQUENTIAL_HANG_GUARD: Duration = Duration::from_secs(600);

#[test]
fn twenty_gib_fill_only_arrays_read_exactly_within_bounded_memory() {
    let _serial = serial();
    let big = BigStore::new("fill");
    let cache = 64 * MIB;
    let mount = ForegroundMount::new(&big.store, &["--cache-size", "64MiB"]);
    let mut failures = Vec::new();
    let mut rng = Lcg(0xf111);

    // Random preads, some large, some across chunk boundaries, some across the end.
    let mut reads = 0u64;
    for name in ["f32_1d", "i16_2d", "f64_small"] {
        let fill = big.fill(name);
        let path = mount.path(name);
        let size = std::fs::metadata(&path).map(|s| s.len()).unwrap_or(0);
        if size != fill.size {
            failures.push(format!("{name}: size {size}, want {}", fill.size));
        }
        let file = std::fs::File::open(&path).expect("open");
        let strides = fill.strides();
        for k in 0..300u64 {
            let len = match k % 3 {
                0 => 1 + rng.next(4096),
                1 => 1 + rng.next(MIB),
                _ => 1 + rng.next(8 * MIB),
            };
            let offset = match k % 5 {
                0 => {
                    let stride = strides[rng.next(strides.len() as u64) as usize];
                    let n = 1 + rng.next(fill.size / stride);
                    (n * stride).saturating_sub(1 + rng.next(len))
                }
                1 => fill.size.saturating_sub(rng.next(2 * len)),
                _ => rng.next(fill.size),
            };
            reads += 1;
            match pread_raw(&file, offset, len as usize) {
                Ok(got) if got == fill.bytes(offset, len) => {}
                Ok(got) => failures.push(format!(
                    "{name}: pread({offset}, {len}): {} bytes, not the fill pattern",
                    got.len()
                )),
                Err(errno) => failures.push(format!(
                    "{name}: pread({offset}, {len}): {}",
                    std::io::Error::from_raw_os_error(errno)
                )),
            }
        }
    }
    let after_random = peak_rss(mount.pid());
    println!(
        "fill: {reads} random preads; daemon peak RSS {}",
        after_random.map_or("gone".into(), mib)
    );
    assert!(
        after_random.is_some_and(|p| p <= cache + RSS_HEADROOM) && failures.is_empty(),
        "after random preads: peak RSS {:?} (bound {}); {} failures:\n{}",
        after_random.map(mib),
        mib(cache + RSS_HEADROOM),
        failures.len(),
        failures.join("\n")
    );

    // One sequential read of the whole 20 GiB array in 1 MiB reads.
    let fill = big.fill("f32_1d");
    let file = std::fs::File::open(mount.path("f32_1d")).expect("open");
    let pattern = fill.bytes(0, MIB);
    let mut buf = vec![0u8; MIB as usize];
    let started = Instant::now();
    let mut offset = 0u64;
    let mut bad = None;
    while offset < fill.size {
        if started.elapsed() > SEQUENTIAL_HANG_GUARD {
            bad = Some(format!(
                "sequential read hung: {} of {} after {SEQUENTIAL_HANG_GUARD:?}",
                mib(offset),
                mib(fill.size)
            ));
            break;
        }
        let n = match file.read_at(&mut buf, offset) {
            Ok(n) => n,
            Err(e) => {
                bad = Some(format!("read at {offset}: {e}"));
                break;
            }
        };
        let good = if offset.is_multiple_of(fill.element.len() as u64) {
            buf[..n] == pattern[..n]
        } else {
            buf[..n] == fill.bytes(offset, n as u64)[..]
        };
        if n == 0 || !good {
            bad = Some(format!("at {offset}: {n} bytes, not the fill pattern"));
            break;
        }
        offset += n as u64;
        if offset.is_multiple_of(1 << 30) {
            // Keep the kernel's page cache from filling the machine.
            use std::os::fd::AsRawFd;
            // SAFETY: advice on an open descriptor.
            unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let peak = peak_rss(mount.pid());
    println!(
        "fill: sequential read of {} in {seconds:.1} s ({:.0} MiB/s); daemon peak RSS {}",
        mib(offset),
        offset as f64 / MIB as f64 / seconds,
        peak.map_or("gone".into(), mib)
    );
    assert_eq!(bad, None, "sequential read of f32_1d");
    assert_eq!(offset, fill.size, "bytes read sequentially");
    let peak = peak.expect("daemon alive");
    assert!(
        peak <= cache + RSS_HEADROOM,
        "daemon peak RSS {} over --cache-size 64MiB + {}",
        mib(peak),
        mib(RSS_HEADROOM)
    );
}

/// Address-space limit for `zarrfs cat` below: half of one 1 GiB chunk.
const CAT_AS_LIMIT: u64 = 512 * MIB;

/// Runs `zarrfs cat STORE PATH` under `prlimit --as`, feeding its stdout to `check`
/// (offset, bytes); returns the exit status and stderr. Hung after 300 s.
fn cat_limited(store: &Path, path: &str, mut check: impl FnMut(u64, &[u8])) -> (bool, String) {
    let mut child = zarrfs_limited(CAT_AS_LIMIT)
        .arg("cat")
        .arg(store)
        .arg(path)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run prlimit (util-linux)");
    let pid = child.id();
    let done = Arc::new(AtomicBool::new(false));
    let watchdog = {
        let done = done.clone();
        std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(300);
            while !done.load(Ordering::Relaxed) {
                if Instant::now() > deadline {
                    signal(pid, libc::SIGKILL);
                    return true;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            false
        })
    };
    let mut err = child.stderr.take().expect("stderr");
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let mut out = child.stdout.take().expect("stdout");
    let mut buf = vec![0u8; MIB as usize];
    let mut offset = 0u64;
    loop {
        match out.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                check(offset, &buf[..n]);
                offset += n as u64;
            }
        }
    }
    let status = child.wait().expect("wait for cat");
    done.store(true, Ordering::Relaxed);
    let hung = watchdog.join().unwrap_or(false);
    let mut stderr = err.join().unwrap_or_default();
    if hung {
        stderr.push_str(" [hung: killed after 300 s]");
    }
    (status.success() && !hung, stderr)
}

#[test]
fn cat_of_a_2_gib_fill_only_array_with_1_gib_chunks_under_an_address_space_limit() {
    let _serial = serial();
    let big = BigStore::new("fill-cat");
    // Control: an ordinary array is written whole under the same limit.
    let mut h = common::HashWriter::default();
    let (ok, stderr) = cat_limited(&big.store, "field", |_, b| {
        std::io::Write::write_all(&mut h, b).expect("hash")
    });
    assert!(ok, "cat field under prlimit --as={CAT_AS_LIMIT}: {stderr}");
    assert_eq!(h.hex(), big.field_sha256, "cat field under the limit");

    let fill = big.fill("f64_small");
    let mut len = 0u64;
    let mut first_bad = None;
    let (ok, stderr) = cat_limited(&big.store, "f64_small", |offset, b| {
        if first_bad.is_none() && b != fill.bytes(offset, b.len() as u64) {
            first_bad = Some(offset);
        }
        len += b.len() as u64;
    });
    println!(
        "cat f64_small under prlimit --as={}: ok {ok}, {} written",
        mib(CAT_AS_LIMIT),
        mib(len)
    );
    assert!(
        ok,
        "cat f64_small under prlimit --as={CAT_AS_LIMIT}: {stderr}"
    );
    assert_eq!(first_bad, None, "cat f64_small: bytes not the fill value");
    assert_eq!(len, fill.size, "cat f64_small: length");
}

// ---------------------------------------------------------------------------------------
// 5. Liveness: a stuck store read and a FIFO chunk
// ---------------------------------------------------------------------------------------

/// Writes two stores with zarr-python: UP (a group of four uint8 arrays "0".."3" of 4 MiB,
/// zstd) and LIVE (a group: `slow`, 16 MiB uint8 in four chunks with no compression and no
/// chunk written; `fifo`, 1 KiB uint8 with no chunk written; `other`, 512x512 float64
/// zstd; `sub/more`, int32). Prints the sha256 of the concatenation of UP's arrays as
/// zarr-python reads them, then those of `other` and `sub/more`.
const LIVENESS_STORES: &str = r#"
import hashlib, sys
import numpy as np
import zarr
up, live = sys.argv[1], sys.argv[2]
n = 4 << 20
g = zarr.open_group(up, mode="w", zarr_format=3)
rng = np.random.default_rng(7)
for k in range(4):
    g.create_array(str(k), shape=(n,), chunks=(n // 4,), dtype="uint8")[:] = rng.integers(0, 256, n, dtype="uint8")
g = zarr.open_group(live, mode="w", zarr_format=3)
g.create_array("slow", shape=(4 * n,), chunks=(n,), dtype="uint8", compressors=None, fill_value=0)
g.create_array("fifo", shape=(1024,), chunks=(1024,), dtype="uint8", fill_value=0)
g.create_array("other", shape=(512, 512), chunks=(128, 128), dtype="float64")[:] = rng.random((512, 512))
g.create_group("sub").create_array("more", shape=(1000,), chunks=(300,), dtype="int32")[:] = np.arange(1000, dtype="int32")
ups = zarr.open_group(up, mode="r")
print(hashlib.sha256(b"".join(np.asarray(ups[str(k)][:]).tobytes() for k in range(4))).hexdigest())
lives = zarr.open_group(live, mode="r")
for p in ["other", "sub/more"]:
    a = np.asarray(lives[p][...])
    print(hashlib.sha256(a.astype(a.dtype.newbyteorder("<")).tobytes()).hexdigest())
"#;

/// Reads a file whole (dropping cached pages first) and prints its sha256, or
/// `error <errno> <message>`.
const HASH_READER: &str = r#"
import hashlib, os, sys
try:
    fd = os.open(sys.argv[1], os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    h = hashlib.sha256()
    while True:
        b = os.read(fd, 1 << 20)
        if not b:
            break
        h.update(b)
    print(h.hexdigest(), flush=True)
except OSError as e:
    print(f"error {e.errno} {e.strerror}", flush=True)
"#;

/// A bind mount, detached on drop.
struct BindMount(PathBuf);

impl BindMount {
    fn new(from: &Path, to: &Path) -> BindMount {
        let c = |p: &Path| std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).expect("path");
        let (src, dst) = (c(from), c(to));
        // SAFETY: valid C strings; a bind mount made by the test (root).
        let rc = unsafe {
            libc::mount(
                src.as_ptr(),
                dst.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND,
                std::ptr::null(),
            )
        };
        assert_eq!(
            rc,
            0,
            "bind mount {} on {}: {}",
            from.display(),
            to.display(),
            std::io::Error::last_os_error()
        );
        BindMount(to.to_path_buf())
    }
}

impl Drop for BindMount {
    fn drop(&mut self) {
        if let Ok(p) = std::ffi::CString::new(self.0.as_os_str().as_encoded_bytes()) {
            // SAFETY: detaching the bind mount made in `new`.
            unsafe { libc::umount2(p.as_ptr(), libc::MNT_DETACH) };
        }
    }
}

/// Sends SIGCONT to a stopped daemon when dropped (also after a failed assertion).
struct Resume(u32);

impl Drop for Resume {
    fn drop(&mut self) {
        // SAFETY: resuming a child process of this test.
        unsafe { libc::kill(self.0 as i32, libc::SIGCONT) };
    }
}

/// Opens a FIFO for writing and closes it, so that a reader blocked opening it returns.
struct UnblockFifo(PathBuf);

impl Drop for UnblockFifo {
    fn drop(&mut self) {
        let _ = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&self.0);
    }
}

/// True while process `pid` waits in read(2) (the slow read in flight).
fn blocked_in_read(pid: u32) -> bool {
    let syscall = std::fs::read_to_string(format!("/proc/{pid}/syscall")).unwrap_or_default();
    let nr = syscall
        .split(' ')
        .next()
        .and_then(|n| n.parse::<i64>().ok());
    nr == Some(libc::SYS_read)
}

/// A FIFO where a chunk should be: the read fails with EIO, it does not wait for a writer.
fn fifo_read_fails(dir: &Path, mount: &ForegroundMount, when: &str, failures: &mut Vec<String>) {
    let mut read = Proc::python(
        "fifo read",
        dir,
        HASH_READER,
        &[mount.path("fifo").to_string_lossy().into()],
    );
    match read.finish(LIVENESS_GUARD) {
        Err(hung) => failures.push(format!("FIFO chunk {when}: {hung}")),
        Ok(_) => {
            let got = read.stdout();
            if got.trim() != format!("error {} Input/output error", libc::EIO) {
                failures.push(format!("FIFO chunk {when}: want EIO, got {got:?}"));
            }
        }
    }
}

/// Hang guard for each operation that must keep answering.
const LIVENESS_GUARD: Duration = Duration::from_secs(10);

#[test]
fn ls_stat_and_other_reads_answer_while_a_store_read_is_stuck_and_a_fifo_chunk_fails() {
    let _serial = serial();
    let tmp = TempDir::new("liveness");
    let (up, live) = (tmp.path().join("up.zarr"), tmp.path().join("live.zarr"));
    let text = python_stdout(
        "write the liveness stores",
        &[
            OsStr::new("-c"),
            OsStr::new(LIVENESS_STORES),
            up.as_os_str(),
            live.as_os_str(),
        ],
    );
    let shas: Vec<&str> = text.lines().collect();
    let (slow_sha, other_sha, more_sha) = (shas[0], shas[1], shas[2]);

    // The chunks of `slow` are the files of another zarrfs mount (UP's arrays "0".."3",
    // decoded): a store folder on a filesystem whose server can be stopped, like a hung
    // network share. The chunk of `fifo` is a FIFO nobody writes.
    let upstream = ForegroundMount::new(&up, &[]);
    let chunk_dir = live.join("slow/c");
    std::fs::create_dir_all(&chunk_dir).expect("mkdir slow/c");
    let _bind = BindMount::new(&upstream.mountpoint, &chunk_dir);
    let fifo = live.join("fifo/c/0");
    std::fs::create_dir_all(fifo.parent().expect("parent")).expect("mkdir fifo/c");
    let c_fifo = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).expect("path");
    // SAFETY: a valid C string.
    assert_eq!(unsafe { libc::mkfifo(c_fifo.as_ptr(), 0o644) }, 0, "mkfifo");
    let mount = ForegroundMount::new(&live, &[]);
    let _unblock = UnblockFifo(fifo.clone());
    let dir = tmp.path();
    let mut failures = Vec::new();
    fifo_read_fails(dir, &mount, "before the stall", &mut failures);

    // Stop the upstream server, then start the slow read: it cannot finish until resumed.
    signal(upstream.pid(), libc::SIGSTOP);
    let resume = Resume(upstream.pid());
    let mut slow = Proc::python(
        "slow read",
        dir,
        HASH_READER,
        &[mount.path("slow").to_string_lossy().into()],
    );
    let in_flight = wait_for(LIVENESS_GUARD, || blocked_in_read(slow.child.id()));
    assert!(
        in_flight && slow.running(),
        "the slow read is not waiting in read(2): /proc/PID/syscall {:?}, {:?} {:?}",
        std::fs::read_to_string(format!("/proc/{}/syscall", slow.child.id())),
        slow.stdout(),
        slow.stderr()
    );
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        slow.running(),
        "the slow read ended while its store was stopped: {:?}",
        slow.stdout()
    );

    let before = failures.len();
    fifo_read_fails(dir, &mount, "during the stall", &mut failures);
    // Listings, stat and reads of other arrays answer meanwhile.
    let ls = run_guarded(
        "ls -la",
        dir,
        Command::new("ls").arg("-la").arg(&mount.mountpoint),
        LIVENESS_GUARD,
    );
    let names = ["slow", "fifo", "other", "sub", ".slow.json", ".group.json"];
    if !ls.ok() || !names.iter().all(|n| ls.stdout.contains(n)) {
        failures.push(format!("ls -la: {ls:?}"));
    }
    let lsr = run_guarded(
        "ls -lRa",
        dir,
        Command::new("ls").arg("-lRa").arg(&mount.mountpoint),
        LIVENESS_GUARD,
    );
    if !lsr.ok() || !lsr.stdout.contains("more") {
        failures.push(format!("ls -lRa: {lsr:?}"));
    }
    let stat = run_guarded(
        "stat",
        dir,
        Command::new("stat")
            .args(["-c", "%n %s"])
            .arg(mount.path("slow"))
            .arg(mount.path("other"))
            .arg(mount.path("sub/more"))
            .arg(mount.path(".slow.json")),
        LIVENESS_GUARD,
    );
    let sizes = [
        (16 << 20).to_string(),
        (512 * 512 * 8).to_string(),
        "4000".into(),
    ];
    if !stat.ok()
        || !sizes
            .iter()
            .all(|s| stat.stdout.contains(&format!(" {s}\n")))
    {
        failures.push(format!("stat: {stat:?}"));
    }
    for (p, want) in [("other", other_sha), ("sub/more", more_sha)] {
        let read = run_guarded(
            p,
            dir,
            Command::new(test_python())
                .args(["-c", HASH_READER])
                .arg(mount.path(p)),
            LIVENESS_GUARD,
        );
        if !read.ok() || read.stdout.trim() != want {
            failures.push(format!("read {p}: {read:?}"));
        }
    }
    let sidecar = run_guarded(
        "cat .slow.json",
        dir,
        Command::new("cat").arg(mount.path(".slow.json")),
        LIVENESS_GUARD,
    );
    if !sidecar.ok() || !sidecar.stdout.contains("shape") {
        failures.push(format!("cat .slow.json: {sidecar:?}"));
    }
    let still_slow = slow.running();
    println!(
        "liveness: while the slow read waited: {} of 7 operations failed; \
         slow read still waiting: {still_slow}",
        failures.len() - before
    );
    if !still_slow {
        failures.push(format!(
            "the slow read ended before its store was resumed: {:?}",
            slow.stdout()
        ));
    }

    // Resumed, the slow read completes with the right bytes.
    drop(resume);
    match slow.finish(Duration::from_secs(60)) {
        Err(hung) => failures.push(hung),
        Ok(_) => {
            if slow.stdout().trim() != slow_sha {
                failures.push(format!("slow read after resume: {:?}", slow.stdout()));
            }
        }
    }
    if peak_rss(mount.pid()).is_none() || mount.log().contains("panic") {
        failures.push(format!("daemon: {}", tail(&mount.log())));
    }
    assert_no_failures(&failures);
}
