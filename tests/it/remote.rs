//! Remote stores end to end, mounted for real: the fixture stores served by s3s-fs (with
//! access keys and anonymously) and by nginx (with WebDAV listing and without), zip
//! archives of them read locally, over HTTP and from S3 (entries fetched in runs), faults
//! injected by a proxy (stalls,
//! dropped connections), and credentials kept out of everything the daemon shows.
//! Every server is started here on loopback; a missing one fails the test.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Once;

use common::fixtures::{
    arrays_of, check_arrays, check_groups, is_unsupported, store_folder, stores,
};
use common::mount::{ForegroundMount, Mount};
use common::servers::{azurite, azurite_put, nginx, s3s_fs, Proxy, Server};
use common::{assert_no_failures, sha256, zarrfs, Manifest, TempDir};

const ACCESS_KEY: &str = "zarrfsTESTACCESSKEY";
const SECRET_KEY: &str = "zarrfs-test-secret-8f3a2c91d7";

/// The credentials go where users put them: the environment.
fn credentials_in_env() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        std::env::set_var("AWS_ACCESS_KEY_ID", ACCESS_KEY);
        std::env::set_var("AWS_SECRET_ACCESS_KEY", SECRET_KEY);
        std::env::set_var("AWS_REGION", "us-east-1");
    });
}

/// A folder of buckets for s3s-fs: `fixtures` is the fixture folder.
fn bucket_root(m: &Manifest) -> TempDir {
    let root = TempDir::new("buckets");
    std::os::unix::fs::symlink(&m.dir, root.path().join("fixtures")).expect("symlink bucket");
    root
}

/// s3s-fs serving the fixtures with the test's access keys (and the folder it serves).
fn keyed_s3s_fs(m: &Manifest) -> (TempDir, Server) {
    credentials_in_env();
    let root = bucket_root(m);
    let server = s3s_fs(root.path(), Some((ACCESS_KEY, SECRET_KEY)));
    (root, server)
}

fn s3_args(server: &Server) -> String {
    format!("endpoint={},allow_http=true", server.url())
}

fn zips_dir() -> PathBuf {
    let dir = crate::common::repo().join("target/fixtures-zip");
    assert!(
        dir.join("stamp").is_file(),
        "no zip fixtures at {}: run scripts/test.sh (scripts/make_zips.py)",
        dir.display()
    );
    dir
}

/// Mount `spec` for every store (`spec(folder)`), C and F order (F only when `both`),
/// and check every array, and the groups when `groups`.
fn check_all(
    m: &Manifest,
    spec: impl Fn(&str) -> String,
    args: &[&str],
    both: bool,
    groups: bool,
) -> Vec<String> {
    let mut failures = Vec::new();
    let orders: &[(&str, &str, &str)] = if both {
        &[("C", "C_little", "C"), ("F", "F_little", "F")]
    } else {
        &[("C", "C_little", "C")]
    };
    for store in stores(m) {
        let url = spec(&store_folder(m, &store));
        for (order, label, vlen) in orders {
            let mut all = vec!["--order", order];
            all.extend_from_slice(args);
            let mount = Mount::new(Path::new(&url), &all);
            failures.extend(check_arrays(m, &store, &mount, label, vlen));
            if groups && *order == "C" {
                failures.extend(check_groups(m, &store, &mount));
            }
        }
    }
    failures
}

#[test]
fn s3_with_access_keys_every_fixture_array_in_c_and_f_order() {
    let m = Manifest::load();
    let (_root, server) = keyed_s3s_fs(&m);
    let options = s3_args(&server);
    let failures = check_all(
        &m,
        |f| format!("s3://fixtures/{f}"),
        &["-o", &options],
        true,
        true,
    );
    assert_no_failures(&failures);
}

#[test]
fn s3_anonymous_reads_a_public_bucket_and_signed_requests_need_keys() {
    credentials_in_env();
    let m = Manifest::load();
    let root = bucket_root(&m);
    let public = s3s_fs(root.path(), None);
    let options = s3_args(&public);
    let mount = Mount::new(
        Path::new("s3://fixtures/v3"),
        &["--anonymous", "-o", &options],
    );
    let mut failures = check_arrays(&m, "v3", &mount, "C_little", "C");
    failures.extend(check_groups(&m, "v3", &mount));
    assert_no_failures(&failures);

    // A server with keys refuses wrong ones: the mount fails up front, naming the store
    // and never the secret.
    let private = s3s_fs(root.path(), Some((ACCESS_KEY, SECRET_KEY)));
    let out = Command::new(zarrfs())
        .args(["inspect", "s3://fixtures/v3", "-o", &s3_args(&private)])
        .env("AWS_SECRET_ACCESS_KEY", "wrong-secret-value-123")
        .output()
        .expect("run zarrfs inspect");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a wrong secret was accepted");
    assert!(stderr.contains("fixtures/v3"), "{stderr}");
    assert!(!stderr.contains("wrong-secret-value-123"), "{stderr}");
}

