//! End-to-end tests of the `zarrfs` binary: `cat` of every fixture array in every
//! layout compared with the manifest's sha256, `inspect` compared with the manifest's
//! tree, and the error behaviour on damaged copies of fixture stores.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use common::{assert_no_failures, sha256, CliRun, Manifest, TempDir, LAYOUTS};
use serde_json::Value;

/// Fixture arrays written with codecs zarrfs does not implement (see docs/stores.md and
/// `tests/it/library.rs`): `cat` of each must fail alone with an "unsupported" error.
const UNSUPPORTED: [(&str, &str); 2] = [
    ("v3", "codecs/numcodecs_jenkins_lookup3"),
    ("v2_zarr2", "categorize_object"),
];

/// Runs of the binary at the same time in the `cat` sweep.
const WORKERS: usize = 3;

/// Runs `zarrfs ARGS...` and collects its exit status and output.
fn zarrfs<S: AsRef<OsStr>>(args: &[S]) -> CliRun {
    CliRun::run(Command::new(common::zarrfs()).args(args))
}

/// `zarrfs cat` of `store`/`path` with `--order` and `--endian` as given.
fn cat(store: &Path, path: &str, order: &str, endian: &str) -> CliRun {
    zarrfs(&[
        OsStr::new("cat"),
        store.as_os_str(),
        OsStr::new(path),
        OsStr::new("--order"),
        OsStr::new(order),
        OsStr::new("--endian"),
        OsStr::new(endian),
    ])
}

/// `zarrfs inspect STORE [PATH] --json`, parsed; panics unless it succeeds with a list.
fn inspect_json(store: &Path, path: Option<&str>) -> Vec<Value> {
    let mut args = vec![OsStr::new("inspect"), store.as_os_str()];
    if let Some(p) = path {
        args.push(OsStr::new(p));
    }
    args.push(OsStr::new("--json"));
    let run = zarrfs(&args);
    assert!(run.success(), "inspect {} failed: {run}", store.display());
    let doc: Value = serde_json::from_slice(&run.stdout)
        .unwrap_or_else(|e| panic!("inspect {} --json: not JSON ({e}): {run}", store.display()));
    doc.as_array()
        .unwrap_or_else(|| panic!("inspect {} --json: not a list: {doc}", store.display()))
        .clone()
}

/// The nodes of an `inspect --json` list by path; panics on a node without a path or a
/// path listed twice.
fn by_path(nodes: &[Value]) -> BTreeMap<String, Value> {
    let mut map = BTreeMap::new();
    for node in nodes {
        let path = node["path"]
            .as_str()
            .unwrap_or_else(|| panic!("node without a path: {node}"))
            .to_string();
        assert!(
            map.insert(path.clone(), node.clone()).is_none(),
            "{path} listed twice"
        );
    }
    map
}

/// The `inspect` path of a manifest path: "" is "/".
fn node_path(path: &str) -> String {
    format!("/{path}")
}

/// The parent path and name of an `inspect` path ("/a/b" → ("/a", "b"); "/a" → ("/", "a")).
fn split_path(path: &str) -> Option<(String, String)> {
    if path == "/" {
        return None;
    }
    let (parent, name) = path.rsplit_once('/')?;
    let parent = if parent.is_empty() { "/" } else { parent };
    Some((parent.to_string(), name.to_string()))
}

fn inspect_kind(manifest_kind: &str) -> &str {
    match manifest_kind {
        "implicit_group" => "implicit group",
        other => other,
    }
}

fn manifest_entry<'a>(m: &'a Manifest, store: &str, path: &str) -> &'a Value {
    m.arrays()
        .iter()
        .find(|a| a["store"] == store && a["path"] == path)
        .unwrap_or_else(|| panic!("{store}:{path} not in the manifest"))
}

/// Fails unless `cat` of the fixture array `store`/`path` (C order, little-endian) from
/// `folder` matches the manifest byte for byte.
fn assert_cat_matches(m: &Manifest, folder: &Path, store: &str, path: &str) {
    let entry = manifest_entry(m, store, path);
    let run = cat(folder, path, "C", "little");
    assert!(run.success(), "cat {store}:{path} failed: {run}");
    assert_eq!(
        sha256(&run.stdout),
        entry["sha256"]["C_little"].as_str().unwrap_or_default(),
        "cat {store}:{path}: bytes differ ({} bytes)",
        run.stdout.len()
    );
}

