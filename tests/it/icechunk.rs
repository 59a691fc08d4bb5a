//! Icechunk repositories as stores, end to end: the repository the icechunk Python package
//! wrote through zarr-python 3 (scripts/make_fixtures_icechunk.py: three commits on
//! `main`, a branch `dev`, a tag `v1`) at every branch, tag and snapshot, through
//! `zarrfs cat --ref/--snapshot` and through the `--versions` folders of a mount, in C and
//! F order, against zarr-python's read-back through an icechunk session at each version;
//! and repositories broken here from a good one, each failing alone.

use crate::common;

use std::path::{Path, PathBuf};

use common::mount::{shown_by_promise, Mount};
use common::servers::{azurite, azurite_put, nginx, s3s_fs, Proxy, Server};
use common::{
    assert_no_failures, icechunk_reset_branch, manifest_at, sha256, try_cat, xattr, TempDir,
};
use serde_json::Value;

/// The fixture folder and the Icechunk manifest.
fn fixtures() -> (PathBuf, Value) {
    manifest_at(
        "icechunk/manifest-icechunk.json",
        "make_fixtures_icechunk.py",
    )
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
    let main = version(&m, "branch", "main");
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
    let doomed = array(version(&m, "tag", "v1"), "doomed");
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
            // Each folder says which snapshot it shows.
            let shown = xattr(&mount.path(&at), "user.zarrfs.snapshot");
            if shown.as_deref() != version["snapshot"].as_str() {
                failures.push(format!("{at}: user.zarrfs.snapshot {shown:?}"));
            }
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

/// Every array of `version` through `cat` and a mount of `store` with `args`, in C and
/// F order, against its expected bytes: the failures.
fn check_cat_and_mount(store: &Path, args: &[&str], version: &Value) -> Vec<String> {
    let mut failures = Vec::new();
    for (order, label) in ORDERS {
        let mut with_order = args.to_vec();
        with_order.extend(["--order", order]);
        let mount = Mount::new(store, &with_order);
        for a in version["arrays"].as_array().expect("arrays") {
            let array = a["path"].as_str().expect("path");
            let by_cat = try_cat(store, array, &with_order);
            let by_mount = std::fs::read(mount.path(array)).map_err(|e| e.to_string());
            let at = format!("{} {array} {order}", store.display());
            for (how, got) in [("cat", by_cat), ("mount", by_mount)] {
                match got {
                    Ok(bytes) if sha256(&bytes) == a["sha256"][label] => {}
                    Ok(_) => failures.push(format!("{how} {at}: bytes differ")),
                    Err(e) => failures.push(format!("{how} {at}: {e}")),
                }
            }
        }
    }
    failures
}

/// The first `per_version` arrays of every version of the repository through `cat` of
/// `url` with `args` and `--ref`/`--snapshot`: the failures.
fn check_cat_at_versions(url: &str, args: &[&str], m: &Value, per_version: usize) -> Vec<String> {
    let mut failures = Vec::new();
    for version in versions(&m["repos"][0]) {
        let chosen = choose(version);
        for a in version["arrays"]
            .as_array()
            .expect("arrays")
            .iter()
            .take(per_version)
        {
            let array = a["path"].as_str().expect("path");
            let mut all: Vec<&str> = chosen.iter().map(String::as_str).collect();
            all.extend_from_slice(args);
            match try_cat(Path::new(url), array, &all) {
                Ok(bytes) if sha256(&bytes) == a["sha256"]["C_little"] => {}
                Ok(_) => failures.push(format!("{chosen:?} {array}: bytes differ")),
                Err(e) => failures.push(format!("{chosen:?} {array}: {e}")),
            }
        }
    }
    failures
}

/// s3s-fs serving the fixture folder as bucket `bucket` (and the folder it serves).
fn fixtures_bucket(dir: &Path, bucket: &str) -> (TempDir, Server) {
    let buckets = TempDir::new("icechunk-buckets");
    std::os::unix::fs::symlink(dir.join("icechunk"), buckets.path().join(bucket))
        .expect("symlink bucket");
    let server = s3s_fs(buckets.path(), None);
    (buckets, server)
}

#[test]
fn a_repository_on_s3_reads_at_every_version() {
    let (dir, m) = fixtures();
    let (_buckets, s3) = fixtures_bucket(&dir, "ice");
    let options = format!("endpoint={},allow_http=true,region=us-east-1", s3.url());
    let url = "s3://ice/repo";
    let args = ["--anonymous", "-o", &options];
    let mut failures = check_versions_mount(Path::new(url), &args, &m);
    // And through cat, at a branch, a tag and a snapshot.
    failures.extend(check_cat_at_versions(url, &args, &m, usize::MAX));
    assert_no_failures(&failures);
}

#[test]
fn virtual_chunks_in_a_bucket_read_through_the_mount_and_cat_from_a_local_or_s3_repository() {
    let (dir, m) = fixtures();
    let repo = &m["virtual"];
    let bucket = &repo["in_bucket"];
    let (_buckets, s3) = fixtures_bucket(&dir, bucket["bucket"].as_str().expect("bucket"));
    let options = format!("endpoint={},allow_http=true,region=us-east-1", s3.url());
    // The repository local, then in the bucket too; its chunks are in the bucket.
    let name = bucket["path"].as_str().expect("path");
    let path = dir.join("icechunk").join(name);
    let in_bucket = PathBuf::from(format!("s3://ice/{name}"));
    let args = ["--anonymous", "-o", &options];
    let main = &versions(repo)[0];
    let mut failures = check_cat_and_mount(&path, &args, main);
    failures.extend(check_cat_and_mount(&in_bucket, &args, main));
    // Narrowed to another prefix of the bucket, the chunks are refused, and say so.
    let narrowed = [
        "--anonymous",
        "-o",
        &options,
        "--virtual-prefix",
        "s3://ice/virtual-data/none/",
    ];
    match try_cat(&path, "t", &narrowed) {
        Err(e) if e.contains("outside the allowed prefixes") => {}
        other => failures.push(format!("narrowed: {:?}", other.map(|b| b.len()))),
    }
    assert_no_failures(&failures);
}

#[test]
fn a_repository_on_azure_reads_at_every_version() {
    let (dir, m) = fixtures();
    let server = azurite();
    azurite_put(&server, "ice", &dir.join("icechunk/repo"), "repo");
    let url = "az://ice/repo";
    let args = ["-o", "use_emulator=true"];
    let mut failures = check_versions_mount(Path::new(url), &args, &m);
    failures.extend(check_cat_at_versions(url, &args, &m, 1));
    assert_no_failures(&failures);
}

/// GCS through its XML API, the one object_store's GCS client speaks (objects at
/// `BASE/BUCKET/KEY`, listing by `list-type=2`): s3s-fs answers it, unsigned requests
/// being public there, as a bucket's `allUsers` reader makes them on GCS.
#[test]
fn a_repository_on_gcs_reads_at_every_version() {
    let (dir, m) = fixtures();
    let (_buckets, server) = fixtures_bucket(&dir, "ice");
    let options = format!("google_base_url={},allow_http=true", server.url());
    let url = "gs://ice/repo";
    let args = ["--anonymous", "-o", &options];
    let mut failures = check_versions_mount(Path::new(url), &args, &m);
    failures.extend(check_cat_at_versions(url, &args, &m, 1));
    // An option that is not one of GCS's keys is refused, not dropped.
    match try_cat(
        Path::new(url),
        "counts",
        &["--anonymous", "-o", &options, "-o", "endpoint=x"],
    ) {
        Err(e) if e.contains("store option endpoint") => {}
        other => failures.push(format!(
            "an S3 option on gs://: {:?}",
            other.map(|b| b.len())
        )),
    }
    assert_no_failures(&failures);
}

/// Chunk objects are read through the store of the repository's location, so
/// `--disk-cache` keeps them: a second mount of a repository on a web server reads every
/// array without fetching one (the crate still reads refs, snapshots and manifests).
#[test]
fn a_second_mount_reads_chunk_objects_from_the_disk_cache() {
    let (dir, m) = fixtures();
    let server = nginx(&dir.join("icechunk"), false);
    let proxy = Proxy::start(server.port, "python3");
    let url = format!("{}/repo", proxy.url());
    let failures = read_twice_through_one_disk_cache(&proxy, [&url, &url], &m);
    assert_no_failures(&failures);
}

/// Mount `urls` (of the fixture repository) one after the other with one disk cache
/// folder, reading branch main's arrays through each: what was wrong, or what the first
/// mount did not fetch or the second fetched of chunk objects.
fn read_twice_through_one_disk_cache(proxy: &Proxy, urls: [&str; 2], m: &Value) -> Vec<String> {
    let cache = TempDir::new("icechunk-disk-cache");
    let cache_dir = cache.path().display().to_string();
    let args = ["--disk-cache", cache_dir.as_str()];
    let main = version(m, "branch", "main");
    let total = main["arrays"].as_array().expect("arrays").len();
    let mut failures = Vec::new();
    for (first, url) in [(true, urls[0]), (false, urls[1])] {
        proxy.command("reset");
        let mount = Mount::new(Path::new(url), &args);
        let (good, errors) = read_all(&mount, "", main);
        drop(mount);
        if good != total {
            failures.push(format!("{url}: {good} of {total} read; {errors:?}"));
        }
        let fetched = proxy.requests("CHUNKS");
        if first && fetched == 0 {
            failures.push(format!("{url}: no chunk object fetched"));
        }
        if !first && fetched > 0 {
            failures.push(format!(
                "{url}: {fetched} chunk objects fetched that the first mount kept"
            ));
        }
    }
    failures
}

/// Chunk objects never change and their IDs are unique, so the disk cache keeps them by
/// ID: a mount of another repository naming the same objects (here the same repository
/// under a second URL, as a copy of it would be) reads every array without fetching one.
#[test]
fn chunk_objects_in_the_disk_cache_serve_every_repository_naming_them() {
    let (dir, m) = fixtures();
    let served = TempDir::new("icechunk-two-repositories");
    for name in ["first", "second"] {
        std::os::unix::fs::symlink(dir.join("icechunk/repo"), served.path().join(name))
            .expect("symlink a repository");
    }
    let server = nginx(served.path(), false);
    let proxy = Proxy::start(server.port, "python3");
    let first = format!("{}/first", proxy.url());
    let second = format!("{}/second", proxy.url());
    let failures = read_twice_through_one_disk_cache(&proxy, [&first, &second], &m);
    assert_no_failures(&failures);
}

/// A copy of the fixture repository in `tmp`.
fn copy_repo(dir: &Path, tmp: &Path) -> PathBuf {
    let to = tmp.join("repo");
    let status = std::process::Command::new("cp")
        .arg("-r")
        .arg(dir.join("icechunk/repo"))
        .arg(&to)
        .status()
        .expect("cp");
    assert!(status.success());
    to
}

/// The files of folder `sub` of repository `repo`, largest first.
fn objects(repo: &Path, sub: &str) -> Vec<PathBuf> {
    let mut files: Vec<(u64, PathBuf)> = std::fs::read_dir(repo.join(sub))
        .expect("objects")
        .filter_map(|e| e.ok())
        .map(|e| (e.metadata().map(|m| m.len()).unwrap_or(0), e.path()))
        .collect();
    files.sort();
    files.into_iter().rev().map(|(_, p)| p).collect()
}

/// The version of the manifest whose kind and name are given.
fn version<'a>(m: &'a Value, kind: &str, name: &str) -> &'a Value {
    versions(&m["repos"][0])
        .iter()
        .find(|v| {
            v["kind"] == kind
                && (v["name"] == name || v["message"].as_str().is_some_and(|t| t.starts_with(name)))
        })
        .expect("version in manifest")
}

