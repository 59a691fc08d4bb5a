#!/usr/bin/env bash
# Create the two Python virtual environments that write the test fixtures.
#
#   target/venv-zarr3  zarr-python 3.x: writes the Zarr v2 and v3 fixtures
#   target/venv-zarr2  zarr-python 2.18.7: writes the 2020 draft-v3 layout
#
# Idempotent: each venv keeps a stamp file holding its requirement list, and
# pip runs only when the stamp is missing or differs from the list below.
# Usage: bash scripts/setup_python.sh   (from anywhere; paths are repo-relative)
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target_dir="$repo_root/target"
python="${PYTHON:-python3}"

# One requirement per line; changing a line re-runs pip for that venv.
zarr3_requirements='zarr>=3.1,<4
numpy
numcodecs[crc32c]
crc32c'
zarr2_requirements='zarr==2.18.7
numpy<2
numcodecs>=0.12,<0.16
pytest'

# make_venv NAME REQUIREMENTS: create target/NAME and install REQUIREMENTS once.
make_venv() {
    local name="$1" requirements="$2"
    local venv="$target_dir/$name"
    local stamp="$venv/.requirements-stamp"
    if [[ -f "$stamp" && -x "$venv/bin/python" ]] && [[ "$(cat "$stamp")" == "$requirements" ]]; then
        echo "setup_python: $name up to date"
        return 0
    fi
    echo "setup_python: creating $name"
    rm -rf "$venv"
    "$python" -m venv "$venv"
    local reqfile="$venv/requirements.txt"
    printf '%s\n' "$requirements" >"$reqfile"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$reqfile"
    printf '%s' "$requirements" >"$stamp"
    "$venv/bin/python" -c 'import zarr, numcodecs, numpy; print("setup_python:", "zarr", zarr.__version__, "numcodecs", numcodecs.__version__, "numpy", numpy.__version__)'
}

mkdir -p "$target_dir"
make_venv venv-zarr3 "$zarr3_requirements"
make_venv venv-zarr2 "$zarr2_requirements"
