//! The bad-input corpus: every broken or hostile store written by
//! `scripts/make_hostile.py` goes through `zarrfs cat`, `zarrfs inspect` (text and
//! `--json`) and a real mount, each process under `prlimit --as=1GiB`, and must get
//! exactly what its manifest entry expects (see the script's docstring): no crash, the
//! expected error naming a store key, siblings byte-exact, the mount alive afterwards, no
//! hang, peak RSS within `--cache-size` (64 MiB) + 256 MiB.
//!
//! Why these limits: the daemon's virtual size on the fixture stores is 145–175 MiB
//! (VmPeak with `--cache-size 64MiB --threads 2`), `cat`'s about the same; 1 GiB of
//! address space leaves room for the cache, the allowed RSS and thread stacks, while any
//! gigabyte-sized allocation a hostile header asks for fails inside the process instead
//! of taking the machine. Every operation has a time guard (20 s; 180 s for 1 GiB
//! streams): an operation still running then counts as a hang.
//!
//! One test per category (metadata, chunks, filesystem); each runs all of its cases,
//! collects every failure, and asserts once at the end with the full list.

use crate::common;

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use common::hostile::{
    errno_name, guarded, run_zarrfs, Case, Corpus, Daemon, Expect, Kind, Run, Started, StdoutSpec,
    BIG_GUARD, CAT_CAP, GUARD, INSPECT_GUARD, RSS_BOUND,
};
use common::mount::pread_full;
use common::{sha256, tail};

/// Failures of one case.
struct Findings {
    items: Vec<String>,
}

impl Findings {
    fn add(&mut self, what: impl Into<String>) {
        self.items.push(what.into());
    }
}

fn run_category(category: &str) {
    let corpus = Corpus::load();
    let cases = corpus.category(category);
    assert!(!cases.is_empty(), "no {category} cases in the corpus");
    let mut failed = Vec::new();
    for case in &cases {
        let store = corpus.dir.join(&case.store);
        let mut f = Findings { items: Vec::new() };
        let started = std::time::Instant::now();
        check_cli(case, &store, &mut f);
        check_mount(case, &store, &mut f);
        eprintln!(
            "hostile {category}: {} {} ({:.1} s)",
            case.name,
            if f.items.is_empty() { "ok" } else { "FAILS" },
            started.elapsed().as_secs_f64()
        );
        if !f.items.is_empty() {
            failed.push(format!(
                "{} [{}] ({}):\n    - {}",
                case.name,
                case.format,
                case.what,
                f.items.join("\n    - ")
            ));
        }
    }
    eprintln!(
        "hostile {category}: {} cases, {} pass, {} fail",
        cases.len(),
        cases.len() - failed.len(),
        failed.len()
    );
    assert!(
        failed.is_empty(),
        "{} of {} {category} cases fail:\n{}",
        failed.len(),
        cases.len(),
        failed.join("\n")
    );
}

#[test]
fn hostile_metadata() {
    run_category("metadata");
}

#[test]
fn hostile_chunks() {
    run_category("chunks");
}

#[test]
fn hostile_filesystem() {
    run_category("filesystem");
}

// --- cat and inspect ------------------------------------------------------------------

fn store_arg(store: &Path) -> String {
    store.to_string_lossy().into_owned()
}

/// Crash, hang and memory checks every run gets.
fn check_run(run: &Run, f: &mut Findings) -> bool {
    if !run.exited() {
        f.add(format!("crash or hang: {}", run.describe()));
        return false;
    }
    if run.code == Some(101) || run.stderr.contains("panicked") {
        f.add(format!("panic: {}", run.describe()));
        return false;
    }
    if run.max_rss > RSS_BOUND {
        f.add(format!(
            "peak RSS {} MiB over the bound of {} MiB: {}",
            run.max_rss >> 20,
            RSS_BOUND >> 20,
            run.describe()
        ));
    }
    true
}

fn names_a_key(text: &str, keys: &[String]) -> bool {
    keys.iter().any(|k| text.contains(k.as_str()))
}

/// A failed `cat` of `path` (exit 1) must name one of `keys` in its message.
fn check_cat_names_a_key(run: &Run, path: &str, keys: &[String], f: &mut Findings) {
    if !names_a_key(&run.stderr, keys) {
        f.add(format!(
            "cat of {path}: the message names none of {keys:?}: {}",
            run.describe()
        ));
    }
}