/// The manifest entry of array `path` at `version`.
fn array<'a>(version: &'a Value, path: &str) -> &'a Value {
    version["arrays"]
        .as_array()
        .expect("arrays")
        .iter()
        .find(|a| a["path"] == path)
        .unwrap_or_else(|| panic!("{path} in the manifest"))
}

/// How many arrays of `version` read right under `at` of `mount`, and the errors of the others.
fn read_all(mount: &Mount, at: &str, version: &Value) -> (usize, Vec<String>) {
    let mut good = 0;
    let mut errors = Vec::new();
    for a in version["arrays"].as_array().expect("arrays") {
        let array = a["path"].as_str().expect("path");
        let path = if at.is_empty() {
            array.to_string()
        } else {
            format!("{at}/{array}")
        };
        match std::fs::read(mount.path(&path)) {
            Ok(bytes) if sha256(&bytes) == a["sha256"]["C_little"] => good += 1,
            Ok(_) => errors.push(format!("{path}: wrong bytes")),
            Err(e) => errors.push(format!("{path}: {e}")),
        }
    }
    (good, errors)
}

#[test]
fn broken_objects_of_a_repository_fail_alone_and_the_mount_stays_alive() {
    let (dir, m) = fixtures();
    let tmp = TempDir::new("icechunk-hostile");
    let repo = copy_repo(&dir, tmp.path());
    let main = version(&m, "branch", "main");
    let dev = version(&m, "branch", "dev");
    let first = version(&m, "snapshot", "first");
    let total = main["arrays"].as_array().expect("arrays").len();
    // A chunk object missing, a manifest cut short, the first commit's snapshot garbled,
    // and the snapshot dev's tip names gone.
    std::fs::remove_file(&objects(&repo, "chunks")[0]).expect("remove chunk");
    let manifest = objects(&repo, "manifests")[0].clone();
    let len = std::fs::metadata(&manifest).expect("manifest").len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&manifest)
        .and_then(|f| f.set_len(len / 2))
        .expect("truncate manifest");
    let snapshot = |id: &Value| repo.join("snapshots").join(id.as_str().expect("id"));
    std::fs::write(snapshot(&first["snapshot"]), b"not a snapshot").expect("garble");
    std::fs::remove_file(snapshot(&dev["snapshot"])).expect("remove dev's snapshot");

    let mount = Mount::new(&repo, &["--versions"]);
    let (good, errors) = read_all(&mount, "", main);
    assert!(
        good > 0 && !errors.is_empty() && errors.iter().all(|e| e.contains("Input/output error")),
        "main: {good} of {total} read; {errors:?}"
    );
    for (at, what) in [
        (
            format!("@snapshots/{}", first["name"].as_str().expect("id")),
            "a garbled snapshot",
        ),
        ("@branches/dev".to_string(), "a missing snapshot"),
    ] {
        let listed =
            std::fs::read_dir(mount.path(&at)).and_then(|d| d.collect::<Result<Vec<_>, _>>());
        assert!(listed.is_err(), "{what}: {at} listed");
    }
    // The tag reads where its objects are whole, and the mount still answers.
    let (good_v1, _) = read_all(&mount, "@tags/v1", version(&m, "tag", "v1"));
    assert!(good_v1 > 0, "nothing read at v1");
    assert!(
        std::fs::metadata(mount.path("counts")).is_ok()
            || std::fs::metadata(mount.path("grp")).is_ok()
    );
    let log = mount.log();
    assert!(
        log.contains("icechunk"),
        "no log line names the repository: {log}"
    );

    // A repository whose repo object is garbled is refused as a whole, clearly.
    std::fs::write(repo.join("repo"), b"garbage").expect("garble repo");
    let err = try_cat(&repo, "counts", &[]).expect_err("a garbled repo object");
    assert!(err.contains("icechunk"), "{err}");
}

