//! Inode numbers on a mount: an unchanged folder, array file, view or sidecar keeps its
//! number (and its kernel file handle: number and generation) when the kernel forgets it
//! and looks it up again, and when the store is read again (`--refresh`, `zarrfs
//! refresh`), so that `ls -i`, `find -samefile`, `tar` and `rsync -H` see one file; a
//! node whose metadata changed gets another number while a file open on the old one
//! reads on; no two files share a number, listings agree with `stat`, and the root is 1.

use crate::common;

use std::collections::{BTreeMap, HashMap};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirEntryExt, FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::mount::Mount;
use common::{copy_dir, zarrfs, Manifest, TempDir};
use serde_json::Value;

/// The sharded array the tests read in the v3 store, and one beside it.
const SHARDED: &str = "sharding/end_crc32c";
const BESIDE: &str = "sharding/start_crc32c";

/// Have the kernel forget what it holds of the files no one uses: their names and inodes
/// are dropped (`drop_caches` 2), and FUSE tells the daemon with a `forget` each.
fn kernel_forgets() {
    std::fs::write("/proc/sys/vm/drop_caches", "2")
        .expect("write /proc/sys/vm/drop_caches (the mount tests run as root)");
}

/// The inode number of every file and folder under `root` (relative paths; "" is the
/// root), from `stat`, checked against the numbers the listings give.
fn numbers(root: &Path) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    out.insert(String::new(), stat(root));
    let mut dirs = vec![PathBuf::new()];
    while let Some(dir) = dirs.pop() {
        let entries = std::fs::read_dir(root.join(&dir))
            .unwrap_or_else(|e| panic!("list /{}: {e}", dir.display()));
        for entry in entries {
            let entry = entry.expect("entry");
            let rel = dir.join(entry.file_name());
            let ino = stat(&root.join(&rel));
            assert_eq!(entry.ino(), ino, "/{}: listed and stat", rel.display());
            if entry.file_type().expect("type").is_dir() {
                dirs.push(rel.clone());
            }
            out.insert(rel.to_string_lossy().into_owned(), ino);
        }
    }
    out
}

fn stat(path: &Path) -> u64 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("stat {}: {e}", path.display()))
        .ino()
}

/// No two paths share a number, and only the root has 1.
fn assert_distinct(numbers: &BTreeMap<String, u64>) {
    let mut seen: HashMap<u64, &str> = HashMap::new();
    for (path, ino) in numbers {
        if let Some(other) = seen.insert(*ino, path) {
            panic!("/{path} and /{other} share inode {ino}");
        }
    }
    assert_eq!(numbers.get(""), Some(&1), "the root");
}

/// The kernel's file handle of `path` (`name_to_handle_at`): for FUSE, the inode's
/// number and its generation. The number is checked against `stat`.
fn handle(path: &Path) -> (u64, u32) {
    #[repr(C)]
    struct Handle {
        bytes: u32,
        kind: i32,
        data: [u32; 16],
    }
    let c_path = CString::new(path.as_os_str().as_bytes()).expect("path");
    let mut h = Handle {
        bytes: 64,
        kind: 0,
        data: [0; 16],
    };
    let mut mount_id = 0;
    // SAFETY: a valid C string, and a handle whose buffer holds the bytes it declares.
    let r = unsafe {
        libc::name_to_handle_at(
            libc::AT_FDCWD,
            c_path.as_ptr(),
            (&mut h as *mut Handle).cast::<libc::file_handle>(),
            &mut mount_id,
            0,
        )
    };
    assert_eq!(
        r,
        0,
        "name_to_handle_at {}: {}",
        path.display(),
        std::io::Error::last_os_error()
    );
    assert!(h.bytes >= 12, "a FUSE handle holds 3 words: {}", h.bytes);
    // fuse_encode_fh: the number's high and low words, then the generation.
    let ino = (u64::from(h.data[0]) << 32) | u64::from(h.data[1]);
    assert_eq!(ino, stat(path), "{}: handle and stat", path.display());
    (ino, h.data[2])
}

/// The files the tests follow of `array` in a mount at `root`: its folder, the folder's
/// `.group.json`, the array's file, its `.npy` view and its sidecar.
fn files_of(root: &Path, array: &str) -> Vec<PathBuf> {
    let (dir, name) = array.rsplit_once('/').expect("an array in a group");
    vec![
        root.join(dir),
        root.join(dir).join(".group.json"),
        root.join(array),
        root.join(format!("{array}.npy")),
        root.join(dir).join(format!(".{name}.json")),
    ]
}

