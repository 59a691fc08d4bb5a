//! Kerchunk reference sets as stores, end to end: the sets kerchunk and VirtualiZarr wrote
//! for NetCDF-4 and HDF5 files (scripts/make_fixtures_refs.py: version 0 and 1, templates,
//! gzip, MultiZarrToZarr over a time series) through `zarrfs cat` in C and F order and
//! through a mount, against the source files read by netCDF4, h5py and xarray; hostile
//! reference sets, written here from a good one, each failing alone; and a set written
//! here whose arrays each have one bad chunk, which fails only reads of its own bytes.

use crate::common;

use std::os::unix::fs::FileExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use base64::Engine;
use common::mount::{pread_full, shown_by_promise, test_python, Mount};
use common::servers::{nginx, s3s_fs, Proxy};
use common::{assert_no_failures, manifest_at, sha256, try_cat, TempDir};
use serde_json::{json, Value};

/// The reference fixtures' folder and manifest.
fn refs() -> (PathBuf, Value) {
    manifest_at("refs/manifest-refs.json", "make_fixtures_refs.py")
}

/// The JSON and Parquet reference sets of the manifest (not the large one).
fn stores(m: &Value) -> Vec<&Value> {
    ["stores", "parquet"]
        .iter()
        .flat_map(|s| m[*s].as_array().expect("stores"))
        .collect()
}

#[test]
fn every_reference_set_reads_like_its_source_files_through_cat() {
    let (dir, m) = refs();
    let mut failures = Vec::new();
    let mut checked = 0;
    for store in stores(&m) {
        let file = dir.join(store["file"].as_str().expect("file"));
        for a in store["arrays"].as_array().expect("arrays") {
            let path = a["path"].as_str().expect("path");
            for (order, label) in [("C", "C_little"), ("F", "F_little")] {
                match try_cat(&file, path, &["--order", order]) {
                    Ok(bytes) if sha256(&bytes) == a["sha256"][label] => checked += 1,
                    Ok(bytes) => failures.push(format!(
                        "{}:{path} {order}: bytes differ ({} bytes, want {})",
                        store["name"],
                        bytes.len(),
                        a["nbytes"]
                    )),
                    Err(e) => failures.push(format!("{}:{path} {order}: {e}", store["name"])),
                }
            }
        }
    }
    assert_no_failures(&failures);
    assert!(checked >= 200, "only {checked} reads checked");
}

#[test]
fn reference_sets_mount_and_serve_every_array() {
    let (dir, m) = refs();
    let mut failures = Vec::new();
    for store in stores(&m) {
        let file = dir.join(store["file"].as_str().expect("file"));
        let mount = Mount::new(&file, &[]);
        let mount_f = Mount::new(&file, &["--order", "F"]);
        for a in store["arrays"].as_array().expect("arrays") {
            let path = a["path"].as_str().expect("path");
            for (mount, label) in [(&mount, "C_little"), (&mount_f, "F_little")] {
                match std::fs::read(mount.path(path)) {
                    Ok(bytes) if sha256(&bytes) == a["sha256"][label] => {}
                    Ok(_) => {
                        failures.push(format!("{}:{path} {label}: bytes differ", store["name"]))
                    }
                    Err(e) => failures.push(format!("{}:{path} {label}: {e}", store["name"])),
                }
            }
        }
        for g in store["groups"].as_array().into_iter().flatten() {
            let g = g.as_str().unwrap_or("");
            if !mount.path(g).is_dir() {
                failures.push(format!("{}:{g}: not a folder", store["name"]));
            }
        }
    }
    assert_no_failures(&failures);
}

/// A copy of reference set `name` in a new folder (its targets stay where they are:
/// outside the copy's folder unless allowed), with `edit` applied to its JSON.
fn edited_copy(name: &str, tmp: &Path, edit: impl FnOnce(&mut Value)) -> PathBuf {
    let (dir, m) = refs();
    let store = stores(&m)
        .into_iter()
        .find(|s| s["name"] == name)
        .expect("store in manifest");
    let text = std::fs::read_to_string(dir.join(store["file"].as_str().expect("file")))
        .expect("read reference set");
    let mut doc: Value = serde_json::from_str(&text).expect("JSON");
    edit(&mut doc);
    let out = tmp.join(format!("{name}.json"));
    std::fs::write(&out, doc.to_string()).expect("write");
    out
}

/// The data folder of the fixtures, which a copied set must be allowed to read.
fn data_dir() -> PathBuf {
    let (dir, _) = refs();
    dir.join("refs/data")
}

#[test]
fn targets_outside_the_allowed_prefixes_are_never_read() {
    let tmp = TempDir::new("refs-outside");
    // The copy lies in a folder of its own: its targets are outside it.
    let copy = edited_copy("single_nc", tmp.path(), |_| {});
    let err = try_cat(&copy, "count", &[]).expect_err("a target outside the set's folder");
    assert!(
        err.contains("outside the allowed prefixes") && err.contains("single.nc"),
        "{err}"
    );
    // Allowed explicitly, it reads.
    let data = data_dir();
    let allowed = try_cat(
        &copy,
        "count",
        &["--virtual-prefix", data.to_str().expect("path")],
    );
    assert!(allowed.is_ok(), "with --virtual-prefix: {allowed:?}");
}