#[test]
fn azure_blob_storage_reads_the_zarr_python_stores_in_c_and_f_order() {
    let m = Manifest::load();
    let server = azurite();
    let picked = ["v3", "v3_consolidated", "v2", "v2_consolidated"];
    for store in picked {
        let folder = store_folder(&m, store);
        azurite_put(&server, "fixtures", &m.store_dir(store), &folder);
    }
    let failures = check_picked(&m, &picked, "az://fixtures", &["-o", "use_emulator=true"]);
    assert_no_failures(&failures);
}

/// Mount each store of `picked` under `base` in C and F order, and check every array
/// (and the groups, once).
fn check_picked(m: &Manifest, picked: &[&str], base: &str, args: &[&str]) -> Vec<String> {
    let mut failures = Vec::new();
    for store in picked {
        let url = format!("{base}/{}", store_folder(m, store));
        for (order, label) in [("C", "C_little"), ("F", "F_little")] {
            let mut all = vec!["--order", order];
            all.extend_from_slice(args);
            let mount = Mount::new(Path::new(&url), &all);
            failures.extend(check_arrays(m, store, &mount, label, order));
            if order == "C" {
                failures.extend(check_groups(m, store, &mount));
            }
        }
    }
    failures
}

/// GCS through its XML API, the one object_store's GCS client speaks (objects at
/// `BASE/BUCKET/KEY`, listing by `list-type=2`): s3s-fs answers it, unsigned requests
/// being public there, as a bucket's `allUsers` reader makes them on GCS.
#[test]
fn gcs_reads_the_zarr_python_stores_in_c_and_f_order() {
    let m = Manifest::load();
    let root = bucket_root(&m);
    let server = s3s_fs(root.path(), None);
    let options = format!("google_base_url={},allow_http=true", server.url());
    let picked = ["v3", "v3_consolidated", "v2", "v2_consolidated"];
    let failures = check_picked(
        &m,
        &picked,
        "gs://fixtures",
        &["--anonymous", "-o", &options],
    );
    assert_no_failures(&failures);
}

#[test]
fn http_with_listing_every_fixture_array_in_c_and_f_order() {
    let m = Manifest::load();
    let server = nginx(&m.dir, true);
    let base = server.url();
    let failures = check_all(&m, |f| format!("{base}/{f}"), &[], true, true);
    assert_no_failures(&failures);
}

#[test]
fn http_without_listing_reads_consolidated_stores_and_named_arrays() {
    let m = Manifest::load();
    let server = nginx(&m.dir, false);
    let base = server.url();
    let mut failures = Vec::new();
    for store in ["v2_consolidated", "v3_consolidated"] {
        let url = format!("{base}/{}", store_folder(&m, store));
        let mount = Mount::new(Path::new(&url), &[]);
        failures.extend(check_arrays(&m, store, &mount, "C_little", "C"));
        failures.extend(check_groups(&m, store, &mount));
    }
    // Without consolidated metadata, named arrays still read through `cat`.
    let url = format!("{base}/{}", store_folder(&m, "v3"));
    for entry in arrays_of(&m, "v3")
        .iter()
        .filter(|a| a["vlen"] == false && !is_unsupported(a))
        .take(5)
    {
        let path = entry["path"].as_str().unwrap_or("");
        let out = Command::new(zarrfs())
            .args(["cat", &url, path])
            .output()
            .expect("cat");
        if !out.status.success() || sha256(&out.stdout) != entry["sha256"]["C_little"] {
            failures.push(format!(
                "cat {url} {path}: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    // ... and listing it says why it cannot.
    let out = Command::new(zarrfs())
        .args(["inspect", &url])
        .output()
        .expect("inspect");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if !text.contains("cannot list") {
        failures.push(format!("inspect of an unlistable store: {text}"));
    }
    assert_no_failures(&failures);
}

#[test]
fn zip_archives_local_and_over_http_read_every_fixture_array() {
    let m = Manifest::load();
    let zips = zips_dir();
    let mut failures = Vec::new();
    let local = |sub: &'static str| {
        let zips = zips.clone();
        move |f: &str| {
            zips.join(sub)
                .join(format!("{f}.zip"))
                .display()
                .to_string()
        }
    };
    failures.extend(check_all(&m, local(""), &[], true, true));
    failures.extend(check_all(&m, local("deflated"), &[], false, false));
    failures.extend(check_all(&m, local("nested"), &[], false, true));
    let server = nginx(&zips, false);
    let base = server.url();
    failures.extend(check_all(
        &m,
        |f| format!("{base}/{f}.zip"),
        &[],
        true,
        true,
    ));
    assert_no_failures(&failures);
}

/// Reads `file` in a thread; its result, or `None` if it is still blocked after `secs`.
fn read_within(file: PathBuf, secs: u64) -> Option<std::io::Result<Vec<u8>>> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(std::fs::read(&file));
    });
    rx.recv_timeout(std::time::Duration::from_secs(secs)).ok()
}