/// `zarrfs cat STORE PATH` with its stdout hashed (up to `CAT_CAP`).
fn cat_hashed(store: &str, path: &str) -> Run {
    let spec = StdoutSpec {
        cap: CAT_CAP,
        hash: true,
        ..Default::default()
    };
    run_zarrfs(&["cat", store, path], spec, BIG_GUARD)
}

/// A `cat` that must print `nbytes` bytes of sha256 `sha`; `what` names the array in
/// the findings.
fn check_cat_bytes(run: &Run, what: &str, nbytes: u64, sha: &str, f: &mut Findings) {
    if run.code != Some(0) {
        f.add(format!("cat of {what}: {}", run.describe()));
    } else if run.stdout.len != nbytes || run.stdout.sha256 != sha {
        f.add(format!(
            "cat of {what}: {} bytes, sha256 {} (expected {nbytes} bytes, {sha})",
            run.stdout.len, run.stdout.sha256
        ));
    }
}

fn check_cli(case: &Case, store: &Path, f: &mut Findings) {
    let s = store_arg(store);
    // Siblings: byte-exact, or (unusable root) exit 1 with a message.
    for g in &case.good {
        let run = cat_hashed(&s, &g.path);
        if !check_run(&run, f) {
            continue;
        }
        if case.root_unusable {
            if run.code != Some(1) || run.stderr.trim().is_empty() {
                f.add(format!(
                    "cat of a store with unusable root metadata must exit 1 with a message: {}",
                    run.describe()
                ));
            }
        } else {
            let what = format!("sibling {}", g.path);
            check_cat_bytes(&run, &what, g.nbytes, &g.sha256, f);
        }
    }
    for e in &case.expect {
        check_cat(e, &s, f);
    }
    check_inspect(case, &s, f);
}

fn check_cat(e: &Expect, store: &str, f: &mut Findings) {
    match e.kind {
        Kind::Meta | Kind::Fail | Kind::Chunk | Kind::Refused => {
            let run = run_zarrfs(&["cat", store, &e.path], StdoutSpec::default(), BIG_GUARD);
            if !check_run(&run, f) {
                return;
            }
            if run.code != Some(1) {
                f.add(format!(
                    "cat of {} must exit 1 ({:?} expected): {}",
                    e.path,
                    e.kind,
                    run.describe()
                ));
            } else {
                check_cat_names_a_key(&run, &e.path, &e.keys, f);
            }
        }
        Kind::Bytes | Kind::Optional => {
            let run = cat_hashed(store, &e.path);
            if !check_run(&run, f) {
                return;
            }
            if e.kind == Kind::Optional && run.code == Some(1) {
                check_cat_names_a_key(&run, &e.path, &e.keys, f);
            } else {
                check_cat_bytes(&run, &e.path, e.nbytes, &e.sha256, f);
            }
        }
        Kind::Uniform => {
            let spec = StdoutSpec {
                cap: CAT_CAP,
                pattern: Some(e.pattern.clone()),
                regions: e.regions.iter().map(|r| (r.0, r.1)).collect(),
                ..Default::default()
            };
            let run = run_zarrfs(&["cat", store, &e.path], spec, BIG_GUARD);
            if !check_run(&run, f) {
                return;
            }
            let want = e.nbytes.min(CAT_CAP);
            if run.code != Some(0) {
                f.add(format!("cat of {}: {}", e.path, run.describe()));
                return;
            }
            if run.stdout.len != want {
                f.add(format!(
                    "cat of {}: {} bytes (expected {want})",
                    e.path, run.stdout.len
                ));
            }
            if let Some(at) = run.stdout.pattern_mismatch {
                f.add(format!(
                    "cat of {}: byte {at} differs from the fill pattern",
                    e.path
                ));
            }
            for (k, (off, len, sha)) in e.regions.iter().enumerate() {
                if off + len <= run.stdout.len && sha256(&run.stdout.regions[k]) != *sha {
                    f.add(format!(
                        "cat of {}: bytes {off}..{} differ from zarr-python's",
                        e.path,
                        off + len
                    ));
                }
            }
        }
    }
}

