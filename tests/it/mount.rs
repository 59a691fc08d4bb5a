//! End-to-end tests that mount for real (root and /dev/fuse required; a missing
//! prerequisite fails): every fixture array through the mount, random preads, numpy
//! memmap, listings, xattrs, sidecars, read-only errors, concurrency, signals,
//! corrupt chunks and the demo of scripts/demo.sh.

use crate::common;

use std::collections::BTreeSet;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::fixtures::{arrays_of, check_store, is_unsupported, stores};
use common::mount::{
    io_args, mounted, pread_full, run_python, test_python, umount, wait_for, wait_until, Lcg,
    Mount, Unmount,
};
use common::{
    assert_no_failures, cat, copy_dir, sha256, xattr, xattr_errno, zarrfs, Manifest, TempDir,
};
use serde_json::Value;

#[test]
fn every_fixture_array_reads_whole_in_c_and_f_order() {
    let m = Manifest::load();
    let mut failures = Vec::new();
    for store in stores(&m) {
        failures.extend(check_store(&m, &store, &["--order", "C"], "C_little", "C"));
        failures.extend(check_store(&m, &store, &["--order", "F"], "F_little", "F"));
    }
    assert_no_failures(&failures);
}

#[test]
fn big_endian_mounts_of_a_subset() {
    let m = Manifest::load();
    let mut failures = Vec::new();
    for store in ["v3", "v2"] {
        failures.extend(check_store(&m, store, &["--endian", "big"], "C_big", "C"));
    }
    failures.extend(check_store(
        &m,
        "draft",
        &["--endian", "big", "--order", "F"],
        "F_big",
        "F",
    ));
    assert_no_failures(&failures);
}

#[test]
fn random_preads_match_the_expected_bytes() {
    let m = Manifest::load();
    let mut rng = Lcg(0x5eed);
    let mut failures = Vec::new();
    let mut checked = 0;
    for store in ["v3", "v2", "draft", "v3_large"] {
        let mount = Mount::new(&m.store_dir(store), &[]);
        let picks: Vec<&Value> = arrays_of(&m, store)
            .into_iter()
            .filter(|a| {
                a["vlen"] == false && a["nbytes"].as_u64().unwrap_or(0) > 64 && !is_unsupported(a)
            })
            .step_by(7)
            .collect();
        for entry in picks {
            let path = entry["path"].as_str().unwrap_or("");
            let expected = cat(&m.store_dir(store), path, &[]);
            assert_eq!(
                sha256(&expected),
                entry["sha256"]["C_little"],
                "cat {store}:{path}"
            );
            let file = std::fs::File::open(mount.path(path)).expect("open");
            let size = expected.len() as u64;
            checked += 1;
            for _ in 0..1000 {
                let offset = rng.next(size + 64);
                let span = if rng.next(4) == 0 { 1 << 20 } else { 4096 };
                let len = 1 + rng.next(span) as usize;
                match pread_full(&file, offset, len) {
                    Ok(got) => {
                        let start = (offset.min(size)) as usize;
                        let end = (offset.saturating_add(len as u64)).min(size) as usize;
                        if got != expected[start..end] {
                            failures.push(format!("{store}:{path} pread({offset}, {len}) differs"));
                            break;
                        }
                    }
                    Err(e) => {
                        failures.push(format!("{store}:{path} pread({offset}, {len}): {e}"));
                        break;
                    }
                }
            }
        }
    }
    assert!(checked >= 40, "only {checked} arrays checked");
    assert_no_failures(&failures);
}

#[test]
fn numpy_memmap_reads_the_right_values() {
    let m = Manifest::load();
    let mount = Mount::new(&m.store_dir("v3_large"), &[]);
    let entry = &arrays_of(&m, "v3_large")[0];
    let shape = entry["shape"].to_string();
    let dtype = entry["dtype"].as_str().unwrap_or("");
    let script = format!(
        "import hashlib, numpy as np\n\
         a = np.memmap({file:?}, dtype={dtype:?}, mode='r', shape=tuple({shape}))\n\
         print(hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest())\n\
         print(repr(float(a[3, 100, 200])), repr(float(a[-1, -1, -1])))\n",
        file = mount.path("field").to_string_lossy()
    );
    let text = run_python(&script);
    let mut lines = text.lines();
    assert_eq!(lines.next(), entry["sha256"]["C_little"].as_str());
    // The same two elements decoded from `zarrfs cat`.
    let bytes = cat(&m.store_dir("v3_large"), "field", &[]);
    let at =
        |i: usize| f32::from_le_bytes(bytes[i * 4..i * 4 + 4].try_into().expect("4 bytes")) as f64;
    let want = format!(
        "{:?} {:?}",
        at((3 * 256 + 100) * 256 + 200),
        at(bytes.len() / 4 - 1)
    );
    assert_eq!(lines.next().map(str::to_string), Some(want));
}