#[test]
fn stalls_fail_only_their_reads_drops_are_retried_and_recovery_needs_no_remount() {
    let m = Manifest::load();
    let server = nginx(&m.dir, true);
    let proxy = Proxy::start(server.port, "python3");
    let url = format!("{}/{}", proxy.url(), store_folder(&m, "v3"));
    // With a disk cache, what was read before the stall is read again from disk however
    // the page cache and the chunk cache have moved on since.
    let cache = TempDir::new("stallcache");
    let cache_dir = cache.path().display().to_string();
    let mount = Mount::new(
        Path::new(&url),
        &[
            "--timeout",
            "1",
            "--retries",
            "1",
            "--disk-cache",
            cache_dir.as_str(),
        ],
    );
    let picks = flat_v3_arrays(&m);
    assert!(picks.len() >= 4, "v3 has too few arrays");
    let expect = |i: usize, bytes: &[u8]| sha256(bytes) == picks[i]["sha256"]["C_little"];
    let file = |i: usize| mount.array(&m, "v3", picks[i]["path"].as_str().unwrap_or(""));
    // Before any fault: a read, and a listing of the array's group.
    let first = std::fs::read(file(0)).expect("read before faults");
    assert!(expect(0, &first), "bytes differ before faults");
    let group = file(1).parent().map(Path::to_path_buf).expect("group");
    let listed = std::fs::read_dir(&group).expect("list").count();

    proxy.command("stall on");
    match read_within(file(1), 60) {
        Some(Err(e)) => assert_eq!(e.raw_os_error(), Some(libc::EIO), "stalled read: {e}"),
        Some(Ok(_)) => panic!("a read through a stalled server succeeded"),
        None => panic!("a read through a stalled server was still blocked after 60 s"),
    }
    // Known nodes and cached data keep answering while the server is stalled.
    assert_eq!(
        std::fs::read_dir(&group)
            .expect("list while stalled")
            .count(),
        listed
    );
    std::fs::metadata(file(2)).expect("stat while stalled");
    let again = std::fs::read(file(0)).expect("cached read while stalled");
    assert!(expect(0, &again), "cached bytes differ while stalled");
    proxy.command("stall off");

    // The server is back: the failed read succeeds without a remount.
    let back = std::fs::read(file(1)).expect("read after the stall");
    assert!(expect(1, &back), "bytes differ after the stall");

    // Dropped connections are retried.
    proxy.command("drop 1");
    let dropped = std::fs::read(file(3)).expect("read with a dropped connection");
    assert!(
        expect(3, &dropped),
        "bytes differ after a dropped connection"
    );
    // The failed read left one log line naming its key.
    let failed = picks[1]["path"].as_str().unwrap_or("");
    assert!(
        mount.log().lines().any(|l| l.contains(failed)),
        "no log line names {failed}: {}",
        mount.log()
    );
}

