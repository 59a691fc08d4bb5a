//! One store test suite that every `Store` implementation runs (as zarrs_storage's
//! `store_test.rs` does for zarrs' stores): listings of the root and of sub-prefixes, whole
//! values, byte ranges (inside, straddling the end, at and past it, suffixes), `head`,
//! missing keys (`Ok(None)`, never an error), versions (`head` and every read of an
//! unchanged object agree; a rewritten object gets another) and `caps`. The expected
//! content never comes from zarrfs: a small tree of files written here with `std::fs`
//! (binary values, an empty one, nested folders) is served as a folder, copied into a
//! memory store, zipped by Python's `zipfile`, put on each remote test server (S3 and GCS
//! on s3s-fs, Azure on Azurite, HTTP on nginx with and without WebDAV listing) and pointed
//! into by a kerchunk reference set; the Icechunk fixture repository is read back through
//! the icechunk Python package. A missing test server or fixture fails its test.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use base64::Engine;
use common::servers::{azurite, azurite_put, nginx, s3s_fs, Server};
use common::{
    assert_no_failures, icechunk_reset_branch, manifest_at, read_python, run_python, venv_python,
    TempDir,
};
use zarrfs::store::{
    open, ByteRange, FolderStore, MemoryStore, Store, StoreConfig, Version, VersionChoice,
};

/// The values of the test tree by key (in the order written), bytes made by a fixed
/// generator: JSON documents, binary values, an empty one, a key in a folder of its own.
fn tree_values() -> Vec<(&'static str, Vec<u8>)> {
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut noise = |n: usize| -> Vec<u8> {
        (0..n)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 24) as u8
            })
            .collect()
    };
    vec![
        (
            "zarr.json",
            br#"{"zarr_format":3,"node_type":"group"}"#.to_vec(),
        ),
        (".zattrs", b"{}".to_vec()),
        ("blob.bin", noise(5000)),
        ("empty", Vec::new()),
        (
            "a/zarr.json",
            br#"{"zarr_format":3,"node_type":"array"}"#.to_vec(),
        ),
        ("a/c/0/0", noise(777)),
        ("a/c/0/1", vec![0xff]),
        ("a/c/1/0", noise(4096)),
        ("a/b/deep/x.bin", noise(300)),
        ("z/only", (0..=255u8).collect()),
    ]
}

/// Keys no store of the tree holds: names beside and below values, and below a value.
const TREE_MISSING: [&str; 5] = ["nope", "a/nope", "nope/zarr.json", "a/c/0/9", "blob.bin/x"];

/// The key the stores that can change have rewritten, and its new bytes (another size,
/// so that even a version made of a time in seconds and a size changes).
const REWRITTEN: &str = "a/c/0/0";

fn rewritten_bytes() -> Vec<u8> {
    (0..778u32).map(|i| (i * 7 % 251) as u8).collect()
}

/// The test tree written into `dir` with `std::fs`.
fn write_tree(dir: &Path) {
    for (key, bytes) in tree_values() {
        let path = dir.join(key);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(&path, bytes).expect("write tree file");
    }
}

/// Every file under `dir` by key (`/`-separated), read back with `std::fs`.
fn read_tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(dir: &Path, prefix: &str, out: &mut BTreeMap<String, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).expect("read tree") {
            let entry = entry.expect("entry");
            let name = entry.file_name().to_string_lossy().to_string();
            let key = format!("{prefix}{name}");
            if entry.file_type().expect("type").is_dir() {
                walk(&entry.path(), &format!("{key}/"), out);
            } else {
                out.insert(key, std::fs::read(entry.path()).expect("read file"));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, "", &mut out);
    out
}

/// What listing a store promises.
#[derive(Clone, Copy, PartialEq)]
enum Lists {
    /// Every folder lists what is below it; a missing one lists nothing.
    Yes,
    /// As `Yes`, less the names that start with a dot, which the server leaves out of its
    /// listings (nginx's WebDAV module does).
    Undotted,
    /// Listing fails with an error that says so (a web server without WebDAV).
    Refused,
}