#[test]
fn hostile_references_fail_alone_and_the_mount_stays_alive() {
    let tmp = TempDir::new("refs-hostile");
    let data = data_dir();
    // Outside the allowed folder: a file any reference could name.
    let secret_dir = tmp.path().join("secret");
    std::fs::create_dir(&secret_dir).expect("mkdir");
    let secret = secret_dir.join("secret.bin");
    std::fs::write(&secret, vec![7u8; 4096]).expect("write secret");
    // The allowed folder: the set, a copy of its source file, and a symlink leading out.
    let allowed = tmp.path().join("allowed");
    std::fs::create_dir(&allowed).expect("mkdir");
    std::fs::copy(data.join("single.nc"), allowed.join("single.nc")).expect("copy source");
    std::os::unix::fs::symlink(&secret, allowed.join("link.nc")).expect("symlink");
    let target = allowed.join("single.nc").to_string_lossy().to_string();
    let mut broken: Vec<(String, String)> = Vec::new();
    let copy = edited_copy("single_nc", &allowed, |doc| {
        let refs = doc["refs"].as_object_mut().expect("refs");
        for v in refs.values_mut() {
            if let Some(parts) = v.as_array_mut() {
                parts[0] = json!(target);
            }
        }
        let cases = [
            (
                json!([secret.to_string_lossy(), 0, 16]),
                "an absolute path outside",
            ),
            (
                json!([format!("{}/../secret/secret.bin", allowed.display()), 0, 16]),
                "../ out",
            ),
            (
                json!([allowed.join("link.nc").to_string_lossy(), 0, 16]),
                "a symlink out",
            ),
            (json!([target, 1u64 << 40, 16]), "past the target's end"),
            (json!([target, 0, (1u64 << 63) + 5]), "past 2^63"),
            (json!("base64:@@not base64@@"), "bad base64"),
            (
                json!([allowed.join("missing.nc").to_string_lossy(), 0, 16]),
                "a missing target",
            ),
        ];
        // One chunk of each of these arrays (single-chunk arrays: the file fails whole).
        let arrays: Vec<String> = refs
            .keys()
            .filter(|k| k.ends_with("/.zarray"))
            .map(|k| k.trim_end_matches("/.zarray").to_string())
            .filter(|a| {
                refs.keys()
                    .filter(|k| k.starts_with(&format!("{a}/")) && !k.contains("/."))
                    .count()
                    == 1
            })
            .collect();
        for ((value, why), array) in cases.into_iter().zip(arrays) {
            let key = refs
                .keys()
                .find(|k| k.starts_with(&format!("{array}/")) && !k.contains("/."))
                .cloned()
                .expect("a chunk key");
            refs.insert(key, value);
            broken.push((array, why.to_string()));
        }
    });
    assert_eq!(
        broken.len(),
        7,
        "not enough single-chunk arrays: {broken:?}"
    );
    let (_, m) = refs();
    let store = stores(&m)
        .into_iter()
        .find(|s| s["name"] == "single_nc")
        .expect("store");
    let mount = Mount::new(&copy, &[]);
    for (array, why) in &broken {
        let got = std::fs::read(mount.path(array));
        assert_eq!(
            got.as_ref().err().and_then(|e| e.raw_os_error()),
            Some(libc::EIO),
            "{array} ({why}): {:?}",
            got.map(|b| b.len())
        );
        let err = try_cat(&copy, array, &[]).expect_err(why);
        assert!(err.contains(array.as_str()), "{why}: {err}");
    }
    // Every other array reads as before, through the same mount.
    for a in store["arrays"].as_array().expect("arrays") {
        let path = a["path"].as_str().expect("path");
        if broken.iter().any(|(b, _)| b == path) {
            continue;
        }
        let bytes = std::fs::read(mount.path(path)).expect("an intact array reads");
        assert_eq!(sha256(&bytes), a["sha256"]["C_little"], "{path}");
    }
    let log = mount.log();
    for what in [
        "outside the allowed prefixes",
        "symlink",
        "past the end",
        "base64",
        "missing",
    ] {
        assert!(log.contains(what), "log has no {what:?}: {log}");
    }
    assert!(
        !log.contains(&"\u{7}".repeat(16)),
        "the secret's bytes in the log"
    );
}

/// A change made to a reference set's JSON.
type Edit = Box<dyn FnOnce(&mut Value)>;

#[test]
fn reference_sets_broken_as_a_whole_are_refused_with_a_clear_error() {
    let tmp = TempDir::new("refs-whole");
    let cases: Vec<(&str, Edit, &str)> = vec![
        (
            "gen_bomb",
            Box::new(|doc: &mut Value| {
                doc["gen"] = json!([{
                    "key": "bomb/{{i}}.{{j}}", "url": "x.nc", "offset": "0", "length": "1",
                    "dimensions": {"i": {"stop": 100000}, "j": {"stop": 100000}}
                }]);
            }),
            "gen",
        ),
        (
            "self_template",
            Box::new(|doc: &mut Value| {
                doc["templates"] = json!({"u": "{{u}}{{u}}"});
                for v in doc["refs"].as_object_mut().expect("refs").values_mut() {
                    if let Some(parts) = v.as_array_mut() {
                        parts[0] = json!("{{u}}");
                    }
                }
            }),
            "",
        ),
    ];
    for (name, edit, want) in cases {
        let folder = tmp.path().join(name);
        std::fs::create_dir(&folder).expect("mkdir");
        let copy = edited_copy("single_nc", &folder, edit);
        let result = try_cat(&copy, "count", &[]);
        let err = result.expect_err(name);
        assert!(err.contains(want), "{name}: {err}");
    }
    // Not JSON at all: no store.
    let bad = tmp.path().join("bad.json");
    std::fs::write(&bad, b"{\"version\": 1, \"refs\": {").expect("write");
    let err = try_cat(&bad, "count", &[]).expect_err("truncated JSON");
    assert!(err.contains("bad.json"), "{err}");
}