#[test]
fn credentials_never_reach_logs_cmdline_xattrs_or_sidecars() {
    let m = Manifest::load();
    let (_root, server) = keyed_s3s_fs(&m);
    let options = s3_args(&server);
    let mount = ForegroundMount::new(Path::new("s3://fixtures/v3"), &["-o", &options]);
    let mut seen = String::new();
    for entry in arrays_of(&m, "v3").iter().take(10) {
        let file = mount.path(entry["path"].as_str().unwrap_or(""));
        let _ = std::fs::read(&file);
        for name in xattr_names(&file) {
            seen.push_str(&xattr_value(&file, &name));
        }
    }
    let sidecar = mount.path(".group.json");
    seen.push_str(&std::fs::read_to_string(sidecar).unwrap_or_default());
    seen.push_str(&mount.log());
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", mount.pid())).expect("cmdline");
    seen.push_str(&String::from_utf8_lossy(&cmdline));
    assert!(seen.contains("fixtures/v3"), "nothing was seen: {seen}");
    for secret in [ACCESS_KEY, SECRET_KEY] {
        assert!(!seen.contains(secret), "{secret} appears in:\n{seen}");
    }
    // On the command line a credential is refused.
    let out = Command::new(zarrfs())
        .args([
            "inspect",
            "s3://fixtures/v3",
            "-o",
            "aws_secret_access_key=abc",
        ])
        .output()
        .expect("inspect");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("environment"));
}

fn xattr_names(path: &Path) -> Vec<String> {
    let out = Command::new("getfattr")
        .arg("--absolute-names")
        .arg("-d")
        .arg("-m")
        .arg("-")
        .arg(path)
        .output()
        .expect("getfattr");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k.to_string()))
        .collect()
}

fn xattr_value(path: &Path, name: &str) -> String {
    let out = Command::new("getfattr")
        .arg("--absolute-names")
        .arg("--only-values")
        .arg("-n")
        .arg(name)
        .arg(path)
        .output()
        .expect("getfattr");
    String::from_utf8_lossy(&out.stdout).to_string()
}

#[test]
fn broken_zip_archives_fail_with_clear_errors_and_bad_entries_alone() {
    let m = Manifest::load();
    let hostile = zips_dir().join("hostile");
    // Half an archive: no mount, a message naming the archive.
    let truncated = hostile.join("truncated.zip");
    let out = Command::new(zarrfs())
        .arg("inspect")
        .arg(&truncated)
        .output()
        .expect("inspect");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "truncated zip: {stderr}");
    assert!(
        stderr.contains("truncated.zip") && stderr.contains("zip"),
        "{stderr}"
    );

    // Entries compressed with a method zarrfs does not read fail alone, with EIO and a
    // log line that says which method; the metadata still lists.
    let mount = Mount::new(&hostile.join("bzip2.zip"), &[]);
    let mut failures = check_groups(&m, "v3", &mount);
    let entry = arrays_of(&m, "v3")
        .into_iter()
        .find(|a| a["vlen"] == false && !is_unsupported(a))
        .expect("a v3 array");
    let path = entry["path"].as_str().unwrap_or("");
    match std::fs::read(mount.array(&m, "v3", path)) {
        Err(e) if e.raw_os_error() == Some(libc::EIO) => {}
        other => failures.push(format!("bzip2 entry {path}: {:?}", other.map(|b| b.len()))),
    }
    if !mount.log().contains("stored or deflated") {
        failures.push(format!("no log line names the zip method: {}", mount.log()));
    }

    // Entries named outside the archive's tree are left out; the store reads as usual.
    let names = Mount::new(&hostile.join("names.zip"), &[]);
    failures.extend(check_arrays(&m, "v3", &names, "C_little", "C"));
    failures.extend(check_groups(&m, "v3", &names));
    assert_no_failures(&failures);
}

#[test]
fn disk_cache_serves_a_second_mount_without_data_gets_and_refetches_changed_objects() {
    let m = Manifest::load();
    // A copy of one store, so that an object can change under the server.
    let served = TempDir::new("served");
    let folder = store_folder(&m, "v3");
    common::copy_dir(&m.store_dir("v3"), &served.path().join(&folder));
    let server = nginx(served.path(), true);
    let proxy = Proxy::start(server.port, "python3");
    let cache = TempDir::new("diskcache");
    let url = format!("{}/{folder}", proxy.url());
    let cache_dir = cache.path().display().to_string();
    let args = [
        "--disk-cache",
        cache_dir.as_str(),
        "--disk-cache-size",
        "1GiB",
    ];
    let arrays: Vec<_> = flat_v3_arrays(&m).into_iter().take(20).collect();
    let read_all = |mount: &Mount| read_v3_arrays(&m, &arrays, mount);
    let first = Mount::new(Path::new(&url), &args);
    let mut failures = read_all(&first);
    drop(first);
    let cold = proxy.requests("DATA");
    assert!(cold > 0, "the first mount fetched no chunk");

    let (again, data_gets) = remount_and_count(&proxy, &url, &args, "DATA", read_all);
    failures.extend(again);
    assert_eq!(data_gets, 0, "chunk GETs with a warm disk cache");

    // The objects of one array rewritten (same bytes, new ETag) are fetched again.
    let path = arrays[0]["path"].as_str().unwrap_or("");
    let store = served.path().join(&folder).join(path);
    let objects = walk(&store);
    // nginx's ETag is made of the modification time in seconds and the size.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    for object in &objects {
        let bytes = std::fs::read(object).expect("read object");
        std::fs::write(object, bytes).expect("rewrite object");
    }
    let rewritten = objects.len();
    assert!(rewritten > 0, "no object under {}", store.display());
    proxy.command("reset");
    let third = Mount::new(Path::new(&url), &args);
    failures.extend(read_all(&third));
    assert!(
        proxy.requests("DATA") > 0,
        "a changed object was served from the disk cache"
    );
    assert_no_failures(&failures);
}