/// What a store is checked against: its values by key, keys it must not hold, and what
/// it promises.
struct Expected {
    values: BTreeMap<String, Vec<u8>>,
    missing: Vec<String>,
    lists: Lists,
    /// Values carry a version tag (not `Version::Unknown`).
    tagged: bool,
    /// The version every value carries, when the store has one version for all of them
    /// (an Icechunk snapshot).
    version: Option<Version>,
    /// Reads want large requests (a remote store): `caps().request_bytes > 0`.
    remote: bool,
    /// Failures known today, each to be taken out once fixed.
    known: Vec<Known>,
}

/// A failure of the suite known today (of zarrfs, or of a test server): the failures whose message
/// holds every one of `parts`, and why. A known failure that no longer shows fails the
/// test too (it was fixed: take it out).
struct Known {
    parts: &'static [&'static str],
    why: &'static str,
}

impl Expected {
    /// The test tree in `dir`, as a store with remote-store `caps` or not.
    fn tree(dir: &Path, remote: bool) -> Expected {
        Expected {
            values: read_tree(dir),
            missing: TREE_MISSING.iter().map(|k| k.to_string()).collect(),
            lists: Lists::Yes,
            tagged: true,
            version: None,
            remote,
            known: Vec::new(),
        }
    }

    /// Every folder the keys lie in ("" for the root), with the keys and sub-folders
    /// directly below it, sorted.
    fn listings(&self) -> BTreeMap<String, (Vec<String>, Vec<String>)> {
        let mut folders: BTreeMap<String, (BTreeSet<String>, BTreeSet<String>)> = BTreeMap::new();
        for key in self.values.keys() {
            let parts: Vec<&str> = key.split('/').collect();
            if self.lists == Lists::Undotted && parts.iter().any(|p| p.starts_with('.')) {
                continue;
            }
            for depth in 0..parts.len() {
                let folder = parts[..depth].join("/");
                let entry = folders.entry(folder).or_default();
                if depth + 1 == parts.len() {
                    entry.0.insert(parts[depth].to_string());
                } else {
                    entry.1.insert(parts[depth].to_string());
                }
            }
        }
        folders
            .into_iter()
            .map(|(f, (k, p))| (f, (k.into_iter().collect(), p.into_iter().collect())))
            .collect()
    }
}

/// The byte ranges each value is read in, and the slice each must give of a value of
/// `n` bytes: the trait's promise that ranges past the end are clipped, written out.
fn ranges(n: u64) -> Vec<(ByteRange, std::ops::Range<usize>)> {
    let clip = |a: u64, b: u64| a.min(n) as usize..b.min(n) as usize;
    let span = |offset: u64, len: u64| {
        (
            ByteRange::Span { offset, len },
            clip(offset, offset.saturating_add(len)),
        )
    };
    let suffix = |len: u64| (ByteRange::Suffix(len), clip(n.saturating_sub(len), n));
    vec![
        span(0, n),
        span(0, 1),
        span(n / 3, n / 3 + 1),
        span(1, 1 << 40),
        span(n.saturating_sub(5), 10),
        span(n, 5),
        span(n + 10, 5),
        span(n / 2, 0),
        suffix(3),
        suffix(n),
        suffix(n + 100),
    ]
}

/// Run the suite against `store`: every failure, each naming `name`.
fn check_store(name: &str, store: &dyn Store, expect: &Expected) -> Vec<String> {
    let mut failures = Vec::new();
    let mut fail = |what: String| failures.push(format!("{name}: {what}"));
    let caps = store.caps();
    if caps.concurrency < 1 {
        fail(format!("caps: concurrency {}", caps.concurrency));
    }
    if expect.remote != (caps.request_bytes > 0) {
        fail(format!("caps: request_bytes {}", caps.request_bytes));
    }
    check_listings(store, expect, &mut fail);
    for (key, bytes) in &expect.values {
        check_value(store, key, bytes, expect, &mut fail);
    }
    for key in &expect.missing {
        store.will_need(key);
        match store.read(key, None) {
            Ok(None) => {}
            other => fail(format!(
                "read of missing {key}: {:?}",
                other.map(|v| v.map(|v| v.bytes.len()))
            )),
        }
        match store.read(key, Some(ByteRange::Suffix(4))) {
            Ok(None) => {}
            other => fail(format!(
                "suffix read of missing {key}: {:?}",
                other.map(|v| v.is_some())
            )),
        }
        match store.head(key) {
            Ok(None) => {}
            other => fail(format!("head of missing {key}: {other:?}")),
        }
    }
    failures
}