#[test]
fn listings_stat_xattrs_and_sidecars_match_the_metadata() {
    let m = Manifest::load();
    let mut failures = Vec::new();
    for store in stores(&m) {
        let mount = Mount::new(&m.store_dir(&store), &[]);
        for group in m.groups().iter().filter(|g| g["store"] == store.as_str()) {
            let gpath = group["path"].as_str().unwrap_or("");
            let children = group["children"].as_array().expect("children");
            let want_visible: BTreeSet<String> = children
                .iter()
                .map(|c| c["name"].as_str().unwrap_or("").to_string())
                .collect();
            let mut want_hidden: BTreeSet<String> = children
                .iter()
                .filter(|c| c["kind"] == "array")
                .map(|c| format!(".{}.json", c["name"].as_str().unwrap_or("")))
                .collect();
            want_hidden.insert(".group.json".into());
            let names: Vec<(String, bool)> = match std::fs::read_dir(mount.path(gpath)) {
                Ok(rd) => rd
                    .map(|e| {
                        let e = e.expect("entry");
                        (
                            e.file_name().to_string_lossy().to_string(),
                            e.file_type().expect("type").is_dir(),
                        )
                    })
                    .collect(),
                Err(e) => {
                    failures.push(format!("{store}:/{gpath}: {e}"));
                    continue;
                }
            };
            let visible: BTreeSet<String> = names
                .iter()
                .filter(|(n, _)| !n.starts_with('.'))
                .map(|(n, _)| n.clone())
                .collect();
            let hidden: BTreeSet<String> = names
                .iter()
                .filter(|(n, _)| n.starts_with('.'))
                .map(|(n, _)| n.clone())
                .collect();
            if visible != want_visible || hidden != want_hidden {
                failures.push(format!("{store}:/{gpath}: listing {visible:?} {hidden:?}, want {want_visible:?} {want_hidden:?}"));
            }
            for c in children {
                let name = c["name"].as_str().unwrap_or("");
                let is_dir = names.iter().any(|(n, d)| n == name && *d);
                if is_dir != (c["kind"] != "array") {
                    failures.push(format!("{store}:/{gpath}/{name}: wrong file type"));
                }
            }
            let sidecar =
                std::fs::read(mount.path(gpath).join(".group.json")).expect("group sidecar");
            let doc: Value = serde_json::from_slice(&sidecar).expect("group sidecar is JSON");
            let kind = if group["kind"] == "implicit_group" {
                "implicit group"
            } else {
                "group"
            };
            if doc["kind"] != kind {
                failures.push(format!("{store}:/{gpath}: sidecar kind {}", doc["kind"]));
            }
            if xattr(&mount.path(gpath), "user.zarr.kind").as_deref() != Some(kind) {
                failures.push(format!("{store}:/{gpath}: user.zarr.kind"));
            }
        }
        for entry in arrays_of(&m, &store) {
            if is_unsupported(entry) {
                continue;
            }
            let path = entry["path"].as_str().unwrap_or("");
            let file = mount.array(&m, &store, path);
            let fail = |what: String| format!("{store}:{path}: {what}");
            let shape: Vec<String> = entry["shape"]
                .as_array()
                .expect("shape")
                .iter()
                .map(|v| v.to_string())
                .collect();
            let dtype = entry["dtype"].as_str().unwrap_or("").to_string();
            let size = std::fs::metadata(&file)
                .map(|s| s.len())
                .unwrap_or(u64::MAX);
            if size != entry["nbytes"].as_u64().unwrap_or(0) {
                failures.push(fail(format!("size {size}, want {}", entry["nbytes"])));
            }
            if xattr(&file, "user.zarr.shape") != Some(shape.join(",")) {
                failures.push(fail(format!(
                    "user.zarr.shape {:?}",
                    xattr(&file, "user.zarr.shape")
                )));
            }
            if xattr(&file, "user.zarr.dtype") != Some(dtype.clone()) {
                failures.push(fail(format!(
                    "user.zarr.dtype {:?}, want {dtype}",
                    xattr(&file, "user.zarr.dtype")
                )));
            }
            let fetched =
                xattr(&file, "user.zarrfs.bytes_fetched").and_then(|v| v.parse::<u64>().ok());
            if entry["vlen"] == false && fetched.is_none() {
                failures.push(fail("user.zarrfs.bytes_fetched missing".into()));
            }
            if xattr(&file, "user.zarr.order").as_deref() != Some("C") {
                failures.push(fail("user.zarr.order".into()));
            }
            // What `ls -l` asks of every file: no such attribute (ACLs may be refused
            // by the kernel itself).
            for (name, allowed) in [
                ("security.selinux", &[libc::ENODATA][..]),
                (
                    "system.posix_acl_access",
                    &[libc::ENODATA, libc::EOPNOTSUPP][..],
                ),
            ] {
                match xattr_errno(&file, name) {
                    Some(e) if allowed.contains(&e) => {}
                    other => failures.push(fail(format!("getxattr {name}: {other:?}"))),
                }
            }
            let fill: Option<Value> =
                xattr(&file, "user.zarr.fill_value").and_then(|v| serde_json::from_str(&v).ok());
            if fill.as_ref() != Some(&entry["fill_value"]) {
                failures.push(fail(format!(
                    "user.zarr.fill_value {fill:?}, want {}",
                    entry["fill_value"]
                )));
            }
            let name = file
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .to_string();
            let sidecar = file.with_file_name(format!(".{name}.json"));
            let doc: Value = match std::fs::read(&sidecar).map(|b| serde_json::from_slice(&b)) {
                Ok(Ok(doc)) => doc,
                other => {
                    failures.push(fail(format!("sidecar: {other:?}")));
                    continue;
                }
            };
            // Draft sharding records the inner chunk as `chunks`; the sidecar calls the
            // shard `chunks` and the inner chunk `inner_chunks`, as for v3 sharding.
            let chunks = match (entry.get("chunks_per_shard"), doc.get("inner_chunks")) {
                (Some(_), Some(inner)) => inner,
                _ => &doc["chunks"],
            };
            if doc["shape"] != entry["shape"]
                || *chunks != entry["chunks"]
                || doc["dtype"] != dtype.as_str()
            {
                failures.push(fail(format!(
                    "sidecar shape/chunks/dtype {} {} {}",
                    doc["shape"], doc["chunks"], doc["dtype"]
                )));
            }
            if doc["data_type"] != entry["zarr_dtype"] || doc["fill_value"] != entry["fill_value"] {
                failures.push(fail(format!(
                    "sidecar data_type/fill {} {}",
                    doc["data_type"], doc["fill_value"]
                )));
            }
        }
    }
    assert_no_failures(&failures);
}

fn expect_erofs<T: std::fmt::Debug>(what: &str, result: std::io::Result<T>) {
    match result {
        Err(e) if e.raw_os_error() == Some(libc::EROFS) => {}
        other => panic!("{what}: expected EROFS, got {other:?}"),
    }
}