/// The node at `/path` in `inspect --json` output.
fn inspect_node<'a>(nodes: &'a [Value], path: &str) -> Option<&'a Value> {
    let want = format!("/{path}");
    nodes
        .iter()
        .find(|n| n["path"].as_str() == Some(want.as_str()))
}

fn check_inspect(case: &Case, store: &str, f: &mut Findings) {
    let keep = StdoutSpec {
        keep: 64 << 20,
        cap: 64 << 20,
        ..Default::default()
    };
    let text = run_zarrfs(&["inspect", store], keep.clone(), INSPECT_GUARD);
    let json = run_zarrfs(&["inspect", store, "--json"], keep, INSPECT_GUARD);
    let text_ok = check_run(&text, f);
    let json_ok = check_run(&json, f);
    if case.root_unusable {
        for run in [&text, &json] {
            if run.exited() && (run.code != Some(1) || run.stderr.trim().is_empty()) {
                f.add(format!(
                    "inspect of a store with unusable root metadata must exit 1 with a message: {}",
                    run.describe()
                ));
            }
        }
        return;
    }
    if text_ok && text.code != Some(0) {
        f.add(format!("inspect must exit 0: {}", text.describe()));
    }
    if !json_ok || json.code != Some(0) {
        if json_ok {
            f.add(format!("inspect --json must exit 0: {}", json.describe()));
        }
        return;
    }
    let text_out = String::from_utf8_lossy(&text.stdout.kept).into_owned();
    let nodes: Vec<Value> = match serde_json::from_slice(&json.stdout.kept) {
        Ok(Value::Array(nodes)) => nodes,
        other => {
            f.add(format!(
                "inspect --json printed no JSON list of nodes ({:?}): {}",
                other.err(),
                json.describe()
            ));
            return;
        }
    };
    for g in &case.good {
        match inspect_node(&nodes, &g.path) {
            None => f.add(format!("inspect --json does not list sibling /{}", g.path)),
            Some(n) if n.get("error").is_some() => f.add(format!(
                "inspect --json reports an error for sibling /{}: {}",
                g.path, n["error"]
            )),
            Some(_) => {}
        }
    }
    for e in &case.expect {
        let node = inspect_node(&nodes, &e.path);
        match e.kind {
            Kind::Meta => {
                let error = node.and_then(|n| n["error"].as_str());
                match error {
                    None => f.add(format!(
                        "inspect --json must report the error of /{}: {}",
                        e.path,
                        node.map_or("node missing".to_string(), |n| n.to_string())
                    )),
                    Some(msg) if !names_a_key(msg, &e.keys) => f.add(format!(
                        "inspect --json error of /{} names none of {:?}: {msg}",
                        e.path, e.keys
                    )),
                    Some(_) => {}
                }
                if text_ok && !names_a_key(&text_out, &e.keys) {
                    f.add(format!(
                        "inspect (text) does not report the error of /{} naming {:?}",
                        e.path, e.keys
                    ));
                }
            }
            Kind::Chunk | Kind::Bytes | Kind::Uniform => match node {
                None => f.add(format!("inspect --json does not list /{}", e.path)),
                Some(n) if n.get("error").is_some() => f.add(format!(
                    "inspect --json reports an error for /{} (its metadata is fine): {}",
                    e.path, n["error"]
                )),
                Some(_) => {}
            },
            Kind::Fail => {
                if node.is_none() {
                    f.add(format!("inspect --json does not list /{}", e.path));
                }
            }
            Kind::Refused | Kind::Optional => {}
        }
    }
    for l in &case.listings {
        for (name, _) in &l.present {
            let p = join(&l.dir, name);
            if inspect_node(&nodes, &p).is_none() {
                f.add(format!("inspect --json does not list /{p}"));
            }
        }
        for name in &l.absent {
            let p = join(&l.dir, name);
            if inspect_node(&nodes, &p).is_some() {
                f.add(format!("inspect --json lists /{p}, which must be left out"));
            }
        }
    }
}

fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

// --- the mount ------------------------------------------------------------------------

/// One guarded mount operation; `Err` with a description when it hung.
fn op<T: Send + 'static>(
    what: &str,
    guard: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, String> {
    guarded(guard, f).map_err(|()| format!("hang: {what} did not return within {guard:?}"))
}

fn errno(e: &std::io::Error) -> Option<i32> {
    e.raw_os_error()
}

