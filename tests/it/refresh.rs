//! Live stores: zarr-python 3 changes a v3 and a v2 store, in a local folder and in a
//! bucket of s3s-fs, while a mount with `--refresh 1s` serves it
//! (scripts/live_writer.py appends rows, overwrites chunks, adds and deletes arrays,
//! and logs each state it leaves), and eight readers list, stat and read the mount all
//! the while. Every read must be made of chunks zarr-python wrote (never a torn chunk),
//! must show every change made more than twice the interval before it was opened, and
//! the only error allowed is ENOENT for a deleted array. Changes made one at a time
//! (scripts/live_steps.py): each new array and each chunk rewritten in place is looked at
//! until twice the interval after its write returned, and then must show; in a
//! consolidated store, a grown array looked up by its sidecar's name first and then by
//! its own. Also: `zarrfs refresh` shows a change at once under an interval of an hour,
//! and `--refresh off` never shows it.

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::mount::{
    look_after_promise, test_python, wait_exit, wait_for, wait_until, Mount, PROMISE_ALLOWANCE,
};
use common::servers::s3s_fs;
use common::{assert_no_failures, zarrfs, TempDir};
use serde_json::Value;

/// The refresh interval of the mounts, in seconds.
const TTL: f64 = 1.0;
/// The refresh interval of the mounts.
const INTERVAL: Duration = Duration::from_secs(1);
/// The allowance on top of twice the interval, from the writer's log line (written once
/// its write returned).
const SLACK: f64 = PROMISE_ALLOWANCE.as_secs_f64();
const READERS: usize = 8;

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// One state the writer left, from its log.
struct State {
    time: f64,
    grow_rows: u64,
    over: Vec<i64>,
    extras: Vec<u64>,
}

fn states(log: &Path) -> Vec<State> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|line| {
            let v: Value = serde_json::from_str(line).expect("writer log line");
            let ints = |k: &str| -> Vec<i64> {
                v[k].as_array()
                    .expect("list")
                    .iter()
                    .map(|x| x.as_i64().expect("int"))
                    .collect()
            };
            State {
                time: v["time"].as_f64().expect("time"),
                grow_rows: v["grow_rows"].as_u64().expect("rows"),
                over: ints("over"),
                extras: ints("extras").into_iter().map(|k| k as u64).collect(),
            }
        })
        .collect()
}

/// What one read showed, and when its file was opened.
enum Seen {
    Grow(f64, u64),
    Over(f64, Vec<i64>),
    Extra(f64, u64),
}

fn int32s(bytes: &[u8]) -> Vec<i64> {
    bytes
        .chunks_exact(4)
        .map(|c| i64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]])))
        .collect()
}

/// Check one read of `grow`: whole rows, each r*10 + [0, 1, 2, 3], the last one possibly
/// still the fill value (zarr-python writes the grown shape before the new row).
fn check_grow(bytes: &[u8]) -> Result<u64, String> {
    if !bytes.len().is_multiple_of(16) || bytes.is_empty() {
        return Err(format!("grow: {} bytes, not whole rows", bytes.len()));
    }
    let values = int32s(bytes);
    let rows = values.len() / 4;
    for (r, row) in values.chunks(4).enumerate() {
        let written: Vec<i64> = (0..4).map(|j| r as i64 * 10 + j).collect();
        let in_progress = r + 1 == rows && row.iter().all(|&x| x == -1);
        if row != written.as_slice() && !in_progress {
            return Err(format!("grow: row {r} is {row:?}"));
        }
    }
    Ok(rows as u64)
}

/// Check one read of `over`: four rows, each one value throughout (one chunk).
fn check_over(bytes: &[u8]) -> Result<Vec<i64>, String> {
    if bytes.len() != 64 {
        return Err(format!("over: {} bytes", bytes.len()));
    }
    let values = int32s(bytes);
    values
        .chunks(4)
        .enumerate()
        .map(|(r, row)| {
            if row.iter().all(|&x| x == row[0]) {
                Ok(row[0])
            } else {
                Err(format!("over: row {r} is torn: {row:?}"))
            }
        })
        .collect()
}