/// The v3 fixture store in bucket `fixtures` of s3s-fs (anonymous), behind a counting
/// proxy: the bucket folder, the server, the proxy, the store's URL and the mount
/// options that reach it through the proxy.
fn counted_s3(m: &Manifest) -> (TempDir, Server, Proxy, String, String) {
    let root = bucket_root(m);
    let server = s3s_fs(root.path(), None);
    let proxy = Proxy::start(server.port, "python3");
    let url = format!("s3://fixtures/{}", store_folder(m, "v3"));
    let options = format!("endpoint={},allow_http=true,region=us-east-1", proxy.url());
    (root, server, proxy, url, options)
}

/// Read `arrays` through each of `mounts` at once, each reader starting at another
/// array: the failures.
fn read_at_once<M: Sync>(
    arrays: &[&serde_json::Value],
    mounts: &[M],
    file: impl Fn(&M, &str) -> PathBuf + Sync,
) -> Vec<String> {
    let start = std::sync::Barrier::new(mounts.len());
    std::thread::scope(|scope| {
        let readers: Vec<_> = mounts
            .iter()
            .enumerate()
            .map(|(n, mount)| {
                let (start, file) = (&start, &file);
                scope.spawn(move || {
                    start.wait();
                    (0..arrays.len())
                        .map(|i| arrays[(i + n * arrays.len() / mounts.len()) % arrays.len()])
                        .filter_map(|a| wrong(a, &file(mount, a["path"].as_str().unwrap_or(""))))
                        .map(|failure| format!("mount {n}: {failure}"))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        readers
            .into_iter()
            .flat_map(|r| r.join().expect("a reader panicked"))
            .collect()
    })
}

/// Four daemons reading one S3 store through one disk cache folder at once: every byte
/// right, and no more chunk objects fetched than one daemon alone fetches (each once).
#[test]
fn four_daemons_sharing_a_disk_cache_fetch_each_object_at_most_once() {
    let m = Manifest::load();
    let (_root, _server, proxy, url, options) = counted_s3(&m);
    let arrays: Vec<_> = flat_v3_arrays(&m).into_iter().take(40).collect();
    let read_all = |mount: &Mount| read_v3_arrays(&m, &arrays, mount);

    // What one mount alone fetches: each object once.
    let alone = TempDir::new("diskcache-alone");
    let alone_dir = alone.path().display().to_string();
    let (mut failures, objects) = remount_and_count(
        &proxy,
        &url,
        &cache_args(&options, &alone_dir),
        "DATA",
        read_all,
    );
    assert!(objects > 0, "one mount fetched no chunk");

    proxy.command("reset");
    let shared = TempDir::new("diskcache-shared");
    let shared_dir = shared.path().display().to_string();
    let args = cache_args(&options, &shared_dir);
    let mounts: Vec<Mount> = (0..4).map(|_| Mount::new(Path::new(&url), &args)).collect();
    failures.extend(read_at_once(&arrays, &mounts, |mount, path| {
        mount.array(&m, "v3", path)
    }));
    let fetched = proxy.requests("DATA");
    drop(mounts);
    assert_no_failures(&failures);
    assert!(
        fetched <= objects,
        "four daemons sharing a disk cache fetched {fetched} chunk objects, one alone {objects}"
    );
}

/// The bytes of the files in the cache folder `root`'s store folders, each file once,
/// counted while the folder's count (`.used`) is locked, as its entries are published.
fn cache_folder_bytes(root: &Path) -> u64 {
    let count = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(root.join(".used"));
    let _locked = count.as_ref().map(|f| f.lock());
    let mut files = std::collections::HashMap::new();
    for store in std::fs::read_dir(root).into_iter().flatten().flatten() {
        for file in std::fs::read_dir(store.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            if let Some(meta) = file.metadata().ok().filter(|m| m.is_file()) {
                files.insert(std::os::unix::fs::MetadataExt::ino(&meta), meta.len());
            }
        }
    }
    files.values().sum()
}

/// Four daemons reading one S3 store at once through one disk cache folder whose budget
/// is a tenth of the data: no reader fails, and the folder never holds more than the
/// budget and one entry per daemon (sampled all along).
#[test]
fn four_daemons_keep_a_shared_disk_cache_within_a_tenth_of_the_data() {
    let m = Manifest::load();
    let (_root, _server, _proxy, url, options) = counted_s3(&m);
    let arrays = flat_v3_arrays(&m);
    let objects: Vec<u64> = walk(&m.store_dir("v3"))
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|meta| meta.len())
        .collect();
    let data: u64 = objects.iter().sum();
    let largest = objects.iter().copied().max().unwrap_or(0);
    let budget = data / 10;
    assert!(
        largest * 4 < budget,
        "{largest} B objects in a {budget} B budget"
    );
    let cache = TempDir::new("diskcache-budget");
    let cache_dir = cache.path().display().to_string();
    let size = budget.to_string();
    let args = [
        &cache_args(&options, &cache_dir)[..],
        &["--disk-cache-size", size.as_str()],
    ]
    .concat();
    let mounts: Vec<Mount> = (0..4).map(|_| Mount::new(Path::new(&url), &args)).collect();
    let done = std::sync::atomic::AtomicBool::new(false);
    let (mut most, mut samples) = (0, 0);
    let failures = std::thread::scope(|scope| {
        let sampler = scope.spawn(|| {
            let mut most = 0;
            let mut samples = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                most = most.max(cache_folder_bytes(cache.path()));
                samples += 1;
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            (most, samples)
        });
        let failures = read_at_once(&arrays, &mounts, |mount, path| mount.array(&m, "v3", path));
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        (most, samples) = sampler.join().expect("the sampler panicked");
        failures
    });
    drop(mounts);
    println!("{samples} samples: at most {most} B in the folder, budget {budget} B, data {data} B");
    assert_no_failures(&failures);
    assert!(
        most > budget / 2,
        "the folder never filled: at most {most} B of {budget} B"
    );
    assert!(
        most <= budget + 4 * largest,
        "the folder held {most} B: over its budget of {budget} B by more than one entry \
         per daemon ({largest} B at most)"
    );
}

/// A daemon killed (SIGKILL) while it writes an entry of a shared disk cache leaves no
/// entry a reader can see half written: while three other daemons read the same array
/// through the folder, the fourth is stopped (SIGSTOP) as soon as one of its temporary
/// files appears and, if the file is still there (being written, not yet renamed),
/// killed; then a new daemon (which removes what the killed one left) reads the array
/// from that folder, every byte right, fetching fewer objects than the store holds.
#[test]
fn a_daemon_killed_while_writing_a_shared_disk_cache_entry_leaves_no_half_entry() {
    use common::mount::{array_file, ForegroundMount};
    let m = Manifest::load();
    let (_root, _server, proxy, _, options) = counted_s3(&m);
    // The 16 MiB array of 130 chunk objects of about 100 KiB: entries take a while to write.
    let url = format!("s3://fixtures/{}", store_folder(&m, "v3_large"));
    let arrays: Vec<_> = arrays_of(&m, "v3_large");
    let mut failures = Vec::new();
    let mut killed = None;
    // Each round on an empty folder (a full one has nothing left to write).
    let mut cache = TempDir::new("diskcache-killed");
    for round in 0..10 {
        if round > 0 {
            cache = TempDir::new("diskcache-killed");
        }
        let cache_dir = cache.path().display().to_string();
        let args = cache_args(&options, &cache_dir);
        let doomed = ForegroundMount::new(Path::new(&url), &args);
        let mounts: Vec<Mount> = (0..3).map(|_| Mount::new(Path::new(&url), &args)).collect();
        let pid = doomed.pid() as i32;
        let prefix = format!(".tmp-{pid}-");
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|scope| {
            let (doomed, arrays, m, done) = (&doomed, &arrays, &m, &done);
            scope.spawn(move || {
                for a in arrays {
                    let path = a["path"].as_str().unwrap_or("");
                    let _ = std::fs::read(array_file(m, "v3_large", path, &doomed.mountpoint));
                }
                done.store(true, std::sync::atomic::Ordering::Relaxed);
            });
            let mounts = &mounts;
            let others = scope.spawn(move || {
                read_at_once(arrays, mounts, |mount, path| {
                    mount.array(m, "v3_large", path)
                })
            });
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                let Some(name) = temporary_files(cache.path())
                    .into_iter()
                    .find(|name| name.starts_with(&prefix))
                else {
                    continue;
                };
                // SAFETY: signals to the daemon this test started.
                unsafe { libc::kill(pid, libc::SIGSTOP) };
                while !all_stopped(pid) {
                    std::thread::yield_now();
                }
                if temporary_files(cache.path()).contains(&name) {
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                    killed = Some((pid, name));
                    break;
                }
                unsafe { libc::kill(pid, libc::SIGCONT) };
            }
            failures.extend(others.join().expect("the readers panicked"));
        });
        drop(mounts);
        drop(doomed);
        if killed.is_some() {
            break;
        }
    }
    let Some((pid, name)) = killed else {
        panic!("in 10 rounds the daemon was never stopped while it wrote an entry");
    };
    println!("daemon {pid} killed while it wrote {name}");
    assert!(
        temporary_files(cache.path()).contains(&name),
        "the killed daemon's {name} is not there"
    );

    let cache_dir = cache.path().display().to_string();
    let args = cache_args(&options, &cache_dir);
    proxy.command("reset");
    let fresh = Mount::new(Path::new(&url), &args);
    let left = temporary_files(cache.path());
    failures.extend(read_arrays(&m, "v3_large", &arrays, &fresh));
    let fetched = proxy.requests("DATA");
    drop(fresh);
    assert_no_failures(&failures);
    assert!(!left.contains(&name), "{name} of the killed daemon stayed");
    let objects = walk(&m.store_dir("v3_large")).len() as u64;
    assert!(
        fetched < objects,
        "the new daemon fetched {fetched} objects of {objects}: the cache served nothing"
    );
}

/// Whether every thread of process `pid` is stopped (or gone).
fn all_stopped(pid: i32) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
        .all(|task| {
            let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
            let state = stat.rsplit_once(')').map(|(_, rest)| rest.trim_start());
            state.is_none_or(|s| s.starts_with(['T', 't', 'Z', 'X']))
        })
}