#[test]
fn write_calls_fail_with_erofs_and_the_mount_keeps_serving() {
    let m = Manifest::load();
    let mount = Mount::new(&m.store_dir("v3_consolidated"), &[]);
    let file = mount.path("top");
    let before = std::fs::read(&file).expect("read");
    expect_erofs("write", std::fs::OpenOptions::new().write(true).open(&file));
    expect_erofs("create", std::fs::File::create(mount.path("new")));
    expect_erofs("mkdir", std::fs::create_dir(mount.path("dir")));
    expect_erofs("unlink", std::fs::remove_file(&file));
    expect_erofs("rmdir", std::fs::remove_dir(mount.path("a")));
    expect_erofs("rename", std::fs::rename(&file, mount.path("moved")));
    expect_erofs(
        "truncate",
        std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&file),
    );
    use std::os::unix::fs::PermissionsExt;
    expect_erofs(
        "chmod",
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o777)),
    );
    let c_path = std::ffi::CString::new(file.as_os_str().as_encoded_bytes()).expect("path");
    // SAFETY: valid C strings and value buffer.
    let rc = unsafe {
        libc::setxattr(
            c_path.as_ptr(),
            c"user.x".as_ptr(),
            c"1".as_ptr().cast(),
            1,
            0,
        )
    };
    assert_eq!(rc, -1);
    assert_eq!(
        std::io::Error::last_os_error().raw_os_error(),
        Some(libc::EROFS),
        "setxattr"
    );
    assert_eq!(std::fs::read(&file).expect("read after"), before);
    // statfs answers and reports a read-only filesystem.
    let c_mp =
        std::ffi::CString::new(mount.mountpoint.as_os_str().as_encoded_bytes()).expect("path");
    // SAFETY: a valid C string and a zeroed statvfs to fill.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    assert_eq!(
        unsafe { libc::statvfs(c_mp.as_ptr(), &mut st) },
        0,
        "statvfs"
    );
    assert_ne!(st.f_flag & libc::ST_RDONLY, 0, "read-only flag");
    // Inode numbers agree between readdir and stat, and stay the same.
    use std::os::unix::fs::{DirEntryExt, MetadataExt};
    let listed = std::fs::read_dir(&mount.mountpoint)
        .expect("ls")
        .map(|e| e.expect("entry"))
        .find(|e| e.file_name() == "top")
        .expect("top listed");
    let ino = std::fs::metadata(&file).expect("stat").ino();
    assert_eq!(listed.ino(), ino);
    assert_eq!(std::fs::metadata(&file).expect("stat again").ino(), ino);
    assert!(std::fs::metadata(mount.path("a/b/data")).is_ok());
    assert_eq!(
        std::fs::metadata(mount.path("nope"))
            .map_err(|e| e.kind())
            .err(),
        Some(ErrorKind::NotFound)
    );
}

#[test]
fn eight_concurrent_readers_over_a_small_cache() {
    let m = Manifest::load();
    let entry = arrays_of(&m, "v3_large")[0];
    let size = entry["nbytes"].as_u64().expect("nbytes");
    // A 2 MiB cache for 16 MiB of decoded data.
    let mount = Mount::new(
        &m.store_dir("v3_large"),
        &["--cache-size", "2MiB", "--threads", "4"],
    );
    let file = mount.path("field").to_string_lossy().to_string();
    // Each reader starts at a different offset, wraps around, and hashes the file in order.
    let script = "import hashlib, os, sys\n\
        path, start, block = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])\n\
        fd = os.open(path, os.O_RDONLY)\n\
        size = os.fstat(fd).st_size\n\
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)\n\
        parts = {}\n\
        off = start\n\
        for _ in range((size + block - 1) // block):\n\
        \x20   parts[off] = os.pread(fd, block, off)\n\
        \x20   off = (off + block) % (((size + block - 1) // block) * block)\n\
        data = b''.join(parts[k] for k in sorted(parts))\n\
        print(hashlib.sha256(data).hexdigest())\n";
    let readers: Vec<_> = (0..8u64)
        .map(|k| {
            let block = [4096u64, 65536, 131072, 1 << 20][k as usize % 4];
            let start = (k * size / 8) / block * block;
            Command::new(test_python())
                .args(["-c", script, &file, &start.to_string(), &block.to_string()])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn reader")
        })
        .collect();
    for (k, r) in readers.into_iter().enumerate() {
        let out = r.wait_with_output().expect("reader");
        assert!(
            out.status.success(),
            "reader {k}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            entry["sha256"]["C_little"].as_str().unwrap_or(""),
            "reader {k}"
        );
    }
}

/// `zarrfs mount -f` of a fixture store as a child of the test, once it is mounted:
/// the folder holding the mountpoint, the mountpoint, the daemon.
fn foreground_mount(tag: &str) -> (TempDir, PathBuf, std::process::Child) {
    let tmp = TempDir::new(tag);
    let mp = tmp.path().join("mnt");
    std::fs::create_dir(&mp).expect("mkdir");
    let child = foreground_mount_at(&mp, &tmp.path().join("log"));
    (tmp, mp, child)
}

/// `zarrfs mount -f` of a fixture store on `mp`, logging to `log`, once it is mounted.
fn foreground_mount_at(mp: &Path, log: &Path) -> std::process::Child {
    let m = Manifest::load();
    let child = Command::new(zarrfs())
        .arg("mount")
        .arg("-f")
        .arg(m.store_dir("v3_consolidated"))
        .arg(mp)
        .args(io_args())
        .stderr(std::fs::File::create(log).expect("log"))
        .spawn()
        .expect("spawn zarrfs mount -f");
    wait_until("the mount", || mounted(mp));
    child
}