fn handles(files: &[PathBuf]) -> Vec<(u64, u32)> {
    files.iter().map(|f| handle(f)).collect()
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// An array in a group of the v2 store.
fn v2_array(m: &Manifest) -> String {
    common::fixtures::arrays_of(m, "v2")
        .into_iter()
        .filter(|a| !common::fixtures::is_unsupported(a))
        .filter_map(|a| a["path"].as_str())
        .find(|p| p.contains('/'))
        .expect("an array in a group of the v2 store")
        .to_string()
}

#[test]
fn every_number_stays_when_the_kernel_forgets_the_files_of_an_unchanged_store() {
    let m = Manifest::load();
    for (store, array) in [("v3", SHARDED.to_string()), ("v2", v2_array(&m))] {
        let mount = Mount::new(&m.store_dir(store), &["--views", "raw,npy"]);
        let root = &mount.mountpoint;
        let first = numbers(root);
        assert_distinct(&first);
        let files = files_of(root, &array);
        let first_handles = handles(&files);
        let bytes = read(&root.join(&array));
        for round in 0..3 {
            kernel_forgets();
            // Looked up anew, one at a time, then as a walk of the whole mount.
            assert_eq!(handles(&files), first_handles, "{store}, round {round}");
            assert_eq!(read(&root.join(&array)), bytes);
            kernel_forgets();
            assert_eq!(numbers(root), first, "{store}, round {round}");
        }
    }
}

/// `zarrfs refresh` of the mount at `mountpoint`, which must succeed.
fn zarrfs_refresh(mountpoint: &Path) {
    let out = Command::new(zarrfs())
        .arg("refresh")
        .arg(mountpoint)
        .output()
        .expect("zarrfs refresh");
    assert!(
        out.status.success(),
        "zarrfs refresh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn every_number_stays_when_an_unchanged_store_is_read_again() {
    let m = Manifest::load();
    let interval = Duration::from_secs(1);
    let mount = Mount::new(
        &m.store_dir("v3"),
        &["--views", "raw,npy", "--refresh", "1s"],
    );
    let root = &mount.mountpoint;
    let first = numbers(root);
    assert_distinct(&first);
    let files = files_of(root, SHARDED);
    let first_handles = handles(&files);
    let bytes = read(&root.join(SHARDED));
    // Past twice the interval, the kernel's entries and the mount's reading of each node
    // are stale: the next look reads the store again.
    std::thread::sleep(2 * interval + Duration::from_millis(500));
    assert_eq!(
        handles(&files),
        first_handles,
        "read again after the interval"
    );
    assert_eq!(read(&root.join(SHARDED)), bytes);
    assert_eq!(numbers(root), first, "read again after the interval");
    zarrfs_refresh(root);
    assert_eq!(handles(&files), first_handles, "after zarrfs refresh");
    assert_eq!(numbers(root), first, "after zarrfs refresh");
    kernel_forgets();
    assert_eq!(numbers(root), first, "after the kernel forgot them");
}

/// Add attribute `name` to the v3 array at `dir` (its `zarr.json` rewritten whole).
fn add_attribute(dir: &Path, name: &str) {
    let path = dir.join("zarr.json");
    let mut doc: Value = serde_json::from_slice(&read(&path)).expect("zarr.json");
    doc["attributes"][name] = Value::Bool(true);
    let text = serde_json::to_vec_pretty(&doc).expect("json");
    std::fs::write(&path, text).expect("write zarr.json");
}

#[test]
fn a_changed_node_gets_another_number_and_a_file_open_on_the_old_one_reads_on() {
    let m = Manifest::load();
    let tmp = TempDir::new("inodes-changed");
    let store = tmp.path().join("v3");
    copy_dir(&m.store_dir("v3"), &store);
    // Read again by `zarrfs refresh` only.
    let mount = Mount::new(
        &store,
        &["--views", "raw,npy", "--refresh", "1h", "--no-watch"],
    );
    let root = &mount.mountpoint;
    let changed = files_of(root, SHARDED);
    let beside = files_of(root, BESIDE);
    let before: Vec<u64> = changed.iter().map(|f| stat(f)).collect();
    let beside_before = handles(&beside);
    let file = std::fs::File::open(root.join(SHARDED)).expect("open");
    let size = file.metadata().expect("fstat").len();
    let mut bytes = vec![0u8; size as usize];
    file.read_exact_at(&mut bytes, 0).expect("read");
    // The array's metadata gains an attribute (its data stays).
    add_attribute(&store.join(SHARDED), "renumbered");
    zarrfs_refresh(root);
    let after: Vec<u64> = changed.iter().map(|f| stat(f)).collect();
    // Its folder and the folder's `.group.json` are unchanged; its file, view and
    // sidecar show another reading.
    assert_eq!(after[..2], before[..2], "{changed:?}");
    for i in 2..5 {
        assert_ne!(after[i], before[i], "{}", changed[i].display());
    }
    assert_eq!(handles(&beside), beside_before, "beside it");
    let all = numbers(root);
    assert_distinct(&all);
    // The open file is still the first reading's, and reads on.
    assert_eq!(file.metadata().expect("fstat").ino(), before[2]);
    let mut again = vec![0u8; size as usize];
    file.read_exact_at(&mut again, 0)
        .expect("read the open file");
    assert_eq!(again, bytes);
    drop(file);
    assert_eq!(read(&root.join(SHARDED)), bytes, "the data is unchanged");
    // A file open on an unchanged node read again: the new reading is another inode,
    // and the open file reads on.
    let open = std::fs::File::open(root.join(BESIDE)).expect("open beside");
    let beside_bytes = read(&root.join(BESIDE));
    zarrfs_refresh(root);
    let reread = stat(&root.join(BESIDE));
    assert_ne!(reread, beside_before[2].0, "read again while open");
    assert_eq!(open.metadata().expect("fstat").ino(), beside_before[2].0);
    let mut again = vec![0u8; beside_bytes.len()];
    open.read_exact_at(&mut again, 0).expect("read");
    assert_eq!(again, beside_bytes);
    assert_distinct(&numbers(root));
    // Closed, and forgotten by the kernel: read again, the node has its number back,
    // and every other file kept its own through it all.
    drop(open);
    kernel_forgets();
    zarrfs_refresh(root);
    assert_eq!(handles(&beside), beside_before, "beside it, closed");
    assert_eq!(numbers(root), all);
}

/// zarr-python makes (`make`) or changes (`over`: row 0 becomes 100s, in its one chunk)
/// the int32 array `a` (4 x 4, a chunk per row) of the v3 store at `store`: the array's
/// bytes as it reads them back, C order, little-endian.
fn zarr_python(store: &Path, step: &str) -> Vec<u8> {
    let code = "import sys, numpy as np, zarr\n\
                path, step = sys.argv[1], sys.argv[2]\n\
                if step == 'make':\n\
                \x20   g = zarr.open_group(store=path, mode='w', zarr_format=3)\n\
                \x20   a = g.create_array(name='a', shape=(4, 4), chunks=(1, 4), dtype='<i4', fill_value=0)\n\
                \x20   a[:] = np.arange(16, dtype='<i4').reshape(4, 4)\n\
                else:\n\
                \x20   zarr.open_array(store=path, path='a', mode='r+')[0, :] = 100\n\
                a = zarr.open_array(store=path, path='a', mode='r')[:]\n\
                sys.stdout.write(np.ascontiguousarray(a, dtype='<i4').tobytes().hex())";
    let python = PathBuf::from(common::mount::test_python());
    let hex = common::run_python(&python, step, code, [store.as_os_str(), step.as_ref()]);
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
        .collect()
}

#[test]
fn a_number_kept_for_a_new_reading_never_serves_the_older_readings_bytes() {
    // Re-reads from the kernel's page cache (a lone file goes through it but under
    // --io direct), or from the materialized copy the kernel is handed.
    for materialize in ["off", "auto"] {
        let tmp = TempDir::new("inodes-pages");
        let store = tmp.path().join("s.zarr");
        let first = zarr_python(&store, "make");
        // Read again by the interval only (chunk files are never watched).
        let args = [
            "--refresh",
            "1s",
            "--no-watch",
            "--materialize",
            materialize,
        ];
        let mount = Mount::new(&store, &args);
        let file = mount.path("a");
        let ino = stat(&file);
        for _ in 0..3 {
            assert_eq!(read(&file), first, "--materialize {materialize}");
        }
        if materialize == "auto" {
            common::mount::wait_until("a copy of the array", || {
                common::xattr(&file, "user.zarrfs.materialized")
                    .is_some_and(|s| s.starts_with("ready"))
            });
            assert_eq!(read(&file), first);
        }
        // A chunk rewritten under unchanged metadata.
        let meta = read(&store.join("a/zarr.json"));
        let second = zarr_python(&store, "over");
        assert_ne!(second, first);
        assert_eq!(
            read(&store.join("a/zarr.json")),
            meta,
            "the metadata is unchanged"
        );
        // Within twice the interval an open shows it (docs/consistency.md), under the same number:
        // the older reading's pages and copy are gone.
        common::mount::wait_until("the rewritten chunk read through the mount", || {
            read(&file) == second
        });
        assert_eq!(stat(&file), ino, "--materialize {materialize}");
    }
}