#[test]
fn virtual_chunks_read_from_the_allowed_containers_only() {
    let (dir, m) = fixtures();
    let repo = &m["virtual"];
    let path = dir.join(repo["path"].as_str().expect("path"));
    let main = &versions(repo)[0];
    assert_no_failures(&check_cat_and_mount(&path, &[], main));
    // Prefixes given are the allowed ones: one the container does not lie under closes
    // it. The virtual chunks fail, the loaded coordinates still read.
    let elsewhere = TempDir::new("icechunk-elsewhere");
    let narrowed = ["--virtual-prefix", elsewhere.path().to_str().expect("path")];
    let err = try_cat(&path, "t", &narrowed).expect_err("a closed container");
    assert!(err.contains("outside the allowed prefixes"), "{err}");
    let time = array(main, "time");
    let bytes = try_cat(&path, "time", &narrowed).expect("time is loaded, not virtual");
    assert_eq!(sha256(&bytes), time["sha256"]["C_little"]);
    let t = &main["arrays"][0];
    // The container's own folder, given, keeps it open.
    let prefix = repo["virtual_prefix"].as_str().expect("prefix");
    let folder = prefix.trim_start_matches("file://");
    let bytes = try_cat(&path, "t", &["--virtual-prefix", folder]).expect("allowed container");
    assert_eq!(sha256(&bytes), t["sha256"]["C_little"]);
}