/// Open and read `len` bytes at `offset`.
fn read_range(path: PathBuf, offset: u64, len: usize) -> std::io::Result<Vec<u8>> {
    let file = std::fs::File::open(path)?;
    pread_full(&file, offset, len)
}

fn check_mount(case: &Case, store: &Path, f: &mut Findings) {
    let daemon = match Daemon::start(store) {
        Started::Mounted(d) => d,
        Started::Exited(code, signal, log) => {
            if case.root_unusable && code == Some(1) && !log.trim().is_empty() {
                return;
            }
            f.add(format!(
                "zarrfs mount exited before mounting (code {code:?}, signal {signal:?}){}; log: {}",
                if case.root_unusable {
                    " (expected exit 1 with a message)"
                } else {
                    ""
                },
                tail(&log, 3000)
            ));
            return;
        }
        Started::Hung(log) => {
            f.add(format!(
                "zarrfs mount neither mounted nor exited within {GUARD:?} (hang); log: {}",
                tail(&log, 3000)
            ));
            return;
        }
    };
    if case.root_unusable {
        f.add("zarrfs mount came up although the root metadata is unusable (expected exit 1)");
        return; // dropping the daemon kills it and clears the mount
    }
    let mut mf = Findings { items: Vec::new() };
    let completed = mount_checks(case, &daemon, &mut mf);
    // Peak memory, read before unmounting.
    match daemon.peak_rss() {
        Some(rss) if rss > RSS_BOUND => mf.add(format!(
            "daemon peak RSS {} MiB over the bound of {} MiB",
            rss >> 20,
            RSS_BOUND >> 20
        )),
        Some(_) => {}
        None => mf.add("the daemon is gone (no /proc status) before unmounting"),
    }
    let log = daemon.log();
    if log.contains("panicked") {
        mf.add("a daemon thread panicked (see the log)");
    }
    if completed {
        let mut daemon = daemon;
        if let Some(status) = daemon.try_wait() {
            use std::os::unix::process::ExitStatusExt;
            mf.add(format!(
                "the daemon died during the checks (code {:?}, signal {:?})",
                status.code(),
                status.signal()
            ));
        } else {
            match daemon.unmount() {
                Ok((Some(0), _)) => {}
                Ok((code, signal)) => mf.add(format!(
                    "the daemon exited with code {code:?}, signal {signal:?} after zarrfs umount"
                )),
                Err(e) => mf.add(e),
            }
        }
    } else {
        drop(daemon);
    }
    if !mf.items.is_empty() {
        for item in mf.items {
            f.add(format!("mount: {item}"));
        }
        f.add(format!("daemon log (tail): {}", tail(&log, 3000)));
    }
}

/// The checks on a live mount; `false` when one of them hung (the mount is then killed).
fn mount_checks(case: &Case, d: &Daemon, f: &mut Findings) -> bool {
    // Listings.
    for l in &case.listings {
        let dir = d.path(&l.dir);
        let listed = match op(&format!("readdir /{}", l.dir), GUARD, move || {
            std::fs::read_dir(&dir).and_then(|it| {
                it.map(|e| {
                    let e = e?;
                    Ok((e.file_name().to_string_lossy().into_owned(), e.file_type()?))
                })
                .collect::<std::io::Result<Vec<_>>>()
            })
        }) {
            Err(hang) => {
                f.add(hang);
                return false;
            }
            Ok(Err(e)) => {
                f.add(format!(
                    "readdir /{} failed: {e} ({})",
                    l.dir,
                    errno_name(errno(&e))
                ));
                continue;
            }
            Ok(Ok(listed)) => listed,
        };
        for (name, kind) in &l.present {
            match listed.iter().find(|(n, _)| n == name) {
                None => f.add(format!("/{} does not list {name}", l.dir)),
                Some((_, t)) if (kind == "dir") != t.is_dir() => f.add(format!(
                    "/{} lists {name} as {t:?}, expected a {kind}",
                    l.dir
                )),
                Some(_) => {}
            }
        }
        for name in &l.absent {
            if listed.iter().any(|(n, _)| n == name) {
                f.add(format!("/{} lists {name}, which must be left out", l.dir));
            }
        }
        for (name, _) in &listed {
            if name.is_empty() || name == "." || name == ".." || name.len() > 255 {
                f.add(format!("/{} lists an impossible name {name:?}", l.dir));
            }
        }
    }
    // Siblings.
    for g in &case.good {
        if !check_bytes(d, &g.path, g.nbytes, &g.sha256, f) {
            return false;
        }
    }
    for e in &case.expect {
        if !check_expect(d, e, f) {
            return false;
        }
    }
    // The daemon logs the key of every failure it served.
    let log = d.log();
    for e in &case.expect {
        if matches!(e.kind, Kind::Meta | Kind::Fail | Kind::Chunk) && !names_a_key(&log, &e.keys) {
            f.add(format!(
                "the daemon log names none of {:?} for /{}",
                e.keys, e.path
            ));
        }
    }
    alive(case, d, f)
}