#[test]
fn sigterm_unmounts_and_exits_zero() {
    let (_tmp, mp, mut child) = foreground_mount("sigterm");
    let _unmount = Unmount(&mp);
    assert!(std::fs::read(mp.join("top")).is_ok());
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(0), "exit status after SIGTERM");
    assert!(!mounted(&mp), "still mounted after SIGTERM");
}

#[test]
fn sigterm_with_a_file_open_on_the_mount_still_ends_the_daemon() {
    let (_tmp, mp, mut child) = foreground_mount("sigterm-busy");
    let _unmount = Unmount(&mp);
    // A file held open makes a plain unmount fail with EBUSY.
    let held = std::fs::File::open(mp.join("top")).expect("open a file on the mount");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    wait_until("the mount to be detached", || !mounted(&mp));
    drop(held);
    let mut status = None;
    let deadline = Instant::now() + Duration::from_secs(20);
    while status.is_none() && Instant::now() < deadline {
        status = child.try_wait().expect("wait");
        std::thread::sleep(Duration::from_millis(50));
    }
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(0),
        "exit status once the last file closed"
    );
}

#[test]
fn a_daemon_ending_after_a_lazy_unmount_leaves_a_new_mount_of_its_folder_alone() {
    let (tmp, mp, mut old) = foreground_mount("remount");
    let _unmount = Unmount(&mp);
    // A file held open keeps the old daemon serving after a lazy unmount.
    let held = std::fs::File::open(mp.join("top")).expect("open a file on the mount");
    let path = std::ffi::CString::new(mp.as_os_str().as_encoded_bytes()).expect("path");
    // SAFETY: a valid path; detaching a mount this test made.
    assert_eq!(unsafe { libc::umount2(path.as_ptr(), libc::MNT_DETACH) }, 0);
    assert!(!mounted(&mp), "detached");
    let mut new = foreground_mount_at(&mp, &tmp.path().join("log2"));
    // The last file of the old mount closes: its daemon ends.
    drop(held);
    let status = common::mount::wait_exit(&mut old, Duration::from_secs(20));
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(0),
        "old daemon's exit once its last file closed"
    );
    assert!(mounted(&mp), "the old daemon's end unmounted the new mount");
    assert!(std::fs::read(mp.join("top")).is_ok(), "new mount serves");
    assert!(
        new.try_wait().expect("wait").is_none(),
        "new daemon running"
    );
    assert!(umount(&mp).success(), "zarrfs umount");
    let status = common::mount::wait_exit(&mut new, Duration::from_secs(20));
    assert_eq!(status.and_then(|s| s.code()), Some(0), "new daemon's exit");
}

#[test]
fn after_sigkill_umount_clears_the_stale_mount() {
    let (_tmp, mp, mut child) = foreground_mount("sigkill");
    let _unmount = Unmount(&mp);
    child.kill().expect("SIGKILL");
    child.wait().expect("wait");
    assert!(mounted(&mp), "a killed daemon leaves its mount behind");
    let err = std::fs::read_dir(&mp).err().and_then(|e| e.raw_os_error());
    assert_eq!(err, Some(libc::ENOTCONN), "stale mount");
    // Mounting again on it says what is there and what to do.
    let again = Command::new(zarrfs())
        .arg("mount")
        .arg(Manifest::load().store_dir("v3_consolidated"))
        .arg(&mp)
        .output()
        .expect("run");
    let message = String::from_utf8_lossy(&again.stderr);
    assert_eq!(
        again.status.code(),
        Some(1),
        "mount on a dead mount: {message}"
    );
    assert!(
        message.contains("dead zarrfs/FUSE mount")
            && message.contains(&format!("zarrfs umount {}", mp.display())),
        "mount on a dead mount: {message}"
    );
    assert!(umount(&mp).success(), "zarrfs umount");
    assert!(!mounted(&mp));
    assert_eq!(std::fs::read_dir(&mp).expect("plain dir again").count(), 0);
}

#[test]
fn startup_errors_are_reported_before_backgrounding() {
    let m = Manifest::load();
    let tmp = TempDir::new("startup");
    let dir = tmp.path().to_path_buf();
    let run = |store: &Path, mp: &Path| {
        Command::new(zarrfs())
            .arg("mount")
            .arg(store)
            .arg(mp)
            .output()
            .expect("run")
    };
    let mp = dir.join("mnt");
    std::fs::create_dir(&mp).expect("mkdir");
    let not_zarr = dir.join("empty");
    std::fs::create_dir(&not_zarr).expect("mkdir");
    for (store, mountpoint, what) in [
        (dir.join("missing"), mp.clone(), "missing store"),
        (not_zarr.clone(), mp.clone(), "not Zarr"),
        (
            m.store_dir("v3"),
            dir.join("no-such-dir"),
            "missing mountpoint",
        ),
    ] {
        let out = run(&store, &mountpoint);
        assert_eq!(out.status.code(), Some(1), "{what}");
        assert!(!out.stderr.is_empty(), "{what}: no message");
    }
    let busy = Mount::new(&m.store_dir("v3_consolidated"), &[]);
    let out = run(&m.store_dir("v3"), &busy.mountpoint);
    assert_eq!(out.status.code(), Some(1), "busy mountpoint");
    assert!(String::from_utf8_lossy(&out.stderr).contains("busy"));
    drop(busy);
}