/// The file name at the end of a target path or URL.
fn file_name(target: &str) -> &str {
    target.rsplit('/').next().unwrap_or("")
}

/// Reference set `name` rewritten so that every target is `base` + the source file's
/// name (a template's value `base` + its last part), in a folder of its own; with its
/// manifest entry.
fn retargeted(name: &str, tmp: &Path, base: &str) -> (PathBuf, Value) {
    let (_, m) = refs();
    let store = stores(&m)
        .into_iter()
        .find(|s| s["name"] == name)
        .expect("store in manifest")
        .clone();
    let copy = edited_copy(name, tmp, |doc| {
        if let Some(templates) = doc.get_mut("templates").and_then(Value::as_object_mut) {
            for v in templates.values_mut() {
                *v = json!(format!("{base}{}", file_name(v.as_str().unwrap_or(""))));
            }
        }
        // Version 1 keeps its references under `refs`; version 0 is nothing else.
        let refs = if doc.get("version").is_some() {
            &mut doc["refs"]
        } else {
            doc
        };
        for v in refs.as_object_mut().expect("refs").values_mut() {
            if let Some(parts) = v.as_array_mut() {
                let target = parts[0].as_str().unwrap_or("");
                // `{{u}}NAME` follows its template.
                if !target.starts_with("{{") {
                    parts[0] = json!(format!("{base}{}", file_name(target)));
                }
            }
        }
    });
    (copy, store)
}

/// Every array of `store` through `cat` of `copy` with `args`, C and F order.
fn cat_all(copy: &Path, store: &Value, args: &[&str]) -> Vec<String> {
    let mut failures = Vec::new();
    for a in store["arrays"].as_array().expect("arrays") {
        let path = a["path"].as_str().expect("path");
        for (order, label) in [("C", "C_little"), ("F", "F_little")] {
            let mut all = vec!["--order", order];
            all.extend_from_slice(args);
            match try_cat(copy, path, &all) {
                Ok(bytes) if sha256(&bytes) == a["sha256"][label] => {}
                Ok(_) => failures.push(format!("{path} {order}: bytes differ")),
                Err(e) => failures.push(format!("{path} {order}: {e}")),
            }
        }
    }
    failures
}

/// Every array of `store` through a mount of `set` with `args`, C and F order; the reads
/// that matched (failures named after `name` go to `failures`).
fn mount_all(
    set: &Path,
    store: &Value,
    args: &[&str],
    name: &str,
    failures: &mut Vec<String>,
) -> usize {
    let mut checked = 0;
    for (order, label) in [("C", "C_little"), ("F", "F_little")] {
        let mut all = vec!["--order", order];
        all.extend_from_slice(args);
        let mount = Mount::new(set, &all);
        for a in store["arrays"].as_array().expect("arrays") {
            let path = a["path"].as_str().expect("path");
            match std::fs::read(mount.path(path)) {
                Ok(bytes) if sha256(&bytes) == a["sha256"][label] => checked += 1,
                Ok(_) => failures.push(format!("{name}:{path} {order}: bytes differ")),
                Err(e) => failures.push(format!("{name}:{path} {order}: {e}")),
            }
        }
    }
    checked
}

/// A folder of buckets for s3s-fs whose bucket `fixtures` is the fixture folder `dir`.
fn fixture_buckets(dir: &Path, label: &str) -> TempDir {
    let buckets = TempDir::new(label);
    std::os::unix::fs::symlink(dir, buckets.path().join("fixtures")).expect("symlink bucket");
    buckets
}