/// A read that must fail: `Ok(true)` if it failed with one of `errnos`.
fn expect_failure(
    d: &Daemon,
    path: &str,
    offset: u64,
    len: usize,
    errnos: &[i32],
    f: &mut Findings,
) -> bool {
    let Some(read) = read_at(d, path, offset, len, f) else {
        return false;
    };
    match read {
        Ok(bytes) => {
            f.add(format!(
                "read of /{path} at {offset} returned {} bytes; it must fail with {:?}",
                bytes.len(),
                errnos
                    .iter()
                    .map(|e| errno_name(Some(*e)))
                    .collect::<Vec<_>>()
            ));
            true
        }
        Err(e) => {
            if !errno(&e).is_some_and(|n| errnos.contains(&n)) {
                f.add(format!(
                    "read of /{path} at {offset} failed with {} ({e}); expected {:?}",
                    errno_name(errno(&e)),
                    errnos
                        .iter()
                        .map(|e| errno_name(Some(*e)))
                        .collect::<Vec<_>>()
                ));
            }
            true
        }
    }
}

/// A guarded read of `len` bytes of `/path` at `offset`; `None` when it hung (the hang
/// is then a finding).
fn read_at(
    d: &Daemon,
    path: &str,
    offset: u64,
    len: usize,
    f: &mut Findings,
) -> Option<std::io::Result<Vec<u8>>> {
    let p = d.path(path);
    op(&format!("read /{path} at {offset}"), GUARD, move || {
        read_range(p, offset, len)
    })
    .map_err(|hang| f.add(hang))
    .ok()
}

/// How a `check_size` went.
enum Sized {
    /// The stat hung.
    Hung,
    /// The stat failed (a finding).
    Failed,
    /// The stat answered (a wrong size is a finding).
    Done,
}

/// stat of `/path` must give a size of `nbytes`.
fn check_size(d: &Daemon, path: &str, nbytes: u64, f: &mut Findings) -> Sized {
    match stat(d, path, f) {
        Err(()) => Sized::Hung,
        Ok(Err(e)) => {
            f.add(format!("stat /{path}: {e}"));
            Sized::Failed
        }
        Ok(Ok(m)) => {
            if m.len() != nbytes {
                f.add(format!("/{path} has size {} (expected {nbytes})", m.len()));
            }
            Sized::Done
        }
    }
}

/// stat of `path` in the mount; `Err(false)` when it hung.
fn stat(
    d: &Daemon,
    path: &str,
    f: &mut Findings,
) -> Result<std::io::Result<std::fs::Metadata>, ()> {
    let p = d.path(path);
    op(&format!("stat /{path}"), GUARD, move || {
        std::fs::metadata(p)
    })
    .map_err(|hang| f.add(hang))
}

/// Whole-file read compared with a sha256; `false` when it hung.
fn check_bytes(d: &Daemon, path: &str, nbytes: u64, sha: &str, f: &mut Findings) -> bool {
    match check_size(d, path, nbytes, f) {
        Sized::Hung => return false,
        Sized::Failed => return true,
        Sized::Done => {}
    }
    let p = d.path(path);
    match op(&format!("read /{path}"), BIG_GUARD, move || {
        std::fs::read(p)
    }) {
        Err(hang) => {
            f.add(hang);
            false
        }
        Ok(Err(e)) => {
            f.add(format!("read /{path}: {e} ({})", errno_name(errno(&e))));
            true
        }
        Ok(Ok(bytes)) => {
            if bytes.len() as u64 != nbytes || sha256(&bytes) != sha {
                f.add(format!(
                    "read /{path}: {} bytes, sha256 {} (expected {nbytes} bytes, {sha})",
                    bytes.len(),
                    sha256(&bytes)
                ));
            }
            true
        }
    }
}