/// The names of the temporary files in the store folders of cache folder `root`.
fn temporary_files(root: &Path) -> Vec<String> {
    std::fs::read_dir(root)
        .into_iter()
        .flatten()
        .flatten()
        .flat_map(|store| {
            std::fs::read_dir(store.path())
                .into_iter()
                .flatten()
                .flatten()
        })
        .map(|f| f.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with(".tmp-"))
        .collect()
}

/// The v3 fixture arrays whose flat files the tests read: fixed-size elements, codecs
/// zarrfs reads.
fn flat_v3_arrays(m: &Manifest) -> Vec<&serde_json::Value> {
    arrays_of(m, "v3")
        .into_iter()
        .filter(|a| a["vlen"] == false && !is_unsupported(a))
        .collect()
}

/// Mount `url` with `args` afresh (the proxy's counts reset first) and read with
/// `read_all`: the read failures, and how many `method` requests the proxy saw.
fn remount_and_count(
    proxy: &Proxy,
    url: &str,
    args: &[&str],
    method: &str,
    read_all: impl Fn(&Mount) -> Vec<String>,
) -> (Vec<String>, u64) {
    proxy.command("reset");
    let mount = Mount::new(Path::new(url), args);
    let failures = read_all(&mount);
    drop(mount);
    (failures, proxy.requests(method))
}

