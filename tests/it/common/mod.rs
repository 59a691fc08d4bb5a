//! Shared helpers for the end-to-end tests: the fixture manifest written by
//! `scripts/make_fixtures.py`, sha256 of byte streams, runs of the `zarrfs` binary
//! (plain or under an address-space limit) and temporary folders.

#![allow(dead_code)]

pub mod fixtures;
pub mod helper;
pub mod hostile;
pub mod mount;
pub mod servers;
pub mod user;

use std::io::Write;
use std::path::PathBuf;

use serde_json::Value;
use sha2::{Digest, Sha256};

/// The fixture folder: `$ZARRFS_FIXTURES` or `target/fixtures`. Missing fixtures are an
/// error: run `scripts/test.sh`, which writes them.
pub fn fixtures_dir() -> PathBuf {
    let dir = std::env::var_os("ZARRFS_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::common::repo().join("target/fixtures"));
    assert!(
        dir.join("manifest.json").is_file(),
        "no fixtures at {}: run scripts/test.sh (it writes them with zarr-python)",
        dir.display()
    );
    dir
}

/// The fixture folder and the manifest at `rel` in it, which `script` writes.
/// The Python of venv `name` under `target/` (made by `scripts/setup_python.sh`), or the
/// one environment variable `env` names; a missing one fails the test.
pub fn venv_python(env: &str, name: &str) -> PathBuf {
    let python = std::env::var_os(env).map(PathBuf::from).unwrap_or_else(|| {
        crate::common::repo()
            .join("target")
            .join(name)
            .join("bin/python")
    });
    assert!(
        python.exists(),
        "no Python at {}: run scripts/test.sh (scripts/setup_python.sh makes it)",
        python.display()
    );
    python
}

/// Runs Python `code` with `python` and `args` (the icechunk package's logs at error
/// level, Python's fault handler on): its stdout; a failure fails the test, naming
/// `what`, with how the process ended, its stderr and the end of its stdout.
pub fn run_python<A: AsRef<std::ffi::OsStr>>(
    python: &std::path::Path,
    what: &str,
    code: &str,
    args: impl IntoIterator<Item = A>,
) -> String {
    python_runs(python, what, code, args, 1)
}

/// [`run_python`] for a script that only reads: a run killed by a signal (the icechunk
/// package has been seen to crash as the interpreter exits, its output complete) is run
/// again, at most three times in all; each failed run's account is printed.
pub fn read_python<A: AsRef<std::ffi::OsStr>>(
    python: &std::path::Path,
    what: &str,
    code: &str,
    args: impl IntoIterator<Item = A>,
) -> String {
    python_runs(python, what, code, args, 3)
}

/// Runs the script up to `runs` times while it is killed by a signal; its stdout.
fn python_runs<A: AsRef<std::ffi::OsStr>>(
    python: &std::path::Path,
    what: &str,
    code: &str,
    args: impl IntoIterator<Item = A>,
    runs: u32,
) -> String {
    use std::os::unix::process::ExitStatusExt;
    let args: Vec<A> = args.into_iter().collect();
    let mut run = 1;
    loop {
        match python_once(python, what, code, &args) {
            Ok(out) => return out,
            Err((status, account)) if run < runs && status.signal().is_some() => {
                eprintln!("{what}: run {run} of {runs} failed, running it again: {account}");
                run += 1;
            }
            Err((_, account)) => panic!("{account}"),
        }
    }
}

/// One run: its stdout, or how it ended with an account of the failure (its stderr and
/// the end of its stdout).
fn python_once<A: AsRef<std::ffi::OsStr>>(
    python: &std::path::Path,
    what: &str,
    code: &str,
    args: &[A],
) -> Result<String, (std::process::ExitStatus, String)> {
    let out = std::process::Command::new(python)
        .args(["-X", "faulthandler", "-c", code])
        .args(args)
        .env("RUST_LOG", "error")
        .output()
        .unwrap_or_else(|e| panic!("{what}: run {}: {e}", python.display()));
    if !out.status.success() {
        let stdout = String::from_utf8_lossy(&out.stdout);
        let tail: String = stdout
            .chars()
            .rev()
            .take(400)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        return Err((
            out.status,
            format!(
                "{what}: {} ({} bytes of stdout, ending {tail:?}): {}",
                out.status,
                out.stdout.len(),
                String::from_utf8_lossy(&out.stderr)
            ),
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Move branch `branch` of the Icechunk repository at `repo` to `snapshot`, through the
/// icechunk Python package.
pub fn icechunk_reset_branch(repo: &std::path::Path, branch: &str, snapshot: &str) {
    let python = venv_python("ZARRFS_ICECHUNK_PYTHON", "venv-icechunk");
    let code = "import sys, icechunk\n\
                r = icechunk.Repository.open(icechunk.local_filesystem_storage(sys.argv[1]))\n\
                r.reset_branch(sys.argv[2], sys.argv[3])";
    let args = [repo.as_os_str(), branch.as_ref(), snapshot.as_ref()];
    run_python(&python, "reset_branch", code, args);
}

/// The JSON document on the last line of `out`.
pub fn last_json(out: &str) -> Value {
    let line = out.lines().last().unwrap_or("");
    serde_json::from_str(line).unwrap_or_else(|e| panic!("no JSON last line ({e}) in:\n{out}"))
}

pub fn manifest_at(rel: &str, script: &str) -> (PathBuf, Value) {
    let dir = crate::common::repo().join("target/fixtures");
    let manifest = dir.join(rel);
    let text = std::fs::read_to_string(&manifest).unwrap_or_else(|e| {
        panic!(
            "{}: {e}: run scripts/test.sh (scripts/{script})",
            manifest.display()
        )
    });
    (dir, serde_json::from_str(&text).expect("manifest JSON"))
}

pub struct Manifest {
    pub dir: PathBuf,
    pub doc: Value,
}

impl Manifest {
    pub fn load() -> Manifest {
        let dir = fixtures_dir();
        let text = std::fs::read_to_string(dir.join("manifest.json")).expect("read manifest");
        Manifest {
            doc: serde_json::from_str(&text).expect("parse manifest"),
            dir,
        }
    }

    pub fn arrays(&self) -> &[Value] {
        self.doc["arrays"].as_array().expect("arrays")
    }

    pub fn groups(&self) -> &[Value] {
        self.doc["groups"].as_array().expect("groups")
    }

    /// The folder of store `name`.
    pub fn store_dir(&self, name: &str) -> PathBuf {
        let stores = self.doc["stores"].as_array().expect("stores");
        let store = stores
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("store {name} not in manifest"));
        self.dir.join(store["dir"].as_str().expect("dir"))
    }
}

/// A `Write` that hashes what it is given.
#[derive(Default)]
pub struct HashWriter {
    pub hasher: Sha256,
    pub len: u64,
}

impl Write for HashWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.hasher.update(buf);
        self.len += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl HashWriter {
    pub fn hex(self) -> String {
        hex(&self.hasher.finalize())
    }
}

/// Fail the test with every failure listed, if there is any.
pub fn assert_no_failures(failures: &[String]) {
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn sha256(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// The four (label, order, big-endian) combinations a fixed-size array is checked in.
pub const LAYOUTS: [(&str, bool, bool); 4] = [
    ("C_little", false, false),
    ("F_little", true, false),
    ("C_big", false, true),
    ("F_big", true, true),
];

/// The outcome of one run of the `zarrfs` binary.
pub struct CliRun {
    pub args: Vec<String>,
    pub status: Option<std::process::ExitStatus>,
    pub stdout: Vec<u8>,
    pub stderr: String,
}

/// How long one run may take before it is killed as hung (a guard, not a benchmark).
const CLI_HANG_GUARD: std::time::Duration = std::time::Duration::from_secs(300);

impl CliRun {
    /// Runs `command` with stdin closed, collecting stdout and stderr; a run still going
    /// after five minutes is killed and reported as hung.
    pub fn run(command: &mut std::process::Command) -> CliRun {
        use std::io::Read;
        use std::process::Stdio;
        let args = std::iter::once(command.get_program())
            .chain(command.get_args())
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        command.env_remove("RUST_LOG");
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {:?}: {e}", command.get_program()));
        let mut out = child.stdout.take().expect("stdout");
        let mut err = child.stderr.take().expect("stderr");
        let out = std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = out.read_to_end(&mut v);
            v
        });
        let err = std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = err.read_to_end(&mut v);
            v
        });
        let deadline = std::time::Instant::now() + CLI_HANG_GUARD;
        let status = loop {
            match child.try_wait().expect("wait for zarrfs") {
                Some(status) => break Some(status),
                None if std::time::Instant::now() > deadline => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break None;
                }
                None => std::thread::sleep(std::time::Duration::from_millis(2)),
            }
        };
        CliRun {
            args,
            status,
            stdout: out.join().unwrap_or_default(),
            stderr: String::from_utf8_lossy(&err.join().unwrap_or_default()).into_owned(),
        }
    }

    pub fn success(&self) -> bool {
        self.status.is_some_and(|s| s.success())
    }

    /// The exit code; `None` when killed by a signal or hung.
    pub fn code(&self) -> Option<i32> {
        self.status.and_then(|s| s.code())
    }
}

/// Runs `command` (see [`CliRun::run`]) and fails the test unless it succeeds; its stdout.
pub fn run_ok(command: &mut std::process::Command) -> Vec<u8> {
    let run = CliRun::run(command);
    assert!(run.success(), "{run}");
    run.stdout
}

/// `pip install` of the venv at `venv`, quiet and from no index: the caller names the
/// wheels (and `--find-links` folders) to install.
pub fn pip_install_offline(venv: &std::path::Path) -> std::process::Command {
    let mut command = std::process::Command::new(venv.join("bin/pip"));
    command.args([
        "install",
        "--quiet",
        "--no-index",
        "--disable-pip-version-check",
    ]);
    command
}

/// The one zarrfs wheel in target/wheels (scripts/build-wheel.sh).
pub fn wheel() -> PathBuf {
    let dir = crate::common::repo().join("target/wheels");
    let wheels: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("zarrfs-") && n.ends_with(".whl"))
                })
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        wheels.len(),
        1,
        "want one zarrfs wheel in {}, found {wheels:?}: run scripts/build-wheel.sh \
         (scripts/test.sh does)",
        dir.display()
    );
    wheels[0].clone()
}

