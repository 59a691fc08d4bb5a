//! Writes through a writable mount (`--writable`), checked by zarr-python: random
//! `pwrite`s (and a slab of fill value) into every fixed-size array of the v3 and v2
//! fixture stores that zarr-python reads, in each of C/F order and little/big endian.
//! `scripts/check_written.py` draws the writes and the expected bytes from zarr-python's
//! own read of each array; after unmount, zarr-python 3 (and 2.18 for the v2 store)
//! read every array back, and every store file that changed must be a chunk the writes
//! touched. A read mount refuses writes with `EROFS`, as before.

use crate::common;

use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use common::mount::Mount;
use common::{copy_dir, fixtures::is_unsupported, venv_python, Manifest, TempDir};
use serde_json::{json, Value};

/// Arrays of `store` in the manifest that have a flat file (fixed-size elements).
fn fixed_arrays<'a>(m: &'a Manifest, store: &str) -> Vec<&'a Value> {
    common::fixtures::arrays_of(m, store)
        .into_iter()
        .filter(|a| a["vlen"] == false && !is_unsupported(a))
        .collect()
}

/// Run `scripts/check_written.py` with `python`: its stdout; a failure fails the test
/// with its output.
fn check_written(python: &Path, args: &[&std::ffi::OsStr]) -> String {
    run_script(python, "check_written.py", args)
}

/// Run `scripts/check_made.py` with `python` (see [`check_written`]).
fn check_made(python: &Path, args: &[&std::ffi::OsStr]) -> String {
    run_script(python, "check_made.py", args)
}