#[test]
fn targets_on_s3_and_a_web_server_read_through_their_remote_stores() {
    let (dir, _) = refs();
    // Buckets: `fixtures` is the fixture folder.
    let buckets = fixture_buckets(&dir, "refs-buckets");
    let s3 = s3s_fs(buckets.path(), None);
    let web = nginx(&dir, false);
    let tmp = TempDir::new("refs-remote");
    let mut failures = Vec::new();
    for (name, base, mut args) in [
        (
            "single_nc",
            "s3://fixtures/refs/data/".to_string(),
            vec![
                "--anonymous".to_string(),
                "-o".into(),
                format!("endpoint={},allow_http=true,region=us-east-1", s3.url()),
            ],
        ),
        ("single_h5", format!("{}/refs/data/", web.url()), Vec::new()),
    ] {
        let folder = tmp.path().join(name);
        std::fs::create_dir(&folder).expect("mkdir");
        let (copy, store) = retargeted(name, &folder, &base);
        let refused = cat_all(
            &copy,
            &store,
            &args.iter().map(String::as_str).collect::<Vec<_>>(),
        );
        assert!(
            !refused.is_empty()
                && refused
                    .iter()
                    .all(|f| f.contains("outside the allowed prefixes")),
            "{name} without --virtual-prefix: {refused:?}"
        );
        args.extend(["--virtual-prefix".to_string(), base.clone()]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        failures.extend(
            cat_all(&copy, &store, &args)
                .into_iter()
                .map(|f| format!("{name}: {f}")),
        );
    }
    assert_no_failures(&failures);
}

#[test]
fn reference_sets_on_s3_with_targets_on_s3_mount_in_c_and_f_order() {
    let (dir, m) = refs();
    // Two buckets: `fixtures` (the fixture folder, holding the targets) and `sets`
    // (reference sets naming their targets in `fixtures`).
    let buckets = fixture_buckets(&dir, "refs-s3-sets");
    let sets = buckets.path().join("sets");
    std::fs::create_dir(&sets).expect("mkdir");
    let s3 = s3s_fs(buckets.path(), None);
    let options = format!("endpoint={},allow_http=true,region=us-east-1", s3.url());
    let mut failures = Vec::new();
    let mut checked = 0;
    for store in stores(&m) {
        let name = store["name"].as_str().expect("name");
        if store["format"] != "json" {
            continue;
        }
        retargeted(name, &sets, "s3://fixtures/refs/data/");
        let url = format!("s3://sets/{name}.json");
        // The targets lie in another bucket: refused until allowed (arrays whose chunks
        // are all inline need no target and read anyway).
        let refused = store["arrays"]
            .as_array()
            .expect("arrays")
            .iter()
            .filter_map(|a| a["path"].as_str())
            .filter_map(|p| try_cat(Path::new(&url), p, &["--anonymous", "-o", &options]).err())
            .collect::<Vec<_>>();
        if refused.is_empty()
            || !refused
                .iter()
                .all(|e| e.contains("outside the allowed prefixes"))
        {
            failures.push(format!("{name}: without --virtual-prefix: {refused:?}"));
        }
        let args = [
            "--anonymous",
            "-o",
            &options,
            "--virtual-prefix",
            "s3://fixtures/refs/data/",
        ];
        checked += mount_all(Path::new(&url), store, &args, name, &mut failures);
    }
    assert_no_failures(&failures);
    assert!(checked >= 150, "only {checked} reads checked");
}

#[test]
fn a_parquet_set_on_s3_reads_through_cat_and_the_mount_with_neighbouring_chunks_in_one_request() {
    let (dir, m) = refs();
    // The fixture folder as bucket `fixtures`: the set at refs/combined_s3.parq names
    // its targets at s3://fixtures/refs/data/, under the set's own folder. Requests go
    // through a counting proxy.
    let buckets = fixture_buckets(&dir, "refs-s3-parquet");
    let s3 = s3s_fs(buckets.path(), None);
    let proxy = Proxy::start(s3.port, "python3");
    let options = format!("endpoint={},allow_http=true,region=us-east-1", proxy.url());
    let store = &m["remote_parquet"][0];
    let url = format!("s3://fixtures/{}", store["file"].as_str().expect("file"));
    let args = ["--anonymous", "-o", &options];
    // The same references as JSON, to count each array's chunks.
    let combined: Value = serde_json::from_slice(
        &std::fs::read(dir.join("refs/combined.json")).expect("combined.json"),
    )
    .expect("JSON");
    let mut failures = Vec::new();
    let (mut chunks, mut data_requests, mut coalesced_arrays) = (0, 0, 0);
    for a in store["arrays"].as_array().expect("arrays") {
        let path = a["path"].as_str().expect("path");
        for (order, label) in [("C", "C_little"), ("F", "F_little")] {
            let before = proxy.requests("GET");
            match try_cat(
                Path::new(&url),
                path,
                &["--order", order, args[0], args[1], args[2]],
            ) {
                Ok(bytes) if sha256(&bytes) == a["sha256"][label] => {}
                Ok(_) => failures.push(format!("cat {path} {order}: bytes differ")),
                Err(e) => failures.push(format!("cat {path} {order}: {e}")),
            }
            // Each `cat` also reads .zmetadata and the array's references file.
            let got = (proxy.requests("GET") - before).saturating_sub(2) as usize;
            let n = ranged_chunks(&combined, path);
            chunks += n;
            data_requests += got;
            if n >= 4 && got < n {
                coalesced_arrays += 1;
            }
        }
    }
    let checked = mount_all(Path::new(&url), store, &args, "combined_s3", &mut failures);
    assert_no_failures(&failures);
    assert!(checked >= 16, "only {checked} reads checked");
    // The chunks of one target in one references file come in one request.
    eprintln!("{data_requests} data requests for {chunks} chunks");
    assert!(
        coalesced_arrays > 0 && data_requests * 2 <= chunks,
        "{data_requests} data requests for {chunks} chunks ({coalesced_arrays} arrays read in fewer requests than chunks)"
    );
}

/// The peak resident memory (KiB) of the daemon serving `mountpoint`.
fn daemon_rss_kib(mountpoint: &Path) -> u64 {
    let mp = mountpoint.to_string_lossy().to_string();
    for entry in std::fs::read_dir("/proc").expect("/proc") {
        let dir = entry.expect("entry").path();
        let Ok(cmdline) = std::fs::read(dir.join("cmdline")) else {
            continue;
        };
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).to_string())
            .collect();
        if args.iter().any(|a| a == "mount") && args.contains(&mp) {
            let status = std::fs::read_to_string(dir.join("status")).expect("status");
            return status
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
                .expect("VmHWM");
        }
    }
    panic!("no daemon for {mp}");
}