impl std::fmt::Display for CliRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use std::os::unix::process::ExitStatusExt;
        let status = match self.status {
            None => "hung (killed)".to_string(),
            Some(s) => match (s.code(), s.signal()) {
                (Some(c), _) => format!("exit {c}"),
                (None, Some(sig)) => format!("killed by signal {sig}"),
                _ => format!("{s}"),
            },
        };
        let stderr: String = self.stderr.chars().take(2000).collect();
        write!(
            f,
            "`{}`: {status}, {} bytes on stdout, stderr: {:?}",
            self.args.join(" "),
            self.stdout.len(),
            stderr.trim_end()
        )
    }
}

/// A fresh folder under the system temporary folder, removed when dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(label: &str) -> TempDir {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("zarrfs-test-{}-{n}-{label}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
        TempDir(dir)
    }

    pub fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Copies the folder `src` to `dst` (created), recursively.
pub fn copy_dir(src: &std::path::Path, dst: &std::path::Path) {
    std::fs::create_dir_all(dst).unwrap_or_else(|e| panic!("mkdir {}: {e}", dst.display()));
    let entries = std::fs::read_dir(src).unwrap_or_else(|e| panic!("read {}: {e}", src.display()));
    for entry in entries {
        let entry = entry.unwrap_or_else(|e| panic!("read {}: {e}", src.display()));
        let from = entry.path();
        let to = dst.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_dir(&from, &to);
        } else {
            std::fs::copy(&from, &to)
                .unwrap_or_else(|e| panic!("copy {} to {}: {e}", from.display(), to.display()));
        }
    }
}