/// What each chunk of the hostile virtual repository's `v` reads through a mount with
/// `args`: its bytes, or the error.
fn hostile_chunks(
    path: &Path,
    chunks: &[Value],
    args: &[&str],
) -> (Mount, Vec<std::io::Result<Vec<u8>>>) {
    let mount = Mount::new(path, args);
    let file = std::fs::File::open(mount.path("v")).expect("open v");
    let got = chunks
        .iter()
        .map(|c| {
            let offset = c["offset"].as_u64().expect("offset");
            let len = c["len"].as_u64().expect("len") as usize;
            common::mount::pread_full(&file, offset, len)
        })
        .collect();
    (mount, got)
}

#[test]
fn hostile_virtual_chunks_fail_alone_and_virtual_prefixes_narrow_or_open_others() {
    let (dir, m) = fixtures();
    let repo = &m["virtual_hostile"];
    let path = dir.join(repo["path"].as_str().expect("path"));
    let chunks = repo["chunks"].as_array().expect("chunks");
    let mut failures = Vec::new();

    // By default: the chunks inside the container read as zarr-python read them; a
    // symlink leading out, a location outside every container, a `..` out of it, a range
    // past the end of its file and a missing file each fail alone.
    let (mount, got) = hostile_chunks(&path, chunks, &[]);
    for (c, got) in chunks.iter().zip(&got) {
        let case = c["case"].as_str().expect("case");
        match (c["sha256"].as_str(), got) {
            (Some(want), Ok(bytes)) if sha256(bytes) == want => {}
            (Some(_), other) => failures.push(format!("{case}: {other:?}")),
            (None, Err(e)) if e.raw_os_error() == Some(5) => {}
            (None, other) => failures.push(format!("{case}: {:?}", other.as_ref().map(Vec::len))),
        }
    }
    let log = mount.log();
    for (what, line) in [
        (
            "a location outside the containers",
            "outside the allowed prefixes",
        ),
        ("a range past the end", "past the end"),
        ("a missing file", "missing"),
        ("a symlink leading out", "link.bin"),
    ] {
        if !log.contains(line) {
            failures.push(format!("no log line for {what} ({line:?})"));
        }
    }
    assert!(std::fs::metadata(mount.path("v")).is_ok(), "the mount died");
    drop(mount);
    let err = try_cat(&path, "v", &[]).expect_err("cat of v");
    assert!(
        err.contains("virtual") || err.contains("reference"),
        "{err}"
    );

    // A prefix inside the container narrows it: data/sub/ stays, data/ goes.
    let sub = repo["sub"].as_str().expect("sub");
    let (_mount, got) = hostile_chunks(&path, chunks, &["--virtual-prefix", sub]);
    if got[0].is_ok() {
        failures.push("narrowed to data/sub: chunk 0 in data/ still read".into());
    }
    match &got[6] {
        Ok(bytes) if Some(sha256(bytes).as_str()) == chunks[6]["sha256"].as_str() => {}
        other => failures.push(format!(
            "narrowed to data/sub: chunk 6: {:?}",
            other.as_ref().map(Vec::len)
        )),
    }

    // Prefixes outside the container open those places: with the container's folder and
    // outside/ given, the chunk outside every container reads its bytes of
    // outside/secret.bin; the symlink out of data/ is still refused.
    let outside = repo["outside"].as_str().expect("outside");
    let data = repo["data"].as_str().expect("data");
    let secret = std::fs::read(Path::new(outside).join("secret.bin")).expect("secret.bin");
    let both = ["--virtual-prefix", outside, "--virtual-prefix", data];
    let (_mount, got) = hostile_chunks(&path, chunks, &both);
    let len = chunks[2]["len"].as_u64().expect("len") as usize;
    match &got[2] {
        Ok(bytes) if bytes[..] == secret[len..2 * len] => {}
        other => failures.push(format!(
            "added outside/: chunk 2: {:?}",
            other.as_ref().map(Vec::len)
        )),
    }
    if got[1].is_ok() {
        failures.push("added outside/: the symlink out of data/ read".into());
    }
    if !matches!(&got[0], Ok(b) if Some(sha256(b).as_str()) == chunks[0]["sha256"].as_str()) {
        failures.push("added outside/: chunk 0 no longer reads".into());
    }
    assert_no_failures(&failures);
}