#[test]
fn a_million_parquet_references_list_at_once_and_read_only_their_own_files() {
    let (dir, m) = refs();
    let store = &m["large"][0];
    let source = dir.join(store["file"].as_str().expect("file"));
    let data = std::fs::read(dir.join(store["source"][0].as_str().expect("source")))
        .expect("the data file");
    // A copy whose reference files the test may break; its targets stay in the
    // fixtures' data folder, allowed explicitly.
    let tmp = TempDir::new("refs-million");
    let copy = tmp.path().join("million.parq");
    common::copy_dir(&source, &copy);
    let data_dir = data_dir();
    let mount = Mount::new(
        &copy,
        &["--virtual-prefix", data_dir.to_str().expect("path")],
    );
    let t0 = std::time::Instant::now();
    let names: Vec<String> = std::fs::read_dir(&mount.mountpoint)
        .expect("list the root")
        .map(|e| e.expect("entry").file_name().to_string_lossy().to_string())
        .filter(|n| !n.starts_with('.'))
        .collect();
    eprintln!("root listing of 1,000,010 references: {:?}", t0.elapsed());
    assert_eq!(names.len(), 2, "{names:?}");
    let big = mount.path("big");
    assert_eq!(std::fs::metadata(&big).expect("stat big").len(), 1_000_000);
    let rss = daemon_rss_kib(&mount.mountpoint);
    eprintln!("daemon peak RSS before any data read: {} MiB", rss / 1024);
    assert!(rss < 200 * 1024, "daemon RSS {rss} KiB before any read");
    // `small`'s reference file broken: reading `big` never opens it.
    std::fs::write(copy.join("small/refs.0.parq"), b"not a parquet file").expect("break");
    let f = std::fs::File::open(&big).expect("open big");
    for (offset, len) in [(0usize, 1000usize), (499_000, 4096), (999_000, 1000)] {
        let got = common::mount::pread_full(&f, offset as u64, len).expect("read big");
        assert_eq!(got, &data[offset..offset + len], "big at {offset}+{len}");
    }
    let small = std::fs::read(mount.path("small"));
    assert_eq!(
        small.as_ref().err().and_then(|e| e.raw_os_error()),
        Some(libc::EIO),
        "small, whose references are broken: {:?}",
        small.map(|b| b.len())
    );
    assert!(mount.log().contains("small"), "log: {}", mount.log());
}

/// The chunks of array `path` that reference set `doc` keeps in target files.
fn ranged_chunks(doc: &Value, path: &str) -> usize {
    let refs = doc.get("refs").unwrap_or(doc);
    let prefix = format!("{path}/");
    refs.as_object()
        .expect("refs")
        .iter()
        .filter(|(k, v)| {
            k.strip_prefix(&prefix)
                .is_some_and(|rest| !rest.contains('/') && !rest.starts_with(".z"))
                && v.as_array().is_some_and(|parts| parts.len() == 3)
        })
        .count()
}

#[test]
fn every_json_set_reads_behind_a_web_server_with_neighbouring_chunks_in_one_request() {
    let (dir, m) = refs();
    let web = nginx(&dir, false);
    let access = web.dir().join("access.log");
    let requests = || {
        std::fs::read_to_string(&access)
            .unwrap_or_default()
            .lines()
            .count()
    };
    let tmp = TempDir::new("refs-web");
    let base = format!("{}/refs/data/", web.url());
    let mut failures = Vec::new();
    let (mut chunks, mut fetched, mut coalesced_arrays) = (0, 0, 0);
    for store in stores(&m) {
        let name = store["name"].as_str().expect("name");
        if store["format"] != "json" {
            continue;
        }
        let folder = tmp.path().join(name);
        std::fs::create_dir(&folder).expect("mkdir");
        let (copy, store) = retargeted(name, &folder, &base);
        let doc: Value =
            serde_json::from_slice(&std::fs::read(&copy).expect("read copy")).expect("JSON");
        for a in store["arrays"].as_array().expect("arrays") {
            let path = a["path"].as_str().expect("path");
            for (order, label) in [("C", "C_little"), ("F", "F_little")] {
                let before = requests();
                match try_cat(&copy, path, &["--order", order, "--virtual-prefix", &base]) {
                    Ok(bytes) if sha256(&bytes) == a["sha256"][label] => {}
                    Ok(_) => failures.push(format!("{name}:{path} {order}: bytes differ")),
                    Err(e) => failures.push(format!("{name}:{path} {order}: {e}")),
                }
                let (n, got) = (ranged_chunks(&doc, path), requests() - before);
                chunks += n;
                fetched += got;
                if n >= 4 && got < n {
                    coalesced_arrays += 1;
                }
            }
        }
    }
    assert_no_failures(&failures);
    // The fixtures' chunks lie back to back in their files: neighbours come in one request.
    assert!(
        coalesced_arrays > 0 && fetched * 2 <= chunks,
        "{fetched} requests for {chunks} chunks ({coalesced_arrays} arrays read in fewer requests than chunks)"
    );
}

/// Where a reference set rewritten while mounted lives.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Origin {
    /// A local JSON file.
    LocalJson,
    /// A JSON file on a web server (nginx).
    WebJson,
    /// A local Parquet folder.
    LocalParquet,
    /// A Parquet folder in a bucket of s3s-fs.
    S3Parquet,
}