#[test]
fn a_corrupt_chunk_fails_only_its_own_reads() {
    let m = Manifest::load();
    let tmp = TempDir::new("corrupt");
    let dir = tmp.path().to_path_buf();
    // A copy holding the large array and the v3 fixtures side by side.
    let store = dir.join("store");
    copy_dir(&m.store_dir("v3"), &store);
    copy_dir(&m.store_dir("v3_large").join("field"), &store.join("field"));
    let entry = arrays_of(&m, "v3_large")[0];
    let u64s = |v: &Value| -> Vec<u64> {
        v.as_array()
            .expect("list")
            .iter()
            .map(|d| d.as_u64().expect("integer"))
            .collect()
    };
    let (dims, chunks) = (u64s(&entry["shape"]), u64s(&entry["chunks"]));
    assert_eq!(dims.len(), 3);
    let item = entry["itemsize"].as_u64().unwrap();
    // Chunk (1, 2, 3): cut in half (zstd without a checksum may not notice flipped bytes).
    let chunk = store.join("field/c/1/2/3");
    let bytes = std::fs::read(&chunk).expect("chunk");
    std::fs::write(&chunk, &bytes[..bytes.len() / 2]).expect("corrupt");
    let expected = cat(&m.store_dir("v3_large"), "field", &[]);

    let mount = Mount::new(&store, &[]);
    let file = std::fs::File::open(mount.path("field")).expect("open");
    let offset = |z: u64, y: u64, x: u64| ((z * dims[1] + y) * dims[2] + x) * item;
    let inside = offset(chunks[0] + 1, 2 * chunks[1] + 2, 3 * chunks[2] + 8);
    let err = pread_full(&file, inside, item as usize)
        .err()
        .and_then(|e| e.raw_os_error());
    assert_eq!(err, Some(libc::EIO), "read inside the corrupt chunk");
    let log = mount.log();
    assert!(log.contains("field/c/1/2/3"), "log names the key: {log}");
    // Outside the chunk (and outside the pages it shares), the same array reads fine.
    let last = dims.iter().map(|d| d - 1).collect::<Vec<_>>();
    for (z, y, x) in [
        (0, 0, 0),
        (0, 200, 100),
        (chunks[0] - 1, 0, 0),
        (last[0], last[1], last[2]),
        (30, 10, 10),
    ] {
        let at = offset(z, y, x);
        let got = pread_full(&file, at, item as usize).expect("read outside");
        assert_eq!(
            got,
            expected[at as usize..(at + item) as usize],
            "element ({z}, {y}, {x})"
        );
    }
    // Every other array of the store still reads.
    for other in arrays_of(&m, "v3")
        .into_iter()
        .filter(|a| !is_unsupported(a))
        .step_by(10)
    {
        let p = other["path"].as_str().unwrap_or("");
        let label = if other["vlen"] == true {
            "C"
        } else {
            "C_little"
        };
        let bytes = std::fs::read(mount.path(p)).unwrap_or_else(|e| panic!("{p}: {e}"));
        assert_eq!(sha256(&bytes), other["sha256"][label], "{p}");
    }
    drop(mount);
}

