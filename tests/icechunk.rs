//! Icechunk repositories as stores, end to end: the repository the icechunk Python package
//! wrote through zarr-python 3 (scripts/make_fixtures_icechunk.py: three commits on
//! `main`, a branch `dev`, a tag `v1`) at every branch, tag and snapshot, through
//! `zarrfs cat --ref/--snapshot` and through the `--versions` folders of a mount, in C and
//! F order, against zarr-python's read-back through an icechunk session at each version;
//! and repositories broken here from a good one, each failing alone.

mod common;

use std::path::{Path, PathBuf};

use common::mount::Mount;
use common::servers::s3s_fs;
use common::{assert_no_failures, sha256, try_cat, TempDir};
use serde_json::Value;

/// The fixture folder and the Icechunk manifest.
fn fixtures() -> (PathBuf, Value) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/fixtures");
    let manifest = dir.join("icechunk/manifest-icechunk.json");
    let text = std::fs::read_to_string(&manifest).unwrap_or_else(|e| {
        panic!(
            "{}: {e}: run scripts/test.sh (scripts/make_fixtures_icechunk.py)",
            manifest.display()
        )
    });
    (dir, serde_json::from_str(&text).expect("manifest JSON"))
}

fn versions(repo: &Value) -> &Vec<Value> {
    repo["versions"].as_array().expect("versions")
}

/// The `cat` arguments choosing `version`.
fn choose(version: &Value) -> Vec<String> {
    let name = version["name"].as_str().expect("name").to_string();
    match version["kind"].as_str() {
        Some("snapshot") => vec!["--snapshot".into(), name],
        _ => vec!["--ref".into(), name],
    }
}

/// The folder of `version` under a `--versions` mount.
fn folder(version: &Value) -> String {
    let kind = match version["kind"].as_str() {
        Some("branch") => "@branches",
        Some("tag") => "@tags",
        _ => "@snapshots",
    };
    format!("{kind}/{}", version["name"].as_str().expect("name"))
}

const ORDERS: [(&str, &str); 2] = [("C", "C_little"), ("F", "F_little")];

#[test]
fn every_array_at_every_version_reads_like_zarr_python_through_cat() {
    let (dir, m) = fixtures();
    let mut failures = Vec::new();
    let mut checked = 0;
    for repo in m["repos"].as_array().expect("repos") {
        let path = dir.join(repo["path"].as_str().expect("path"));
        for version in versions(repo) {
            let chosen = choose(version);
            for a in version["arrays"].as_array().expect("arrays") {
                let array = a["path"].as_str().expect("path");
                for (order, label) in ORDERS {
                    let mut args: Vec<&str> = chosen.iter().map(String::as_str).collect();
                    args.extend(["--order", order]);
                    match try_cat(&path, array, &args) {
                        Ok(bytes) if sha256(&bytes) == a["sha256"][label] => checked += 1,
                        Ok(_) => failures.push(format!("{chosen:?} {array} {order}: bytes differ")),
                        Err(e) => failures.push(format!("{chosen:?} {array} {order}: {e}")),
                    }
                }
            }
        }
    }
    assert_no_failures(&failures);
    assert!(checked >= 60, "only {checked} reads checked");
}

#[test]
fn the_default_version_is_main_and_a_deleted_array_is_gone_from_it() {
    let (dir, m) = fixtures();
    let repo = &m["repos"][0];
    let path = dir.join(repo["path"].as_str().expect("path"));
    let main = versions(repo)
        .iter()
        .find(|v| v["kind"] == "branch" && v["name"] == "main")
        .expect("main");
    let paths: Vec<&str> = main["arrays"]
        .as_array()
        .expect("arrays")
        .iter()
        .filter_map(|a| a["path"].as_str())
        .collect();
    assert!(!paths.contains(&"doomed"), "{paths:?}");
    let err = try_cat(&path, "doomed", &[]).expect_err("doomed was deleted on main");
    assert!(err.contains("doomed"), "{err}");
    // It is still there at the tag that predates the deletion.
    let v1 = versions(repo)
        .iter()
        .find(|v| v["kind"] == "tag" && v["name"] == "v1")
        .expect("v1");
    let doomed = v1["arrays"]
        .as_array()
        .expect("arrays")
        .iter()
        .find(|a| a["path"] == "doomed")
        .expect("doomed at v1");
    let bytes = try_cat(&path, "doomed", &["--ref", "v1"]).expect("doomed at v1");
    assert_eq!(sha256(&bytes), doomed["sha256"]["C_little"]);
    // A reference that names nothing is refused with the names there are.
    let err = try_cat(&path, "counts", &["--ref", "nope"]).expect_err("no such ref");
    assert!(
        err.contains("nope") && err.contains("dev") && err.contains("v1"),
        "{err}"
    );
}