#[test]
fn a_chunk_two_versions_share_is_fetched_and_decoded_once() {
    let (dir, m) = fixtures();
    let path = dir.join(m["repos"][0]["path"].as_str().expect("path"));
    let (main, v1, dev) = (
        version(&m, "branch", "main"),
        version(&m, "tag", "v1"),
        version(&m, "branch", "dev"),
    );
    let first = version(&m, "snapshot", "first");
    let mount = Mount::new(&path, &["--versions"]);
    let read = |at: &str, version: &Value| -> (bool, u64) {
        let file = mount.path(&format!("{at}temperature"));
        let bytes = std::fs::read(&file).expect("read temperature");
        let right = sha256(&bytes) == array(version, "temperature")["sha256"]["C_little"];
        let fetched = xattr(&file, "user.zarrfs.bytes_fetched")
            .and_then(|v| v.parse().ok())
            .expect("bytes_fetched");
        (right, fetched)
    };
    let (right, fetched) = read("@tags/v1/", v1);
    assert!(right && fetched > 0, "v1: right {right}, fetched {fetched}");
    // main has not touched temperature since v1, and the first commit's four rows are
    // v1's first four: the same chunk objects, already decoded.
    let first_at = format!("@snapshots/{}/", first["name"].as_str().expect("id"));
    for (at, version) in [("", main), (first_at.as_str(), first)] {
        let (right, fetched) = read(at, version);
        assert!(right, "{at}temperature: wrong bytes");
        assert_eq!(fetched, 0, "{at}temperature fetched its chunks again");
    }
    // dev rewrote temperature: its chunks are other objects, fetched.
    let (right, fetched) = read("@branches/dev/", dev);
    assert!(
        right && fetched > 0,
        "dev: right {right}, fetched {fetched}"
    );
}