/// Run `scripts/SCRIPT` with `python` and `args`: its stdout; a failure fails the test
/// with its output.
fn run_script(python: &Path, script: &str, args: &[&std::ffi::OsStr]) -> String {
    let path = crate::common::repo().join("scripts").join(script);
    let out = std::process::Command::new(python)
        .arg(&path)
        .args(args)
        .env("PYTHONWARNINGS", "ignore")
        .output()
        .unwrap_or_else(|e| panic!("run {script}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{script} {args:?}: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The file of `path` in a mount of a store holding it.
fn file_in(mount: &Mount, path: &str) -> PathBuf {
    mount.path(path)
}

#[test]
fn random_writes_into_every_fixed_size_array_read_back_by_zarr_python_tensorstore_and_zarrs() {
    let m = Manifest::load();
    let zarr3 = venv_python("ZARRFS_TEST_PYTHON", "venv-zarr3");
    let zarr2 = venv_python("ZARRFS_ZARR2_PYTHON", "venv-zarr2");
    let zarrs = zarrs_read();
    let layouts = [("C", "little"), ("F", "big"), ("C", "big"), ("F", "little")];
    for (round, (order, endian)) in layouts.into_iter().enumerate() {
        let tmp = TempDir::new("write-random");
        let stores: Vec<(String, PathBuf)> = ["v3", "v2"]
            .iter()
            .map(|s| (s.to_string(), tmp.path().join(s)))
            .collect();
        let mut specs = Vec::new();
        for (name, dir) in &stores {
            copy_dir(&m.store_dir(name), dir);
            for (i, a) in fixed_arrays(&m, name).into_iter().enumerate() {
                specs.push(json!({
                    "store": dir, "path": a["path"], "order": order, "endian": endian,
                    "seed": round * 1000 + i, "fill_rows": i % 2 == 0,
                }));
            }
        }
        let spec_path = tmp.path().join("spec.json");
        let plan_path = tmp.path().join("plan.json");
        let spec =
            json!({"stores": stores.iter().map(|(_, d)| d).collect::<Vec<_>>(), "arrays": specs});
        std::fs::write(&spec_path, spec.to_string()).expect("write spec");
        check_written(
            &zarr3,
            &[
                "plan".as_ref(),
                spec_path.as_os_str(),
                plan_path.as_os_str(),
            ],
        );
        let plan: Value =
            serde_json::from_slice(&std::fs::read(&plan_path).expect("plan")).expect("plan json");
        let planned = plan["arrays"].as_array().expect("arrays");
        // zarr-python reads all but a few exotic data types of these stores.
        assert!(planned.len() >= 200, "{} arrays planned", planned.len());
        // The v2 arrays zarr-python 2.18 reads as zarr-python 3 does (before the writes).
        let v2_all = json!({
            "arrays": planned.iter().filter(|a| a["store"].as_str() == stores[1].1.to_str()).collect::<Vec<_>>(),
            "files": {},
        });
        let v2_all_path = tmp.path().join("plan-v2-all.json");
        let v2_path = tmp.path().join("plan-v2.json");
        std::fs::write(&v2_all_path, v2_all.to_string()).expect("write v2 plan");
        let out = check_written(
            &zarr2,
            &[
                "agree".as_ref(),
                v2_all_path.as_os_str(),
                v2_path.as_os_str(),
            ],
        );
        assert!(out.contains("agrees on"), "{out}");
        // The arrays tensorstore and zarrs read as zarr-python 3 does (before the writes),
        // in the first two layouts (one of each order and byte order: their reads of the
        // store do not depend on the mount's layout).
        let others_path = tmp.path().join("others.json");
        let others_too = round < 2;
        if others_too {
            let out = check_written(
                &zarr3,
                &[
                    "others-agree".as_ref(),
                    plan_path.as_os_str(),
                    others_path.as_os_str(),
                    zarrs.as_os_str(),
                ],
            );
            assert!(out.contains("before the writes"), "{out}");
        }
        let endian_flag = if endian == "big" { "big" } else { "little" };
        for (name, dir) in &stores {
            let staging = tmp.path().join(format!("staging-{name}"));
            let mount = writable(dir, &staging, &["--order", order, "--endian", endian_flag]);
            let mut failures = Vec::new();
            for (k, a) in planned.iter().enumerate() {
                if a["store"].as_str() != dir.to_str() {
                    continue;
                }
                let path = a["path"].as_str().expect("path");
                let file = file_in(&mount, path);
                let writes = a["writes"].as_array().expect("writes");
                let opened = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(&file);
                let f = match opened {
                    Ok(f) => f,
                    Err(e) => {
                        failures.push(format!("{name} {path}: open for writing: {e}"));
                        continue;
                    }
                };
                for (j, w) in writes.iter().enumerate() {
                    let offset = w[0].as_u64().expect("offset");
                    let bytes = hex(w[1].as_str().expect("hex"));
                    if let Err(e) = f.write_all_at(&bytes, offset) {
                        failures.push(format!("{name} {path}: pwrite at {offset}: {e}"));
                    }
                    // Some arrays commit halfway (fsync), the rest at close.
                    if k % 3 == 0 && j == 0 {
                        if let Err(e) = f.sync_all() {
                            failures.push(format!("{name} {path}: fsync: {e}"));
                        }
                    }
                }
                // What the open file reads now is what was written, staged or committed
                // (where the array's codecs keep every byte: a lossy one changes what it
                // commits at the fsync).
                let size = a["size"].as_u64().expect("size");
                let mut back = vec![0u8; size as usize];
                match f.read_exact_at(&mut back, 0) {
                    Ok(())
                        if common::sha256(&back) == a["written"] || a["written"] != a["sha256"] => {
                    }
                    Ok(()) => {
                        failures.push(format!("{name} {path}: read back before close differs"))
                    }
                    Err(e) => failures.push(format!("{name} {path}: read back: {e}")),
                }
                drop(f);
                // And a new open after the close.
                match std::fs::read(&file) {
                    Ok(back)
                        if common::sha256(&back) == a["sha256"]
                            || common::sha256(&back) == a["written"] => {}
                    Ok(_) => failures.push(format!("{name} {path}: read after close differs")),
                    Err(e) => failures.push(format!("{name} {path}: read after close: {e}")),
                }
            }
            let log = mount.log();
            drop(mount);
            assert!(
                failures.is_empty(),
                "{order} {endian} {name}: {} failures:\n{}\nlog:\n{log}",
                failures.len(),
                failures.join("\n")
            );
            let left: Vec<_> = std::fs::read_dir(&staging)
                .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name()).collect())
                .unwrap_or_default();
            assert!(left.is_empty(), "staging files left: {left:?}");
        }
        let out = check_written(&zarr3, &["check".as_ref(), plan_path.as_os_str()]);
        assert!(out.contains(" 0 failures"), "{out}");
        if others_too {
            // tensorstore and zarrs read back what they read before as zarr-python 3 does,
            // most of the arrays each.
            let out = check_written(
                &zarr3,
                &[
                    "others".as_ref(),
                    others_path.as_os_str(),
                    zarrs.as_os_str(),
                ],
            );
            assert!(out.contains(" 0 failures"), "{out}");
            let count = |after: &str| -> usize {
                out.split(after)
                    .nth(1)
                    .and_then(|rest| rest.split_whitespace().next())
                    .and_then(|n| n.trim_end_matches(':').parse().ok())
                    .unwrap_or(0)
            };
            let (ts, zs) = (count("tensorstore read "), count("zarrs "));
            assert!(
                ts >= 150 && zs >= 100,
                "tensorstore read {ts} arrays, zarrs {zs}: {out}"
            );
        }
        // zarr-python 2.18 reads the v2 store back too.
        let out = check_written(
            &zarr2,
            &[
                "check".as_ref(),
                v2_path.as_os_str(),
                "--data-only".as_ref(),
            ],
        );
        assert!(out.contains(" 0 failures"), "{out}");
    }
}

#[test]
fn cat_appends_rows_and_truncate_cuts_them_read_back_by_zarr_python() {
    let m = Manifest::load();
    let zarr3 = venv_python("ZARRFS_TEST_PYTHON", "venv-zarr3");
    // (store, array, rows appended, rows cut): chunked, sharded, transposed, v2.
    let cases = [
        ("v3", "codecs/zstd_3", 7, 0),
        ("v3", "sharding/end_crc32c", 3, 0),
        ("v3", "order/transpose_3d", 2, 0),
        ("v3", "codecs/gzip_1", 0, 13),
        ("v2", "order/F_2d", 4, 0),
        ("v2", "order/C_3d", 0, 2),
    ];
    for (order, endian) in [("C", "little"), ("F", "big")] {
        let tmp = TempDir::new("write-resize");
        let mut specs = Vec::new();
        for store in ["v3", "v2"] {
            copy_dir(&m.store_dir(store), &tmp.path().join(store));
        }
        for (i, (store, path, grow, cut)) in cases.iter().enumerate() {
            if !fixed_arrays(&m, store).iter().any(|a| a["path"] == *path) {
                panic!("{store} {path}: not among the fixtures");
            }
            specs.push(json!({
                "store": tmp.path().join(store), "path": path, "order": order, "endian": endian,
                "seed": i, "fill_rows": false, "append_rows": grow, "shrink_rows": cut,
            }));
        }
        let stores = [tmp.path().join("v3"), tmp.path().join("v2")];
        let spec_path = tmp.path().join("spec.json");
        let plan_path = tmp.path().join("plan.json");
        std::fs::write(
            &spec_path,
            json!({"stores": stores, "arrays": specs}).to_string(),
        )
        .expect("write spec");
        check_written(
            &zarr3,
            &[
                "plan".as_ref(),
                spec_path.as_os_str(),
                plan_path.as_os_str(),
            ],
        );
        let plan: Value =
            serde_json::from_slice(&std::fs::read(&plan_path).expect("plan")).expect("plan json");
        let planned = plan["arrays"].as_array().expect("arrays");
        assert_eq!(planned.len(), cases.len(), "every case planned");
        for dir in &stores {
            let staging = tmp.path().join("staging");
            let mount = writable(dir, &staging, &["--order", order, "--endian", endian]);
            for a in planned
                .iter()
                .filter(|a| a["store"].as_str() == dir.to_str())
            {
                let path = a["path"].as_str().expect("path");
                let file = mount.path(path);
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .open(&file)
                    .expect("open");
                for w in a["writes"].as_array().expect("writes") {
                    let bytes = hex(w[1].as_str().expect("hex"));
                    f.write_all_at(&bytes, w[0].as_u64().expect("offset"))
                        .expect("pwrite");
                }
                drop(f);
                let new_size = a["new_size"].as_u64().expect("new size");
                let step = hex(a["append"].as_str().expect("append"));
                let shell = if step.is_empty() {
                    format!("truncate -s {new_size} '{}'", file.display())
                } else {
                    let step_file = tmp.path().join("step.raw");
                    std::fs::write(&step_file, &step).expect("write step");
                    format!("cat '{}' >> '{}'", step_file.display(), file.display())
                };
                let out = std::process::Command::new("sh")
                    .args(["-c", &shell])
                    .stdin(std::process::Stdio::null())
                    .output()
                    .expect("sh");
                assert!(
                    out.status.success(),
                    "{shell}: {}: {}\n{}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr),
                    mount.log()
                );
                let back = std::fs::read(&file).expect("read after resize");
                assert_eq!(back.len() as u64, new_size, "{path}: size after {shell}");
                assert_eq!(
                    common::sha256(&back),
                    a["resized"],
                    "{path} ({order}, {endian}): read after {shell}"
                );
            }
            drop(mount);
        }
        let out = check_written(&zarr3, &["check".as_ref(), plan_path.as_os_str()]);
        assert!(out.contains(" 0 failures"), "{out}");
    }
}

#[test]
fn a_mount_without_writable_refuses_writes_with_erofs() {
    let m = Manifest::load();
    let tmp = TempDir::new("write-ro");
    let store = tmp.path().join("v3");
    copy_dir(&m.store_dir("v3"), &store);
    let before = std::fs::read(store.join("codecs/zstd/zarr.json")).ok();
    let mount = Mount::new(&store, &[]);
    let a = fixed_arrays(&m, "v3")[0]["path"]
        .as_str()
        .expect("path")
        .to_string();
    let e = std::fs::OpenOptions::new()
        .write(true)
        .open(mount.path(&a))
        .expect_err("an open for writing on a read-only mount");
    assert_eq!(e.raw_os_error(), Some(libc::EROFS), "{e}");
    let mut f = std::fs::File::open(mount.path(&a)).expect("open for reading");
    let e = f.write(b"x").expect_err("a write on a read-only handle");
    assert!(
        matches!(e.raw_os_error(), Some(libc::EBADF) | Some(libc::EROFS)),
        "{e}"
    );
    drop(mount);
    assert_eq!(
        std::fs::read(store.join("codecs/zstd/zarr.json")).ok(),
        before
    );
}

#[test]
fn a_writable_mount_takes_whole_rows_only_and_refuses_views() {
    let m = Manifest::load();
    let tmp = TempDir::new("write-refused");
    let store = tmp.path().join("v3");
    copy_dir(&m.store_dir("v3"), &store);
    let staging = tmp.path().join("staging");
    let mount = writable(&store, &staging, &["--views", "raw,npy"]);
    // 20 x 30 int32: rows of 120 bytes.
    let a = "codecs/zstd_3";
    let file = mount.path(a);
    let size = std::fs::metadata(&file).expect("stat").len();
    assert_eq!(size, 2400);
    // `cp` over it: an open with O_TRUNC then whole rows written replace its data.
    let before = std::fs::read(&file).expect("read");
    let mut replaced: Vec<u8> = before.iter().rev().copied().collect();
    replaced.truncate(1200);
    std::fs::write(&file, &replaced).expect("write over it");
    assert!(
        std::fs::read(&file).expect("read") == replaced,
        "read after cp"
    );
    std::fs::write(&file, &before).expect("write it back");
    let e = std::fs::OpenOptions::new()
        .write(true)
        .open(mount.path(&format!("{a}.npy")))
        .expect_err("a view opened for writing");
    assert_eq!(e.raw_os_error(), Some(libc::EROFS), "{e}");
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&file)
        .expect("open for writing");
    // A truncate to a size that is not whole rows fails at once.
    let e = f
        .set_len(size + 1)
        .expect_err("a truncate to part of a row");
    assert_eq!(e.raw_os_error(), Some(libc::EINVAL), "{e}");
    // A write may leave part of a row while the file is open; the commit refuses it.
    f.write_all_at(b"xy", size - 1)
        .expect("a write past the end");
    let e = f.sync_all().expect_err("a commit of part of a row");
    assert_eq!(e.raw_os_error(), Some(libc::EINVAL), "{e}");
    // Cut back to whole rows, it commits (the byte before the end written).
    f.set_len(size).expect("a truncate to whole rows");
    f.sync_all().expect("fsync");
    drop(f);
    let back = std::fs::read(&file).expect("read");
    assert_eq!((back.len() as u64, back[size as usize - 1]), (size, b'x'));
    assert!(
        back[..size as usize - 1] == before[..size as usize - 1],
        "written back"
    );
    // A zero-dimensional array has no rows to add.
    let scalar = mount.path("keys/default_slash_0d");
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&scalar)
        .expect("open a scalar for writing");
    let e = f
        .write_all_at(b"abcd", 2)
        .expect_err("a write past a scalar's end");
    assert_eq!(e.raw_os_error(), Some(libc::EINVAL), "{e}");
    drop(f);
    let log = mount.log();
    assert!(log.contains("not a whole number of rows"), "{log}");
    assert!(log.contains("passes the end of the file"), "{log}");
}