#[test]
fn readme_demo_mounts_a_readable_hierarchy() {
    let tmp = TempDir::new("demo");
    let dir = tmp.path().to_path_buf();
    let script = crate::common::repo().join("scripts/demo.sh");
    // Its stderr to a file (not a pipe): the daemon it starts outlives it.
    let err = tmp.path().join("demo.err");
    let out = Command::new("bash")
        .arg(&script)
        .arg(&dir)
        .env("ZARRFS_BIN", zarrfs())
        .stderr(std::fs::File::create(&err).expect("demo.sh's stderr"))
        .output()
        .expect("run demo.sh");
    assert!(
        out.status.success(),
        "demo.sh failed ({}): {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        common::tail(&std::fs::read_to_string(&err).unwrap_or_default(), 4000)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("getfattr -d"), "prints what to try: {text}");
    let mp = dir.join("mnt");
    let _unmount = Unmount(&mp);
    assert!(mounted(&mp));
    let names: BTreeSet<String> = std::fs::read_dir(&mp)
        .expect("ls")
        .map(|e| e.expect("entry").file_name().to_string_lossy().to_string())
        .collect();
    let want: BTreeSet<String> = [
        ".group.json",
        ".temperature.json",
        "legacy",
        "surface",
        "temperature",
    ]
    .map(String::from)
    .into();
    assert_eq!(names, want);
    // Each demo array through the mount equals zarr-python's reading of the store.
    let script = format!(
        "import zarr, numpy as np\n\
         for p in ['temperature', 'surface/elevation', 'legacy/counts']:\n\
         \x20   a = np.asarray(zarr.open_array({store:?} + '/' + p, mode='r')[...])\n\
         \x20   m = np.fromfile({mnt:?} + '/' + p, dtype=a.dtype.newbyteorder('<')).reshape(a.shape)\n\
         \x20   assert np.array_equal(a, m), p\n\
         \x20   print(p, a.shape)\n",
        store = dir.join("demo.zarr").to_string_lossy(),
        mnt = mp.to_string_lossy()
    );
    assert_eq!(run_python(&script).lines().count(), 3);
    assert!(umount(&mp).success(), "zarrfs umount");
}

/// sha256 of everything read from a new open of `path`.
fn read_hash(path: &Path) -> String {
    sha256(&std::fs::read(path).expect("read array file"))
}

/// A mount of the large fixture array with room for its copy: the mount, the array's
/// file and zarr-python's digest of it; its copy state is `no` so far.
fn materialized_large(m: &Manifest) -> (Mount, PathBuf, String) {
    let entry = &arrays_of(m, "v3_large")[0];
    let want = entry["sha256"]["C_little"]
        .as_str()
        .expect("digest")
        .to_string();
    let mount = Mount::new(&m.store_dir("v3_large"), &["--materialize", "512MiB"]);
    let file = mount.path("field");
    assert_eq!(copy_state(&file), "no");
    (mount, file, want)
}

/// `user.zarrfs.materialized` of `file`.
fn copy_state(file: &Path) -> String {
    xattr(file, "user.zarrfs.materialized").unwrap_or_default()
}

#[test]
fn arrays_read_through_are_served_by_the_kernel_and_stay_exact() {
    let m = Manifest::load();
    let (_mount, file, want) = materialized_large(&m);
    let want = want.as_str();
    let entry = &arrays_of(&m, "v3_large")[0];
    let state = || copy_state(&file);
    // Read through once, with the file held open while the copy is built.
    let held = std::fs::File::open(&file).expect("open");
    assert_eq!(read_hash(&file), want);
    wait_until("the copy in memory", || state().starts_with("ready"));
    // While a page-cache open is live the kernel refuses passthrough: this open goes
    // through the daemon, and it must work.
    assert_eq!(read_hash(&file), want);
    assert_eq!(state(), "ready (0 opens served by the kernel)");
    drop(held);
    // Once the daemon has seen the releases, opens are served by the kernel.
    wait_until("an open served by the kernel", || {
        assert_eq!(read_hash(&file), want);
        !state().starts_with("ready (0 ")
    });
    // Random reads and numpy's memmap of a passthrough file.
    let bytes = cat(&m.store_dir("v3_large"), "field", &[]);
    let f = std::fs::File::open(&file).expect("open");
    let mut rng = Lcg(7);
    for _ in 0..200 {
        let offset = rng.next(bytes.len() as u64);
        let len = rng.next(1 << 16) as usize;
        let got = pread_full(&f, offset, len).expect("pread");
        let end = (offset as usize + len).min(bytes.len());
        assert_eq!(got, &bytes[offset as usize..end], "pread {offset}+{len}");
    }
    // O_DIRECT readers (passed through too while a passthrough open is live) read at any
    // offset and length, as through the daemon.
    let direct = {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(&file)
            .expect("open O_DIRECT")
    };
    for (offset, len) in [(1u64, 7usize), (4095, 4099), (bytes.len() as u64 - 3, 10)] {
        let got = pread_full(&direct, offset, len).expect("O_DIRECT pread");
        let end = (offset as usize + len).min(bytes.len());
        assert_eq!(
            got,
            &bytes[offset as usize..end],
            "O_DIRECT pread {offset}+{len}"
        );
    }
    let script = format!(
        "import hashlib, numpy as np\n\
         a = np.memmap({file:?}, dtype={dtype:?}, mode='r')\n\
         print(hashlib.sha256(a.tobytes()).hexdigest())\n",
        file = file.to_string_lossy(),
        dtype = entry["dtype"].as_str().unwrap_or("")
    );
    assert_eq!(run_python(&script).trim(), want);
}

/// Bytes of `path` the kernel page cache holds (fincore).
fn resident(path: &Path) -> u64 {
    let out = Command::new("fincore")
        .args(["--bytes", "--noheadings", "--output", "RES"])
        .arg(path)
        .output()
        .expect("run fincore");
    assert!(out.status.success(), "fincore {}", path.display());
    let text = String::from_utf8_lossy(&out.stdout);
    text.trim().parse().expect("fincore RES")
}

#[test]
fn each_open_reads_through_the_page_cache_or_direct_as_the_io_mode_says() {
    let m = Manifest::load();
    let store = m.store_dir("v3_large");
    let fixed = io_args();
    // Without a fixed mode from the environment the mount runs the default, auto.
    let mount = Mount::new(&store, &["--views", "raw,npy", "--materialize", "off"]);
    let (first, second) = (mount.path("field"), mount.path("field.npy"));
    let read = |path: &Path| {
        let bytes = std::fs::read(path).expect("read");
        assert!(
            bytes.len() > 1 << 20,
            "{} too small to tell",
            path.display()
        );
    };
    // The first file is read while it alone is open; the second while the first is held.
    let held = std::fs::File::open(&first).expect("open");
    read(&first);
    read(&second);
    let (a, b) = (resident(&first), resident(&second));
    match fixed.get(1).map(String::as_str) {
        None | Some("auto") => {
            assert!(
                a > 0,
                "a lone open goes through the page cache: {a} bytes cached"
            );
            assert_eq!(b, 0, "an open beside another read is direct");
            drop(held);
            // Once the daemon has seen the release, the file read direct before is
            // opened alone: through the page cache.
            wait_until("a lone open through the page cache", || {
                read(&second);
                resident(&second) > 0
            });
        }
        Some("cache") => assert!(a > 0 && b > 0, "cache mode: {a} and {b} bytes cached"),
        Some("direct") => assert!(a == 0 && b == 0, "direct mode: {a} and {b} bytes cached"),
        Some(other) => panic!("unknown ZARRFS_TEST_IO {other}"),
    }
}

/// `zarrfs mount -f STORE MOUNTPOINT` reading direct with no copies, whatever
/// ZARRFS_TEST_IO says (every read reaches the daemon as asked), with `args` and `env`
/// besides, logging warnings to `log`; once it is mounted.
fn direct_foreground(
    store: &Path,
    mountpoint: &Path,
    log: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> std::process::Child {
    let child = Command::new(zarrfs())
        .args(["mount", "-f"])
        .arg(store)
        .arg(mountpoint)
        .args(["--io", "direct", "--materialize", "off"])
        .args(args)
        .env("RUST_LOG", "warn")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).expect("log"))
        .spawn()
        .expect("spawn zarrfs mount -f");
    wait_until("the mount", || mounted(mountpoint));
    child
}