/// The listing of every folder of the expectation (in both spellings, `a` and `a/`), and
/// of missing folders.
fn check_listings(store: &dyn Store, expect: &Expected, fail: &mut impl FnMut(String)) {
    let listings = expect.listings();
    for (folder, (keys, prefixes)) in &listings {
        let spellings = if folder.is_empty() {
            vec![String::new()]
        } else {
            vec![format!("{folder}/"), folder.clone()]
        };
        for prefix in spellings {
            match (store.list_dir(&prefix), expect.lists) {
                (Ok(l), Lists::Yes | Lists::Undotted)
                    if (&l.keys, &l.prefixes) == (keys, prefixes) => {}
                (Ok(l), Lists::Yes | Lists::Undotted) => fail(format!(
                    "list_dir({prefix:?}): keys {:?} prefixes {:?}, expected {keys:?} {prefixes:?}",
                    l.keys, l.prefixes
                )),
                (Err(e), Lists::Refused) if e.to_string().contains("cannot list") => {}
                (got, _) => fail(format!("list_dir({prefix:?}): {got:?}")),
            }
        }
    }
    let mut missing: Vec<String> = vec!["no-such-folder/".into()];
    missing.extend(
        listings
            .keys()
            .filter(|f| !f.is_empty())
            .map(|f| format!("{f}/no-such-folder/")),
    );
    for prefix in missing {
        match (store.list_dir(&prefix), expect.lists) {
            (Ok(l), Lists::Yes | Lists::Undotted) if l.keys.is_empty() && l.prefixes.is_empty() => {
            }
            (Err(e), Lists::Refused) if e.to_string().contains("cannot list") => {}
            (got, _) => fail(format!("list_dir of missing {prefix:?}: {got:?}")),
        }
    }
}

/// What `read` returns, or the message of a panic it raised (as an error), so that one
/// panicking read fails its check alone.
fn unpanicked<T>(read: impl FnOnce() -> zarrfs::error::Result<T>) -> Result<T, String> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(read)) {
        Ok(got) => got.map_err(|e| e.to_string()),
        Err(panic) => Err(format!(
            "panicked: {}",
            panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()
        )),
    }
}

/// One value: whole, in every range, its head, and the versions they carry.
fn check_value(
    store: &dyn Store,
    key: &str,
    bytes: &[u8],
    expect: &Expected,
    fail: &mut impl FnMut(String),
) {
    store.will_need(key);
    let whole = match store.read(key, None) {
        Ok(Some(v)) => v,
        other => {
            fail(format!("read {key}: {:?}", other.map(|v| v.is_some())));
            return;
        }
    };
    if whole.bytes != bytes {
        fail(format!(
            "read {key}: {} bytes differ from the {} expected",
            whole.bytes.len(),
            bytes.len()
        ));
    }
    let version = whole.version;
    if expect.tagged && version == Version::Unknown {
        fail(format!("read {key}: version unknown"));
    }
    if let Some(want) = &expect.version {
        if &version != want {
            fail(format!(
                "read {key}: version {version:?}, expected {want:?}"
            ));
        }
    }
    for (range, slice) in ranges(bytes.len() as u64) {
        match unpanicked(|| store.read(key, Some(range))) {
            Ok(Some(v)) if v.bytes == bytes[slice.clone()] && v.version == version => {}
            Ok(Some(v)) if v.bytes == bytes[slice.clone()] => fail(format!(
                "read {key} {range:?}: version {:?}, the whole read's {version:?}",
                v.version
            )),
            Ok(Some(v)) => fail(format!(
                "read {key} {range:?}: {} bytes, expected bytes {slice:?}{}",
                v.bytes.len(),
                if v.bytes.len() == slice.len() {
                    " (differ)"
                } else {
                    ""
                }
            )),
            other => fail(format!("read {key} {range:?}: {other:?}")),
        }
    }
    match store.head(key) {
        Ok(Some(h)) if h.size != bytes.len() as u64 => {
            fail(format!("head {key}: size {}, not {}", h.size, bytes.len()))
        }
        Ok(Some(h)) if h.version != version => fail(format!(
            "head {key}: version {:?}, the read's {version:?}",
            h.version
        )),
        Ok(Some(_)) => {}
        other => fail(format!("head {key}: {other:?}")),
    }
}