/// A `--writable` mount of `store`, staging in `staging`, with `extra` flags.
fn writable(store: &Path, staging: &Path, extra: &[&str]) -> Mount {
    let mut args = vec![
        "--writable",
        "--write-staging",
        staging.to_str().expect("utf-8 path"),
    ];
    args.extend_from_slice(extra);
    Mount::new(store, &args)
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

/// A `zarrfs mount -f --writable` child with `env` set, up once mounted: its process
/// and its mountpoint, log and staging folders under `dir`.
fn writable_daemon(
    store: &Path,
    dir: &Path,
    staging: &Path,
    env: &[(&str, &str)],
    extra: &[&str],
) -> (std::process::Child, PathBuf, PathBuf) {
    let mountpoint = dir.join("mnt");
    std::fs::create_dir_all(&mountpoint).expect("mkdir");
    let log = dir.join(format!("zarrfs-{}.log", std::process::id()));
    let mut command = std::process::Command::new(common::zarrfs());
    for (k, v) in env {
        command.env(k, v);
    }
    let mut args = vec![
        "--writable",
        "--write-staging",
        staging.to_str().expect("utf-8"),
    ];
    args.extend_from_slice(extra);
    let mut child =
        common::mount::spawn_foreground(command, store, &mountpoint, &args, &log).expect("spawn");
    let up = common::mount::wait_for(std::time::Duration::from_secs(20), || {
        common::mount::mounted(&mountpoint) || child.try_wait().ok().flatten().is_some()
    });
    assert!(
        up && common::mount::mounted(&mountpoint),
        "no mount: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    (child, mountpoint, log)
}

/// What a failing test must not leave behind: the mount at `.0` (unmounted lazily) and
/// its daemon, process `.1` (ended by its own PID while that process is still the
/// daemon of that mountpoint).
struct Cleanup(PathBuf, u32);

impl Drop for Cleanup {
    fn drop(&mut self) {
        force_unmount(&self.0);
        let cmdline = std::fs::read(format!("/proc/{}/cmdline", self.1)).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains(&*self.0.to_string_lossy()) {
            // SAFETY: a signal to a process this test started, by its PID.
            unsafe { libc::kill(self.1 as i32, libc::SIGKILL) };
        }
    }
}

/// Unmount `mountpoint` even when its daemon is gone (`umount -l` of a dead connection).
fn force_unmount(mountpoint: &Path) {
    if common::mount::mounted(mountpoint) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(mountpoint)
            .status();
    }
}

#[test]
fn a_daemon_killed_in_a_commit_leaves_every_chunk_old_or_new_and_its_staging_is_reported() {
    let m = Manifest::load();
    let zarr3 = venv_python("ZARRFS_TEST_PYTHON", "venv-zarr3");
    // 20 x 30 int32 in 8 x 16 chunks: a rewrite of the whole file puts 6 chunks.
    for kill_after in [0u32, 2, 5] {
        let tmp = TempDir::new("write-killed");
        let store = tmp.path().join("v3");
        copy_dir(&m.store_dir("v3"), &store);
        let save = tmp.path().join("zstd_3");
        let spec = json!({"stores": [&store], "arrays": [{
            "store": &store, "path": "codecs/zstd_3", "order": "C", "endian": "little",
            "seed": kill_after, "whole": true, "save": &save,
        }]});
        let spec_path = tmp.path().join("spec.json");
        let plan_path = tmp.path().join("plan.json");
        std::fs::write(&spec_path, spec.to_string()).expect("spec");
        check_written(
            &zarr3,
            &[
                "plan".as_ref(),
                spec_path.as_os_str(),
                plan_path.as_os_str(),
            ],
        );
        let plan: Value =
            serde_json::from_slice(&std::fs::read(&plan_path).expect("plan")).expect("json");
        let w = &plan["arrays"][0]["writes"][0];
        let staging = tmp.path().join("staging");
        let fault = format!("kill-after-puts:{kill_after}");
        let (mut child, mountpoint, log) = writable_daemon(
            &store,
            tmp.path(),
            &staging,
            &[("ZARRFS_FAULT", &fault)],
            &[],
        );
        let _cleanup = Cleanup(mountpoint.clone(), child.id());
        let file = mountpoint.join("codecs/zstd_3");
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&file)
            .expect("open");
        f.write_all_at(&hex(w[1].as_str().expect("hex")), 0)
            .expect("pwrite");
        // The close commits, and the daemon dies in it: the close fails.
        let closed = f.sync_all();
        drop(f);
        let exited = common::mount::wait_exit(&mut child, std::time::Duration::from_secs(20));
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(
            closed.is_err(),
            "kill after {kill_after}: the commit returned: {text}"
        );
        assert!(
            exited.is_some(),
            "kill after {kill_after}: the daemon lives on: {text}"
        );
        force_unmount(&mountpoint);
        let out = check_written(&zarr3, &["torn".as_ref(), plan_path.as_os_str()]);
        assert!(
            out.contains(" 0 failures"),
            "kill after {kill_after}: {out}"
        );
        assert!(
            out.contains(&format!("{kill_after} new")),
            "kill after {kill_after}: {out}"
        );
        // The next mount with the same staging folder names what was never committed.
        let (mut child, mountpoint, log) = writable_daemon(&store, tmp.path(), &staging, &[], &[]);
        let _cleanup = Cleanup(mountpoint.clone(), child.id());
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let reported = text
            .lines()
            .filter(|l| l.contains("never committed") && l.contains("/codecs/zstd_3"))
            .count();
        force_unmount(&mountpoint);
        let _ = common::mount::wait_exit(&mut child, std::time::Duration::from_secs(20));
        assert_eq!(reported, 1, "{text}");
    }
}

#[test]
fn a_second_writer_of_an_array_waits_for_the_first_or_fails_with_ebusy() {
    let m = Manifest::load();
    let tmp = TempDir::new("write-busy");
    let store = tmp.path().join("v3");
    copy_dir(&m.store_dir("v3"), &store);
    let staging = tmp.path().join("staging");
    let mount = writable(&store, &staging, &["--write-wait", "1s"]);
    let file = mount.path("codecs/zstd_3");
    let open = |f: &Path| std::fs::OpenOptions::new().write(true).open(f);
    let first = open(&file).expect("first writer");
    let started = std::time::Instant::now();
    let e = open(&file).expect_err("a second writer while the first is open");
    assert_eq!(e.raw_os_error(), Some(libc::EBUSY), "{e}");
    assert!(started.elapsed() >= std::time::Duration::from_millis(900));
    // Another array is not held up, nor are readers of this one.
    drop(open(&mount.path("codecs/gzip_1")).expect("a writer of another array"));
    assert_eq!(std::fs::read(&file).expect("a reader").len(), 2400);
    drop(first);
    drop(mount);
    // A writer that waits gets the array once the first closes. Its mount waits long
    // enough for that close on a busy machine too.
    let mount = writable(
        &store,
        &tmp.path().join("staging-2"),
        &["--write-wait", "60s"],
    );
    let file = mount.path("codecs/zstd_3");
    let first = open(&file).expect("first writer");
    let waiter = {
        let file = file.clone();
        std::thread::spawn(move || open(&file).map(drop))
    };
    std::thread::sleep(std::time::Duration::from_millis(200));
    drop(first);
    waiter
        .join()
        .expect("join")
        .expect("the waiting writer opens once the first closes");
}

