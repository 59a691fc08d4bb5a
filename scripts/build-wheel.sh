#!/usr/bin/env bash
# Build the pip wheel of zarrfs (maturin, bindings = "bin": the wheel installs the
# `zarrfs` command) into target/wheels. maturin comes from PyPI into the test cache's
# venv-wheel (scripts/test_cache.sh), linked at target/venv-wheel.
# Usage: bash scripts/build-wheel.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/test_cache.sh
. scripts/test_cache.sh

python="${PYTHON:-python3}"
requirement='maturin>=1.5,<2'
build_maturin() {
    "$python" -m venv "$1"
    "$1/bin/python" -m pip install --quiet --disable-pip-version-check --retries 10 "$requirement"
}
cache_link venv "venv-wheel-$(cache_key "$requirement" "$("$python" -VV)")" target/venv-wheel build_maturin
# The release profile and target folder of cargo build --release: zarrfs is compiled once
# for the tests and the wheel, maturin only links the stripped binary again.
rm -f target/wheels/zarrfs-*.whl
target/venv-wheel/bin/maturin build --release --out target/wheels
ls -l target/wheels/zarrfs-*.whl