/// The suite passes on `store`, but for `expect`'s known failures, each of which shows.
fn passes(name: &str, store: &dyn Store, expect: &Expected) {
    let failures = check_store(name, store, expect);
    let known = |f: &String, k: &Known| k.parts.iter().all(|p| f.contains(p));
    let mut left: Vec<String> = failures
        .iter()
        .filter(|f| !expect.known.iter().any(|k| known(f, k)))
        .cloned()
        .collect();
    for k in &expect.known {
        if !failures.iter().any(|f| known(f, k)) {
            left.push(format!(
                "{name}: known failure fixed ({}): take it out",
                k.why
            ));
        }
    }
    assert_no_failures(&left);
}

/// The version `key` reads with now (its head must agree).
fn version_now(store: &dyn Store, key: &str) -> Version {
    let read = store.read(key, None).expect("read").expect("present");
    read.version
}

/// After `key` was rewritten to `bytes` behind `store`'s back: the store reads the new
/// bytes, under a version other than `before`, and its head agrees.
fn check_rewritten(name: &str, store: &dyn Store, key: &str, bytes: &[u8], before: &Version) {
    let after = store.read(key, None).expect("read").expect("present");
    assert!(
        after.bytes == bytes,
        "{name}: {key} reads the old bytes after a rewrite"
    );
    assert_ne!(
        &after.version, before,
        "{name}: {key} kept its version through a rewrite"
    );
    let head = store.head(key).expect("head").expect("present");
    assert_eq!(
        (head.size, &head.version),
        (bytes.len() as u64, &after.version),
        "{name}: head of {key} after a rewrite"
    );
}

/// What rewrites [`REWRITTEN`] behind a store's back, given the new bytes.
type Rewrite<'a> = dyn Fn(&[u8]) + 'a;

/// The suite, then (when `rewrite` is given) a rewrite of [`REWRITTEN`] through it.
fn run_suite(name: &str, store: &dyn Store, expect: &Expected, rewrite: Option<&Rewrite>) {
    passes(name, store, expect);
    if let Some(rewrite) = rewrite {
        let before = version_now(store, REWRITTEN);
        let bytes = rewritten_bytes();
        rewrite(&bytes);
        check_rewritten(name, store, REWRITTEN, &bytes, &before);
    }
}

/// A fresh copy of the test tree: its folder (`TREE/tree`) and its parent.
fn tree() -> (TempDir, PathBuf) {
    let top = TempDir::new("suite");
    let dir = top.path().join("tree");
    write_tree(&dir);
    (top, dir)
}