impl Origin {
    fn parquet(self) -> bool {
        matches!(self, Origin::LocalParquet | Origin::S3Parquet)
    }
}

/// kerchunk's Parquet form of the JSON reference set `json`, written to `out` by
/// kerchunk.df.refs_to_dataframe.
fn to_parquet(json: &Path, out: &Path) {
    let python = common::venv_python("ZARRFS_REFS_PYTHON", "venv-refs");
    let code = "import json, sys, kerchunk.df\n\
                kerchunk.df.refs_to_dataframe(json.load(open(sys.argv[1])), sys.argv[2])";
    common::run_python(&python, "refs_to_dataframe", code, [json, out]);
}

/// Put the set at `from` (a file, or a folder) at `to` as a writer republishing it does:
/// each file written beside its place and renamed into it; in a folder, `.zmetadata`
/// last (as kerchunk writes it).
fn put(from: &Path, to: &Path) {
    let mut files = Vec::new();
    let mut todo = vec![from.to_path_buf()];
    while let Some(p) = todo.pop() {
        if p.is_dir() {
            for e in std::fs::read_dir(&p).expect("read_dir") {
                todo.push(e.expect("entry").path());
            }
        } else {
            files.push(p);
        }
    }
    files.sort_by_key(|f| f.ends_with(".zmetadata"));
    for file in files {
        let rel = file.strip_prefix(from).expect("under");
        let dest = if rel.as_os_str().is_empty() {
            to.to_path_buf()
        } else {
            to.join(rel)
        };
        let parent = dest.parent().expect("parent");
        std::fs::create_dir_all(parent).expect("mkdir");
        let staged = parent.join(".staged");
        std::fs::copy(&file, &staged).expect("copy");
        std::fs::rename(&staged, &dest).expect("rename into place");
    }
}