#[test]
fn a_full_staging_folder_fails_the_write_with_enospc() {
    let m = Manifest::load();
    let tmp = TempDir::new("write-full");
    let store = tmp.path().join("v3_large");
    copy_dir(&m.store_dir("v3_large"), &store);
    let staging = tmp.path().join("staging");
    std::fs::create_dir_all(&staging).expect("mkdir");
    let status = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
        .arg(&staging)
        .status()
        .expect("mount tmpfs");
    assert!(
        status.success(),
        "mount a 64 KiB tmpfs (the tests run as root)"
    );
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(&self.0).status();
        }
    }
    let _tmpfs = Unmount(staging.clone());
    let before = std::fs::read(store.join("field/zarr.json")).expect("metadata");
    let mount = writable(&store, &staging, &[]);
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(mount.path("field"))
        .expect("open");
    let e = f
        .write_all_at(&vec![7u8; 1 << 20], 0)
        .expect_err("1 MiB into 64 KiB");
    assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "{e}");
    drop(f);
    let log = mount.log();
    drop(mount);
    assert!(log.contains("no space left for staged writes"), "{log}");
    assert_eq!(
        std::fs::read(store.join("field/zarr.json")).expect("metadata"),
        before
    );
}

#[test]
fn a_shared_writable_mmap_of_numpy_is_committed_and_read_by_zarr_python() {
    let m = Manifest::load();
    let zarr3 = venv_python("ZARRFS_TEST_PYTHON", "venv-zarr3");
    let tmp = TempDir::new("write-mmap");
    let store = tmp.path().join("v3");
    copy_dir(&m.store_dir("v3"), &store);
    let staging = tmp.path().join("staging");
    let old = tmp.path().join("old.npy");
    let code = "import sys, numpy as np, zarr\n\
                z = zarr.open_array(store=sys.argv[1], path='codecs/zstd_3', mode='r')\n\
                np.save(sys.argv[2], z[...])";
    common::run_python(&zarr3, "save", code, [store.as_os_str(), old.as_os_str()]);
    let mount = writable(&store, &staging, &[]);
    let code = "import sys, numpy as np\n\
                m = np.memmap(sys.argv[1], dtype='<i4', mode='r+', shape=(20, 30))\n\
                m[3, :] = 42\n\
                m[:, 17] = -7\n\
                m.flush()\n\
                del m";
    let file = mount.path("codecs/zstd_3");
    common::run_python(&zarr3, "memmap", code, [file.as_os_str()]);
    drop(mount);
    let code = "import sys, numpy as np, zarr\n\
                want = np.load(sys.argv[2])\n\
                want[3, :] = 42\n\
                want[:, 17] = -7\n\
                got = zarr.open_array(store=sys.argv[1], path='codecs/zstd_3', mode='r')[...]\n\
                print('same' if np.array_equal(got, want) else 'differs')";
    let out = common::run_python(&zarr3, "check", code, [store.as_os_str(), old.as_os_str()]);
    assert_eq!(out.trim(), "same");
}

#[test]
fn inspect_says_which_arrays_a_writable_mount_takes_writes_to() {
    let m = Manifest::load();
    let inspect = |store: &Path| -> Vec<Value> {
        let out = std::process::Command::new(common::zarrfs())
            .arg("inspect")
            .arg(store)
            .arg("--json")
            .output()
            .expect("zarrfs inspect");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("json")
    };
    let nodes = inspect(&m.store_dir("v3"));
    let of = |path: &str| {
        nodes
            .iter()
            .find(|n| n["path"] == path)
            .unwrap_or_else(|| panic!("{path} not listed"))["writable"]
            .clone()
    };
    assert_eq!(of("/codecs/zstd_3"), json!(true));
    assert_eq!(of("/sharding/end_crc32c"), json!(true));
    let vlen = fixed_or_vlen(&m, "v3", true);
    assert_eq!(
        of(&format!("/{vlen}")),
        json!("no: variable-length elements")
    );
    let zip = crate::common::repo().join("target/fixtures-zip/v3.zip");
    let zipped = inspect(&zip);
    let arrays: Vec<_> = zipped.iter().filter(|n| n["kind"] == "array").collect();
    assert!(!arrays.is_empty());
    for n in arrays {
        assert_eq!(n["writable"], json!("no: the store takes no writes"), "{n}");
    }
}

/// The path of an array of `store` with variable-length elements (`vlen`) or not.
fn fixed_or_vlen(m: &Manifest, store: &str, vlen: bool) -> String {
    common::fixtures::arrays_of(m, store)
        .into_iter()
        .find(|a| a["vlen"] == vlen && !is_unsupported(a))
        .and_then(|a| a["path"].as_str())
        .expect("such an array")
        .to_string()
}