/// Without `--versions` one version is shown, and an array read through leaves the decoded
/// cache chunk by chunk as for any store (a second read decodes, and so fetches, again),
/// so that reading a large array keeps the daemon at a few hundred MiB; with
/// `--versions` its chunks stay for the other versions that may share them. Read
/// through the library: no kernel page cache between the reads.
#[test]
fn served_chunks_stay_in_the_decoded_cache_only_where_other_versions_are_shown() {
    use zarrfs::fs::{FsOptions, ZarrFs, ROOT};
    use zarrfs::hierarchy::Hierarchy;
    use zarrfs::store::{StoreConfig, VersionChoice};

    let (dir, m) = fixtures();
    let path = dir.join(m["repos"][0]["path"].as_str().expect("path"));
    let main = version(&m, "branch", "main");
    let expected = array(main, "temperature")["sha256"]["C_little"].clone();
    let fetched_by_read = |all: bool| -> Vec<u64> {
        let cfg = StoreConfig {
            icechunk: VersionChoice {
                all,
                ..VersionChoice::default()
            },
            ..StoreConfig::default()
        };
        let store = zarrfs::store::open(path.to_str().expect("utf-8 path"), &cfg).expect("open");
        let options = FsOptions {
            layout: zarrfs::read::view::Layout::default(),
            cache_bytes: 64 << 20,
            prefetch_threads: 1,
            views: Default::default(),
            staging: None,
            write_wait: Default::default(),
            commit_message: None,
            new_defaults: Default::default(),
        };
        let fs = ZarrFs::new(Hierarchy::open(store).expect("hierarchy"), options, "repo");
        let ino = fs.lookup(ROOT, "temperature").expect("lookup").ino;
        let fetched = || -> u64 {
            let v = fs
                .getxattr(ino, "user.zarrfs.bytes_fetched")
                .expect("xattr");
            String::from_utf8_lossy(&v).parse().expect("a number")
        };
        let mut after = Vec::new();
        for _ in 0..2 {
            let fh = fs.open(ino).expect("open");
            let size = fs.getattr(ino).expect("getattr").size as usize;
            let bytes = fs.read(fh, 0, size).expect("read");
            fs.release(fh);
            assert_eq!(
                Value::from(sha256(&bytes)),
                expected,
                "all {all}: wrong bytes"
            );
            after.push(fetched());
        }
        after
    };
    // The second read fetches the array again: its units left the decoded cache as they
    // were served. Exactly as much as the first, but on a loaded machine (CI's two I/O
    // passes side by side) a unit the prefetcher decoded after the reader had served it
    // has been seen to stay, 3 attempts of 3 in one run, which runs here do not
    // reproduce: such a straggler is allowed, up to a quarter of the array (were served
    // units kept, as with --versions below, the second read would fetch nothing).
    let exact = |a: &Vec<u64>| a[0] > 0 && a[1] == 2 * a[0];
    let refetched = |a: &Vec<u64>| a[0] > 0 && a[1] <= 2 * a[0] && 4 * (a[1] - a[0]) >= 3 * a[0];
    let mut attempts: Vec<Vec<u64>> = Vec::new();
    while attempts.len() < 3 && !attempts.last().is_some_and(exact) {
        attempts.push(fetched_by_read(false));
    }
    assert!(
        attempts.iter().any(refetched),
        "without --versions, bytes fetched after each read, per attempt: {attempts:?}"
    );
    if !attempts.iter().any(exact) {
        eprintln!("without --versions, a unit stayed in the cache: {attempts:?}");
    }
    let with_versions = fetched_by_read(true);
    assert!(
        with_versions[0] > 0 && with_versions[1] == with_versions[0],
        "with --versions, bytes fetched after each read: {with_versions:?}"
    );
}