fn check_expect(d: &Daemon, e: &Expect, f: &mut Findings) -> bool {
    let path = e.path.as_str();
    match e.kind {
        Kind::Meta | Kind::Fail => {
            match stat(d, path, f) {
                Err(()) => return false,
                Ok(Err(err)) => f.add(format!(
                    "stat /{path} must work for a node whose metadata is unusable: {err}"
                )),
                Ok(Ok(m)) if !m.is_file() => f.add(format!("/{path} is not a file")),
                Ok(Ok(_)) => {}
            }
            expect_failure(d, path, 0, 4096, &e.errnos, f)
        }
        Kind::Refused => match stat(d, path, f) {
            Err(()) => false,
            Ok(Err(err)) if errno(&err) == Some(libc::ENOENT) => true,
            Ok(Err(err)) => {
                f.add(format!(
                    "stat /{path}: {err} (expected ENOENT, or a file whose reads fail)"
                ));
                true
            }
            Ok(Ok(_)) => expect_failure(d, path, 0, 4096, &e.errnos, f),
        },
        Kind::Chunk if e.vlen => {
            match stat(d, path, f) {
                Err(()) => return false,
                Ok(Err(err)) => f.add(format!("stat /{path}: {err}")),
                Ok(Ok(_)) => {}
            }
            expect_failure(d, path, 0, 4096, &e.errnos, f)
        }
        Kind::Chunk => {
            if let Sized::Hung = check_size(d, path, e.nbytes, f) {
                return false;
            }
            for &(off, len) in &e.broken {
                if !expect_failure(d, path, off, len as usize, &e.errnos, f) {
                    return false;
                }
            }
            for (off, len, sha) in &e.intact {
                let (off, len) = (*off, *len as usize);
                let Some(read) = read_at(d, path, off, len, f) else {
                    return false;
                };
                match read {
                    Err(err) => f.add(format!(
                        "read of intact bytes {off}..{} of /{path} failed: {err} ({})",
                        off + len as u64,
                        errno_name(errno(&err))
                    )),
                    Ok(bytes) if sha256(&bytes) != *sha => f.add(format!(
                        "intact bytes {off}..{} of /{path} differ from zarr-python's",
                        off + len as u64
                    )),
                    Ok(_) => {}
                }
            }
            // A whole-file read crosses the broken chunk.
            let p = d.path(path);
            match op(&format!("whole read of /{path}"), BIG_GUARD, move || {
                std::fs::read(p)
            }) {
                Err(hang) => {
                    f.add(hang);
                    return false;
                }
                Ok(Ok(bytes)) => f.add(format!(
                    "whole read of /{path} returned {} bytes; it must fail",
                    bytes.len()
                )),
                Ok(Err(err)) if !errno(&err).is_some_and(|n| e.errnos.contains(&n)) => {
                    f.add(format!(
                        "whole read of /{path} failed with {}",
                        errno_name(errno(&err))
                    ))
                }
                Ok(Err(_)) => {}
            }
            true
        }
        Kind::Bytes => check_bytes(d, path, e.nbytes, &e.sha256, f),
        Kind::Optional => match stat(d, path, f) {
            Err(()) => false,
            Ok(Err(err)) if errno(&err) == Some(libc::ENOENT) => true,
            Ok(_) => check_bytes(d, path, e.nbytes, &e.sha256, f),
        },
        Kind::Uniform => check_uniform(d, e, f),
    }
}