#[test]
fn zarrfs_write_writes_a_whole_array_from_a_file_or_stdin_read_back_by_zarr_python() {
    let m = Manifest::load();
    let zarr3 = venv_python("ZARRFS_TEST_PYTHON", "venv-zarr3");
    let tmp = TempDir::new("write-cli");
    for store in ["v3", "v2"] {
        copy_dir(&m.store_dir(store), &tmp.path().join(store));
    }
    // The new contents, drawn by numpy: 25 rows for a 20-row C array (from a file), and
    // 5 of 9 columns of an F array, big-endian (from stdin).
    let code = "import sys, numpy as np\n\
                a = (np.arange(25 * 30) * 3 - 7).astype('<i4').reshape(25, 30)\n\
                np.save(sys.argv[1] + '/a.npy', a)\n\
                open(sys.argv[1] + '/a.raw', 'wb').write(a.tobytes())\n\
                b = (np.arange(7 * 5) * -11 + 5).astype('<i4').reshape(7, 5)\n\
                np.save(sys.argv[1] + '/b.npy', b)\n\
                open(sys.argv[1] + '/b.raw', 'wb').write(b.astype('>i4').tobytes(order='F'))";
    common::run_python(&zarr3, "inputs", code, [tmp.path().as_os_str()]);
    let zarrfs = |args: &[&std::ffi::OsStr], stdin: Option<&Path>| {
        let mut c = std::process::Command::new(common::zarrfs());
        c.arg("write").args(args);
        if let Some(file) = stdin {
            c.stdin(std::fs::File::open(file).expect("stdin"));
        }
        c.output().expect("zarrfs write")
    };
    let staging = tmp.path().join("staging");
    let input = std::fs::read(tmp.path().join("a.raw")).expect("the input");
    let out = zarrfs(
        &[
            tmp.path().join("v3").as_os_str(),
            "codecs/zstd_3".as_ref(),
            "--from".as_ref(),
            tmp.path().join("a.raw").as_os_str(),
            "--write-staging".as_ref(),
            staging.as_os_str(),
        ],
        None,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("shape [25, 30]"));
    assert!(
        std::fs::read(tmp.path().join("a.raw")).expect("the input") == input,
        "the input file is read where it is, never changed"
    );
    let out = zarrfs(
        &[
            tmp.path().join("v2").as_os_str(),
            "order/F_2d".as_ref(),
            "--order".as_ref(),
            "F".as_ref(),
            "--endian".as_ref(),
            "big".as_ref(),
        ],
        Some(&tmp.path().join("b.raw")),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!staging.exists(), "the staging folder is removed");
    let code = "import sys, numpy as np, zarr\n\
                d = sys.argv[1]\n\
                a = zarr.open_array(store=d + '/v3', path='codecs/zstd_3', mode='r')[...]\n\
                b = zarr.open_array(store=d + '/v2', path='order/F_2d', mode='r')[...]\n\
                ok = np.array_equal(a, np.load(d + '/a.npy')) and np.array_equal(b, np.load(d + '/b.npy'))\n\
                print('same' if ok else f'differs {a.shape} {b.shape}')";
    let out_py = common::run_python(&zarr3, "check", code, [tmp.path().as_os_str()]);
    assert_eq!(out_py.trim(), "same");
    // A zip archive takes no writes: nothing is written, and the reason is given.
    let zip = crate::common::repo().join("target/fixtures-zip/v3.zip");
    let out = zarrfs(
        &[
            zip.as_os_str(),
            "codecs/zstd_3".as_ref(),
            "--from".as_ref(),
            tmp.path().join("a.raw").as_os_str(),
        ],
        None,
    );
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("the store takes no writes"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn mkdir_makes_a_group_rmdir_removes_an_empty_one_and_rm_removes_an_array_seen_by_zarr_python() {
    let m = Manifest::load();
    let zarr3 = venv_python("ZARRFS_TEST_PYTHON", "venv-zarr3");
    let tmp = TempDir::new("write-nodes");
    for store in ["v3", "v2"] {
        let dir = tmp.path().join(store);
        copy_dir(&m.store_dir(store), &dir);
        let staging = tmp.path().join(format!("staging-{store}"));
        let mount = writable(&dir, &staging, &[]);
        std::fs::create_dir(mount.path("made")).expect("mkdir");
        std::fs::create_dir(mount.path("made/inner")).expect("mkdir in the new group");
        assert!(mount.path("made/inner").is_dir());
        let e = std::fs::create_dir(mount.path("made")).expect_err("mkdir of an existing group");
        assert_eq!(e.raw_os_error(), Some(libc::EEXIST), "{e}");
        let e = std::fs::remove_dir(mount.path("made"))
            .expect_err("rmdir of a group with a group in it");
        assert_eq!(e.raw_os_error(), Some(libc::ENOTEMPTY), "{e}");
        std::fs::create_dir(mount.path("gone")).expect("mkdir");
        std::fs::remove_dir(mount.path("gone")).expect("rmdir of an empty group");
        assert!(!mount.path("gone").exists());
        // rm of an array's file removes the array, its chunks first.
        let doomed = if store == "v3" {
            "codecs/gzip_1"
        } else {
            "compressors/zlib"
        };
        assert!(mount.path(doomed).is_file(), "{store}: {doomed}");
        std::fs::remove_file(mount.path(doomed)).expect("rm an array");
        assert!(!mount.path(doomed).exists());
        let (folder, leaf) = doomed.split_once('/').expect("a path in a group");
        let names: Vec<String> = std::fs::read_dir(mount.path(folder))
            .expect("ls")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        assert!(!names.iter().any(|n| n == leaf), "{names:?}");
        assert!(names.len() > 3, "the other arrays stay: {names:?}");
        let e = std::fs::remove_file(mount.path("made")).expect_err("rm of a group");
        assert!(
            matches!(e.raw_os_error(), Some(libc::EISDIR) | Some(libc::EROFS)),
            "{e}"
        );
        drop(mount);
        assert!(
            !dir.join(doomed).exists(),
            "{store}: the array's folder is gone"
        );
        let code = "import sys, zarr\n\
                    g = zarr.open_group(store=sys.argv[1], mode='r')\n\
                    folder, leaf = sys.argv[2].split('/')\n\
                    print(sorted(g['made'].group_keys()), 'gone' in g, leaf in g[folder], len(list(g[folder].array_keys())) > 3)";
        let out = common::run_python(&zarr3, "check", code, [dir.as_os_str(), doomed.as_ref()]);
        assert_eq!(out.trim(), "['inner'] False False True", "{store}");
    }
    // A read-only mount makes nothing.
    let mount = Mount::new(&tmp.path().join("v3"), &[]);
    let e = std::fs::create_dir(mount.path("nope")).expect_err("mkdir on a read-only mount");
    assert_eq!(e.raw_os_error(), Some(libc::EROFS), "{e}");
}

#[test]
fn each_close_on_an_icechunk_branch_is_one_commit_read_back_by_icechunk() {
    let tmp = TempDir::new("write-icechunk");
    let repo = tmp.path().join("repo");
    icechunk_commits(&repo, &repo, &[], tmp.path());
}

/// The same through S3 (s3s-fs serving the repository's folder as bucket `ice`).
#[test]
fn each_close_on_an_icechunk_branch_on_s3_is_one_commit_read_back_by_icechunk() {
    let tmp = TempDir::new("write-icechunk-s3");
    let buckets = tmp.path().join("buckets");
    std::fs::create_dir_all(buckets.join("ice")).expect("bucket");
    let repo = buckets.join("ice/repo");
    let server = common::servers::s3s_fs(&buckets, None);
    let options = format!("endpoint={},allow_http=true,region=us-east-1", server.url());
    icechunk_commits(
        &repo,
        Path::new("s3://ice/repo"),
        &["--anonymous", "-o", &options],
        tmp.path(),
    );
}

/// Three closes on branch `main` of a repository made by icechunk in folder `repo`,
/// mounted as `url` with `args`: three commits, each reading as the state after its
/// close, the first commit kept; a tag stays read-only; a `.npy` saved makes an array
/// in one more commit.
fn icechunk_commits(repo: &Path, url: &Path, args: &[&str], tmp: &Path) {
    let icechunk = venv_python("ZARRFS_ICECHUNK_PYTHON", "venv-icechunk");
    // A repository with array `a` (8 x 6 int32 in 4 x 3 chunks, 0..48) on main, tagged v1.
    let code = "import sys, numpy as np, zarr, icechunk\n\
                repo = icechunk.Repository.create(icechunk.local_filesystem_storage(sys.argv[1]))\n\
                s = repo.writable_session('main')\n\
                a = zarr.create_array(store=s.store, name='a', shape=(8, 6), chunks=(4, 3), dtype='<i4', fill_value=0)\n\
                a[:] = np.arange(48, dtype='<i4').reshape(8, 6)\n\
                first = s.commit('made by icechunk')\n\
                repo.create_tag('v1', snapshot_id=first)\n\
                print(first)";
    let first = common::run_python(&icechunk, "make", code, [repo.as_os_str()]);
    let first = first.trim().to_string();
    let staging = tmp.join("staging");
    let mut with = args.to_vec();
    with.extend(["--commit-message", "from a test"]);
    let mount = writable(url, &staging, &with);
    let file = mount.path("a");
    let write_at = |offset: u64, bytes: &[u8]| {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&file)
            .expect("open");
        f.write_all_at(bytes, offset).expect("pwrite");
        // The close commits.
        drop(f);
    };
    write_at(0, &1000i32.to_le_bytes());
    write_at(47 * 4, &2000i32.to_le_bytes());
    let rows: Vec<u8> = (0..12i32).flat_map(|v| (-v).to_le_bytes()).collect();
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("cat >> '{}'", file.display()))
        .stdin({
            let rows_file = tmp.join("rows.raw");
            std::fs::write(&rows_file, &rows).expect("rows");
            std::fs::File::open(rows_file).expect("rows")
        })
        .output()
        .expect("cat");
    assert!(
        out.status.success(),
        "cat >> {}: {}: {}\n{}",
        file.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr),
        mount.log()
    );
    assert_eq!(std::fs::metadata(&file).expect("stat").len(), 10 * 6 * 4);
    // A saved .npy makes array `b`, in one commit of its own.
    let code = "import sys, numpy as np\n\
                np.save(sys.argv[1], np.arange(35, dtype='>f8').reshape(5, 7))\n\
                print('saved')";
    let npy = mount.path("b.npy");
    common::run_python(&icechunk, "save", code, [npy.as_os_str()]);
    drop(mount);
    // A tag stays read-only.
    let mut tag = args.to_vec();
    tag.extend(["--ref", "v1"]);
    let tagged = writable(url, &staging, &tag);
    let e = std::fs::OpenOptions::new()
        .write(true)
        .open(tagged.path("a"))
        .expect_err("a tag opened for writing");
    assert_eq!(e.raw_os_error(), Some(libc::EROFS), "{e}");
    drop(tagged);
    // Three commits on main after the first, each reading as the state after its close.
    let code = "import sys, numpy as np, zarr, icechunk\n\
                repo = icechunk.Repository.open(icechunk.local_filesystem_storage(sys.argv[1]))\n\
                infos = list(repo.ancestry(branch='main'))\n\
                b = zarr.open_array(store=repo.readonly_session('main').store, path='b', mode='r')[...]\n\
                made = np.array_equal(b, np.arange(35).reshape(5, 7)) and infos[0].message.startswith('from a test: /b: array made')\n\
                infos = infos[1:]\n\
                want = np.arange(48, dtype='<i4').reshape(8, 6)\n\
                states = []\n\
                s1 = want.copy(); s1[0, 0] = 1000; states.append(s1)\n\
                s2 = s1.copy(); s2[7, 5] = 2000; states.append(s2)\n\
                s3 = np.concatenate([s2, -np.arange(12, dtype='<i4').reshape(2, 6)]); states.append(s3)\n\
                new = list(reversed(infos[:3]))\n\
                ok = [info.message.startswith('from a test: /a: ') for info in new]\n\
                same = [np.array_equal(zarr.open_array(store=repo.readonly_session(snapshot_id=info.id).store, path='a', mode='r')[...], s) for info, s in zip(new, states)]\n\
                print(made, len(infos), infos[3].id == sys.argv[2], ok, same)";
    let out = common::run_python(
        &icechunk,
        "ancestry",
        code,
        [repo.as_os_str(), first.as_ref()],
    );
    assert_eq!(
        out.trim(),
        "True 5 True [True, True, True] [True, True, True]",
        "(the saved array, commits on main before it, the first kept, messages, states)"
    );
}

