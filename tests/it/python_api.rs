//! The Python API of the wheel (`import zarrfs`: mount, memmap, info, serve, `python -m
//! zarrfs`): `scripts/check_python_api.py` in a fresh venv of Debian's Python holding
//! only the wheel and numpy (offline, from target/wheels and target/wheelhouse), as root
//! and as the normal user `zarrfs-test` (mounting through fusermount3), against the v3
//! and v2 fixture stores and zarr-python's digests of them; and a notebook run through
//! nbclient (`scripts/check_notebook.py`, venv-notebook). Mounts for real.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use common::user::{as_user, id, open_to_all, text, FuseDeviceMode, USER};
use common::{copy_dir, fixtures_dir, pip_install_offline, run_ok, wheel, TempDir};

fn repo() -> PathBuf {
    crate::common::repo()
}

/// A folder every user can read holding: `venv` (Debian's Python with only the wheel
/// and numpy), `fixtures` (the v3 and v2 stores and the manifest) and the check script.
struct Setup {
    tmp: TempDir,
}

impl Setup {
    fn new() -> Setup {
        let tmp = TempDir::new("python-api");
        let venv = tmp.path().join("venv");
        // Debian's Python: a normal user can run it (a pyenv one under /root is not).
        run_ok(
            Command::new("/usr/bin/python3")
                .args(["-m", "venv"])
                .arg(&venv),
        );
        run_ok(
            pip_install_offline(&venv)
                .arg("--find-links")
                .arg(repo().join("target/wheelhouse"))
                .arg(wheel())
                .arg("numpy"),
        );
        let listed = run_ok(Command::new(venv.join("bin/pip")).args(["list", "--format=freeze"]));
        let listed = String::from_utf8_lossy(&listed);
        let mut packages: Vec<&str> = listed
            .lines()
            .filter_map(|l| l.split("==").next())
            .filter(|n| !["pip", "setuptools"].contains(n))
            .collect();
        packages.sort();
        assert_eq!(
            packages,
            ["numpy", "zarrfs"],
            "the venv holds more: {listed}"
        );
        let fixtures = fixtures_dir();
        let copy = tmp.path().join("fixtures");
        for store in ["v3", "v2"] {
            copy_dir(&fixtures.join(store), &copy.join(store));
        }
        std::fs::copy(fixtures.join("manifest.json"), copy.join("manifest.json"))
            .expect("copy the manifest");
        std::fs::copy(
            repo().join("scripts/check_python_api.py"),
            tmp.path().join("check_python_api.py"),
        )
        .expect("copy the script");
        open_to_all(tmp.path());
        Setup { tmp }
    }

    fn python(&self) -> PathBuf {
        self.tmp.path().join("venv/bin/python")
    }

    fn args(&self) -> Vec<String> {
        vec![
            self.tmp
                .path()
                .join("check_python_api.py")
                .display()
                .to_string(),
            self.tmp.path().join("fixtures").display().to_string(),
            // The wheel's own binary (one a normal user can run), whose messages the
            // API must raise unchanged.
            self.tmp
                .path()
                .join("venv/bin/zarrfs")
                .display()
                .to_string(),
        ]
    }
}

/// Both users share one venv; the checks run one at a time (their mounts are private).
static SETUP: Mutex<Option<Setup>> = Mutex::new(None);

fn with_setup(check: impl FnOnce(&Setup)) {
    let mut guard = SETUP.lock().unwrap_or_else(|e| e.into_inner());
    let setup = guard.get_or_insert_with(Setup::new);
    check(setup);
}

/// How many arrays the script checked (its last line), with its whole output on failure.
fn checked(out: &std::process::Output) -> usize {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "check_python_api.py: {}", text(out));
    let last = stdout.lines().last().unwrap_or_default();
    last.strip_prefix("checked ")
        .and_then(|rest| rest.strip_suffix(" arrays"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in the script's output: {stdout}"))
}

#[test]
fn the_api_mounts_reads_serves_and_fails_as_documented_as_root() {
    with_setup(|setup| {
        let out = Command::new(setup.python())
            .args(setup.args())
            .env_remove("ZARRFS_BINARY")
            .output()
            .expect("run the venv's python");
        let n = checked(&out);
        assert!(n > 20, "only {n} arrays checked");
    });
}

#[test]
fn the_api_mounts_through_fusermount3_as_a_normal_user() {
    let uid = id("-u");
    assert_ne!(uid, 0, "{USER} must not be root");
    let _mode = FuseDeviceMode::world_usable();
    with_setup(|setup| {
        let args = setup.args();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = as_user(Path::new("/tmp"), &setup.python(), &args);
        let n = checked(&out);
        assert!(n > 20, "only {n} arrays checked");
        // Every mount the script made was the user's own (fusermount3's user_id).
        let info = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
        assert!(
            !info
                .lines()
                .any(|l| l.contains("zarrfs") && l.contains(&format!("user_id={uid}"))),
            "a mount of {USER} is left: {info}"
        );
    });
}

#[test]
fn a_notebook_mounts_reads_serves_and_unmounts_through_nbclient() {
    let python = common::venv_python("ZARRFS_TEST_NOTEBOOK_PYTHON", "venv-notebook");
    // The wheel under test into the kernel's venv (its other packages stay).
    run_ok(
        Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-index",
                "--no-deps",
                "--force-reinstall",
                "--disable-pip-version-check",
            ])
            .arg(wheel()),
    );
    let out = Command::new(&python)
        .arg(repo().join("scripts/check_notebook.py"))
        .arg(fixtures_dir())
        .env_remove("ZARRFS_BINARY")
        .output()
        .expect("run check_notebook.py");
    assert!(out.status.success(), "check_notebook.py: {}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.lines().any(|l| l.starts_with("notebook ok ")),
        "{stdout}"
    );
}

#[test]
fn the_package_is_typed_strictly() {
    let python = common::venv_python("ZARRFS_TEST_NOTEBOOK_PYTHON", "venv-notebook");
    let out = Command::new(&python)
        .args([
            "-m",
            "mypy",
            "--strict",
            "--no-incremental",
            "python/zarrfs",
        ])
        .current_dir(repo())
        .output()
        .expect("run mypy");
    assert!(out.status.success(), "mypy --strict: {}", text(&out));
}