/// Fail the test unless `tool` is on the PATH; `install` says how to get it.
pub fn require_tool(tool: &str, install: &str) {
    let found = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .stdout(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(found, "{tool} is missing: {install}");
}

/// The repository the tests run in: cargo's `CARGO_MANIFEST_DIR` at run time (cargo sets
/// it for the tests it runs, scripts/test.sh for those it runs itself), else the one the
/// binary was compiled in. A test binary restored from the test cache may have been
/// compiled in another clone, and cargo does not compile it again for a new path.
pub fn repo() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
}

/// The zarrfs binary under test: `$ZARRFS_TEST_BIN` (scripts/test.sh names the build
/// without FUSE there for the test of that build), else the one cargo built beside the
/// tests (`CARGO_BIN_EXE_zarrfs` at run time, as [`repo`]).
pub fn zarrfs() -> PathBuf {
    std::env::var_os("ZARRFS_TEST_BIN")
        .or_else(|| std::env::var_os("CARGO_BIN_EXE_zarrfs"))
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_zarrfs")))
}

/// `prlimit --as=AS_LIMIT -- zarrfs`: the binary under test with its address space
/// limited to `as_limit` bytes (prlimit is in util-linux); arguments follow.
pub fn zarrfs_limited(as_limit: u64) -> std::process::Command {
    let mut command = std::process::Command::new("prlimit");
    command
        .arg(format!("--as={as_limit}"))
        .arg("--")
        .arg(zarrfs());
    command
}