#[test]
fn a_sidecar_written_back_with_new_attributes_rewrites_them_and_nothing_else_may_change() {
    let m = Manifest::load();
    let zarr3 = venv_python("ZARRFS_TEST_PYTHON", "venv-zarr3");
    let tmp = TempDir::new("write-attrs");
    for (store, array) in [("v3", "codecs/zstd_3"), ("v2", "compressors/zlib")] {
        let dir = tmp.path().join(store);
        copy_dir(&m.store_dir(store), &dir);
        let staging = tmp.path().join(format!("staging-{store}"));
        let mount = writable(&dir, &staging, &[]);
        let (folder, name) = array.split_once('/').expect("a path in a group");
        let sidecar = mount.path(&format!("{folder}/.{name}.json"));
        let mut doc: Value =
            serde_json::from_slice(&std::fs::read(&sidecar).expect("read sidecar")).expect("json");
        doc["attributes"] = json!({"units": "K", "scale": [1, 2.5], "note": "ünïcode"});
        let text = serde_json::to_vec_pretty(&doc).expect("json");
        let mut f = std::fs::File::create(&sidecar).expect("open the sidecar for writing");
        f.write_all(&text).expect("write");
        let size = f.metadata().expect("fstat the sidecar being written").len();
        assert_eq!(size, text.len() as u64, "{store}: the size as written");
        if let Err(e) = f.sync_all() {
            panic!(
                "{store}: the attributes are committed: {e}\n{}",
                mount.log()
            );
        }
        drop(f);
        let back: Value =
            serde_json::from_slice(&std::fs::read(&sidecar).expect("read again")).expect("json");
        assert_eq!(back["attributes"], doc["attributes"], "{store}");
        // The group's sidecar too.
        let group = mount.path(&format!("{folder}/.group.json"));
        let mut gdoc: Value =
            serde_json::from_slice(&std::fs::read(&group).expect("read")).expect("json");
        gdoc["attributes"] = json!({"title": "edited"});
        std::fs::write(&group, serde_json::to_vec(&gdoc).expect("json")).expect("write group");
        // Anything but the attributes changed fails, and changes nothing.
        let mut bad = back.clone();
        bad["shape"] = json!([1, 1]);
        let mut f = std::fs::File::create(&sidecar).expect("open");
        f.write_all(&serde_json::to_vec(&bad).expect("json"))
            .expect("write");
        let e = f
            .sync_all()
            .expect_err("a shape changed through the sidecar");
        assert_eq!(e.raw_os_error(), Some(libc::EINVAL), "{e}");
        drop(f);
        let log = mount.log();
        drop(mount);
        assert!(
            log.contains("only \"attributes\" changes through a sidecar"),
            "{log}"
        );
        let code = "import sys, json, zarr\n\
                    a = zarr.open_array(store=sys.argv[1], path=sys.argv[2], mode='r')\n\
                    g = zarr.open_group(store=sys.argv[1], path=sys.argv[3], mode='r')\n\
                    print(json.dumps([dict(a.attrs), dict(g.attrs), list(a.shape)], ensure_ascii=False))";
        let out = common::run_python(
            &zarr3,
            "attrs",
            code,
            [dir.as_os_str(), array.as_ref(), folder.as_ref()],
        );
        let got: Value = serde_json::from_str(out.trim()).expect("json");
        assert_eq!(got[0], doc["attributes"], "{store}");
        assert_eq!(got[1], json!({"title": "edited"}), "{store}");
        assert_eq!(got[2], doc["shape"], "{store}: the shape stays");
    }
}

/// The access keys the S3 test server takes, in the environment (the mounts inherit it).
fn s3_credentials() -> (&'static str, &'static str) {
    static ONCE: std::sync::Once = std::sync::Once::new();
    let keys = ("zarrfsTESTACCESSKEY", "zarrfs-test-secret-8f3a2c91d7");
    ONCE.call_once(|| {
        std::env::set_var("AWS_ACCESS_KEY_ID", keys.0);
        std::env::set_var("AWS_SECRET_ACCESS_KEY", keys.1);
        std::env::set_var("AWS_REGION", "us-east-1");
    });
    keys
}

/// Object storage under test: where the store is, how a mount reaches it, how another
/// writer rewrites one of its objects, and how its objects come back into a folder.
enum Bucket {
    /// s3s-fs, whose bucket is a folder: its objects are files.
    S3(common::servers::Server),
    /// scripts/gcs_server.py, whose bucket is a folder too.
    Gcs(common::servers::Server),
    /// Azurite: its blobs are put and got over HTTP.
    Azure(common::servers::Server),
}

