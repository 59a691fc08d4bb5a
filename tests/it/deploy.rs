//! The Kubernetes manifests of `deploy/kubernetes` (`scripts/check_manifests.py`, in
//! venv-deploy with kubernetes-validate): every document valid against Kubernetes'
//! schemas (1.29 and the latest the package ships, unknown fields refused), a misspelt
//! field of each caught, and every zarrfs command line in them run for real against a
//! fixture store in place of the bucket (mounted in front, listed, unmounted).

use crate::common;

use std::process::Command;

use common::{fixtures_dir, venv_python, zarrfs};

#[test]
fn the_manifests_validate_and_their_zarrfs_command_lines_mount() {
    let repo = crate::common::repo();
    let python = venv_python("ZARRFS_TEST_DEPLOY_PYTHON", "venv-deploy");
    let out = Command::new(python)
        .arg(repo.join("scripts/check_manifests.py"))
        .arg(repo.join("deploy/kubernetes"))
        .arg(zarrfs())
        .arg(fixtures_dir().join("v3"))
        .env_remove("RUST_LOG")
        .output()
        .expect("run check_manifests.py");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "check_manifests.py: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.lines().any(|l| l.starts_with("checked ")),
        "no summary: {stdout}"
    );
}