/// A bug in a read answered on the request loop's own thread (its units all decoded) fails
/// that read alone with EIO and one log line; the mount, other reads of the same file and
/// other files keep being served. The panic is injected with `ZARRFS_FAULT`.
#[test]
fn a_panic_in_the_inline_read_fails_only_that_read() {
    let (dir, mountpoint, log) = common::mount::mount_dir("inline-panic");
    let store = dir.path().join("demo.zarr");
    let made = Command::new(zarrfs())
        .arg("demo")
        .arg(&store)
        .output()
        .expect("zarrfs demo");
    assert!(made.status.success(), "zarrfs demo: {made:?}");
    let mut child = direct_foreground(
        &store,
        &mountpoint,
        &log,
        &[],
        &[("ZARRFS_FAULT", "inline-read-panic-at:12288")],
    );
    let _unmount = Unmount(&mountpoint);
    let path = mountpoint.join("temperature");
    let file = std::fs::File::open(&path).expect("open temperature");
    // The first read decodes the chunks the next ones need (rows of one layer of chunks).
    let first = pread_full(&file, 0, 4096).expect("first read");
    assert_eq!(first.len(), 4096);
    // All decoded now: answered inline, where the fault panics. More panics than the
    // daemon has request loops (one per core): a panic that ended its loop would leave
    // none to answer what follows, and the reads below would hang.
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let (done, results) = std::sync::mpsc::channel();
    let (reader, store_path, mp) = (
        file.try_clone().expect("dup"),
        store.clone(),
        mountpoint.clone(),
    );
    std::thread::spawn(move || {
        let mut errs = Vec::new();
        for _ in 0..cores + 2 {
            errs.push(
                pread_full(&reader, 12288, 4096)
                    .map(|_| ())
                    .map_err(|e| e.raw_os_error()),
            );
        }
        // The same file, another offset, inline too; another file; a listing.
        let second = pread_full(&reader, 4096, 4096).map_err(|e| e.to_string());
        let counts = std::fs::read(mp.join("legacy/counts")).map_err(|e| e.to_string());
        let listed = std::fs::read_dir(&mp)
            .map(|d| d.count())
            .map_err(|e| e.to_string());
        let _ = done.send((errs, second, counts, listed, store_path));
    });
    let (errs, second, counts, listed, _) = results
        .recv_timeout(Duration::from_secs(60))
        .expect("reads after the injected panics hang: the mount stopped serving");
    assert!(errs.iter().all(|e| *e == Err(Some(libc::EIO))), "{errs:?}");
    let whole = cat(&store, "temperature", &[]);
    assert_eq!(first, whole[..4096]);
    assert_eq!(second.expect("read after the panics"), whole[4096..8192]);
    assert_eq!(
        counts.expect("read counts"),
        cat(&store, "legacy/counts", &[])
    );
    assert!(listed.expect("ls") > 2);
    drop(file);
    assert!(umount(&mountpoint).success());
    let _ = child.wait();
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        text.contains("internal error") && text.contains("injected fault"),
        "no log line for the panic: {text}"
    );
}

/// Reads `path` from `start` to the end, then from 0 up to `start`, in 1 MiB reads, and
/// returns the file's bytes in order.
fn read_from_the_middle(path: &Path, start: u64) -> Vec<u8> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(path).expect("open");
    let mut tail = Vec::new();
    f.seek(SeekFrom::Start(start)).expect("seek");
    f.read_to_end(&mut tail).expect("read the tail");
    let mut head = vec![0u8; start as usize];
    f.seek(SeekFrom::Start(0)).expect("seek");
    f.read_exact(&mut head).expect("read the head");
    head.extend_from_slice(&tail);
    head
}

#[test]
fn a_first_read_fills_the_copy_as_it_is_served() {
    let m = Manifest::load();
    let (_mount, file, want) = materialized_large(&m);
    let state = || copy_state(&file);
    // The read's own bytes complete the copy: ready the moment the read ends, with no
    // background decode of the array to wait for.
    assert_eq!(read_hash(&file), want);
    let now = state();
    assert!(now.starts_with("ready"), "right after one read: {now}");
    wait_until("an open served by the kernel", || {
        assert_eq!(read_hash(&file), want);
        !state().starts_with("ready (0 ")
    });
}

#[test]
fn copies_filled_from_the_middle_at_random_and_by_two_readers_are_exact() {
    let m = Manifest::load();
    // Every fixed-size array of the v3 fixtures, read first from its middle.
    let mount = Mount::new(&m.store_dir("v3"), &["--materialize", "256MiB"]);
    let mut failures = Vec::new();
    for entry in arrays_of(&m, "v3") {
        if is_unsupported(entry) || entry["vlen"] == true {
            continue;
        }
        let path = entry["path"].as_str().unwrap_or("");
        let file = common::mount::array_file(&m, "v3", path, &mount.mountpoint);
        let want = entry["sha256"]["C_little"].as_str().unwrap_or("");
        let size = std::fs::metadata(&file).map(|s| s.len()).unwrap_or(0);
        let got = read_from_the_middle(&file, size / 2);
        if sha256(&got) != want {
            failures.push(format!("{path}: read from the middle differs"));
        }
        // Read again (from the copy, or through the kernel once it is ready).
        if read_hash(&file) != want {
            failures.push(format!("{path}: re-read differs"));
        }
        let state = xattr(&file, "user.zarrfs.materialized").unwrap_or_default();
        if size > 0
            && !wait_for(Duration::from_secs(20), || {
                xattr(&file, "user.zarrfs.materialized")
                    .unwrap_or_default()
                    .starts_with("ready")
            })
        {
            failures.push(format!("{path}: copy never ready ({state})"));
        } else if read_hash(&file) != want {
            failures.push(format!("{path}: read of the copy differs"));
        }
    }
    assert_no_failures(&failures);
    drop(mount);

    // Random reads while the copy fills, then two readers at once, then the copy.
    let entry = &arrays_of(&m, "v3_large")[0];
    let want = entry["sha256"]["C_little"].as_str().expect("digest");
    let bytes = cat(&m.store_dir("v3_large"), "field", &[]);
    let mount = Mount::new(&m.store_dir("v3_large"), &["--materialize", "512MiB"]);
    let file = mount.path("field");
    let f = std::fs::File::open(&file).expect("open");
    let mut rng = Lcg(11);
    for _ in 0..300 {
        let offset = rng.next(bytes.len() as u64);
        let len = rng.next(3 << 20) as usize;
        let got = pread_full(&f, offset, len).expect("pread");
        let end = (offset as usize + len).min(bytes.len());
        assert_eq!(got, &bytes[offset as usize..end], "pread {offset}+{len}");
    }
    let readers: Vec<_> = [0u64, bytes.len() as u64 / 3]
        .into_iter()
        .map(|start| {
            let file = file.clone();
            std::thread::spawn(move || sha256(&read_from_the_middle(&file, start)))
        })
        .collect();
    for r in readers {
        assert_eq!(r.join().expect("reader"), want, "a concurrent reader");
    }
    drop(f);
    wait_until("the copy ready", || {
        xattr(&file, "user.zarrfs.materialized")
            .unwrap_or_default()
            .starts_with("ready")
    });
    wait_until("an open served by the kernel", || {
        assert_eq!(read_hash(&file), want);
        !xattr(&file, "user.zarrfs.materialized")
            .unwrap_or_default()
            .starts_with("ready (0 ")
    });
}