/// [`read_arrays`] of the v3 fixture store.
fn read_v3_arrays(m: &Manifest, arrays: &[&serde_json::Value], mount: &Mount) -> Vec<String> {
    read_arrays(m, "v3", arrays, mount)
}

/// Read each of `arrays` (of fixture store `store`) through `mount`: what differs from
/// zarr-python's bytes in C order, or fails.
fn read_arrays(
    m: &Manifest,
    store: &str,
    arrays: &[&serde_json::Value],
    mount: &Mount,
) -> Vec<String> {
    arrays
        .iter()
        .filter_map(|a| wrong(a, &mount.array(m, store, a["path"].as_str().unwrap_or(""))))
        .collect()
}

/// What is wrong with array `a` of the manifest read from `file` (other bytes than
/// zarr-python's in C order, or an error), if anything.
fn wrong(a: &serde_json::Value, file: &Path) -> Option<String> {
    let path = a["path"].as_str().unwrap_or("");
    match std::fs::read(file) {
        Ok(b) if sha256(&b) == a["sha256"]["C_little"] => None,
        Ok(_) => Some(format!("{path}: bytes differ")),
        Err(e) => Some(format!("{path}: {e}")),
    }
}

/// Mount options reaching the store with `options` (anonymous) through the disk cache
/// folder `dir`.
fn cache_args<'a>(options: &'a str, dir: &'a str) -> [&'a str; 5] {
    ["--anonymous", "-o", options, "--disk-cache", dir]
}