/// A reference set replaced by the next one of its time series while mounted with
/// `--refresh 1s`: each array whose bytes differ shows the second set's within twice the
/// interval of the rewrite, and a file opened before reads the first set's.
fn a_rewritten_set_is_followed(origin: Origin) {
    let (dir, m) = refs();
    let tmp = TempDir::new("refs-live");
    let by_name = |name: &str| {
        stores(&m)
            .into_iter()
            .find(|s| s["name"] == name)
            .expect("store in manifest")
    };
    let (first, second) = (by_name("series_0"), by_name("series_1"));
    let sha = |store: &Value, path: &str| -> Value {
        store["arrays"]
            .as_array()
            .expect("arrays")
            .iter()
            .find(|a| a["path"] == path)
            .map_or(Value::Null, |a| a["sha256"]["C_little"].clone())
    };
    // Arrays whose bytes differ between the two files of the series.
    let differ: Vec<String> = first["arrays"]
        .as_array()
        .expect("arrays")
        .iter()
        .map(|a| a["path"].as_str().expect("path").to_string())
        .filter(|p| sha(first, p) != sha(second, p) && !sha(second, p).is_null())
        .collect();
    assert!(differ.len() >= 2, "the series' files differ in {differ:?}");
    // The two sets as the origin holds them: kerchunk's JSON, or its Parquet form.
    let set = |store: &Value, k: usize| -> PathBuf {
        let json = dir.join(store["file"].as_str().expect("file"));
        if !origin.parquet() {
            return json;
        }
        let out = tmp.path().join(format!("series_{k}.parq"));
        to_parquet(&json, &out);
        out
    };
    let (first_set, second_set) = (set(first, 0), set(second, 1));
    let served = tmp.path().join("served");
    std::fs::create_dir(&served).expect("mkdir");
    let live = served.join(if origin.parquet() {
        "live.parq"
    } else {
        "live.json"
    });
    put(&first_set, &live);
    let web = (origin == Origin::WebJson).then(|| nginx(&served, false));
    let buckets = TempDir::new("refs-live-buckets");
    std::os::unix::fs::symlink(&served, buckets.path().join("sets")).expect("bucket");
    let s3 = (origin == Origin::S3Parquet).then(|| s3s_fs(buckets.path(), None));
    let data = data_dir();
    let mut args = vec![
        "--refresh".to_string(),
        "1s".into(),
        "--virtual-prefix".into(),
        data.to_string_lossy().into_owned(),
        "--log-level".into(),
        "info".into(),
    ];
    let store = match (&web, &s3) {
        (Some(web), _) => format!("{}/live.json", web.url()),
        (_, Some(s3)) => {
            args.extend([
                "--anonymous".to_string(),
                "-o".into(),
                format!("endpoint={},allow_http=true,region=us-east-1", s3.url()),
            ]);
            "s3://sets/live.parq".to_string()
        }
        _ => live.to_string_lossy().into_owned(),
    };
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mount = Mount::new(Path::new(&store), &args);
    let read = |p: &str| sha256(&std::fs::read(mount.path(p)).expect("read"));
    assert_eq!(read(&differ[0]), sha(first, &differ[0]));
    // Opened before the set is rewritten, read after. A Parquet set is read lazily, a
    // references file at a time: the reading keeps the files it has read (docs/stores.md),
    // so the file is read a little first.
    let mut held = std::fs::File::open(mount.path(&differ[1])).expect("open");
    if origin.parquet() {
        std::io::Read::read_exact(&mut held, &mut [0u8; 1]).expect("read a byte");
    }
    if origin == Origin::WebJson {
        // nginx's ETag is made of the modification time in seconds and the size.
        std::thread::sleep(Duration::from_millis(1100));
    }
    put(&second_set, &live);
    let rewritten = std::time::Instant::now();
    // Each array shows the second set within twice the interval of the rewrite (not
    // every array as soon as one does: each is read again on its own).
    let failures: Vec<String> = differ
        .iter()
        .filter_map(|p| {
            shown_by_promise(rewritten, Duration::from_secs(1), || {
                let got = read(p);
                (got == sha(second, p))
                    .then_some(())
                    .ok_or_else(|| format!("{p}: {got}, not the second set's bytes"))
            })
            .err()
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{origin:?}: {failures:?}; log:\n{}",
        mount.log()
    );
    // The whole file, through the descriptor opened before.
    let size = held.metadata().expect("fstat").len() as usize;
    let bytes = pread_full(&held, 0, size).expect("read held");
    assert_eq!(
        sha256(&bytes),
        sha(first, &differ[1]),
        "{origin:?}: a file opened before the rewrite"
    );
    assert!(mount.log().contains("read again"), "{}", mount.log());
}

/// Element `i` of the int32 array salted `salt` of [`bad_chunk_set`], little-endian.
fn element(salt: u32, i: u64) -> [u8; 4] {
    ((i as u32).wrapping_mul(2_654_435_761) ^ salt).to_le_bytes()
}

/// The first `n` elements of the array salted `salt`.
fn elements(salt: u32, n: u64) -> Vec<u8> {
    (0..n).flat_map(|i| element(salt, i)).collect()
}

/// One array of the set [`bad_chunk_set`] writes: two chunks of `chunk` int32 elements
/// (stored raw, no compressor), the second one unreadable as `bad` says (`None`: readable).
struct TwoChunks {
    name: &'static str,
    salt: u32,
    chunk: u64,
    bad: Option<Value>,
}

/// A kerchunk reference set at `dir/set.json` with `arrays`, each chunk's bytes inline in
/// base64 unless it is bad.
fn bad_chunk_set(dir: &Path, arrays: &[TwoChunks]) -> PathBuf {
    let mut refs = serde_json::Map::new();
    refs.insert(
        ".zgroup".into(),
        json!(json!({"zarr_format": 2}).to_string()),
    );
    for a in arrays {
        let zarray = json!({
            "zarr_format": 2, "shape": [2 * a.chunk], "chunks": [a.chunk], "dtype": "<i4",
            "compressor": null, "filters": null, "fill_value": 0, "order": "C"
        });
        refs.insert(format!("{}/.zarray", a.name), json!(zarray.to_string()));
        let all = elements(a.salt, 2 * a.chunk);
        let (first, second) = all.split_at(all.len() / 2);
        let inline = |b: &[u8]| {
            json!(format!(
                "base64:{}",
                base64::engine::general_purpose::STANDARD.encode(b)
            ))
        };
        refs.insert(format!("{}/0", a.name), inline(first));
        let second = a.bad.clone().unwrap_or_else(|| inline(second));
        refs.insert(format!("{}/1", a.name), second);
    }
    let path = dir.join("set.json");
    let doc = json!({"version": 1, "refs": refs});
    std::fs::write(&path, doc.to_string()).expect("write the reference set");
    path
}

/// pread from `offset` on in requests of `len` bytes until one fails or the file ends:
/// the bytes read, and the offset and error of the request that failed.
fn read_until_error(
    file: &std::fs::File,
    offset: u64,
    len: usize,
) -> (Vec<u8>, Option<(u64, std::io::Error)>) {
    let mut got = Vec::new();
    let mut buf = vec![0u8; len];
    loop {
        let at = offset + got.len() as u64;
        match file.read_at(&mut buf, at) {
            Ok(0) => return (got, None),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) => return (got, Some((at, e))),
        }
    }
}

/// Bytes `[from, to)` of `file` read through `mmap` (by Python), or how it died.
fn mmap_read(file: &Path, from: u64, to: u64) -> Result<Vec<u8>, std::process::ExitStatus> {
    let script = format!(
        "import mmap, os, sys\n\
         fd = os.open({file:?}, os.O_RDONLY)\n\
         m = mmap.mmap(fd, 0, prot=mmap.PROT_READ)\n\
         sys.stdout.buffer.write(m[{from}:{to}])\n",
        file = file.to_string_lossy()
    );
    let out = Command::new(test_python())
        .args(["-c", &script])
        .output()
        .expect("run python");
    if out.status.success() {
        Ok(out.stdout)
    } else {
        Err(out.status)
    }
}

