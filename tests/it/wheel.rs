//! The pip wheel (scripts/build-wheel.sh, maturin with `bindings = "bin"`): installed with
//! `pip install --no-index` into a fresh venv, its `zarrfs` mounts the demo store and
//! serves the same bytes as the binary under test. Mounts for real (root, /dev/fuse).

use crate::common;

use std::path::Path;
use std::process::Command;

use common::mount::{mounted, Unmount};
use common::{pip_install_offline, run_ok, sha256, wheel, zarrfs, TempDir};

/// The array files under `dir` (names not starting with `.`), as paths relative to it.
fn array_files(dir: &Path, prefix: &str, out: &mut Vec<String>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok())
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name().to_string_lossy().to_string();
        if name.starts_with('.') {
            continue;
        }
        let rel = format!("{prefix}{name}");
        if entry.file_type().expect("file type").is_dir() {
            array_files(&entry.path(), &format!("{rel}/"), out);
        } else {
            out.push(rel);
        }
    }
}

#[test]
fn the_wheel_installs_a_zarrfs_that_mounts_the_demo_store() {
    let wheel = wheel();
    let tmp = TempDir::new("wheel");
    let venv = tmp.path().join("venv");
    run_ok(Command::new("python3").args(["-m", "venv"]).arg(&venv));
    run_ok(pip_install_offline(&venv).arg(&wheel));
    let installed = venv.join("bin/zarrfs");
    assert!(installed.is_file(), "the wheel installed no bin/zarrfs");
    let version = run_ok(Command::new(&installed).arg("--version"));
    assert_eq!(
        String::from_utf8_lossy(&version).trim(),
        format!("zarrfs {}", env!("CARGO_PKG_VERSION"))
    );

    // The venv's bin on PATH, as after `source venv/bin/activate`.
    let path = format!(
        "{}:{}",
        venv.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let store = tmp.path().join("demo.zarr");
    run_ok(
        Command::new("zarrfs")
            .arg("demo")
            .arg(&store)
            .env("PATH", &path),
    );
    let mp = tmp.path().join("mnt");
    std::fs::create_dir(&mp).expect("mkdir");
    let _unmount = Unmount(&mp);
    run_ok(
        Command::new("zarrfs")
            .arg("mount")
            .arg(&store)
            .arg(&mp)
            .arg("--log-file")
            .arg(tmp.path().join("zarrfs.log"))
            .env("PATH", &path),
    );
    assert!(
        mounted(&mp),
        "the wheel's zarrfs returned but nothing is mounted"
    );

    let mut files = Vec::new();
    array_files(&mp, "", &mut files);
    for want in ["temperature", "surface/elevation", "legacy/counts"] {
        assert!(files.iter().any(|f| f == want), "{want} not in {files:?}");
    }
    for file in &files {
        let served = std::fs::read(mp.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        let want = run_ok(Command::new(zarrfs()).arg("cat").arg(&store).arg(file));
        assert_eq!(served.len(), want.len(), "{file}: size");
        assert_eq!(sha256(&served), sha256(&want), "{file}: bytes differ");
    }
    run_ok(
        Command::new("zarrfs")
            .arg("umount")
            .arg(&mp)
            .env("PATH", &path),
    );
    assert!(
        !mounted(&mp),
        "still mounted after the wheel's zarrfs umount"
    );
}