/// The files under `dir` that are not metadata documents (chunk objects).
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else if !matches!(
            path.file_name().and_then(|n| n.to_str()),
            Some("zarr.json" | ".zarray" | ".zattrs" | ".zgroup" | ".zmetadata")
        ) {
            out.push(path);
        }
    }
    out
}

/// A zip archive on a server reads through the disk cache of the server's store: a
/// second mount of it reads its directory and every entry from disk, with no GET.
#[test]
fn a_zip_archive_on_a_server_is_served_from_the_disk_cache_by_a_second_mount() {
    let m = Manifest::load();
    let server = nginx(&zips_dir(), false);
    let proxy = Proxy::start(server.port, "python3");
    let cache = TempDir::new("zipcache");
    let cache_dir = cache.path().display().to_string();
    let args = ["--disk-cache", cache_dir.as_str()];
    let url = format!("{}/v3.zip", proxy.url());
    let arrays: Vec<_> = flat_v3_arrays(&m).into_iter().take(20).collect();
    assert!(!arrays.is_empty(), "no v3 fixture arrays");
    let read_all = |mount: &Mount| read_v3_arrays(&m, &arrays, mount);
    let first = Mount::new(Path::new(&url), &args);
    let mut failures = read_all(&first);
    drop(first);
    assert!(
        proxy.requests("GET") > 0,
        "the first mount read nothing of the archive"
    );
    let (again, gets) = remount_and_count(&proxy, &url, &args, "GET", read_all);
    failures.extend(again);
    assert_eq!(gets, 0, "GETs of the archive with a warm disk cache");
    assert_no_failures(&failures);
}

/// A zip archive on S3 is read in runs of entries: entries lying back to back are fetched
/// together, so reading every array takes fewer GETs than the chunk entries it reads; a
/// second mount with the same disk cache reads the archive with no GET at all.
#[test]
fn a_zip_archive_on_s3_is_read_in_runs_of_entries_and_then_from_the_disk_cache() {
    credentials_in_env();
    let m = Manifest::load();
    let buckets = TempDir::new("zipbuckets");
    std::os::unix::fs::symlink(zips_dir(), buckets.path().join("zips")).expect("bucket");
    let server = s3s_fs(buckets.path(), Some((ACCESS_KEY, SECRET_KEY)));
    // The proxy forwards bytes untouched (the Host header too), so signatures hold.
    let proxy = Proxy::start(server.port, "python3");
    let options = format!("endpoint={},allow_http=true", proxy.url());
    let cache = TempDir::new("s3zipcache");
    let cache_dir = cache.path().display().to_string();
    let args = ["-o", options.as_str(), "--disk-cache", cache_dir.as_str()];
    let url = "s3://zips/v3.zip";
    let arrays = flat_v3_arrays(&m);
    assert!(!arrays.is_empty(), "no v3 fixture arrays");
    // The chunk entries (shards included) reading every array reads: the archive holds
    // the store's files.
    let entries: usize = arrays
        .iter()
        .map(|a| walk(&m.store_dir("v3").join(a["path"].as_str().unwrap_or(""))).len())
        .sum();
    assert!(entries > 1, "the arrays have {entries} chunk entries");
    let read_all = |mount: &Mount| read_v3_arrays(&m, &arrays, mount);
    let first = Mount::new(Path::new(url), &args);
    let mut failures = read_all(&first);
    drop(first);
    let gets = proxy.requests("GET");
    assert!(gets > 0, "the first mount read nothing of the archive");
    assert!(
        gets < entries as u64,
        "{gets} GETs for {entries} chunk entries: entries were not fetched together"
    );
    let (again, gets) = remount_and_count(&proxy, url, &args, "GET", read_all);
    failures.extend(again);
    assert_eq!(gets, 0, "GETs of the archive with a warm disk cache");
    assert_no_failures(&failures);
}