/// A fill-value (repeating pattern) file: its regions, and the whole file (when at most
/// 1 GiB) or a sample of reads spread over it.
fn check_uniform(d: &Daemon, e: &Expect, f: &mut Findings) -> bool {
    let path = e.path.clone();
    match check_size(d, &path, e.nbytes, f) {
        Sized::Hung => return false,
        Sized::Failed => return true,
        Sized::Done => {}
    }
    for (off, len, sha) in &e.regions {
        let (off, len) = (*off, *len as usize);
        let Some(read) = read_at(d, &path, off, len, f) else {
            return false;
        };
        match read {
            Err(err) => f.add(format!(
                "read /{path} at {off}: {err} ({})",
                errno_name(errno(&err))
            )),
            Ok(bytes) if sha256(&bytes) != *sha => f.add(format!(
                "bytes {off}..{} of /{path} differ from zarr-python's",
                off + len as u64
            )),
            Ok(_) => {}
        }
    }
    let pattern = e.pattern.clone();
    let nbytes = e.nbytes;
    let p = d.path(&path);
    let scan = move || -> Result<Option<u64>, std::io::Error> {
        let file = std::fs::File::open(p)?;
        let plen = pattern.len() as u64;
        let block = 1u64 << 20;
        let tiled: Vec<u8> = pattern
            .iter()
            .copied()
            .cycle()
            .take((block + plen) as usize)
            .collect();
        let mut buf = vec![0u8; block as usize];
        let mut check = |off: u64, len: u64| -> Result<Option<u64>, std::io::Error> {
            let len = len.min(nbytes - off) as usize;
            let mut got = 0;
            while got < len {
                let n = file.read_at(&mut buf[got..len], off + got as u64)?;
                if n == 0 {
                    return Ok(Some(off + got as u64));
                }
                got += n;
            }
            let phase = (off % plen) as usize;
            let want = &tiled[phase..phase + len];
            Ok(buf[..len]
                .iter()
                .zip(want)
                .position(|(a, b)| a != b)
                .map(|i| off + i as u64))
        };
        if nbytes <= CAT_CAP {
            let mut off = 0;
            while off < nbytes {
                if let Some(bad) = check(off, block)? {
                    return Ok(Some(bad));
                }
                off += block;
            }
        } else {
            let mut lcg = common::mount::Lcg(7);
            for _ in 0..32 {
                let off = lcg.next(nbytes >> 12) << 12;
                if let Some(bad) = check(off, 4096)? {
                    return Ok(Some(bad));
                }
            }
        }
        Ok(None)
    };
    match op(&format!("scan of /{path}"), BIG_GUARD, scan) {
        Err(hang) => {
            f.add(hang);
            false
        }
        Ok(Err(err)) => {
            f.add(format!(
                "scan of /{path}: {err} ({})",
                errno_name(errno(&err))
            ));
            true
        }
        Ok(Ok(Some(at))) => {
            f.add(format!(
                "/{path}: byte {at} differs from the fill pattern (or the file ends early)"
            ));
            true
        }
        Ok(Ok(None)) => true,
    }
}

/// After everything: the daemon still answers a fresh lookup, an xattr of a sibling and a
/// root listing.
fn alive(case: &Case, d: &Daemon, f: &mut Findings) -> bool {
    let fresh = d.path("no-such-entry-after-the-checks");
    match op("fresh lookup", GUARD, move || std::fs::metadata(fresh)) {
        Err(hang) => {
            f.add(hang);
            return false;
        }
        Ok(Err(e)) if errno(&e) == Some(libc::ENOENT) => {}
        Ok(r) => f.add(format!(
            "a fresh lookup of a missing name gave {:?} instead of ENOENT: is the daemon alive?",
            r.map(|_| ()).map_err(|e| errno_name(errno(&e)))
        )),
    }
    if let Some(g) = case.good.first() {
        let p = d.path(&g.path);
        let shape = op("getxattr user.zarr.shape", GUARD, move || {
            let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).expect("path");
            let mut buf = [0u8; 256];
            // SAFETY: valid C strings and a buffer of the size given.
            let n = unsafe {
                libc::getxattr(
                    c.as_ptr(),
                    c"user.zarr.shape".as_ptr(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                )
            };
            if n < 0 {
                Err(std::io::Error::last_os_error())
            } else {
                Ok(String::from_utf8_lossy(&buf[..n as usize]).into_owned())
            }
        });
        match shape {
            Err(hang) => {
                f.add(hang);
                return false;
            }
            Ok(Err(e)) => f.add(format!(
                "getxattr user.zarr.shape of sibling /{} after the checks: {e}",
                g.path
            )),
            Ok(Ok(_)) => {}
        }
    }
    let root = d.path("");
    match op("root listing after the checks", GUARD, move || {
        std::fs::read_dir(root).map(|it| it.count())
    }) {
        Err(hang) => {
            f.add(hang);
            false
        }
        Ok(Err(e)) => {
            f.add(format!("the root no longer lists: {e}"));
            true
        }
        Ok(Ok(_)) => true,
    }
}