impl Bucket {
    fn url(&self) -> &'static str {
        match self {
            Bucket::S3(_) => "s3://bkt/v3",
            Bucket::Gcs(_) => "gs://bkt/v3",
            Bucket::Azure(_) => "az://bkt/v3",
        }
    }

    fn options(&self) -> String {
        match self {
            Bucket::S3(server) => format!("endpoint={},allow_http=true", server.url()),
            // object_store's GCS client signs every put: with a key that asks for no
            // OAuth exchange, as for an emulator.
            Bucket::Gcs(server) => format!(
                "google_base_url={},allow_http=true,google_service_account={}",
                server.url(),
                server.dir().join(common::servers::GCS_KEY).display()
            ),
            Bucket::Azure(_) => "use_emulator=true".into(),
        }
    }

    /// Ready another client to put `bytes` at `key` (below the store): what makes the
    /// put. The client's process (Azure) is started here, before the test opens a file
    /// of the mount: a process forked while one is open would close it at its exec, a
    /// flush that waits for the commit the test holds.
    fn rewriter(&self, tmp: &Path, store: &Path, key: &str, bytes: &[u8]) -> Box<dyn FnOnce()> {
        match self {
            Bucket::S3(_) | Bucket::Gcs(_) => {
                let (path, bytes) = (store.join(key), bytes.to_vec());
                Box::new(move || std::fs::write(path, bytes).expect("the other writer"))
            }
            Bucket::Azure(server) => {
                let (folder, name) = key.rsplit_once('/').expect("a key in a folder");
                let one = tmp.join("other-writer");
                std::fs::create_dir_all(&one).expect("mkdir");
                std::fs::write(one.join(name), bytes).expect("the other writer's file");
                let now = tmp.join("other-writer-now");
                let err = tmp.join("other-writer.err");
                // The put is tried three times, each failure said on stderr, by this
                // process: the test starts no other once a file of the mount is open.
                // It gives up waiting for its start after ten minutes (a test that
                // failed before).
                let code = "import os, subprocess, sys, time\n\
                            deadline = time.time() + 600\n\
                            while not os.path.exists(sys.argv[1]):\n\
                            \x20   if time.time() > deadline: sys.exit('the other writer: never started')\n\
                            \x20   time.sleep(0.01)\n\
                            for attempt in range(1, 4):\n\
                            \x20   code = subprocess.call([sys.executable] + sys.argv[2:])\n\
                            \x20   if code == 0: sys.exit(0)\n\
                            \x20   print(f'the other writer: attempt {attempt} exited {code}', file=sys.stderr, flush=True)\n\
                            \x20   if attempt < 3: time.sleep(1)\n\
                            sys.exit(code)";
                let mut child =
                    std::process::Command::new(venv_python("ZARRFS_TEST_PYTHON", "venv-zarr3"))
                        .args(["-c", code])
                        .arg(&now)
                        .arg(crate::common::repo().join("scripts/azurite_upload.py"))
                        .arg(format!("{}/devstoreaccount1", server.url()))
                        .arg("bkt")
                        .arg(&one)
                        .arg(format!("v3/{folder}"))
                        .stdin(std::process::Stdio::null())
                        .stderr(std::fs::File::create(&err).expect("the other writer's stderr"))
                        .spawn()
                        .expect("start the other writer");
                Box::new(move || {
                    std::fs::write(&now, b"").expect("start the other writer's put");
                    let guard = std::time::Duration::from_secs(300);
                    let status = common::mount::wait_exit(&mut child, guard);
                    if status.is_none() {
                        let _ = child.kill();
                        let _ = child.wait();
                    }
                    let said = std::fs::read_to_string(&err).unwrap_or_default();
                    assert!(
                        status.is_some_and(|s| s.success()),
                        "the other writer's put: {} (3 tries); its stderr:\n{}",
                        status.map_or("still running after 300 s".into(), |s| s.to_string()),
                        common::tail(&said, 4000)
                    );
                    if !said.trim().is_empty() {
                        eprintln!("the other writer's put, tried again:\n{said}");
                    }
                })
            }
        }
    }

    /// The store's objects as they are now, in folder `store`.
    fn fetch(&self, store: &Path) {
        let Bucket::Azure(server) = self else {
            return;
        };
        let python = venv_python("ZARRFS_TEST_PYTHON", "venv-zarr3");
        let out = std::process::Command::new(python)
            .arg(crate::common::repo().join("scripts/azurite_download.py"))
            .arg(format!("{}/devstoreaccount1", server.url()))
            .args(["bkt", "v3"])
            .arg(store)
            .output()
            .expect("run azurite_download.py");
        assert!(
            out.status.success(),
            "azurite_download.py: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The bytes of `key` (below the store) as the bucket holds them now.
    fn read(&self, store: &Path, tmp: &Path, key: &str) -> Vec<u8> {
        match self {
            Bucket::S3(_) | Bucket::Gcs(_) => std::fs::read(store.join(key)).expect("an object"),
            Bucket::Azure(_) => {
                let back = tmp.join("fetched");
                self.fetch(&back);
                std::fs::read(back.join(key)).expect("a blob")
            }
        }
    }
}

/// [`conditional_puts`] on a server whose buckets are the folders of `buckets/` (the v3
/// fixture store copied into `bkt/v3`), started by `start`.
fn conditional_puts_in_a_folder(name: &str, start: impl FnOnce(&Path) -> Bucket) {
    let tmp = TempDir::new(name);
    let root = tmp.path().join("buckets");
    let store = root.join("bkt/v3");
    copy_dir(&Manifest::load().store_dir("v3"), &store);
    conditional_puts(start(&root), &store, tmp.path());
}

#[test]
fn writes_to_s3_are_conditional_puts_read_back_by_zarr_python_and_another_writers_chunk_is_kept() {
    conditional_puts_in_a_folder("write-s3", |root| {
        Bucket::S3(common::servers::s3s_fs(root, Some(s3_credentials())))
    });
}

/// On GCS a put names the generation it read, the condition GCS takes
/// (`x-goog-if-generation-match`).
#[test]
fn writes_to_gcs_are_conditional_puts_read_back_by_zarr_python_and_another_writers_chunk_is_kept() {
    conditional_puts_in_a_folder("write-gcs", |root| Bucket::Gcs(common::servers::gcs(root)));
}

#[test]
fn writes_to_azure_are_conditional_puts_read_back_by_zarr_python_and_another_writers_chunk_is_kept()
{
    let tmp = TempDir::new("write-azure");
    let server = common::servers::azurite();
    let store = tmp.path().join("v3");
    copy_dir(&Manifest::load().store_dir("v3"), &store);
    common::servers::azurite_put(&server, "bkt", &store, "v3");
    conditional_puts(Bucket::Azure(server), &store, tmp.path());
}

/// Random writes into arrays of the v3 fixture store in `bucket` (its objects also in
/// folder `store`), each committed by an fsync, read back by zarr-python; then a commit
/// whose chunk another writer rewrote between its read and its put fails with `EIO`
/// and leaves that writer's chunk.
fn conditional_puts(bucket: Bucket, store: &Path, tmp: &Path) {
    let zarr3 = venv_python("ZARRFS_TEST_PYTHON", "venv-zarr3");
    let options = bucket.options();
    let arrays = [
        "codecs/zstd_3",
        "sharding/end_crc32c",
        "order/transpose_2d",
        "codecs/blosc_lz4_shuffle",
    ];
    let specs: Vec<Value> = arrays
        .iter()
        .enumerate()
        .map(|(i, path)| {
            json!({"store": store, "path": path, "order": "C", "endian": "little", "seed": 700 + i, "fill_rows": i == 0})
        })
        .collect();
    let spec_path = tmp.join("spec.json");
    let plan_path = tmp.join("plan.json");
    std::fs::write(
        &spec_path,
        json!({"stores": [store], "arrays": specs}).to_string(),
    )
    .expect("spec");
    check_written(
        &zarr3,
        &[
            "plan".as_ref(),
            spec_path.as_os_str(),
            plan_path.as_os_str(),
        ],
    );
    let plan: Value =
        serde_json::from_slice(&std::fs::read(&plan_path).expect("plan")).expect("json");
    let staging = tmp.join("staging");
    let mount = writable(Path::new(bucket.url()), &staging, &["-o", &options]);
    for a in plan["arrays"].as_array().expect("arrays") {
        let path = a["path"].as_str().expect("path");
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(mount.path(path))
            .expect("open");
        for w in a["writes"].as_array().expect("writes") {
            f.write_all_at(
                &hex(w[1].as_str().expect("hex")),
                w[0].as_u64().expect("offset"),
            )
            .expect("pwrite");
        }
        f.sync_all()
            .unwrap_or_else(|e| panic!("{path}: commit: {e}\n{}", mount.log()));
        drop(f);
        let back = std::fs::read(mount.path(path)).expect("read after the commit");
        assert!(
            common::sha256(&back) == a["sha256"] || common::sha256(&back) == a["written"],
            "{path}: read after the commit"
        );
    }
    let log = mount.log();
    drop(mount);
    assert!(!log.contains("WARN"), "{log}");
    // Another writer rewrites chunk 0/0 of an array between the commit's read of it and
    // its put (the daemon waits there for the test): the close fails, and the other
    // writer's chunk stays as it wrote it.
    let victim = "codecs/gzip_1";
    let chunk = format!("{victim}/c/0/0");
    let go = tmp.join("go");
    let fault = format!("wait-before-put:{}", go.display());
    let dir = tmp.join("daemon");
    let (mut child, mountpoint, log) = writable_daemon(
        Path::new(bucket.url()),
        &dir,
        &staging,
        &[("ZARRFS_FAULT", &fault)],
        &["--log-level", "debug", "-o", &options],
    );
    let _cleanup = Cleanup(mountpoint.clone(), child.id());
    let theirs = std::fs::read(store.join("codecs/gzip_1/c/1/1")).expect("another chunk's bytes");
    let rewrite = bucket.rewriter(tmp, store, &chunk, &theirs);
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(mountpoint.join(victim))
        .expect("open");
    f.write_all_at(&[1, 2, 3, 4], 0).expect("pwrite");
    let closing = std::thread::spawn(move || f.sync_all());
    let mut waiting = go.clone().into_os_string();
    waiting.push(".waiting");
    assert!(
        common::mount::wait_for(std::time::Duration::from_secs(30), || Path::new(&waiting)
            .exists()),
        "the commit never reached its put"
    );
    rewrite();
    std::fs::write(&go, b"").expect("go on");
    let e = closing.join().expect("join").err().unwrap_or_else(|| {
        panic!(
            "a put over another writer's chunk succeeded: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        )
    });
    assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}");
    let kept = bucket.read(store, tmp, &chunk) == theirs;
    force_unmount(&mountpoint);
    let _ = common::mount::wait_exit(&mut child, std::time::Duration::from_secs(20));
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(kept, "the other writer's chunk is kept: {text}");
    assert!(text.contains("changed by another writer"), "{text}");
    // What the commits wrote reads back in zarr-python from the bucket's objects (the
    // array the other writer touched is left out).
    bucket.fetch(store);
    let out = check_written(
        &zarr3,
        &[
            "check".as_ref(),
            plan_path.as_os_str(),
            "--data-only".as_ref(),
        ],
    );
    assert!(out.contains(" 0 failures"), "{out}");
}

#[test]
fn rewriting_one_chunk_row_writes_only_its_chunks_as_bytes_written_counts() {
    let m = Manifest::load();
    let tmp = TempDir::new("write-row");
    let store = tmp.path().join("v3");
    copy_dir(&m.store_dir("v3"), &store);
    let staging = tmp.path().join("staging");
    let chunks = store.join("codecs/zstd_3/c");
    let files = |dir: &Path| -> std::collections::BTreeMap<String, Vec<u8>> {
        let mut out = std::collections::BTreeMap::new();
        for row in std::fs::read_dir(dir).expect("ls c") {
            let row = row.expect("entry").path();
            for f in std::fs::read_dir(&row).expect("ls row") {
                let f = f.expect("entry").path();
                let name = f.strip_prefix(dir).expect("under c").display().to_string();
                out.insert(name, std::fs::read(&f).expect("chunk"));
            }
        }
        out
    };
    let before = files(&chunks);
    let mount = writable(&store, &staging, &[]);
    let file = mount.path("codecs/zstd_3");
    assert_eq!(
        common::xattr(&file, "user.zarrfs.bytes_written").expect("user.zarrfs.bytes_written"),
        "0"
    );
    // 20 x 30 int32 in 8 x 16 chunks: rows 8..16 are chunk row 1, two chunks.
    let row: Vec<u8> = (0..8 * 30)
        .flat_map(|i: i32| (i * 3 + 1).to_le_bytes())
        .collect();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&file)
        .expect("open");
    f.write_all_at(&row, 8 * 30 * 4).expect("pwrite");
    drop(f);
    let written: u64 = common::xattr(&file, "user.zarrfs.bytes_written")
        .expect("user.zarrfs.bytes_written")
        .parse()
        .expect("a number");
    drop(mount);
    let after = files(&chunks);
    let changed: Vec<&String> = after
        .keys()
        .filter(|k| before.get(*k) != after.get(*k))
        .collect();
    assert_eq!(changed, ["1/0", "1/1"], "only chunk row 1 is rewritten");
    let sizes: u64 = changed.iter().map(|k| after[*k].len() as u64).sum();
    assert_eq!(
        written, sizes,
        "bytes written are those two chunks' objects"
    );
}