#[test]
fn a_mount_follows_a_moving_branch_and_files_opened_before_stay_on_their_snapshot() {
    use std::io::Read;
    let (dir, m) = fixtures();
    let tmp = TempDir::new("icechunk-tip");
    let repo = copy_repo(&dir, tmp.path());
    let main = version(&m, "branch", "main");
    let v1 = version(&m, "tag", "v1");
    let tip = v1["snapshot"].as_str().expect("snapshot");
    let ttl = std::time::Duration::from_secs(1);
    let mount = Mount::new(
        &repo,
        &["--refresh", "1s", "--versions", "--log-level", "info"],
    );
    // Files of an array that differs at v1, opened at main's tip and not read yet (no
    // chunk of it decoded before the move).
    let wide = "grp/sub/wide";
    let first = main["snapshot"].as_str().expect("snapshot");
    for at in ["counts", "@branches/main/counts"] {
        assert_eq!(
            xattr(&mount.path(at), "user.zarrfs.snapshot").as_deref(),
            Some(first)
        );
    }
    let before = &array(main, wide)["sha256"]["C_little"];
    assert_ne!(before, &array(v1, wide)["sha256"]["C_little"]);
    let mut held: Vec<std::fs::File> = [wide.to_string(), format!("@branches/main/{wide}")]
        .iter()
        .map(|p| std::fs::File::open(mount.path(p)).expect("open wide"))
        .collect();

    // main moves back to the snapshot of v1 (doomed there again, flags longer, wide as
    // it was).
    icechunk_reset_branch(&repo, "main", tip);
    let moved = std::time::Instant::now();
    // Within twice the interval of the move, each node shows it: looked at on its own
    // (not every node as soon as one does).
    let mut failures = Vec::new();
    for at in ["counts", "@branches/main/counts"] {
        let shown = shown_by_promise(moved, ttl, || {
            let id = xattr(&mount.path(at), "user.zarrfs.snapshot");
            (id.as_deref() == Some(tip))
                .then_some(())
                .ok_or_else(|| format!("{at}: snapshot {id:?}, not {tip}"))
        });
        failures.extend(shown.err());
    }
    for at in ["", "@branches/main"] {
        for a in v1["arrays"].as_array().expect("arrays") {
            let array = a["path"].as_str().expect("path");
            let path = if at.is_empty() {
                array.to_string()
            } else {
                format!("{at}/{array}")
            };
            let shown = shown_by_promise(moved, ttl, || match std::fs::read(mount.path(&path)) {
                Ok(bytes) if sha256(&bytes) == a["sha256"]["C_little"] => Ok(()),
                Ok(_) => Err(format!("{path}: not v1's bytes")),
                Err(e) => Err(format!("{path}: {e}")),
            });
            failures.extend(shown.err());
        }
    }
    assert!(failures.is_empty(), "{failures:?}; log:\n{}", mount.log());
    // The files opened before read the snapshot they were opened at, whole.
    for file in &mut held {
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).expect("read held file");
        assert_eq!(sha256(&bytes), *before, "a file opened before the move");
    }
    assert!(
        mount.log().contains("moved to snapshot"),
        "no log line for the move:\n{}",
        mount.log()
    );
}
