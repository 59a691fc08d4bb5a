#!/usr/bin/env bash
# Build the pip wheel of zarrfs (maturin, bindings = "bin": the wheel installs the
# `zarrfs` command) into target/wheels. maturin comes from PyPI into target/venv-wheel,
# installed once. Usage: bash scripts/build-wheel.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

venv=target/venv-wheel
requirement='maturin>=1.5,<2'
stamp="$venv/.requirements-stamp"
if ! [[ -x "$venv/bin/maturin" && -f "$stamp" && "$(cat "$stamp")" == "$requirement" ]]; then
    echo "build-wheel: installing $requirement into $venv"
    rm -rf "$venv"
    "${PYTHON:-python3}" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$requirement"
    printf '%s' "$requirement" >"$stamp"
fi
# The release profile, as cargo build --release: the same build cache.
rm -f target/wheels/zarrfs-*.whl
"$venv/bin/maturin" build --release --out target/wheels
ls -l target/wheels/zarrfs-*.whl