/// Why `run` did not fail cleanly, if it did not: a clean failure is exit status 1
/// (not a signal, nor a panic's 101) and a `zarrfs: ` message on stderr that contains
/// every one of `needles`.
fn unclean_failure(run: &CliRun, what: &str, needles: &[&str]) -> Option<String> {
    if run.code() != Some(1) {
        return Some(format!("{what}: expected exit status 1: {run}"));
    }
    if !run.stderr.starts_with("zarrfs: ") {
        return Some(format!(
            "{what}: stderr should start with `zarrfs: `: {run}"
        ));
    }
    let missing: Vec<&&str> = needles
        .iter()
        .filter(|n| !run.stderr.contains(**n))
        .collect();
    (!missing.is_empty()).then(|| format!("{what}: stderr should mention {missing:?}: {run}"))
}

fn assert_clean_failure(run: &CliRun, what: &str, needles: &[&str]) {
    if let Some(e) = unclean_failure(run, what, needles) {
        panic!("{e}");
    }
}

// ---------------------------------------------------------------------------------
// cat: every array, every layout
// ---------------------------------------------------------------------------------

/// One run of `cat` and what it must produce.
struct CatJob<'a> {
    entry: &'a Value,
    label: &'static str,
    order: &'static str,
    endian: &'static str,
    /// The fixture uses a codec zarrfs does not implement: `cat` must fail with
    /// "unsupported".
    unsupported: bool,
}

impl CatJob<'_> {
    fn id(&self) -> String {
        format!(
            "{}:{} {} ({})",
            self.entry["store"].as_str().unwrap_or_default(),
            self.entry["path"].as_str().unwrap_or_default(),
            self.label,
            self.entry["note"].as_str().unwrap_or_default()
        )
    }

    fn check(&self, m: &Manifest) -> Result<(), String> {
        let store = self.entry["store"].as_str().unwrap_or_default();
        let path = self.entry["path"].as_str().unwrap_or_default();
        let run = cat(&m.store_dir(store), path, self.order, self.endian);
        if self.unsupported {
            return if !run.success() && run.stderr.contains("unsupported") {
                Ok(())
            } else {
                Err(format!("expected an \"unsupported\" failure: {run}"))
            };
        }
        if !run.success() {
            return Err(format!("failed: {run}"));
        }
        let vlen = self.entry["vlen"].as_bool() == Some(true);
        if !vlen {
            let nbytes = self.entry["nbytes"].as_u64().unwrap_or(u64::MAX);
            if run.stdout.len() as u64 != nbytes {
                return Err(format!(
                    "wrote {} bytes, expected {nbytes}",
                    run.stdout.len()
                ));
            }
        }
        let expected = self.entry["sha256"][self.label].as_str().unwrap_or("?");
        let got = sha256(&run.stdout);
        if got != expected {
            return Err(format!(
                "sha256 {got}, expected {expected} ({} bytes)",
                run.stdout.len()
            ));
        }
        Ok(())
    }
}