#[test]
fn a_bad_chunk_fails_only_reads_of_its_own_bytes_in_every_io_mode() {
    let tmp = TempDir::new("refs-bad-chunk");
    let set_dir = tmp.path().join("set");
    std::fs::create_dir(&set_dir).expect("mkdir");
    // Outside the set's folder: a target the set may not read.
    let outside = tmp.path().join("outside.bin");
    std::fs::write(&outside, vec![0u8; 4 << 20]).expect("write");
    let arrays = [
        // A first chunk of 4000 bytes: the page that holds its end holds bad bytes too.
        TwoChunks {
            name: "small",
            salt: 0x5eed,
            chunk: 1000,
            bad: Some(json!("base64:@@not base64@@")),
        },
        // A first chunk of 1.2 MB, longer than a request and not a whole number of
        // pages: kernel readahead windows span both chunks.
        TwoChunks {
            name: "large",
            salt: 0xbad,
            chunk: 300_000,
            bad: Some(json!([outside.to_string_lossy(), 0, 1_200_000])),
        },
        TwoChunks {
            name: "good",
            salt: 0x600d,
            chunk: 1000,
            bad: None,
        },
    ];
    let set = bad_chunk_set(&set_dir, &arrays);
    let mount = Mount::new(&set, &[]);
    let page = 4096u64;
    for a in arrays.iter().filter(|a| a.bad.is_some()) {
        let path = mount.path(a.name);
        let good = 4 * a.chunk;
        let size = 2 * good;
        let want = elements(a.salt, a.chunk);
        let what = |s: &str| format!("{} ({}): {s}", a.name, mount.log());
        // An open made before the failure is known (through the page cache, unless the
        // mount or its io decision is direct).
        let before = std::fs::File::open(&path).expect("open");
        let eio = |r: std::io::Result<usize>| r.map_err(|e| e.raw_os_error());
        let mut buf = vec![0u8; 16];
        let failed = eio(std::fs::File::open(&path)
            .expect("open")
            .read_at(&mut buf, good));
        assert_eq!(failed, Err(Some(libc::EIO)), "{}", what("the bad chunk"));
        // New opens: every good byte reads exactly, whatever the reads span, up to the
        // first bad byte, where the next read fails with EIO.
        let spans = [
            (0, page as usize),
            (0, 1 << 20),
            (0, (size + page) as usize),
            (good - 100, 200),
            (good - 4, page as usize),
            (good / page * page, page as usize),
            ((good / page * page).saturating_sub(page), 3 * page as usize),
            (good.saturating_sub(3 << 20), 1 << 20),
            (1, 4095),
        ];
        for (offset, len) in spans {
            let file = std::fs::File::open(&path).expect("open");
            let (got, failed) = read_until_error(&file, offset, len);
            let span = format!("{len} bytes a request from {offset}");
            assert!(
                got == want[offset as usize..],
                "{}",
                what(&format!(
                    "{span}: {} bytes read, {} good ones from there, first difference at {:?}",
                    got.len(),
                    good - offset,
                    got.iter()
                        .zip(&want[offset as usize..])
                        .position(|(x, y)| x != y)
                ))
            );
            let (at, error) = failed.unwrap_or_else(|| panic!("{}", what(&span)));
            assert_eq!(
                (at, error.raw_os_error()),
                (good, Some(libc::EIO)),
                "{span}"
            );
        }
        // The bad chunk's own bytes fail, wherever a read of them starts.
        let file = std::fs::File::open(&path).expect("open");
        for (offset, len) in [(good, 1), (good + 1, page), (size - 4, 4), (size - 8, page)] {
            let mut buf = vec![0u8; len as usize];
            let got = eio(file.read_at(&mut buf, offset));
            assert_eq!(got, Err(Some(libc::EIO)), "{len} bytes at {offset}");
        }
        // The file keeps its size: no read was taken for its end.
        assert_eq!(file.metadata().expect("fstat").len(), size, "{}", a.name);
        // mmap: every page before the one the bad chunk starts in reads, and touching a
        // bad byte is SIGBUS, never a zero.
        let whole_pages = good / page * page;
        let mapped = mmap_read(&path, 0, whole_pages);
        assert!(
            mapped.as_deref() == Ok(&want[..whole_pages as usize]),
            "{}",
            what("mmap of the good pages")
        );
        let touched = mmap_read(&path, good, good + 1);
        assert_eq!(
            touched.map_err(|s| s.signal()),
            Err(Some(libc::SIGBUS)),
            "{}",
            what("mmap of a bad byte")
        );
        // The open made before: every page wholly before the bad chunk reads, through
        // the page cache too (which reads a failed readahead's pages one by one).
        let (got, _) = read_until_error(&before, 0, 64 << 10);
        assert!(
            got.len() as u64 >= whole_pages && got == want[..got.len()],
            "{}",
            what(&format!(
                "the open made before the failure read {} bytes",
                got.len()
            ))
        );
    }
    // The daemon keeps serving the other file, and logged each bad chunk's key.
    let good = &arrays[2];
    let bytes = std::fs::read(mount.path(good.name)).expect("the good array reads");
    assert!(bytes == elements(good.salt, 2 * good.chunk), "good");
    let log = mount.log();
    for key in ["small/1", "large/1"] {
        assert!(log.contains(key), "the log names {key}: {log}");
    }
}

#[test]
fn a_reference_file_rewritten_while_mounted_is_followed_and_files_opened_before_read_on() {
    a_rewritten_set_is_followed(Origin::LocalJson);
}

#[test]
fn a_reference_file_on_a_web_server_rewritten_while_mounted_is_followed() {
    a_rewritten_set_is_followed(Origin::WebJson);
}

#[test]
fn a_parquet_reference_folder_rewritten_while_mounted_is_followed() {
    a_rewritten_set_is_followed(Origin::LocalParquet);
}

#[test]
fn a_parquet_reference_folder_on_s3_rewritten_while_mounted_is_followed() {
    a_rewritten_set_is_followed(Origin::S3Parquet);
}