/// Every array of every version through `--versions` folders of a mount of `store`.
fn check_versions_mount(store: &Path, args: &[&str], m: &Value) -> Vec<String> {
    let mut failures = Vec::new();
    let repo = &m["repos"][0];
    for (order, label) in ORDERS {
        let mut all = vec!["--versions", "--order", order];
        all.extend_from_slice(args);
        let mount = Mount::new(store, &all);
        let snapshots: std::collections::BTreeSet<String> = versions(repo)
            .iter()
            .filter(|v| v["kind"] == "snapshot")
            .map(|v| v["name"].as_str().expect("name").to_string())
            .collect();
        let listed: std::collections::BTreeSet<String> =
            std::fs::read_dir(mount.path("@snapshots"))
                .map(|d| {
                    // Hidden files are the folder's sidecars.
                    d.filter_map(|e| e.ok())
                        .map(|e| e.file_name().to_string_lossy().to_string())
                        .filter(|n| !n.starts_with('.'))
                        .collect()
                })
                .unwrap_or_default();
        if listed != snapshots {
            failures.push(format!("@snapshots lists {listed:?}, not {snapshots:?}"));
        }
        for version in versions(repo) {
            let at = folder(version);
            for a in version["arrays"].as_array().expect("arrays") {
                let array = a["path"].as_str().expect("path");
                match std::fs::read(mount.path(&format!("{at}/{array}"))) {
                    Ok(bytes) if sha256(&bytes) == a["sha256"][label] => {}
                    Ok(_) => failures.push(format!("{at}/{array} {order}: bytes differ")),
                    Err(e) => failures.push(format!("{at}/{array} {order}: {e}")),
                }
            }
            if version["kind"] == "branch" && version["name"] == "main" {
                // The default tree is main's.
                for a in version["arrays"].as_array().expect("arrays") {
                    let array = a["path"].as_str().expect("path");
                    match std::fs::read(mount.path(array)) {
                        Ok(bytes) if sha256(&bytes) == a["sha256"][label] => {}
                        _ => failures.push(format!("{array} {order} at the root: not main's")),
                    }
                }
            }
        }
    }
    failures
}

#[test]
fn versions_mount_as_folders_beside_the_default_tree() {
    let (dir, m) = fixtures();
    let store = dir.join(m["repos"][0]["path"].as_str().expect("path"));
    assert_no_failures(&check_versions_mount(&store, &[], &m));
}

#[test]
fn a_repository_on_s3_reads_at_every_version() {
    let (dir, m) = fixtures();
    let buckets = TempDir::new("icechunk-buckets");
    std::os::unix::fs::symlink(dir.join("icechunk"), buckets.path().join("ice"))
        .expect("symlink bucket");
    let s3 = s3s_fs(buckets.path(), None);
    let options = format!("endpoint={},allow_http=true,region=us-east-1", s3.url());
    let url = "s3://ice/repo";
    let args = ["--anonymous", "-o", &options];
    let mut failures = check_versions_mount(Path::new(url), &args, &m);
    // And through cat, at a branch, a tag and a snapshot.
    for version in versions(&m["repos"][0]) {
        let chosen = choose(version);
        for a in version["arrays"].as_array().expect("arrays") {
            let array = a["path"].as_str().expect("path");
            let mut all: Vec<&str> = chosen.iter().map(String::as_str).collect();
            all.extend_from_slice(&args);
            match try_cat(Path::new(url), array, &all) {
                Ok(bytes) if sha256(&bytes) == a["sha256"]["C_little"] => {}
                Ok(_) => failures.push(format!("{chosen:?} {array}: bytes differ")),
                Err(e) => failures.push(format!("{chosen:?} {array}: {e}")),
            }
        }
    }
    assert_no_failures(&failures);
}
