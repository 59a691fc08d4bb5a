//! Live stores: zarr-python 3 changes a v3 and a v2 store, in a local folder and in a
//! bucket of s3s-fs, while a mount with `--refresh 1s` serves it
//! (scripts/live_writer.py appends rows, overwrites chunks, adds and deletes arrays,
//! and logs each state it leaves), and eight readers list, stat and read the mount all
//! the while. Every read must be made of chunks zarr-python wrote (never a torn chunk),
//! must show every change made more than twice the interval before it was opened, and
//! the only error allowed is ENOENT for a deleted array. Also: `zarrfs refresh` shows a
//! change at once under an interval of an hour, and `--refresh off` never shows it.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::mount::{test_python, wait_until, Mount};
use common::servers::s3s_fs;
use common::{assert_no_failures, zarrfs, TempDir};
use serde_json::Value;

/// The refresh interval of the mounts, in seconds.
const TTL: f64 = 1.0;
/// Scheduling allowance on top of twice the interval (a busy machine).
const SLACK: f64 = 0.5;
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
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/live_writer.py")
}

/// The Python of the Icechunk fixtures' venv, which has obstore (the writer's S3 client).
fn obstore_python() -> PathBuf {
    let python = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/venv-icechunk/bin/python");
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
    .spawn()
    .expect("start live_writer.py");
    wait_until("the writer made the store", || !states(&log).is_empty());
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
    assert!(status.is_ok_and(|s| s.success()), "live_writer.py failed");
    let states = states(&log);
    let last = states.last().expect("states");
    // Twice the interval after the last change, a new open sees it all.
    std::thread::sleep(Duration::from_secs_f64(2.0 * TTL + SLACK));
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
    let status = Command::new(test_python())
        .arg(script())
        .arg(store)
        .args([format, steps, "0"])
        .arg(&log)
        .arg(&go)
        .status()
        .expect("run live_writer.py");
    assert!(status.success(), "live_writer.py failed");
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