/// The last `n` characters of `text`, for failure messages.
pub fn tail(text: &str, n: usize) -> String {
    let skip = text.chars().count().saturating_sub(n);
    text.chars().skip(skip).collect()
}

/// `zarrfs cat` of one array: its stdout, or its error message.
pub fn try_cat(store: &std::path::Path, path: &str, args: &[&str]) -> Result<Vec<u8>, String> {
    let out = std::process::Command::new(zarrfs())
        .arg("cat")
        .arg(store)
        .arg(path)
        .args(args)
        .output()
        .expect("run zarrfs cat");
    if out.status.success() {
        Ok(out.stdout)
    } else {
        Err(String::from_utf8_lossy(&out.stderr).to_string())
    }
}

/// `zarrfs cat` of one array: its stdout.
pub fn cat(store: &std::path::Path, path: &str, args: &[&str]) -> Vec<u8> {
    try_cat(store, path, args).unwrap_or_else(|e| panic!("zarrfs cat {path} failed: {e}"))
}

/// getxattr(2) of `name` on `path`: its value, or the errno.
fn getxattr(path: &std::path::Path, name: &str) -> Result<Vec<u8>, i32> {
    let c_path =
        std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).map_err(|_| libc::EINVAL)?;
    let c_name = std::ffi::CString::new(name).map_err(|_| libc::EINVAL)?;
    let mut buf = vec![0u8; 1 << 16];
    // SAFETY: valid C strings and a buffer of the given length.
    let n = unsafe {
        libc::getxattr(
            c_path.as_ptr(),
            c_name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if n < 0 {
        return Err(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO));
    }
    buf.truncate(n as usize);
    Ok(buf)
}

/// The errno of getxattr(2) of `name` on `path`, `None` when it succeeds.
pub fn xattr_errno(path: &std::path::Path, name: &str) -> Option<i32> {
    getxattr(path, name).err()
}

/// Extended attribute `name` of `path`, as text; `None` when it has none.
pub fn xattr(path: &std::path::Path, name: &str) -> Option<String> {
    String::from_utf8(getxattr(path, name).ok()?).ok()
}