/// With no materialized copies, a direct-IO file read again right after a read is
/// served from the decoded chunks the daemon kept (the array fits its cache): the second
/// read fetches nothing from the store.
#[test]
fn a_direct_io_re_read_without_copies_fetches_nothing_again() {
    let m = Manifest::load();
    let (_dir, mountpoint, log) = common::mount::mount_dir("reread");
    let mut child = direct_foreground(
        &m.store_dir("v3_large"),
        &mountpoint,
        &log,
        &["--cache-size", "256MiB"],
        &[],
    );
    let _unmount = Unmount(&mountpoint);
    let file = mountpoint.join("field");
    let fetched = || {
        xattr(&file, "user.zarrfs.bytes_fetched")
            .and_then(|v| v.parse::<u64>().ok())
            .expect("user.zarrfs.bytes_fetched")
    };
    let want = arrays_of(&m, "v3_large")[0]["sha256"]["C_little"]
        .as_str()
        .expect("digest")
        .to_string();
    assert_eq!(read_hash(&file), want);
    let after_first = fetched();
    assert!(after_first > 0, "the first read fetched nothing");
    assert_eq!(read_hash(&file), want);
    assert_eq!(
        fetched(),
        after_first,
        "the re-read fetched from the store again"
    );
    assert!(umount(&mountpoint).success(), "zarrfs umount");
    let _ = common::mount::wait_exit(&mut child, Duration::from_secs(20));
}

/// The pid of the daemon serving `mountpoint` (its command line names it).
fn daemon_of(mountpoint: &Path) -> u32 {
    let want = mountpoint.as_os_str().as_encoded_bytes();
    std::fs::read_dir("/proc")
        .expect("/proc")
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .find(|pid| {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let args: Vec<&[u8]> = cmd.split(|b| *b == 0).collect();
            args.contains(&&b"mount"[..]) && args.contains(&want)
        })
        .unwrap_or_else(|| panic!("no daemon of {}", mountpoint.display()))
}

/// The size lstat(2) gives, as `ls -l` asks it: the basic attributes alone (std's
/// metadata asks statx for the birth time too, which the kernel asks the daemon for until
/// it learns that the daemon answers no statx).
fn lstat_size(path: &Path) -> Option<u64> {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).ok()?;
    // SAFETY: a NUL-terminated path and a stat buffer of the right type.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    (unsafe { libc::lstat(c.as_ptr(), &mut st) } == 0).then_some(st.st_size as u64)
}

/// Sends SIGCONT to a stopped daemon when dropped (also after a failed assertion).
struct Resume(u32);

impl Drop for Resume {
    fn drop(&mut self) {
        // SAFETY: kill(2) with a pid and a signal number.
        unsafe { libc::kill(self.0 as i32, libc::SIGCONT) };
    }
}

#[test]
fn a_listing_carries_the_attributes_and_stat_of_a_listed_file_needs_no_daemon() {
    let m = Manifest::load();
    let mount = Mount::new(&m.store_dir("v3"), &[]);
    // The listing alone, as `ls -l` reads it before its first stat, of a group of
    // arrays of every data type.
    let group = "dtypes";
    let listed: Vec<PathBuf> = std::fs::read_dir(mount.path(group))
        .expect("list the group")
        .map(|e| e.expect("entry").path())
        .collect();
    let want: Vec<(PathBuf, u64)> = arrays_of(&m, "v3")
        .into_iter()
        .filter(|e| !is_unsupported(e))
        .filter_map(|e| {
            let name = e["path"].as_str()?.strip_prefix(group)?.strip_prefix('/')?;
            (!name.contains('/')).then(|| {
                let nbytes = e["nbytes"].as_u64().unwrap_or(u64::MAX);
                (mount.path(group).join(name), nbytes)
            })
        })
        .collect();
    assert!(
        want.len() >= 10,
        "the v3 store's group {group} holds arrays: {want:?}"
    );
    for (file, _) in &want {
        assert!(listed.contains(file), "{} listed", file.display());
    }
    // With the daemon stopped, every listed file's stat is answered by the kernel.
    let pid = daemon_of(&mount.mountpoint);
    // SAFETY: kill(2) with a pid and a signal number.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGSTOP) }, 0);
    let resume = Resume(pid);
    let (tx, rx) = std::sync::mpsc::channel();
    let files = listed.clone();
    std::thread::spawn(move || {
        let sizes: Vec<(PathBuf, Option<u64>)> = files
            .into_iter()
            .map(|f| {
                let size = lstat_size(&f);
                (f, size)
            })
            .collect();
        let _ = tx.send(sizes);
    });
    let stated = rx.recv_timeout(Duration::from_secs(10));
    drop(resume);
    let sizes = stated.expect("stat of the listed files waited for the stopped daemon");
    for (file, nbytes) in &want {
        let size = sizes.iter().find(|(f, _)| f == file).and_then(|(_, s)| *s);
        assert_eq!(size, Some(*nbytes), "{}", file.display());
    }
    assert!(
        sizes.iter().all(|(_, s)| s.is_some()),
        "every listed entry stats: {sizes:?}"
    );
}
