//! `zarrfs serve` end to end, with real clients: every fixture array and view of the
//! folder stores byte-exact over HTTP in C and F (zarr-python's SHA-256s, and the FUSE
//! mount of the same flags for the views), every listing through HTML, JSON and
//! PROPFIND equal to the mount's (Python requests, fsspec: `scripts/check_served.py`),
//! the same for an S3 store (s3s-fs) and an Icechunk repository with `--versions`; GDAL
//! reading the `.tif` and `.vrt` views by `/vsicurl/` as through the mount; rclone's
//! WebDAV remote; hostile requests, each failing alone; the token; a clean stop.

use crate::common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::mount::{wait_exit, Mount};
use common::servers::s3s_fs;
use common::{fixtures_dir, venv_python, zarrfs, TempDir};

fn repo() -> PathBuf {
    crate::common::repo()
}

/// A `zarrfs serve` in the foreground on a free loopback port, ended by its PID.
struct Served {
    child: Child,
    url: String,
    log: PathBuf,
    _dir: TempDir,
}

impl Served {
    fn start(store: &str, args: &[&str]) -> Served {
        Self::try_start(store, args).unwrap_or_else(|e| panic!("{e}"))
    }

    fn try_start(store: &str, args: &[&str]) -> Result<Served, String> {
        let dir = TempDir::new("serve");
        let log = dir.path().join("serve.log");
        let mut child = Command::new(zarrfs())
            .arg("serve")
            .arg(store)
            .args(["--http", "127.0.0.1:0"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).expect("log"))
            .spawn()
            .expect("run zarrfs serve");
        let mut line = String::new();
        let stdout = child.stdout.take().expect("stdout");
        let read = BufReader::new(stdout).read_line(&mut line);
        let url = line
            .split(" at ")
            .nth(1)
            .map(|u| u.trim().trim_end_matches('/').to_string());
        match (read, url) {
            (Ok(n), Some(url)) if n > 0 => Ok(Served {
                child,
                url,
                log,
                _dir: dir,
            }),
            _ => {
                let status = wait_exit(&mut child, Duration::from_secs(10));
                let _ = child.kill();
                Err(format!(
                    "zarrfs serve {store} did not start ({status:?}): {}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                ))
            }
        }
    }

    fn addr(&self) -> String {
        self.url.trim_start_matches("http://").to_string()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("zarrfs serve log:\n{}", common::tail(&self.log(), 4000));
        }
    }
}

/// Run `scripts/check_served.py tree` against `served` and `mount`; its counts.
fn check_tree(served: &Served, mount: &Path, extra: &[&str]) -> serde_json::Value {
    let python = venv_python("ZARRFS_TEST_PYTHON", "venv-zarr3");
    let out = Command::new(python)
        .arg(repo().join("scripts/check_served.py"))
        .arg("tree")
        .arg(&served.url)
        .arg(mount)
        .args(extra)
        .output()
        .expect("run check_served.py");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "check_served.py failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    common::last_json(&stdout)
}

fn count(v: &serde_json::Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or(0)
}

#[test]
fn every_array_view_and_listing_of_the_folder_stores_in_c_and_f() {
    let fixtures = fixtures_dir();
    let manifest = fixtures.join("manifest.json");
    for store in ["v3", "v2"] {
        for order in ["C", "F"] {
            let path = fixtures.join(store);
            let args = ["--views", "all", "--order", order];
            let mount = Mount::new(&path, &args);
            let served = Served::start(path.to_str().expect("path"), &args);
            let layout = format!("{order}_little");
            let counts = check_tree(
                &served,
                &mount.mountpoint,
                &[
                    "--manifest",
                    manifest.to_str().expect("path"),
                    "--store",
                    store,
                    "--layout",
                    &layout,
                    "--ranges",
                    "2",
                ],
            );
            eprintln!("{store} {order}: {counts}");
            assert!(
                count(&counts, "manifest_arrays") >= 100,
                "{store} {order}: {counts}"
            );
            assert!(count(&counts, "files") >= 500, "{store} {order}: {counts}");
            assert!(
                count(&counts, "fsspec_reads") >= 20,
                "{store} {order}: {counts}"
            );
            // One access line per request, at info.
            assert!(served.log().contains("\"GET /"), "no access lines");
        }
    }
}

#[test]
fn an_s3_store_and_an_icechunk_repository_with_versions() {
    let fixtures = fixtures_dir();
    let buckets = TempDir::new("buckets");
    std::os::unix::fs::symlink(&fixtures, buckets.path().join("fixtures")).expect("bucket");
    let s3 = s3s_fs(buckets.path(), None);
    let options = format!("endpoint={},allow_http=true", s3.url());
    let args = ["--anonymous", "-o", &options, "--views", "raw,npy,tiff"];
    let mount = Mount::new(Path::new("s3://fixtures/v3"), &args);
    let served = Served::start("s3://fixtures/v3", &args);
    let manifest = fixtures.join("manifest.json");
    let counts = check_tree(
        &served,
        &mount.mountpoint,
        &[
            "--manifest",
            manifest.to_str().expect("path"),
            "--store",
            "v3",
            "--ranges",
            "1",
        ],
    );
    eprintln!("s3: {counts}");
    assert!(count(&counts, "manifest_arrays") >= 100, "{counts}");

    let repo = fixtures.join("icechunk/repo");
    let args = ["--versions", "--views", "npy"];
    let mount = Mount::new(&repo, &args);
    let served = Served::start(repo.to_str().expect("path"), &args);
    let counts = check_tree(&served, &mount.mountpoint, &["--ranges", "1"]);
    eprintln!("icechunk: {counts}");
    for folder in ["@branches", "@tags", "@snapshots"] {
        let listing = curl(&served, &format!("/{folder}/?format=json"), &[]);
        assert!(
            listing.contains("\"type\": \"directory\""),
            "{folder}: {listing}"
        );
    }
    assert!(count(&counts, "dirs") >= 10, "{counts}");
}

#[test]
fn gdal_opens_the_tif_and_vrt_views_by_url_as_through_the_mount() {
    let geo = fixtures_dir().join("geo");
    let args = ["--views", "tiff,vrt"];
    let mount = Mount::new(&geo, &args);
    let served = Served::start(geo.to_str().expect("path"), &args);
    let out = Command::new(venv_python("ZARRFS_VIEWS_PYTHON", "venv-views"))
        .arg(repo().join("scripts/check_served_gdal.py"))
        .arg(&served.url)
        .arg(&mount.mountpoint)
        .output()
        .expect("run check_served_gdal.py");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "check_served_gdal.py: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let counts = common::last_json(&stdout);
    eprintln!("gdal: {counts}");
    assert!(
        count(&counts, "tif") >= 20 && count(&counts, "vrt") >= 20,
        "{counts}"
    );
    assert!(count(&counts, "georeferenced") >= 10, "{counts}");
}

/// Issue 42's window: GDAL reading one 256 x 256 window of a page of a `.tif` view by URL
/// gets zarr-python's values, and the server reads only the one chunk under it from the
/// store (the JSON listing's `bytes_fetched`, before and after).
#[test]
fn a_gdal_window_by_url_reads_only_the_chunk_under_it() {
    let tmp = TempDir::new("window");
    let script = repo().join("scripts/gdal_window.py");
    // gdal_window.py COMMAND ARG... with `python`: what it printed.
    let run = |python: PathBuf, args: &[&std::ffi::OsStr]| -> String {
        let run = common::CliRun::run(Command::new(python).arg(&script).args(args));
        assert!(run.success(), "gdal_window.py {args:?}: {run}");
        String::from_utf8_lossy(&run.stdout).into_owned()
    };
    let made = run(
        venv_python("ZARRFS_TEST_PYTHON", "venv-zarr3"),
        &["make".as_ref(), tmp.path().as_os_str()],
    );
    let doc = common::last_json(&made);
    let store = doc["store"].as_str().expect("store").to_string();
    let served = Served::start(&store, &["--views", "raw,tiff"]);
    let fetched = || -> u64 {
        let listing: serde_json::Value =
            serde_json::from_str(&curl(&served, "?format=json", &[])).expect("a JSON listing");
        listing["entries"]
            .as_array()
            .expect("entries")
            .iter()
            .find(|e| e["name"] == "img")
            .and_then(|e| e["array"]["bytes_fetched"].as_u64())
            .unwrap_or(0)
    };
    let before = fetched();
    let url = format!("{}/img.tif", served.url.trim_end_matches('/'));
    let said = run(
        venv_python("ZARRFS_VIEWS_PYTHON", "venv-views"),
        &["read".as_ref(), url.as_ref(), tmp.path().as_os_str()],
    );
    assert_eq!(
        common::last_json(&said)["block"],
        serde_json::json!([256, 256])
    );
    let chunk = Path::new(&store).join(doc["chunk"].as_str().expect("chunk"));
    let stored = std::fs::metadata(&chunk).expect("the chunk").len();
    assert_eq!(
        fetched() - before,
        stored,
        "the window read fetched other chunks than {}",
        chunk.display()
    );
}

/// `curl` of `path` on `served` with `args`: its stdout.
fn curl(served: &Served, path: &str, args: &[&str]) -> String {
    let out = Command::new("curl")
        .args(["-s", "--path-as-is", "--max-time", "30"])
        .args(args)
        .arg(format!("{}{path}", served.url))
        .output()
        .expect("run curl");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The status of `curl` of `path` with `args`.
fn status(served: &Served, path: &str, args: &[&str]) -> u16 {
    let mut all = vec!["-o", "/dev/null", "-w", "%{http_code}"];
    all.extend_from_slice(args);
    curl(served, path, &all).trim().parse().unwrap_or(0)
}

/// The rclone binary (Debian's, installed by scripts/test.sh).
fn rclone() -> &'static str {
    common::require_tool("rclone", "run scripts/test.sh (it installs it)");
    "rclone"
}

#[test]
fn rclone_lists_cats_and_copies_over_webdav() {
    let store = fixtures_dir().join("v3");
    let args = ["--views", "npy"];
    let mount = Mount::new(&store, &args);
    let served = Served::start(store.to_str().expect("path"), &args);
    let config = TempDir::new("rclone");
    let run = |extra: &[&str]| {
        let out = Command::new(rclone())
            .env("RCLONE_CONFIG", config.path().join("rclone.conf"))
            .env("RCLONE_WEBDAV_URL", &served.url)
            .args(extra)
            .output()
            .expect("run rclone");
        assert!(
            out.status.success(),
            "rclone {extra:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    };
    // lsjson of a group: names and sizes as the mount lists them.
    let listed: serde_json::Value =
        serde_json::from_slice(&run(&["lsjson", ":webdav:dtypes"])).expect("lsjson");
    let mut got: Vec<(String, u64)> = listed
        .as_array()
        .expect("list")
        .iter()
        .filter(|e| e["IsDir"] == false)
        .map(|e| {
            (
                e["Name"].as_str().unwrap_or("").to_string(),
                e["Size"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    got.sort();
    let mut want: Vec<(String, u64)> = std::fs::read_dir(mount.path("dtypes"))
        .expect("readdir")
        .map(|e| e.expect("entry"))
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| {
            let size = e.metadata().expect("stat").len();
            (e.file_name().to_string_lossy().into_owned(), size)
        })
        .collect();
    want.sort();
    assert_eq!(got, want);
    assert!(want.len() >= 20);
    // cat of one file, copy of a whole group: the mount's bytes.
    let cat = run(&["cat", ":webdav:codecs/zstd_3.npy"]);
    assert_eq!(
        cat,
        std::fs::read(mount.path("codecs/zstd_3.npy")).expect("read")
    );
    let copy = TempDir::new("rclone-copy");
    run(&[
        "copy",
        ":webdav:dtypes",
        copy.path().to_str().expect("path"),
    ]);
    let mut compared = 0;
    for (name, _) in &want {
        let got = std::fs::read(copy.path().join(name));
        match std::fs::read(mount.path(&format!("dtypes/{name}"))) {
            Ok(bytes) => {
                assert_eq!(got.ok(), Some(bytes), "dtypes/{name}");
                compared += 1;
            }
            // A file the mount cannot read is not copied either.
            Err(_) => assert!(got.is_err(), "dtypes/{name} was copied"),
        }
    }
    assert!(compared >= 20, "{compared} files compared");
}

/// Send `request` (raw bytes) on a new connection; the status of the answer (0: none).
fn raw_status(addr: &str, request: &[u8]) -> u16 {
    let Ok(mut s) = TcpStream::connect(addr) else {
        return 0;
    };
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    if s.write_all(request).is_err() {
        // The server may close before taking a huge request whole; its answer is read.
    }
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    let text = String::from_utf8_lossy(&answer);
    text.strip_prefix("HTTP/1.1 ")
        .and_then(|t| t.get(..3))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

fn get(path: &str, headers: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{headers}\r\n").into_bytes()
}

#[test]
fn hostile_requests_each_fail_alone_and_the_server_goes_on() {
    let store = fixtures_dir().join("v3");
    let served = Served::start(store.to_str().expect("path"), &["--views", "raw,tiff"]);
    let addr = served.addr();
    let ok = || raw_status(&addr, &get("/codecs/zstd_3", ""));
    assert_eq!(ok(), 200);
    // Traversal in every encoding: refused, never served.
    for path in [
        "/../../etc/passwd",
        "/%2e%2e/%2e%2e/etc/passwd",
        "/%2E%2E/etc/passwd",
        "/codecs/..%2f..%2fetc%2fpasswd",
        "/..%5c..%5cetc%5cpasswd",
        "/codecs\\..\\..\\etc\\passwd",
        "/codecs/%00",
        "/.%2e/etc/passwd",
        "/%c0%ae%c0%ae/etc/passwd",
    ] {
        let code = raw_status(&addr, &get(path, ""));
        assert!(code == 400 || code == 404, "{path}: {code}");
    }
    assert_eq!(status(&served, "/%2e%2e/%2e%2e/etc/passwd", &[]), 400);
    // Ranges past the end, negative, huge, and 10,000 in one header.
    assert_eq!(
        status(&served, "/codecs/zstd_3", &["-H", "Range: bytes=999999-"]),
        416
    );
    assert_eq!(
        status(&served, "/codecs/zstd_3", &["-H", "Range: bytes=-0"]),
        416
    );
    assert_eq!(
        status(
            &served,
            "/codecs/zstd_3",
            &["-H", "Range: bytes=99999999999999999999999999-"]
        ),
        416
    );
    assert_eq!(
        status(
            &served,
            "/codecs/zstd_3",
            &["-H", "Range: bytes=-99999999999999999999"]
        ),
        206
    );
    let many: Vec<String> = (0..10_000).map(|i| format!("{i}-{i}")).collect();
    let code = raw_status(
        &addr,
        &get(
            "/codecs/zstd_3",
            &format!("Range: bytes={}\r\n", many.join(",")),
        ),
    );
    assert!(code == 431 || code == 200, "10,000 ranges: {code}");
    let few: Vec<String> = (0..300).map(|i| format!("{i}-{i}")).collect();
    let code = raw_status(
        &addr,
        &get(
            "/codecs/zstd_3",
            &format!("Range: bytes={}\r\n", few.join(",")),
        ),
    );
    assert_eq!(code, 200, "several ranges are ignored");
    // A 1 MiB header.
    let big = format!("X-Big: {}\r\n", "a".repeat(1 << 20));
    assert_eq!(raw_status(&addr, &get("/", &big)), 431);
    // PROPFIND: billion laughs, depth infinity, a body over 64 KiB.
    let mut laughs =
        String::from("<?xml version=\"1.0\"?>\n<!DOCTYPE lolz [\n<!ENTITY lol \"lol\">\n");
    for i in 1..10 {
        let prev = if i == 1 {
            "lol".to_string()
        } else {
            format!("lol{}", i - 1)
        };
        laughs.push_str(&format!(
            "<!ENTITY lol{i} \"{}\">\n",
            format!("&{prev};").repeat(10)
        ));
    }
    laughs.push_str(
        "]>\n<D:propfind xmlns:D=\"DAV:\"><D:prop><D:lol>&lol9;</D:lol></D:prop></D:propfind>",
    );
    let propfind = |depth: &str, body: &str| {
        format!(
            "PROPFIND / HTTP/1.1\r\nHost: x\r\nConnection: close\r\nDepth: {depth}\r\n\
             Content-Type: application/xml\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()
    };
    assert_eq!(raw_status(&addr, &propfind("1", &laughs)), 400);
    assert_eq!(raw_status(&addr, &propfind("infinity", "")), 403);
    assert_eq!(
        raw_status(&addr, &propfind("1", &"x".repeat(100 << 10))),
        413
    );
    assert_eq!(raw_status(&addr, &propfind("0", "")), 207);
    // Every method that would write.
    for method in [
        "PUT",
        "DELETE",
        "MKCOL",
        "COPY",
        "MOVE",
        "PROPPATCH",
        "LOCK",
        "POST",
    ] {
        let req = format!("{method} /codecs/zstd_3 HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
        assert_eq!(raw_status(&addr, req.as_bytes()), 405, "{method}");
    }
    let options = curl(&served, "/", &["-X", "OPTIONS", "-i"]);
    assert!(
        options.to_ascii_lowercase().contains("dav: 1\r\n"),
        "{options}"
    );
    // Garbage instead of a request.
    assert_eq!(raw_status(&addr, b"\x00\x01\x02 garbage\r\n\r\n"), 400);
    assert_eq!(ok(), 200, "the server still serves");
}

/// Raise this process's open-file limit to its hard limit.
fn raise_open_files() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read and write the struct given.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit), 0);
        limit.rlim_cur = limit.rlim_max;
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &limit), 0);
    }
}

#[test]
fn idle_connections_and_a_slow_reader_do_not_starve_a_normal_client() {
    raise_open_files();
    let store = fixtures_dir().join("v3_large");
    let served = Served::start(store.to_str().expect("path"), &[]);
    let addr = served.addr();
    // 2,000 connections that never ask anything (the cap is 1,024).
    let idle: Vec<TcpStream> = (0..2000)
        .filter_map(|_| TcpStream::connect(&addr).ok())
        .collect();
    assert!(idle.len() >= 1500, "{} idle connections made", idle.len());
    let began = Instant::now();
    assert_eq!(raw_status(&addr, &get("/", "")), 200);
    eprintln!(
        "a normal request beside 2,000 idle connections: {:?}",
        began.elapsed()
    );
    // A client that asks for a large file and takes one byte a second.
    let listing = curl(&served, "/?format=json", &[]);
    let doc: serde_json::Value = serde_json::from_str(&listing).expect("json");
    let largest = doc["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .filter(|e| e["type"] == "file")
        .max_by_key(|e| e["size"].as_u64().unwrap_or(0))
        .expect("a file")
        .clone();
    let href = largest["href"].as_str().expect("href").to_string();
    let mut slow = TcpStream::connect(&addr).expect("connect");
    slow.write_all(&get(&href, "")).expect("ask");
    let mut one = [0u8; 1];
    for _ in 0..3 {
        let _ = slow.read(&mut one);
        std::thread::sleep(Duration::from_secs(1));
        let began = Instant::now();
        assert_eq!(raw_status(&addr, &get(&href, "Range: bytes=0-99\r\n")), 206);
        eprintln!("a range beside the slow reader: {:?}", began.elapsed());
    }
    drop(idle);
    assert_eq!(raw_status(&addr, &get("/", "")), 200);
}

#[test]
fn a_token_is_asked_when_given_and_other_addresses_need_one() {
    let store = fixtures_dir().join("v3");
    let path = store.to_str().expect("path");
    // Another address than loopback without a token or --public: refused at startup.
    let out = Command::new(zarrfs())
        .args(["serve", path, "--http", "0.0.0.0:0"])
        .output()
        .expect("run zarrfs serve");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--token-file") && err.contains("--public"),
        "{err}"
    );
    let dir = TempDir::new("token");
    let token = dir.path().join("token");
    std::fs::write(&token, "s3cret-token\n").expect("write token");
    let served = Served::start(path, &["--token-file", token.to_str().expect("path")]);
    assert_eq!(status(&served, "/", &[]), 401);
    assert_eq!(status(&served, "/codecs/zstd_3", &["-u", "me:wrong"]), 401);
    assert_eq!(
        status(
            &served,
            "/codecs/zstd_3",
            &["-H", "Authorization: Bearer nope"]
        ),
        401
    );
    assert_eq!(
        status(&served, "/codecs/zstd_3", &["-u", "anyone:s3cret-token"]),
        200
    );
    assert_eq!(
        status(
            &served,
            "/codecs/zstd_3",
            &["-H", "Authorization: Bearer s3cret-token"]
        ),
        200
    );
    let challenge = curl(&served, "/", &["-i"]);
    assert!(
        challenge
            .to_ascii_lowercase()
            .contains("www-authenticate: basic"),
        "{challenge}"
    );
}

#[test]
fn sigterm_and_sigint_stop_the_server_cleanly() {
    let store = fixtures_dir().join("v3");
    for signal in [libc::SIGTERM, libc::SIGINT] {
        let mut served = Served::start(store.to_str().expect("path"), &[]);
        assert_eq!(status(&served, "/", &[]), 200);
        // SAFETY: kill sends a signal to the server's own PID.
        unsafe { libc::kill(served.child.id() as i32, signal) };
        let ended = wait_exit(&mut served.child, Duration::from_secs(20));
        assert!(
            ended.is_some_and(|s| s.success()),
            "signal {signal}: {ended:?}"
        );
        assert!(served.log().contains("stopped serving"), "{}", served.log());
    }
}

/// `GET path` on a new connection: the status and the body.
fn http_get(addr: &str, path: &str) -> (u16, Vec<u8>) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    s.write_all(&get(path, "")).expect("ask");
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    let split = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(answer.len(), |i| i + 4);
    let head = String::from_utf8_lossy(&answer[..split]);
    let code = head
        .strip_prefix("HTTP/1.1 ")
        .and_then(|t| t.get(..3))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (code, answer[split..].to_vec())
}

/// What the build without FUSE must do (`scripts/test.sh` runs this test alone with that
/// build's binary in `$ZARRFS_TEST_BIN`): serve every array of every fixture store as
/// zarr-python reads it.
#[test]
fn the_build_without_fuse_serves_every_fixture_array() {
    use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
    // The binary is the build without FUSE: it knows no `mount`.
    let mount = Command::new(zarrfs())
        .args(["mount", "--help"])
        .output()
        .expect("run zarrfs");
    assert!(
        !mount.status.success(),
        "{} has a mount command: set ZARRFS_TEST_BIN to the build without FUSE",
        zarrfs().display()
    );
    let m = common::Manifest::load();
    let mut checked = 0;
    let mut failures = Vec::new();
    for store in common::fixtures::stores(&m) {
        let dir = m.store_dir(&store);
        let served = Served::start(dir.to_str().expect("path"), &[]);
        let addr = served.addr();
        for entry in common::fixtures::arrays_of(&m, &store) {
            if entry["vlen"] == true || common::fixtures::is_unsupported(entry) {
                continue;
            }
            let file = common::mount::array_file(
                &m,
                &store,
                entry["path"].as_str().unwrap_or(""),
                Path::new("/"),
            );
            let path: Vec<String> = file
                .components()
                .skip(1)
                .map(|c| {
                    utf8_percent_encode(&c.as_os_str().to_string_lossy(), NON_ALPHANUMERIC)
                        .to_string()
                })
                .collect();
            let (code, body) = http_get(&addr, &format!("/{}", path.join("/")));
            if code != 200
                || common::sha256(&body) != entry["sha256"]["C_little"].as_str().unwrap_or("")
            {
                failures.push(format!(
                    "{store}/{}: {code}, {} bytes",
                    entry["path"],
                    body.len()
                ));
            }
            checked += 1;
        }
    }
    common::assert_no_failures(&failures);
    assert!(checked >= 400, "{checked} arrays checked");
    eprintln!("{checked} arrays served as zarr-python reads them");
}

/// Headless Chromium (Debian's, installed by scripts/test.sh) on `url`: `what` is
/// `--dump-dom` (the page as the browser built it) or `--screenshot=FILE`.
fn chromium(url: &str, what: &str) -> String {
    common::require_tool("chromium", "run scripts/test.sh (it installs it)");
    let profile = TempDir::new("chromium");
    let out = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--window-size=1200,900",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(what)
        .arg(url)
        .output()
        .expect("run chromium");
    assert!(
        out.status.success(),
        "chromium {what} {url}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The width and height of a PNG file (its IHDR).
fn png_size(bytes: &[u8]) -> Option<(u32, u32)> {
    if bytes.len() < 24 || &bytes[..8] != b"\x89PNG\r\n\x1a\n" || &bytes[12..16] != b"IHDR" {
        return None;
    }
    let n = |i: usize| u32::from_be_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
    Some((n(16), n(20)))
}

#[test]
fn a_browser_loads_the_root_and_a_group_page_with_their_links_and_array_rows() {
    let store = fixtures_dir().join("v3");
    let served = Served::start(store.to_str().expect("path"), &["--views", "raw,tiff"]);
    let shots = TempDir::new("shots");
    let mut sizes = Vec::new();
    for page in ["/", "/dtypes/"] {
        let url = format!("{}{page}", served.url);
        let dom = chromium(&url, "--dump-dom");
        let listing: serde_json::Value =
            serde_json::from_str(&curl(&served, &format!("{page}?format=json"), &[]))
                .expect("json");
        let entries = listing["entries"].as_array().expect("entries");
        assert!(!entries.is_empty());
        // Every entry is a link the browser shows, with its name.
        for e in entries {
            let href = e["href"].as_str().expect("href");
            let name = e["name"].as_str().expect("name");
            let shown = if e["type"] == "directory" {
                format!("{name}/")
            } else {
                name.to_string()
            };
            let link = format!("<a href=\"{href}\">{shown}</a>");
            assert!(dom.contains(&link), "{page}: no {link}");
        }
        // Every file of an array is a row of class "array" with its shape and chunks.
        let arrays: Vec<&serde_json::Value> = entries
            .iter()
            .filter(|e| e.get("array").is_some())
            .collect();
        let rows = dom.matches("<tr class=\"array\">").count();
        assert_eq!(rows, arrays.len(), "{page}: array rows");
        for e in &arrays {
            let join = |k: &str| {
                e["array"][k]
                    .as_array()
                    .expect("list")
                    .iter()
                    .map(|v| v.to_string())
                    .collect::<Vec<_>>()
                    .join(" × ")
            };
            let cells = format!("<td>{}</td>", join("shape"));
            assert!(dom.contains(&cells), "{page}: no shape cell {cells}");
            assert!(
                dom.contains(&format!("<td>{}</td></tr>", join("chunks"))),
                "{page}: chunks"
            );
        }
        if page == "/dtypes/" {
            assert!(arrays.len() >= 40, "{} array rows", arrays.len());
        }
        // The screenshot: a PNG of the window, not blank.
        let file = shots.path().join(format!("page{}.png", sizes.len()));
        chromium(&url, &format!("--screenshot={}", file.display()));
        let png = std::fs::read(&file).expect("screenshot");
        assert_eq!(png_size(&png), Some((1200, 900)), "{page}");
        sizes.push(png.len());
    }
    assert!(
        sizes.iter().all(|&n| n > 10_000),
        "screenshots: {sizes:?} bytes"
    );
}

/// A davfs2 mount of a server, unmounted when dropped.
struct DavMount {
    dir: TempDir,
}

impl DavMount {
    fn new(url: &str) -> DavMount {
        let found = Path::new("/usr/sbin/mount.davfs").is_file();
        assert!(
            found,
            "davfs2 is missing: run scripts/test.sh (it installs it)"
        );
        let dir = TempDir::new("davfs");
        std::fs::create_dir(dir.path().join("mnt")).expect("mountpoint");
        // No locks (the server is read-only) and no prompt for credentials.
        std::fs::write(dir.path().join("davfs2.conf"), "use_locks 0\nask_auth 0\n").expect("conf");
        let out = Command::new("mount.davfs")
            .arg(format!("{url}/"))
            .arg(dir.path().join("mnt"))
            .arg("-o")
            .arg(format!(
                "ro,conf={}",
                dir.path().join("davfs2.conf").display()
            ))
            .stdin(Stdio::null())
            .output()
            .expect("run mount.davfs");
        assert!(
            out.status.success(),
            "mount.davfs: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        DavMount { dir }
    }

    fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join("mnt").join(p)
    }
}

impl Drop for DavMount {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg(self.dir.path().join("mnt"))
            .status();
    }
}

#[test]
fn a_davfs2_mount_reads_the_files_of_the_fuse_mount() {
    let store = fixtures_dir().join("v3");
    let args = ["--views", "raw,npy"];
    let fuse = Mount::new(&store, &args);
    let served = Served::start(store.to_str().expect("path"), &args);
    let dav = DavMount::new(&served.url);
    let mut compared = 0;
    for group in ["dtypes", "codecs", "shapes"] {
        let mut names: Vec<String> = std::fs::read_dir(fuse.path(group))
            .expect("readdir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        for name in names {
            let rel = format!("{group}/{name}");
            // What the FUSE mount cannot read (an unsupported codec), davfs2 cannot either.
            let Ok(want) = std::fs::read(fuse.path(&rel)) else {
                assert!(
                    std::fs::read(dav.path(&rel)).is_err(),
                    "{rel}: read through davfs2"
                );
                continue;
            };
            let got = std::fs::read(dav.path(&rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
            assert!(got == want, "{rel}: davfs2 read other bytes");
            compared += 1;
        }
    }
    assert!(compared >= 100, "{compared} files compared");
}