#[test]
fn cat_every_fixture_array_in_every_layout() {
    let m = Manifest::load();
    let arrays = m.arrays();
    assert!(
        arrays.len() > 100,
        "too few fixture arrays: {}",
        arrays.len()
    );
    let mut jobs = Vec::new();
    for entry in arrays {
        let id = (
            entry["store"].as_str().unwrap_or_default(),
            entry["path"].as_str().unwrap_or_default(),
        );
        if UNSUPPORTED.contains(&id) {
            jobs.push(CatJob {
                entry,
                label: "unsupported",
                order: "C",
                endian: "little",
                unsupported: true,
            });
        } else if entry["vlen"].as_bool() == Some(true) {
            for (label, order) in [("C", "C"), ("F", "F")] {
                jobs.push(CatJob {
                    entry,
                    label,
                    order,
                    endian: "little",
                    unsupported: false,
                });
            }
        } else {
            for (label, f_order, big_endian) in LAYOUTS {
                jobs.push(CatJob {
                    entry,
                    label,
                    order: if f_order { "F" } else { "C" },
                    endian: if big_endian { "big" } else { "little" },
                    unsupported: false,
                });
            }
        }
    }
    let next = AtomicUsize::new(0);
    let failures = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..WORKERS {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(job) = jobs.get(i) else { break };
                if let Err(e) = job.check(&m) {
                    failures
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(format!("{}: {e}", job.id()));
                }
            });
        }
    });
    let mut failures = failures.into_inner().unwrap_or_else(|p| p.into_inner());
    failures.sort();
    assert!(
        failures.is_empty(),
        "{} of {} cat runs ({} arrays) failed:\n{}",
        failures.len(),
        jobs.len(),
        arrays.len(),
        failures.join("\n")
    );
}

// ---------------------------------------------------------------------------------
// inspect
// ---------------------------------------------------------------------------------

/// The `chunks` and `inner_chunks` inspect should show for manifest array `a`: the
/// chunk grid (the shard shape when sharded) and the inner chunk shape when it differs.
/// A draft sharding transformer's metadata gives the inner chunk shape and the
/// chunks per shard.
fn expected_chunks(a: &Value) -> (Value, Option<Value>) {
    if let Some(per_shard) = a.get("chunks_per_shard").and_then(Value::as_array) {
        let inner = a["chunks"].as_array().cloned().unwrap_or_default();
        let shard: Vec<Value> = inner
            .iter()
            .zip(per_shard)
            .map(|(c, n)| (c.as_u64().unwrap_or(0) * n.as_u64().unwrap_or(0)).into())
            .collect();
        let inner = (inner != shard).then_some(Value::Array(inner));
        return (Value::Array(shard), inner);
    }
    let inner = a
        .get("inner_chunks")
        .filter(|i| **i != a["chunks"])
        .cloned();
    (a["chunks"].clone(), inner)
}