/// Read `path`: its bytes, `None` when it is gone (ENOENT), or the error.
fn read(path: &Path) -> Result<Option<Vec<u8>>, String> {
    match std::fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// One pass of a reader over the mount.
fn read_once(mnt: &Path, seen: &mut Vec<Seen>) -> Result<(), String> {
    let names: Vec<String> = std::fs::read_dir(mnt)
        .map_err(|e| format!("list: {e}"))?
        .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect::<std::io::Result<_>>()
        .map_err(|e| format!("list: {e}"))?;
    for name in &names {
        let Some(k) = name
            .strip_prefix("extra_")
            .and_then(|k| k.parse::<u64>().ok())
        else {
            continue;
        };
        let opened = now();
        if let Some(bytes) = read(&mnt.join(name))? {
            // A chunk deleted under an open file reads as the fill value, 0.
            let ok = bytes.len() == 8
                && bytes
                    .chunks(4)
                    .all(|c| c.iter().all(|&b| b == (k % 256) as u8) || c.iter().all(|&b| b == 0));
            if !ok {
                return Err(format!("{name}: {bytes:?}"));
            }
            seen.push(Seen::Extra(opened, k));
        }
    }
    for name in ["grow", "over"] {
        std::fs::metadata(mnt.join(name)).map_err(|e| format!("stat {name}: {e}"))?;
        let opened = now();
        let bytes = read(&mnt.join(name))?.ok_or_else(|| format!("{name}: ENOENT"))?;
        seen.push(match name {
            "grow" => Seen::Grow(opened, check_grow(&bytes)?),
            _ => Seen::Over(opened, check_over(&bytes)?),
        });
    }
    Ok(())
}

/// The last state made long enough before `opened` that a read opened then must show it.
fn due(states: &[State], opened: f64) -> Option<&State> {
    states
        .iter()
        .take_while(|s| s.time <= opened - 2.0 * TTL - SLACK)
        .last()
}

/// Whether what `seen` showed is stale against the writer's log.
fn stale(states: &[State], seen: &Seen) -> Option<String> {
    match seen {
        Seen::Grow(opened, rows) => {
            let due = due(states, *opened)?;
            (*rows < due.grow_rows).then(|| {
                format!(
                    "grow opened at {opened:.2}: {rows} rows, {} due",
                    due.grow_rows
                )
            })
        }
        Seen::Over(opened, values) => {
            let due = due(states, *opened)?;
            values
                .iter()
                .zip(&due.over)
                .any(|(v, d)| v < d)
                .then(|| format!("over opened at {opened:.2}: {values:?}, {:?} due", due.over))
        }
        Seen::Extra(opened, k) => {
            let due = due(states, *opened)?;
            let made = states
                .iter()
                .any(|s| s.extras.contains(k) && s.time <= due.time);
            (made && !due.extras.contains(k))
                .then(|| format!("extra_{k} opened at {opened:.2}, deleted before"))
        }
    }
}

fn script() -> PathBuf {
    crate::common::repo().join("scripts/live_writer.py")
}

/// The Python of the Icechunk fixtures' venv, which has obstore (the writer's S3 client).
fn obstore_python() -> PathBuf {
    let python = crate::common::repo().join("target/venv-icechunk/bin/python");
    assert!(
        python.exists(),
        "{} is missing: scripts/test.sh makes it",
        python.display()
    );
    python
}

/// zarr-python changes a Zarr `format` store while readers read it through a mount:
/// a local folder, or with `s3`, a bucket of s3s-fs.
fn readers_follow_a_changing_store(format: &str, s3: bool, disk_cache: bool) {
    let tmp = TempDir::new("live");
    let cache_dir = tmp.path().join("disk-cache");
    let cache = cache_dir.to_string_lossy().to_string();
    let buckets = tmp.path().join("buckets");
    std::fs::create_dir_all(buckets.join("live")).expect("bucket");
    let server = s3.then(|| s3s_fs(&buckets, None));
    let (log, go) = (tmp.path().join("log.jsonl"), tmp.path().join("go"));
    let writer_err = tmp.path().join("writer.err");
    let mut writer = match &server {
        Some(server) => {
            let mut c = Command::new(obstore_python());
            c.env("ZARRFS_S3_ENDPOINT", server.url())
                .arg(script())
                .arg("s3://live/live.zarr");
            c
        }
        None => {
            let mut c = Command::new(test_python());
            c.arg(script()).arg(tmp.path().join("live.zarr"));
            c
        }
    }
    .args([format, "36", "0.25"])
    .arg(&log)
    .arg(&go)
    .stderr(std::fs::File::create(&writer_err).expect("writer's stderr"))
    .spawn()
    .expect("start live_writer.py");
    // The store is made once the log has its first line; a writer that ends first (or
    // never gets there) is ended and its stderr shown.
    wait_for(Duration::from_secs(20), || {
        !states(&log).is_empty() || writer.try_wait().is_ok_and(|s| s.is_some())
    });
    if states(&log).is_empty() {
        let _ = writer.kill();
        let status = writer.wait();
        panic!(
            "live_writer.py did not make the store within 20 s (it ended: {status:?}); \
             its stderr ({}):\n{}",
            writer_err.display(),
            common::tail(
                &std::fs::read_to_string(&writer_err).unwrap_or_default(),
                4000
            )
        );
    }
    let options = server
        .as_ref()
        .map(|s| format!("endpoint={},allow_http=true,region=us-east-1", s.url()));
    let mount = match &options {
        Some(o) => {
            let mut args = vec!["--refresh", "1s", "--anonymous", "-o", o];
            if disk_cache {
                args.extend(["--disk-cache", cache.as_str()]);
            }
            Mount::new(Path::new("s3://live/live.zarr"), &args)
        }
        None => Mount::new(&tmp.path().join("live.zarr"), &["--refresh", "1s"]),
    };
    std::fs::write(&go, b"").expect("go");
    let stop = AtomicBool::new(false);
    let seen = Mutex::new(Vec::new());
    let failures = Mutex::new(Vec::new());
    let status = std::thread::scope(|s| {
        for _ in 0..READERS {
            s.spawn(|| {
                let mut mine = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    if let Err(e) = read_once(&mount.mountpoint, &mut mine) {
                        failures.lock().expect("failures").push(e);
                    }
                }
                seen.lock().expect("seen").extend(mine);
            });
        }
        let status = writer.wait();
        stop.store(true, Ordering::Relaxed);
        status
    });
    let writer_said = std::fs::read_to_string(&writer_err).unwrap_or_default();
    assert!(
        status.as_ref().is_ok_and(|s| s.success()),
        "live_writer.py failed ({status:?}): {writer_said}\nits log:\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    if !writer_said.is_empty() {
        eprintln!("live_writer.py made a change again after the store refused it:\n{writer_said}");
    }
    let states = states(&log);
    let last = states.last().expect("states");
    // Twice the interval after the last change, a new open sees it all.
    let written = Duration::from_secs_f64((now() - last.time).max(0.0));
    std::thread::sleep((2 * INTERVAL + PROMISE_ALLOWANCE).saturating_sub(written));
    let mut failures = failures.into_inner().expect("failures");
    let mut now_seen = Vec::new();
    if let Err(e) = read_once(&mount.mountpoint, &mut now_seen) {
        failures.push(format!("after the writer: {e}"));
    }
    let extras: Vec<u64> = now_seen
        .iter()
        .filter_map(|s| match s {
            Seen::Extra(_, k) => Some(*k),
            _ => None,
        })
        .collect();
    for s in &now_seen {
        match s {
            Seen::Grow(_, rows) if *rows != last.grow_rows => failures.push(format!(
                "after the writer: grow has {rows} rows, not {}",
                last.grow_rows
            )),
            Seen::Over(_, v) if *v != last.over => failures.push(format!(
                "after the writer: over is {v:?}, not {:?}",
                last.over
            )),
            _ => {}
        }
    }
    if extras != last.extras {
        failures.push(format!(
            "after the writer: extras {extras:?}, not {:?}",
            last.extras
        ));
    }
    let seen = seen.into_inner().expect("seen");
    failures.extend(seen.iter().filter_map(|s| stale(&states, s)));
    let log_text = mount.log();
    assert_no_failures(&failures);
    let reads = seen.len();
    assert!(
        reads >= 100,
        "only {reads} reads while the store changed; daemon log: {log_text}"
    );
    // Every kind of change was seen while it happened.
    let rows_seen: std::collections::BTreeSet<u64> = seen
        .iter()
        .filter_map(|s| match s {
            Seen::Grow(_, r) => Some(*r),
            _ => None,
        })
        .collect();
    assert!(rows_seen.len() >= 3, "grow seen with rows {rows_seen:?}");
    assert!(
        seen.iter().any(|s| matches!(s, Seen::Extra(..))),
        "no extra array was read"
    );
}