/// zarrs' reader of a whole array (benches/zarrs-read, built by `scripts/test.sh`;
/// override: `$ZARRFS_ZARRS_READ`).
fn zarrs_read() -> PathBuf {
    let path = std::env::var_os("ZARRFS_ZARRS_READ")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::common::repo().join("target/zarrs-read/release/zarrs-read"));
    assert!(
        path.exists(),
        "{} is missing: scripts/test.sh builds it",
        path.display()
    );
    path
}

/// `numpy.save` into a group folder and a new sidecar make arrays (every data type the
/// `.npy` route takes, C and F order, both byte orders; v3 and v2 stores; the default
/// codecs, gzip, and blosc in shards) that zarr-python 3, zarr-python 2.18 (v2),
/// tensorstore and zarrs read as they were written.
#[test]
fn numpy_save_and_a_new_sidecar_make_arrays_that_zarr_python_tensorstore_and_zarrs_read() {
    let zarr3 = venv_python("ZARRFS_TEST_PYTHON", "venv-zarr3");
    let zarr2 = venv_python("ZARRFS_ZARR2_PYTHON", "venv-zarr2");
    let zarrs = zarrs_read();
    let tmp = TempDir::new("write-new");
    let runs: [(&str, &str, &[&str], &str); 3] = [
        ("3", "C-little", &[], "zstd"),
        (
            "2",
            "F-big",
            &[
                "--order",
                "F",
                "--endian",
                "big",
                "--new-codecs",
                "gzip:6",
                "--new-chunks",
                "64KiB",
            ],
            "gzip",
        ),
        (
            "3",
            "C-big",
            &[
                "--endian",
                "big",
                "--new-chunks",
                "256KiB",
                "--new-codecs",
                "blosc-zstd,shard:32KiB",
            ],
            "sharding,blosc",
        ),
    ];
    for (i, (format, layout, options, codecs)) in runs.iter().enumerate() {
        let store = tmp.path().join(format!("s{i}.zarr"));
        let expect = tmp.path().join(format!("expect{i}"));
        std::fs::create_dir_all(&expect).expect("expectation folder");
        let code = "import sys, zarr\n\
                    g = zarr.open_group(sys.argv[1], mode='w', zarr_format=int(sys.argv[2]))\n\
                    g.create_group('sub')\n\
                    print('ok')";
        common::run_python(
            &zarr3,
            "make the store",
            code,
            [store.as_os_str(), format.as_ref()],
        );
        let staging = tmp.path().join(format!("staging{i}"));
        let mount = writable(&store, &staging, options);
        let group = mount.path("sub");
        let out = check_made(
            &zarr3,
            &[
                "write".as_ref(),
                group.as_os_str(),
                expect.as_os_str(),
                format.as_ref(),
                layout.as_ref(),
            ],
        );
        assert!(out.contains("made 10 arrays"), "{out}");
        let log = mount.log();
        drop(mount);
        assert!(
            log.contains("no array made at the last close") || log.contains("long.npy"),
            "the refused .npy is named in the log: {log}"
        );
        let args = [
            store.as_os_str(),
            "sub".as_ref(),
            expect.as_os_str(),
            codecs.as_ref(),
        ];
        let out = check_made(&zarr3, &[&["check".as_ref()], &args[..]].concat());
        assert!(out.contains("reads 10 arrays"), "{out}");
        if *format == "2" {
            let out = check_made(&zarr2, &[&["check".as_ref()], &args[..3]].concat());
            assert!(out.contains("zarr 2.18"), "{out}");
        }
        let out = check_made(&zarr3, &[&["tensorstore".as_ref()], &args[..3]].concat());
        assert!(out.contains("tensorstore reads 9 arrays"), "{out}");
        if *format == "3" {
            let cases: Value = serde_json::from_slice(
                &std::fs::read(expect.join("cases.json")).expect("cases.json"),
            )
            .expect("cases.json is JSON");
            let mut read = 0;
            for case in cases["cases"].as_array().expect("cases") {
                let name = case["name"].as_str().expect("name");
                if case["dtype"].as_str().is_some_and(|d| d.contains('M')) {
                    continue; // zarrs reads no numpy.datetime64
                }
                let out = std::process::Command::new(&zarrs)
                    .arg(&store)
                    .arg(format!("/sub/{name}"))
                    .arg("--sha256")
                    .output()
                    .expect("run zarrs-read");
                let line = String::from_utf8_lossy(&out.stdout).into_owned();
                assert!(
                    out.status.success(),
                    "zarrs-read {name}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                assert_eq!(
                    line.split_whitespace().nth(2),
                    case["sha256"].as_str(),
                    "zarrs reads {name} of run {i} otherwise: {line}"
                );
                read += 1;
            }
            assert_eq!(read, 9, "run {i}");
        }
    }
}