/// Differences between the `inspect --json` nodes of store `store` and the manifest.
fn inspect_differences(m: &Manifest, store: &str, nodes: &BTreeMap<String, Value>) -> Vec<String> {
    let mut errors = Vec::new();
    let mut expected_paths = BTreeSet::new();
    for g in m.groups().iter().filter(|g| g["store"] == store) {
        let path = node_path(g["path"].as_str().unwrap_or_default());
        expected_paths.insert(path.clone());
        let kind = inspect_kind(g["kind"].as_str().unwrap_or_default());
        let Some(node) = nodes.get(&path) else {
            errors.push(format!("group {path} missing"));
            continue;
        };
        if node["kind"] != kind {
            errors.push(format!("{path}: kind {}, expected {kind:?}", node["kind"]));
        }
        if let Some(e) = node.get("error") {
            errors.push(format!("{path}: error {e}"));
        }
        let expected: BTreeSet<(String, String)> = g["children"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .map(|c| {
                let name = c["name"].as_str().unwrap_or_default().to_string();
                (
                    name,
                    inspect_kind(c["kind"].as_str().unwrap_or_default()).to_string(),
                )
            })
            .collect();
        let listed: BTreeSet<(String, String)> = nodes
            .iter()
            .filter_map(|(p, n)| {
                let (parent, name) = split_path(p)?;
                (parent == path).then(|| (name, n["kind"].as_str().unwrap_or("?").to_string()))
            })
            .collect();
        if listed != expected {
            errors.push(format!(
                "{path}: children {:?}, expected {:?} (missing {:?}, extra {:?})",
                listed.len(),
                expected.len(),
                expected.difference(&listed).collect::<Vec<_>>(),
                listed.difference(&expected).collect::<Vec<_>>()
            ));
        }
    }
    for a in m.arrays().iter().filter(|a| a["store"] == store) {
        let manifest_path = a["path"].as_str().unwrap_or_default();
        let path = node_path(manifest_path);
        expected_paths.insert(path.clone());
        let Some(node) = nodes.get(&path) else {
            errors.push(format!("array {path} missing"));
            continue;
        };
        if node["kind"] != "array" {
            errors.push(format!("{path}: kind {}, expected \"array\"", node["kind"]));
        }
        if let Some(e) = node.get("error") {
            // A fixture zarrfs cannot read may be listed with just its error.
            if !(UNSUPPORTED.contains(&(store, manifest_path))
                && e.as_str().is_some_and(|e| e.contains("unsupported")))
            {
                errors.push(format!("{path}: error {e}"));
            }
            continue;
        }
        if node["shape"] != a["shape"] {
            errors.push(format!(
                "{path}: shape {}, expected {}",
                node["shape"], a["shape"]
            ));
        }
        if node["dtype"] != a["dtype"] {
            errors.push(format!(
                "{path}: dtype {}, expected {}",
                node["dtype"], a["dtype"]
            ));
        }
        if node["data_type"] != a["zarr_dtype"] {
            errors.push(format!(
                "{path}: data_type {}, expected {}",
                node["data_type"], a["zarr_dtype"]
            ));
        }
        let (chunks, inner) = expected_chunks(a);
        if node["chunks"] != chunks {
            errors.push(format!(
                "{path}: chunks {}, expected {chunks}",
                node["chunks"]
            ));
        }
        let codecs = node["codecs"].as_array();
        // The read unit is the whole shard when a bytes-to-bytes codec follows sharding.
        let shard_is_compressed = codecs
            .and_then(|c| c.last())
            .is_some_and(|c| c["name"] != "sharding_indexed")
            && a.get("inner_chunks").is_some();
        match (node.get("inner_chunks"), &inner) {
            (Some(got), Some(want)) if got == want => {}
            (None, Some(_)) if shard_is_compressed => {}
            (None, None) => {}
            (got, want) => errors.push(format!("{path}: inner_chunks {got:?}, expected {want:?}")),
        }
        if codecs.is_none() {
            errors.push(format!(
                "{path}: codecs {}, expected a list",
                node["codecs"]
            ));
        }
        if !node["attributes"].is_object() {
            errors.push(format!(
                "{path}: attributes {}, expected an object",
                node["attributes"]
            ));
        }
    }
    for extra in nodes.keys().filter(|p| !expected_paths.contains(*p)) {
        errors.push(format!("{extra}: listed but not in the manifest"));
    }
    errors
}

#[test]
fn inspect_json_matches_the_manifest() {
    let m = Manifest::load();
    let stores = m.doc["stores"].as_array().expect("stores");
    assert!(!stores.is_empty(), "no stores in the manifest");
    let mut errors = Vec::new();
    let mut checked = 0;
    for s in stores {
        let name = s["name"].as_str().expect("store name");
        let nodes = by_path(&inspect_json(&m.store_dir(name), None));
        checked += nodes.len();
        errors.extend(
            inspect_differences(&m, name, &nodes)
                .into_iter()
                .map(|e| format!("{name}: {e}")),
        );
    }
    let expected = m.arrays().len() + m.groups().len();
    assert!(
        errors.is_empty(),
        "{} differences:\n{}",
        errors.len(),
        errors.join("\n")
    );
    assert_eq!(
        checked, expected,
        "nodes listed vs arrays + groups in the manifest"
    );
}

#[test]
fn inspect_json_of_a_subtree() {
    let m = Manifest::load();
    let nodes = by_path(&inspect_json(&m.store_dir("v3"), Some("grp")));
    let mut expected = BTreeSet::new();
    for g in m.groups().iter().filter(|g| g["store"] == "v3") {
        expected.insert(node_path(g["path"].as_str().unwrap_or_default()));
    }
    for a in m.arrays().iter().filter(|a| a["store"] == "v3") {
        expected.insert(node_path(a["path"].as_str().unwrap_or_default()));
    }
    expected.retain(|p| p == "/grp" || p.starts_with("/grp/"));
    assert!(expected.len() > 3, "fixture v3:grp changed: {expected:?}");
    assert_eq!(
        nodes.keys().cloned().collect::<BTreeSet<_>>(),
        expected,
        "inspect v3 grp"
    );
    // An array path lists just that array.
    let nodes = inspect_json(&m.store_dir("v3"), Some("dtypes/float32"));
    assert_eq!(nodes.len(), 1, "inspect v3 dtypes/float32: {nodes:?}");
    assert_eq!(nodes[0]["path"], "/dtypes/float32");
    assert_eq!(nodes[0]["kind"], "array");
    assert_eq!(nodes[0]["dtype"], "<f4");
}

#[test]
fn inspect_text_mentions_every_array() {
    let m = Manifest::load();
    for store in ["v3", "v2", "draft"] {
        let run = zarrfs(&[OsStr::new("inspect"), m.store_dir(store).as_os_str()]);
        assert!(run.success(), "inspect {store} failed: {run}");
        let text = String::from_utf8(run.stdout.clone()).expect("inspect output is UTF-8");
        let first_words: BTreeSet<&str> = text
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .collect();
        let missing: Vec<String> = m
            .arrays()
            .iter()
            .filter(|a| a["store"] == store)
            .map(|a| node_path(a["path"].as_str().unwrap_or_default()))
            .filter(|p| !first_words.contains(p.as_str()))
            .collect();
        assert!(
            missing.is_empty(),
            "inspect {store} (text) does not list {missing:?}:\n{text}"
        );
    }
}

// ---------------------------------------------------------------------------------
// errors
// ---------------------------------------------------------------------------------

/// A copy of fixture store `store` in a fresh temporary folder.
fn copy_store(m: &Manifest, store: &str) -> (TempDir, PathBuf) {
    let tmp = TempDir::new(store);
    let dst = tmp.path().join(store);
    common::copy_dir(&m.store_dir(store), &dst);
    (tmp, dst)
}

fn read_json(path: &Path) -> Value {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parse {}: {e}", path.display()))
}

fn write_json(path: &Path, doc: &Value) {
    let text = serde_json::to_string_pretty(doc).expect("serialize");
    std::fs::write(path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

#[test]
fn truncated_zstd_chunk_fails_alone_naming_its_key() {
    let m = Manifest::load();
    let (_tmp, store) = copy_store(&m, "v3");
    let chunk = store.join("codecs/zstd_3/c/1/0");
    let bytes = std::fs::read(&chunk).expect("read chunk");
    assert!(bytes.len() > 16, "chunk too small: {}", bytes.len());
    std::fs::write(&chunk, &bytes[..bytes.len() / 2]).expect("truncate chunk");

    for (order, endian) in [("C", "little"), ("F", "big")] {
        let run = cat(&store, "codecs/zstd_3", order, endian);
        assert_clean_failure(
            &run,
            "cat of a truncated zstd chunk",
            &["codecs/zstd_3/c/1/0"],
        );
    }
    assert_cat_matches(&m, &store, "v3", "codecs/zstd_checksum");
    assert_cat_matches(&m, &store, "v3", "codecs/gzip_1");
}

#[test]
fn overwritten_gzip_chunk_fails_alone_naming_its_key() {
    let m = Manifest::load();
    let (_tmp, store) = copy_store(&m, "v2");
    let chunk = store.join("compressors/gzip/1.0");
    let mut bytes = std::fs::read(&chunk).expect("read chunk");
    assert!(bytes.len() > 64, "chunk too small: {}", bytes.len());
    // Past the 10-byte header, before the 8-byte trailer (CRC-32 and length).
    let mid = bytes.len() / 2;
    for b in &mut bytes[mid - 8..mid + 8] {
        *b ^= 0xa5;
    }
    std::fs::write(&chunk, &bytes).expect("write chunk");

    let run = cat(&store, "compressors/gzip", "C", "little");
    assert_clean_failure(
        &run,
        "cat of a damaged gzip chunk",
        &["compressors/gzip/1.0"],
    );
    assert_cat_matches(&m, &store, "v2", "compressors/zstd");
    assert_cat_matches(&m, &store, "v2", "compressors/zlib");
}

#[test]
fn unknown_codec_fails_that_array_only() {
    let m = Manifest::load();
    let original = inspect_json(&m.store_dir("v3"), None);
    let (_tmp, store) = copy_store(&m, "v3");
    let meta_path = store.join("codecs/gzip_1/zarr.json");
    let mut meta = read_json(&meta_path);
    let codecs = meta["codecs"].as_array_mut().expect("codecs");
    let gzip = codecs
        .iter_mut()
        .find(|c| c["name"] == "gzip")
        .expect("a gzip codec in v3 codecs/gzip_1");
    gzip["name"] = "no.such.codec".into();
    write_json(&meta_path, &meta);

    let run = cat(&store, "codecs/gzip_1", "C", "little");
    assert_clean_failure(
        &run,
        "cat of an array with an unknown codec",
        &["unsupported", "codecs/gzip_1", "no.such.codec"],
    );
    assert_cat_matches(&m, &store, "v3", "codecs/gzip_9");

    // inspect still lists everything; only that node carries an error.
    let damaged = by_path(&inspect_json(&store, None));
    let original = by_path(&original);
    assert_eq!(
        damaged.keys().collect::<Vec<_>>(),
        original.keys().collect::<Vec<_>>(),
        "inspect lists different nodes"
    );
    for (path, before) in &original {
        if path != "/codecs/gzip_1" {
            assert_eq!(&damaged[path], before, "inspect of {path} changed");
        }
    }
    let node = &damaged["/codecs/gzip_1"];
    assert_eq!(node["kind"], "array", "{node}");
    let error = node
        .get("error")
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("inspect shows no error on /codecs/gzip_1: {node}"));
    assert!(error.contains("unsupported"), "error {error:?}");
}

#[test]
fn unknown_v2_compressor_fails_that_array_only() {
    let m = Manifest::load();
    let (_tmp, store) = copy_store(&m, "v2");
    let meta_path = store.join("compressors/zstd/.zarray");
    let mut meta = read_json(&meta_path);
    assert!(meta["compressor"].is_object(), "{meta}");
    meta["compressor"]["id"] = "no.such.codec".into();
    write_json(&meta_path, &meta);

    let run = cat(&store, "compressors/zstd", "C", "little");
    assert_clean_failure(
        &run,
        "cat of an array with an unknown compressor",
        &["unsupported", "compressors/zstd"],
    );
    assert_cat_matches(&m, &store, "v2", "compressors/gzip");

    let nodes = by_path(&inspect_json(&store, None));
    let errors: Vec<&String> = nodes
        .iter()
        .filter(|(p, n)| *p != "/compressors/zstd" && n.get("error").is_some())
        .map(|(p, _)| p)
        .collect();
    assert!(errors.is_empty(), "other nodes with errors: {errors:?}");
    let node = &nodes["/compressors/zstd"];
    assert_eq!(node["kind"], "array", "{node}");
    let error = node
        .get("error")
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("inspect shows no error on /compressors/zstd: {node}"));
    assert!(error.contains("unsupported"), "error {error:?}");
}

#[test]
fn cat_of_a_group_or_a_missing_path_fails() {
    let m = Manifest::load();
    let v3 = m.store_dir("v3");
    for group in ["grp", "implicit", ""] {
        let run = cat(&v3, group, "C", "little");
        assert_clean_failure(&run, &format!("cat of group {group:?}"), &[]);
        assert!(run.stdout.is_empty(), "cat of group {group:?} wrote output");
    }
    for (store, path) in [
        ("v3", "no/such/array"),
        ("v3", "dtypes/no_such_array"),
        ("v2", "dtypes/no_such_array"),
        ("draft", "dtypes/no_such_array"),
    ] {
        let run = cat(&m.store_dir(store), path, "C", "little");
        assert_clean_failure(
            &run,
            &format!("cat of missing {store}:{path}"),
            &["not found"],
        );
    }
    // An array name used as a group.
    let run = cat(&v3, "dtypes/float32/x", "C", "little");
    assert_clean_failure(&run, "cat below an array", &[]);
}

#[test]
fn a_folder_that_is_not_zarr_fails() {
    let tmp = TempDir::new("not-zarr");
    let dir = tmp.path().join("plain");
    std::fs::create_dir_all(dir.join("sub")).expect("mkdir");
    std::fs::write(dir.join("readme.txt"), "not a zarr store\n").expect("write");
    std::fs::write(dir.join("sub/data.bin"), [0u8; 64]).expect("write");
    for path in ["", "sub", "sub/data.bin"] {
        let run = cat(&dir, path, "C", "little");
        assert_clean_failure(&run, &format!("cat of plain folder path {path:?}"), &[]);
    }
    let run = zarrfs(&[OsStr::new("inspect"), dir.as_os_str()]);
    assert_clean_failure(&run, "inspect of a plain folder", &[]);
    let missing = tmp.path().join("does-not-exist");
    let run = cat(&missing, "a", "C", "little");
    assert_clean_failure(&run, "cat of a store that does not exist", &[]);
    let run = zarrfs(&[OsStr::new("inspect"), missing.as_os_str()]);
    assert_clean_failure(&run, "inspect of a store that does not exist", &[]);
}

#[test]
fn bad_arguments_fail() {
    let m = Manifest::load();
    let v3 = m.store_dir("v3");
    let run = cat(&v3, "dtypes/float32", "x", "little");
    assert!(!run.success(), "--order x accepted: {run}");
    let run = cat(&v3, "dtypes/float32", "C", "middle");
    assert!(!run.success(), "--endian middle accepted: {run}");
}

/// Runs `zarrfs ARGS...` with its address space limited, so an attempt to allocate
/// memory the metadata asks for fails (or aborts) quickly instead of swapping.
fn zarrfs_limited<S: AsRef<OsStr>>(args: &[S]) -> CliRun {
    use std::os::unix::process::CommandExt;
    let mut command = Command::new(common::zarrfs());
    command.args(args);
    // SAFETY: setrlimit is async-signal-safe and touches no memory of the parent.
    unsafe {
        command.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: 4 << 30,
                rlim_max: 4 << 30,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    CliRun::run(&mut command)
}

#[test]
fn enormous_chunks_fail_cleanly() {
    let m = Manifest::load();
    let (_tmp_v2, v2) = copy_store(&m, "v2");
    let (_tmp_v3, v3) = copy_store(&m, "v3");

    // v2: 20 × 30 int32 (zstd) with 2e9 × 2e9 chunks; the stored 0.0 chunk is far too small.
    let meta_path = v2.join("compressors/zstd/.zarray");
    let mut meta = read_json(&meta_path);
    meta["chunks"] = serde_json::json!([2_000_000_000u64, 2_000_000_000u64]);
    write_json(&meta_path, &meta);
    // v2, uncompressed, three dimensions whose chunk element count overflows u64.
    let meta_path = v2.join("shapes/d3/.zarray");
    let mut meta = read_json(&meta_path);
    meta["chunks"] = serde_json::json!([1u64 << 40, 1u64 << 40, 1u64 << 40]);
    write_json(&meta_path, &meta);
    // v2, F order: 4 × (2^62 + 3) elements wraps around u64 to the 12 of the stored
    // (4 × 3) chunks, so only a checked element count notices the shape is absurd.
    let meta_path = v2.join("order/F_2d/.zarray");
    let mut meta = read_json(&meta_path);
    assert_eq!(
        meta["chunks"],
        serde_json::json!([3, 4]),
        "fixture v2:order/F_2d changed"
    );
    meta["chunks"] = serde_json::json!([4u64, (1u64 << 62) + 3]);
    write_json(&meta_path, &meta);
    // v3: chunk shapes whose element count overflows u64, and one that is merely huge.
    let meta_path = v3.join("codecs/zstd_3/zarr.json");
    let mut meta = read_json(&meta_path);
    meta["chunk_grid"]["configuration"]["chunk_shape"] =
        serde_json::json!([u64::MAX / 2, u64::MAX / 2]);
    write_json(&meta_path, &meta);
    let meta_path = v3.join("codecs/gzip_1/zarr.json");
    let mut meta = read_json(&meta_path);
    meta["chunk_grid"]["configuration"]["chunk_shape"] =
        serde_json::json!([1u64 << 24, 1u64 << 24]);
    write_json(&meta_path, &meta);
    // v3 sharding: an enormous shard shape.
    let sharded = m
        .arrays()
        .iter()
        .find(|a| a["store"] == "v3" && a.get("inner_chunks").is_some())
        .expect("a sharded v3 fixture");
    let sharded_path = sharded["path"].as_str().expect("path");
    let meta_path = v3.join(sharded_path).join("zarr.json");
    let mut meta = read_json(&meta_path);
    let ndim = meta["shape"].as_array().expect("shape").len();
    meta["chunk_grid"]["configuration"]["chunk_shape"] = serde_json::json!(vec![1u64 << 40; ndim]);
    write_json(&meta_path, &meta);

    let cases = [
        (&v2, "compressors/zstd"),
        (&v2, "shapes/d3"),
        (&v2, "order/F_2d"),
        (&v3, "codecs/zstd_3"),
        (&v3, "codecs/gzip_1"),
        (&v3, sharded_path),
    ];
    let mut failures = Vec::new();
    for (store, path) in cases {
        for order in ["C", "F"] {
            let run = zarrfs_limited(&[
                OsStr::new("cat"),
                store.as_os_str(),
                OsStr::new(path),
                OsStr::new("--order"),
                OsStr::new(order),
            ]);
            let what = format!("cat {path} --order {order} with enormous chunks");
            failures.extend(unclean_failure(&run, &what, &[]));
        }
        // inspect may describe or reject the node, but must not crash.
        let run = zarrfs_limited(&[
            OsStr::new("inspect"),
            store.as_os_str(),
            OsStr::new(path),
            OsStr::new("--json"),
        ]);
        if !matches!(run.code(), Some(0 | 1)) {
            failures.push(format!("inspect {path} with enormous chunks: {run}"));
        }
    }
    assert_no_failures(&failures);
    // The rest of the stores still read.
    assert_cat_matches(&m, &v2, "v2", "compressors/gzip");
    assert_cat_matches(&m, &v3, "v3", "codecs/gzip_9");
}

/// `--ref` with `--snapshot` is refused as the command line is parsed (clap's usage error,
/// exit status 2), in every command that takes a store and in mount(8)'s `-o` form,
/// before the store is opened: the store named here does not exist, and a refusal from
/// opening it would name it.
#[test]
fn ref_with_snapshot_is_refused_when_the_arguments_are_parsed() {
    let tmp = TempDir::new("ref-snapshot");
    let store = tmp.path().join("no-such-repository");
    let mountpoint = tmp.path().join("mnt");
    std::fs::create_dir(&mountpoint).expect("make the mountpoint");
    let (s, m) = (store.to_string_lossy(), mountpoint.to_string_lossy());
    let snapshot = "ABCDEFGHJKMNPQRSTVWX";
    let forms: Vec<Vec<&str>> = vec![
        vec!["mount", "--ref", "main", "--snapshot", snapshot, &s, &m],
        vec![&s, &m, "-o", "ref=main,snapshot=ABCDEFGHJKMNPQRSTVWX"],
        vec![
            &s,
            &m,
            "-o",
            "ref=main",
            "-o",
            "snapshot=ABCDEFGHJKMNPQRSTVWX",
        ],
        vec!["cat", "--ref", "main", "--snapshot", snapshot, &s, "a"],
        vec!["inspect", "--snapshot", snapshot, "--ref", "v1", &s],
        vec!["ls", "--ref", "main", "--snapshot", snapshot, &s],
    ];
    for args in forms {
        let run = zarrfs(&args);
        assert_eq!(run.code(), Some(2), "{args:?}: a usage error: {run}");
        assert!(
            run.stderr.contains("--ref") && run.stderr.contains("cannot be used with"),
            "{args:?}: stderr should say --ref cannot be used with --snapshot: {run}"
        );
        assert!(
            !run.stderr.contains("no-such-repository"),
            "{args:?}: refused before the store is opened: {run}"
        );
    }
    assert!(!common::mount::mounted(&mountpoint), "nothing is mounted");
}