#[test]
fn readers_follow_a_changing_v3_store() {
    readers_follow_a_changing_store("3", false, false);
}

#[test]
fn readers_follow_a_changing_v2_store() {
    readers_follow_a_changing_store("2", false, false);
}

#[test]
fn readers_follow_a_changing_v3_store_on_s3() {
    readers_follow_a_changing_store("3", true, false);
}

/// The disk cache asks for an object's version again once per refresh interval: a
/// rewritten chunk is not served from the entry of its old version.
#[test]
fn readers_follow_a_changing_v3_store_on_s3_through_the_disk_cache() {
    readers_follow_a_changing_store("3", true, true);
}

#[test]
fn readers_follow_a_changing_v2_store_on_s3() {
    readers_follow_a_changing_store("2", true, false);
}

/// Make the store with zarr-python and its first `steps` changes, at once; the state.
fn write_store(store: &Path, format: &str, steps: &str) -> State {
    let tmp = TempDir::new("live-once");
    let (log, go) = (tmp.path().join("log.jsonl"), tmp.path().join("go"));
    std::fs::write(&go, b"").expect("go");
    let out = Command::new(test_python())
        .arg(script())
        .arg(store)
        .args([format, steps, "0"])
        .arg(&log)
        .arg(&go)
        .stdin(Stdio::null())
        .output()
        .expect("run live_writer.py");
    assert!(
        out.status.success(),
        "live_writer.py failed ({}): {}\nits log:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr),
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    let said = String::from_utf8_lossy(&out.stderr);
    if !said.trim().is_empty() {
        eprintln!("live_writer.py's stderr (it succeeded):\n{said}");
    }
    states(&log).pop().expect("states")
}

/// `zarrfs refresh` of `m`'s mountpoint.
fn zarrfs_refresh(m: &Mount) -> std::process::Output {
    Command::new(zarrfs())
        .arg("refresh")
        .arg(&m.mountpoint)
        .output()
        .expect("zarrfs refresh")
}

#[test]
fn zarrfs_refresh_shows_a_change_at_once_and_refresh_off_never() {
    let tmp = TempDir::new("refresh-now");
    let store = tmp.path().join("s.zarr");
    // The store as made (one row), mounted.
    let first = write_store(&store, "3", "0");
    // Not watched: only the interval or `zarrfs refresh` shows a change.
    let hour = Mount::new(&store, &["--refresh", "1h", "--no-watch"]);
    let off = Mount::new(&store, &["--refresh", "off"]);
    let rows = |m: &Mount| check_grow(&std::fs::read(m.path("grow")).expect("read grow"));
    assert_eq!(rows(&hour), Ok(first.grow_rows));
    assert_eq!(rows(&off), Ok(first.grow_rows));
    // Read twice, the refreshing mount's file gets a passthrough copy of this reading.
    assert_eq!(rows(&hour), Ok(first.grow_rows));
    wait_until("a copy of grow under --refresh 1h", || {
        common::xattr(&hour.path("grow"), "user.zarrfs.materialized")
            .is_some_and(|s| s.starts_with("ready"))
    });
    assert_eq!(rows(&hour), Ok(first.grow_rows));
    for m in [&hour, &off] {
        assert!(!m.path("extra_2").exists());
    }
    // Made again with three changes: two rows, and extra_2.
    let second = write_store(&store, "3", "3");
    assert_eq!(second.grow_rows, 2);
    // An hour's interval: still the first reading, until `zarrfs refresh`.
    assert_eq!(rows(&hour), Ok(first.grow_rows));
    let out = zarrfs_refresh(&hour);
    assert!(
        out.status.success(),
        "zarrfs refresh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(rows(&hour), Ok(second.grow_rows));
    let size = std::fs::metadata(hour.path("grow")).expect("stat").len();
    assert_eq!(size, second.grow_rows * 16);
    assert!(
        hour.path("extra_2").exists(),
        "a new array shows after refresh"
    );
    // Refresh off: the mount shows what it read first; `zarrfs refresh` is refused
    // (the mount is read-only to the kernel).
    assert_eq!(rows(&off), Ok(first.grow_rows));
    assert!(
        !off.path("extra_2").exists(),
        "a name found missing stays missing"
    );
    let refused = zarrfs_refresh(&off);
    assert!(
        !refused.status.success(),
        "refresh of a mount with --refresh off"
    );
}

#[test]
fn a_watched_local_folder_shows_a_metadata_change_at_once() {
    for format in ["3", "2"] {
        let tmp = TempDir::new("refresh-watch");
        let store = tmp.path().join("s.zarr");
        let first = write_store(&store, format, "0");
        // An hour's interval: only the inotify watch can show the change in time.
        let m = Mount::new(&store, &["--refresh", "1h", "--log-level", "info"]);
        let rows = || check_grow(&std::fs::read(m.path("grow")).expect("read grow"));
        assert_eq!(rows(), Ok(first.grow_rows));
        assert!(!m.path("extra_2").exists());
        let second = write_store(&store, format, "3");
        assert_eq!(second.grow_rows, 2);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let seen = loop {
            let size = std::fs::metadata(m.path("grow")).map(|md| md.len());
            if m.path("extra_2").exists() && size.ok() == Some(second.grow_rows * 16) {
                break true;
            }
            if std::time::Instant::now() > deadline {
                break false;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        };
        assert!(
            seen,
            "v{format}: the change did not show within 10 s; log:\n{}",
            m.log()
        );
        assert_eq!(rows(), Ok(second.grow_rows), "v{format}");
        assert!(
            m.log().contains("watching"),
            "v{format}: no watch in the log:\n{}",
            m.log()
        );
    }
}

/// How long live_steps.py may take to answer one command (or to make the store) before
/// the test fails as hung: a guard, well above its five tries of a step.
const ANSWER_GUARD: Duration = Duration::from_secs(120);

/// scripts/live_steps.py: a store changed one step at a time, each step's write timed.
/// Its stderr goes to a file, shown (its end) in every failure.
struct Steps {
    child: Child,
    commands: Option<ChildStdin>,
    /// Its stdout, a line at a time (read by a thread of its own, so that an answer can
    /// be waited for with a deadline).
    answers: Receiver<String>,
    err: PathBuf,
}

impl Steps {
    /// The store at `store` (a folder, or `s3://live/live.zarr` on `endpoint`) made as
    /// Zarr `format`, consolidated after each step when `consolidated`; the script's
    /// stderr goes to file `err`.
    fn start(
        store: &str,
        format: &str,
        endpoint: Option<&str>,
        consolidated: bool,
        err: &Path,
    ) -> Steps {
        let script = crate::common::repo().join("scripts/live_steps.py");
        let mut command = match endpoint {
            Some(url) => {
                let mut c = Command::new(obstore_python());
                c.env("ZARRFS_S3_ENDPOINT", url);
                c
            }
            None => Command::new(test_python()),
        };
        command.arg(script).args([store, format]);
        if consolidated {
            command.arg("consolidated");
        }
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(err).expect("live_steps.py's stderr"))
            .spawn()
            .expect("start live_steps.py");
        let commands = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let (send, answers) = std::sync::mpsc::channel();
        // Ends at the end of the script's stdout (its exit, or its kill).
        std::thread::spawn(move || {
            for line in stdout.lines() {
                let Ok(line) = line else { break };
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        let mut steps = Steps {
            child,
            commands,
            answers,
            err: err.to_path_buf(),
        };
        steps.answer("ready");
        steps
    }

    /// The end of the script's stderr.
    fn stderr(&self) -> String {
        common::tail(
            &std::fs::read_to_string(&self.err).unwrap_or_default(),
            4000,
        )
    }

    /// Ends the script and fails the test, saying `what` went wrong and quoting the
    /// script's stderr.
    fn fail(&mut self, what: &str) -> ! {
        drop(self.commands.take());
        let _ = self.child.kill();
        let status = self.child.wait();
        panic!(
            "live_steps.py failed: {what} ({status:?}); its stderr ({}) ends:\n{}",
            self.err.display(),
            self.stderr()
        );
    }

    fn answer(&mut self, expected: &str) {
        let line = match self.answers.recv_timeout(ANSWER_GUARD) {
            Ok(line) => line,
            Err(RecvTimeoutError::Timeout) => {
                self.fail(&format!("no {expected:?} within {ANSWER_GUARD:?}"))
            }
            Err(RecvTimeoutError::Disconnected) => {
                self.fail(&format!("its stdout ended before {expected:?}"))
            }
        };
        if line.trim() != expected {
            drop(self.commands.take());
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        assert_eq!(
            line.trim(),
            expected,
            "live_steps.py failed; its stderr ({}) ends:\n{}",
            self.err.display(),
            self.stderr()
        );
    }

    /// Make one change; when its write returned (as the test heard of it).
    fn run(&mut self, command: &str) -> Instant {
        let stdin = self.commands.as_mut().expect("stdin");
        if let Err(e) = writeln!(stdin, "{command}").and_then(|()| stdin.flush()) {
            self.fail(&format!("write {command:?} to it: {e}"));
        }
        self.answer("done");
        Instant::now()
    }
}

impl Drop for Steps {
    fn drop(&mut self) {
        // The end of stdin ends the script; one still going after the guard is killed.
        drop(self.commands.take());
        if wait_exit(&mut self.child, ANSWER_GUARD).is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A store made by live_steps.py and mounted with `--refresh 1s`: in a folder, or with
/// `s3`, in a bucket of s3s-fs. Dropped in order: the writer, the mount, the server, the
/// folders.
struct LiveStore {
    steps: Steps,
    mount: Mount,
    _server: Option<common::servers::Server>,
    _tmp: TempDir,
}

fn live_store(format: &str, s3: bool, consolidated: bool) -> LiveStore {
    live_store_with(format, s3, consolidated, &[])
}

/// [`live_store`], mounted with `extra` arguments too (`DISK_CACHE` in them stands for
/// a folder of the store's).
fn live_store_with(format: &str, s3: bool, consolidated: bool, extra: &[&str]) -> LiveStore {
    let tmp = TempDir::new("live-steps");
    let cache = tmp.path().join("disk-cache").to_string_lossy().into_owned();
    let extra: Vec<&str> = extra
        .iter()
        .map(|a| {
            if *a == "DISK_CACHE" {
                cache.as_str()
            } else {
                a
            }
        })
        .collect();
    let buckets = tmp.path().join("buckets");
    std::fs::create_dir_all(buckets.join("live")).expect("bucket");
    let server = s3.then(|| s3s_fs(&buckets, None));
    let err = tmp.path().join("live_steps.err");
    let (steps, mount) = match &server {
        Some(server) => {
            let steps = Steps::start(
                "s3://live/live.zarr",
                format,
                Some(&server.url()),
                consolidated,
                &err,
            );
            let options = format!("endpoint={},allow_http=true,region=us-east-1", server.url());
            let mut args = vec!["--refresh", "1s", "--anonymous", "-o", &options];
            args.extend(&extra);
            (steps, Mount::new(Path::new("s3://live/live.zarr"), &args))
        }
        None => {
            let store = tmp.path().join("live.zarr");
            let steps = Steps::start(&store.to_string_lossy(), format, None, consolidated, &err);
            let mut args = vec!["--refresh", "1s"];
            args.extend(&extra);
            (steps, Mount::new(&store, &args))
        }
    };
    LiveStore {
        steps,
        mount,
        _server: server,
        _tmp: tmp,
    }
}

/// Sets its flag when dropped.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Row `row` of `over` as a read opened now shows it: its one value, or what is wrong.
fn over_row(mnt: &Path, row: usize) -> Result<i64, String> {
    let bytes = std::fs::read(mnt.join("over")).map_err(|e| format!("over: {e}"))?;
    check_over(&bytes).map(|rows| rows[row])
}

/// A reader that keeps the mount busy: lists it, stats every name, reads `over`, and
/// stats the name of the next array before it exists (a name found missing).
fn look_around(mnt: &Path, next: u64) {
    let _ = std::fs::metadata(mnt.join(format!("extra_{next}")));
    if let Ok(entries) = std::fs::read_dir(mnt) {
        for entry in entries.flatten() {
            let _ = std::fs::metadata(entry.path());
        }
    }
    let _ = std::fs::read(mnt.join("over"));
}

/// Changes made one at a time, `changes` times: a new array (`extra_K`, every byte K),
/// then a row of `over` rewritten in place with K. Each is looked at until twice the
/// interval after its write returned (and the allowance), by a checker of its own while
/// four readers keep the mount busy; a `stat` of the new name and a read of the new
/// array, and a read of `over`, begun after that, must show it (a later rewrite of the
/// row may show instead).
fn changes_show_within_the_promise(format: &str, s3: bool, consolidated: bool, changes: u64) {
    let mut live = live_store(format, s3, consolidated);
    let (steps, mount) = (&mut live.steps, &live.mount);
    let mnt = mount.mountpoint.as_path();
    let next = AtomicU64::new(1);
    let stop = AtomicBool::new(false);
    let failures = Mutex::new(Vec::new());
    let fail = |e: String| failures.lock().expect("failures").push(e);
    std::thread::scope(|s| {
        // The readers stop however this ends (a failed step too).
        let _stop = StopOnDrop(&stop);
        for _ in 0..4 {
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    look_around(mnt, next.load(Ordering::Relaxed));
                }
            });
        }
        let mut checks = Vec::new();
        for k in 1..=changes {
            next.store(k, Ordering::Relaxed);
            // The readers look for the name while it is missing.
            std::thread::sleep(Duration::from_millis(100));
            let name = format!("extra_{k}");
            let made = steps.run(&format!("make {name} {k}"));
            let row = (k % 4) as usize;
            let rewritten = steps.run(&format!("over {row} {k}"));
            let fail = &fail;
            checks.push(s.spawn(move || {
                let stat = look_after_promise(made, INTERVAL, || {
                    std::fs::metadata(mnt.join(&name)).map(|m| m.len())
                });
                match stat {
                    Ok(8) => {}
                    Ok(n) => fail(format!("{name}: {n} bytes")),
                    Err(e) => fail(format!("{name}: stat 2 x the interval after: {e}")),
                }
                match std::fs::read(mnt.join(&name)) {
                    Ok(b) if b == [(k % 256) as u8; 8] => {}
                    got => fail(format!("{name}: read {got:?}")),
                }
                match look_after_promise(rewritten, INTERVAL, || over_row(mnt, row)) {
                    Ok(v) if v >= k as i64 => {}
                    got => fail(format!(
                        "over row {row} = {k}: read 2 x the interval after: {got:?}"
                    )),
                }
            }));
        }
        for check in checks {
            check.join().expect("checker");
        }
    });
    let failures = failures.into_inner().expect("failures");
    assert!(
        failures.is_empty(),
        "{} of {changes} new arrays and as many rewritten rows late:\n{}\ndaemon log:\n{}",
        failures.len(),
        failures.join("\n"),
        mount.log()
    );
}

#[test]
fn new_arrays_and_rewritten_chunks_of_a_v2_store_show_within_twice_the_interval() {
    changes_show_within_the_promise("2", false, false, 60);
}

#[test]
fn new_arrays_and_rewritten_chunks_of_a_v2_store_on_s3_show_within_twice_the_interval() {
    changes_show_within_the_promise("2", true, false, 80);
}

#[test]
fn new_arrays_and_rewritten_chunks_of_a_consolidated_v2_store_on_s3_show_within_twice_the_interval()
{
    changes_show_within_the_promise("2", true, true, 60);
}

/// In a consolidated store on S3, the consolidated metadata is read once per interval,
/// by whichever look is first past it. Here a look at `over` reads it, the array `grow`
/// grows by a row (and the store is consolidated again), then `grow` is looked up by its
/// sidecar's name near the end of that interval and by its own name near the end of the
/// next: a `stat` of `grow` begun twice the interval after the write must show the new
/// row. (It did not when a node read from consolidated metadata counted as read when it
/// was looked at rather than when that metadata was read, and the kernel kept a name for
/// a whole interval after its reading was already old.)
#[test]
fn a_consolidated_store_on_s3_shows_a_grown_array_within_twice_the_interval_by_any_name() {
    let mut live = live_store("2", true, true);
    let (steps, mount) = (&mut live.steps, &live.mount);
    let size = |name: &str| std::fs::metadata(mount.path(name)).map(|m| m.len());
    let mut rows = 1;
    let mut failures = Vec::new();
    for _ in 0..8 {
        // Everything read before is older than the interval.
        std::thread::sleep(INTERVAL + INTERVAL / 5);
        let read = Instant::now();
        size(".over.json").expect("stat .over.json");
        let grown = steps.run("grow");
        rows += 1;
        let at = |fraction: f64| read + INTERVAL.mul_f64(fraction);
        let until = |t: Instant| std::thread::sleep(t.saturating_duration_since(Instant::now()));
        until(at(0.9));
        size(".grow.json").expect("stat .grow.json");
        until(at(1.85));
        let _ = size("grow");
        let seen = look_after_promise(grown, INTERVAL, || size("grow"));
        if seen.as_ref().ok() != Some(&(rows * 16)) {
            failures.push(format!(
                "grow of {rows} rows: {seen:?} 2 x the interval after (the write took {:?})",
                grown - read
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{}\ndaemon log:\n{}",
        failures.join("\n"),
        mount.log()
    );
}

/// Through the disk cache on S3, an object's version is asked for once per interval.
/// Here `over` is read (its chunks' versions asked for) near the end of a reading begun
/// by a look at its sidecar, a row is rewritten at once, its `.npy` view is read just
/// after the next reading begins (within the interval of those versions), and `over` is
/// looked up again near that reading's end: a read of `over` begun twice the interval
/// after the write must show the row. (It did not when a reading trusted versions asked
/// for before it began, and the kernel kept a name for a whole interval after its
/// reading was already old.) With no passthrough copies, a mount whose reads are direct
/// keeps the chunks it decoded (`ZARRFS_TEST_IO=direct`): there the stale row outlived
/// its reading; read through the page cache, the row is decoded again at the last
/// lookup, once the versions asked for are older than the interval.
#[test]
fn a_row_rewritten_on_s3_shows_through_the_disk_cache_within_twice_the_interval_by_any_name() {
    let mut live = live_store_with(
        "2",
        true,
        false,
        &[
            "--disk-cache",
            "DISK_CACHE",
            "--views",
            "raw,npy",
            "--materialize",
            "off",
        ],
    );
    let (steps, mount) = (&mut live.steps, &live.mount);
    let mnt = mount.mountpoint.as_path();
    let mut failures = Vec::new();
    for k in 1..=8 {
        // Everything read before is older than the interval.
        std::thread::sleep(INTERVAL + INTERVAL / 5);
        let read = Instant::now();
        let at = |fraction: f64| read + INTERVAL.mul_f64(fraction);
        let until = |t: Instant| std::thread::sleep(t.saturating_duration_since(Instant::now()));
        std::fs::metadata(mount.path(".over.json")).expect("stat .over.json");
        until(at(0.9));
        over_row(mnt, 0).expect("read over");
        let row = k % 4;
        let rewritten = steps.run(&format!("over {row} {k}"));
        until(at(1.85));
        std::fs::metadata(mount.path(".over.json")).expect("stat .over.json");
        std::fs::read(mount.path("over.npy")).expect("read over.npy");
        until(at(2.8));
        let _ = over_row(mnt, row);
        match look_after_promise(rewritten, INTERVAL, || over_row(mnt, row)) {
            Ok(v) if v == k as i64 => {}
            seen => failures.push(format!(
                "over row {row} = {k}: {seen:?} 2 x the interval after (the write took {:?})",
                rewritten - at(0.9)
            )),
        }
    }
    assert!(
        failures.is_empty(),
        "{}\ndaemon log:\n{}",
        failures.join("\n"),
        mount.log()
    );
}