fn write_file(path: &Path, bytes: &[u8]) {
    std::fs::write(path, bytes).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

#[test]
fn folder_store_passes_the_suite() {
    let (_top, dir) = tree();
    let store = FolderStore::open(&dir).expect("open folder");
    let expect = Expected::tree(&dir, false);
    run_suite(
        "folder",
        &store,
        &expect,
        Some(&|b: &[u8]| write_file(&dir.join(REWRITTEN), b)),
    );
}

#[test]
fn store_opener_on_a_folder_passes_the_suite() {
    let (_top, dir) = tree();
    let store = open(&dir.display().to_string(), &StoreConfig::default()).expect("open");
    let expect = Expected::tree(&dir, false);
    run_suite(
        "open(folder)",
        &*store,
        &expect,
        Some(&|b: &[u8]| write_file(&dir.join(REWRITTEN), b)),
    );
}

#[test]
fn memory_store_passes_the_suite() {
    let (_top, dir) = tree();
    let expect = Expected::tree(&dir, false);
    let mut store = MemoryStore::new();
    for (key, bytes) in &expect.values {
        store.insert(key.clone(), bytes.clone());
    }
    passes("memory", &store, &expect);
    let before = version_now(&store, REWRITTEN);
    store.insert(REWRITTEN, rewritten_bytes());
    check_rewritten("memory", &store, REWRITTEN, &rewritten_bytes(), &before);
}

/// The test tree zipped by Python's `zipfile` into `out`: folder entries included, and
/// entries stored and deflated by turns.
fn zip_tree(dir: &Path, out: &Path) {
    let code = "import os, sys, zipfile\n\
                src, out = sys.argv[1], sys.argv[2]\n\
                n = 0\n\
                with zipfile.ZipFile(out, 'w') as z:\n\
                \x20   for root, dirs, files in os.walk(src):\n\
                \x20       dirs.sort()\n\
                \x20       if root != src:\n\
                \x20           z.write(root, os.path.relpath(root, src) + '/')\n\
                \x20       for name in sorted(files):\n\
                \x20           n += 1\n\
                \x20           how = zipfile.ZIP_DEFLATED if n % 2 else zipfile.ZIP_STORED\n\
                \x20           path = os.path.join(root, name)\n\
                \x20           z.write(path, os.path.relpath(path, src), compress_type=how)\n";
    run_python(Path::new("python3"), "zipfile", code, [dir, out]);
}

#[test]
fn zip_store_passes_the_suite() {
    let (top, dir) = tree();
    let archive = top.path().join("tree.zip");
    zip_tree(&dir, &archive);
    let store = open(&archive.display().to_string(), &StoreConfig::default()).expect("open zip");
    // An archive is opened at one version: it is not rewritten under the store.
    run_suite("zip", &*store, &Expected::tree(&dir, false), None);
}

#[test]
fn zip_store_over_http_passes_the_suite() {
    let (top, dir) = tree();
    zip_tree(&dir, &top.path().join("tree.zip"));
    let server = nginx(top.path(), false);
    let url = format!("{}/tree.zip", server.url());
    let store = open(&url, &StoreConfig::default()).expect("open zip over HTTP");
    run_suite("zip over HTTP", &*store, &Expected::tree(&dir, true), None);
}

/// A store option list.
fn options(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// s3s-fs 0.14.1 answers a suffix range longer than the object with 500 (it seeks that
/// far back from the end: EINVAL) where S3 and RFC 9110 give the whole object, and
/// `RemoteStore::read` falls back to a HEAD only for spans wholly past the end.
const S3S_FS_SUFFIX: Known = Known {
    parts: &[": read ", " Suffix(", "500 Internal Server Error"],
    why: "s3s-fs refuses suffix ranges longer than the object (500)",
};

/// A folder of buckets for s3s-fs holding bucket `suite` with the tree at `tree/`.
fn buckets(top: &Path) -> TempDir {
    let root = TempDir::new("suite-buckets");
    std::os::unix::fs::symlink(top, root.path().join("suite")).expect("bucket symlink");
    root
}

fn rewrite_on_disk(dir: &Path) -> impl Fn(&[u8]) + '_ {
    move |b: &[u8]| write_file(&dir.join(REWRITTEN), b)
}

/// The tree in bucket `suite` of s3s-fs (with `keys`, or anonymous), read at `url` with
/// the options `options` gives for the server.
fn s3s_fs_suite(
    name: &str,
    url: &str,
    keys: Option<(&str, &str)>,
    options: impl FnOnce(&Server) -> StoreConfig,
) {
    let (top, dir) = tree();
    let root = buckets(top.path());
    let server = s3s_fs(root.path(), keys);
    let store = open(url, &options(&server)).expect("open");
    let mut expect = Expected::tree(&dir, true);
    expect.known.push(S3S_FS_SUFFIX);
    run_suite(name, &*store, &expect, Some(&rewrite_on_disk(&dir)));
}

#[test]
fn s3_store_passes_the_suite() {
    const ACCESS: &str = "suiteACCESSKEY";
    const SECRET: &str = "suite-secret-key-5b1e";
    s3s_fs_suite("s3", "s3://suite/tree", Some((ACCESS, SECRET)), |server| {
        StoreConfig {
            options: options(&[
                ("endpoint", &server.url()),
                ("allow_http", "true"),
                ("region", "us-east-1"),
                ("aws_access_key_id", ACCESS),
                ("aws_secret_access_key", SECRET),
            ]),
            ..StoreConfig::default()
        }
    });
}

/// GCS through its XML API, which s3s-fs answers (as tests/it/remote.rs reads it).
#[test]
fn gcs_store_passes_the_suite() {
    s3s_fs_suite("gcs", "gs://suite/tree", None, |server| StoreConfig {
        anonymous: true,
        options: options(&[("google_base_url", &server.url()), ("allow_http", "true")]),
        ..StoreConfig::default()
    });
}

#[test]
fn azure_store_passes_the_suite() {
    let (_top, dir) = tree();
    let server = azurite();
    azurite_put(&server, "suite", &dir, "tree");
    let cfg = StoreConfig {
        options: options(&[("use_emulator", "true")]),
        ..StoreConfig::default()
    };
    let store = open("az://suite/tree", &cfg).expect("open az");
    let rewrite = |b: &[u8]| {
        let staged = TempDir::new("suite-azure-rewrite");
        let path = staged.path().join(REWRITTEN);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        write_file(&path, b);
        azurite_put(&server, "suite", staged.path(), "tree");
    };
    run_suite(
        "azure",
        &*store,
        &Expected::tree(&dir, true),
        Some(&rewrite),
    );
}

fn http_suite(name: &str, dav: bool) {
    let (top, dir) = tree();
    let server: Server = nginx(top.path(), dav);
    let store =
        open(&format!("{}/tree", server.url()), &StoreConfig::default()).expect("open http");
    let mut expect = Expected::tree(&dir, true);
    expect.lists = if dav { Lists::Undotted } else { Lists::Refused };
    run_suite(name, &*store, &expect, Some(&rewrite_on_disk(&dir)));
}

#[test]
fn http_store_with_webdav_listing_passes_the_suite() {
    http_suite("http (WebDAV)", true);
}

#[test]
fn http_store_without_listing_passes_the_suite() {
    http_suite("http (no listing)", false);
}

/// A remote store behind the disk cache (asking for versions on every head, as a mount
/// refreshing continuously would), cold and then warm.
#[test]
fn disk_cache_over_http_passes_the_suite() {
    let (top, dir) = tree();
    let server = nginx(top.path(), true);
    let cache = TempDir::new("suite-cache");
    let cfg = StoreConfig {
        disk_cache: Some((cache.path().to_path_buf(), 1 << 30)),
        revalidate: Some(std::time::Duration::ZERO),
        ..StoreConfig::default()
    };
    let url = format!("{}/tree", server.url());
    let mut expect = Expected::tree(&dir, true);
    expect.lists = Lists::Undotted;
    let cold = open(&url, &cfg).expect("open cached http");
    passes("disk cache (cold)", &*cold, &expect);
    let warm = open(&url, &cfg).expect("open cached http again");
    run_suite(
        "disk cache (warm)",
        &*warm,
        &expect,
        Some(&rewrite_on_disk(&dir)),
    );
}

/// A kerchunk reference set (version 1, a template and a `gen` entry) beside the tree,
/// pointing into it: inline text, base64, a range of a file by relative path, by absolute
/// path and by `file://` URL, a whole file, and generated ranges; with the bytes each key
/// must read, cut from the files as read with `std::fs`.
fn reference_set(top: &Path, dir: &Path) -> (PathBuf, BTreeMap<String, Vec<u8>>) {
    let file = |key: &str| std::fs::read(dir.join(key)).expect("read tree file");
    let blob = file("blob.bin");
    let deep = file("a/b/deep/x.bin");
    let chunk = file("a/c/1/0");
    let inline_doc = r#"{"zarr_format":3,"node_type":"group","attributes":{"k":"v"}}"#;
    let b64 = base64::engine::general_purpose::STANDARD;
    let abs = dir.join("a/c/1/0").display().to_string();
    let doc = serde_json::json!({
        "version": 1,
        "templates": {"blob": "tree/blob.bin"},
        "refs": {
            "zarr.json": inline_doc,
            "bin/b64": format!("base64:{}", b64.encode(&chunk[..100])),
            "bin/empty": "base64:",
            "r/rel": ["tree/a/b/deep/x.bin", 10, 200],
            "r/tmpl": ["{{blob}}", 4000, 1000],
            "r/abs": [abs, 1, 4095],
            "r/url": [format!("file://{abs}"), 0, 2048],
            "r/whole": ["tree/z/only"],
        },
        "gen": [{
            "key": "g/c/{{i}}",
            "url": "{{blob}}",
            "offset": "{{i * 1000}}",
            "length": "999",
            "dimensions": {"i": {"stop": 4}},
        }],
    });
    let path = top.join("refs.json");
    write_file(&path, doc.to_string().as_bytes());
    let mut values: BTreeMap<String, Vec<u8>> = BTreeMap::from([
        ("zarr.json".into(), inline_doc.as_bytes().to_vec()),
        ("bin/b64".into(), chunk[..100].to_vec()),
        ("bin/empty".into(), Vec::new()),
        ("r/rel".into(), deep[10..210].to_vec()),
        ("r/tmpl".into(), blob[4000..5000].to_vec()),
        ("r/abs".into(), chunk[1..4096].to_vec()),
        ("r/url".into(), chunk[..2048].to_vec()),
        ("r/whole".into(), file("z/only")),
    ]);
    for i in 0..4 {
        values.insert(format!("g/c/{i}"), blob[i * 1000..i * 1000 + 999].to_vec());
    }
    (path, values)
}

#[test]
fn reference_store_passes_the_suite() {
    let (top, dir) = tree();
    let (path, values) = reference_set(top.path(), &dir);
    let store = open(&path.display().to_string(), &StoreConfig::default()).expect("open refs");
    let expect = Expected {
        values,
        missing: ["nope", "r/nope", "g/c/4", "g/c", "zarr.json/x"]
            .map(String::from)
            .to_vec(),
        lists: Lists::Yes,
        tagged: true,
        version: None,
        remote: false,
        known: Vec::new(),
    };
    run_suite("references", &*store, &expect, None);
}

/// The Icechunk fixture repository (scripts/make_fixtures_icechunk.py).
fn icechunk_repo() -> PathBuf {
    let (dir, m) = manifest_at(
        "icechunk/manifest-icechunk.json",
        "make_fixtures_icechunk.py",
    );
    dir.join(m["repos"][0]["path"].as_str().expect("repo path"))
}

/// Keys an Icechunk repository of the fixture must not hold (checked with the icechunk
/// package too).
const ICECHUNK_MISSING: [&str; 5] = [
    "nope",
    "nope/zarr.json",
    "grp/nope/zarr.json",
    "temperature/c/99/0/0",
    "counts/c/2/2",
];

/// Every key and value of the repository at `repo` at branch or tag `name` (`kind`
/// `branch` or `tag`), and its snapshot, as the icechunk Python package reads them
/// through zarr's store API; `missing` are checked absent there.
fn icechunk_expected(repo: &Path, kind: &str, name: &str) -> Expected {
    let python = venv_python("ZARRFS_ICECHUNK_PYTHON", "venv-icechunk");
    let code = "import asyncio, base64, json, sys\n\
                import icechunk\n\
                from zarr.core.buffer import default_buffer_prototype\n\
                path, kind, name, missing = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]\n\
                repo = icechunk.Repository.open(icechunk.local_filesystem_storage(path))\n\
                session = repo.readonly_session(**{kind: name})\n\
                store = session.store\n\
                async def main():\n\
                \x20   keys = sorted([k async for k in store.list()])\n\
                \x20   values = {}\n\
                \x20   for k in keys:\n\
                \x20       got = await store.get(k, prototype=default_buffer_prototype())\n\
                \x20       values[k] = base64.b64encode(got.to_bytes()).decode()\n\
                \x20   present = []\n\
                \x20   for k in missing:\n\
                \x20       try:\n\
                \x20           there = await store.exists(k)\n\
                \x20       except icechunk.IcechunkError:\n\
                \x20           there = False  # a key zarr could not name\n\
                \x20       if there:\n\
                \x20           present.append(k)\n\
                \x20   return values, present\n\
                values, present = asyncio.run(main())\n\
                print(json.dumps({'snapshot': session.snapshot_id, 'values': values, 'present': present}))\n";
    let mut args: Vec<&std::ffi::OsStr> = vec![repo.as_os_str(), kind.as_ref(), name.as_ref()];
    args.extend(ICECHUNK_MISSING.iter().map(std::ffi::OsStr::new));
    let out = read_python(&python, "icechunk read-back", code, args);
    let doc = common::last_json(&out);
    let present = doc["present"].as_array().expect("present");
    assert!(present.is_empty(), "the fixture holds {present:?}");
    let b64 = base64::engine::general_purpose::STANDARD;
    let values: BTreeMap<String, Vec<u8>> = doc["values"]
        .as_object()
        .expect("values")
        .iter()
        .map(|(k, v)| {
            (
                k.clone(),
                b64.decode(v.as_str().expect("b64")).expect("base64"),
            )
        })
        .collect();
    assert!(values.len() > 20, "only {} keys read back", values.len());
    let snapshot = doc["snapshot"].as_str().expect("snapshot id");
    Expected {
        values,
        missing: ICECHUNK_MISSING.map(String::from).to_vec(),
        lists: Lists::Yes,
        tagged: true,
        version: Some(Version::Snapshot(snapshot.to_string())),
        remote: false,
        known: Vec::new(),
    }
}

#[test]
fn icechunk_store_passes_the_suite() {
    let repo = icechunk_repo();
    let main = icechunk_expected(&repo, "branch", "main");
    let store = open(&repo.display().to_string(), &StoreConfig::default()).expect("open repo");
    passes("icechunk main", &*store, &main);

    let v1 = icechunk_expected(&repo, "tag", "v1");
    assert_ne!(v1.version, main.version, "the fixture's v1 is main's tip");
    let cfg = StoreConfig {
        icechunk: VersionChoice {
            reference: Some("v1".into()),
            ..VersionChoice::default()
        },
        ..StoreConfig::default()
    };
    let at_v1 = open(&repo.display().to_string(), &cfg).expect("open repo at v1");
    passes("icechunk v1", &*at_v1, &v1);

    // The store of a copy follows its branch: once `main` is moved back to v1's snapshot
    // (by the icechunk package) and the store refreshed, it reads as v1 does.
    let tmp = TempDir::new("suite-icechunk");
    let copy = tmp.path().join("repo");
    common::copy_dir(&repo, &copy);
    let moving = open(&copy.display().to_string(), &StoreConfig::default()).expect("open copy");
    passes("icechunk copy", &*moving, &main);
    icechunk_reset_branch(&copy, "main", &snapshot_of(&v1));
    moving.refresh(None).expect("refresh");
    passes("icechunk copy moved to v1", &*moving, &v1);
}

/// The snapshot id an Icechunk expectation's version names.
fn snapshot_of(expect: &Expected) -> String {
    match &expect.version {
        Some(Version::Snapshot(id)) => id.clone(),
        other => panic!("no snapshot: {other:?}"),
    }
}
