#!/usr/bin/env bash
# The test command: installs what the tests need on a fresh machine (fuse3, attr, the
# Python venvs that write fixtures, GDAL and netCDF-C, script(1) and man, the user
# zarrfs-test), writes the fixtures with zarr-python, GDAL and netCDF-C, builds the pip
# wheel, then runs formatting, lint and every test (mount tests included, for real).
# No C library is needed to build zarrfs: c-blosc, zstd, lz4, liblzma and libbz2 are
# built from source by their crates.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

missing=()
command -v fusermount3 >/dev/null || missing+=(fuse3)
command -v getfattr >/dev/null || missing+=(attr)
# The progress bar test runs `zarrfs cat` on a terminal through script(1); the man page
# test renders the page with man(1).
command -v script >/dev/null || missing+=(bsdutils)
command -v man >/dev/null || missing+=(man-db)
# The wheel test makes a fresh venv.
/usr/bin/python3 -c "import ensurepip, venv" 2>/dev/null || missing+=(python3-venv)
# Fixtures from the other Zarr writers: GDAL (gdal_translate, python3-gdal) and netCDF-C.
command -v gdal_translate >/dev/null || missing+=(gdal-bin)
/usr/bin/python3 -c "from osgeo import gdal" 2>/dev/null || missing+=(python3-gdal)
{ command -v ncgen && command -v nccopy && command -v ncdump; } >/dev/null || missing+=(netcdf-bin)
# The file views' readers (tests/views.rs, scripts/check_views.py): libtiff's tiffinfo and
# tiffdump; their venv of Debian's Python that sees python3-gdal needs python3-venv (above).
command -v tiffinfo >/dev/null || missing+=(libtiff-tools)
# The HTTP test server: nginx with WebDAV PROPFIND (tests/remote.rs).
[ -x /usr/sbin/nginx ] || missing+=(nginx-light)
[ -e /usr/lib/nginx/modules/ngx_http_dav_ext_module.so ] || missing+=(libnginx-mod-http-dav-ext)
# rclone's WebDAV remote reads what `zarrfs serve` serves (tests/serve.rs).
command -v rclone >/dev/null || missing+=(rclone)
# A real browser loads its listings (tests/serve.rs): headless Chromium.
command -v chromium >/dev/null || missing+=(chromium)
# A davfs2 mount of the server is read against the FUSE mount (tests/serve.rs).
[ -x /usr/sbin/mount.davfs ] || missing+=(davfs2)
# The Azure test server, Azurite, comes from npm (Node.js).
command -v npm >/dev/null || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
    echo "test.sh: installing ${missing[*]}"
    if [ "$(id -u)" -ne 0 ]; then
        echo "test.sh: need root to install ${missing[*]}" >&2
        exit 1
    fi
    apt-get update -qq
    # No package may start a service (nginx's would listen on every address): the tests
    # start their own servers on loopback.
    policy=/usr/sbin/policy-rc.d
    made_policy=
    if ! [ -e $policy ]; then
        printf '#!/bin/sh\nexit 101\n' > $policy && chmod +x $policy && made_policy=1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
    [ -z "$made_policy" ] || rm -f $policy
fi

# The unprivileged user of tests/non_root.rs.
if ! id -u zarrfs-test >/dev/null 2>&1; then
    echo "test.sh: creating the system user zarrfs-test"
    useradd --system --no-create-home --shell /usr/sbin/nologin zarrfs-test
fi

# The container image of tests/container.rs: podman, runc, uidmap and mmdebstrap from
# Debian's packages, and its Debian base made once by mmdebstrap (target/container).
bash scripts/container.sh install
bash scripts/container.sh base

bash scripts/setup_python.sh
target/venv-zarr3/bin/python scripts/make_fixtures.py target/fixtures
# Kerchunk and VirtualiZarr reference sets of NetCDF-4 / HDF5 files (tests/references.rs).
target/venv-refs/bin/python scripts/make_fixtures_refs.py target/fixtures
# Icechunk repositories written by the icechunk package (tests/icechunk.rs).
RUST_LOG=error target/venv-icechunk/bin/python scripts/make_fixtures_icechunk.py target/fixtures
# Georeferenced stores written by xarray + rioxarray, netCDF4 + xarray and GDAL's own
# Zarr writer (tests/geo.rs).
target/venv-geo/bin/python scripts/make_fixtures_geo.py target/fixtures
# OME-Zarr images (NGFF 0.4 and 0.5) written by ome-zarr-py (tests/ome.rs).
target/venv-ome/bin/python scripts/make_fixtures_ome.py target/fixtures
# The bad-input corpus of tests/hostile.rs: broken and hostile stores (FIFOs and device
# files among them, so this runs as root).
target/venv-zarr3/bin/python scripts/make_hostile.py target/hostile
# Zip archives of the fixture stores (tests/remote.rs).
target/venv-zarr3/bin/python scripts/make_zips.py target/fixtures target/fixtures-zip

# The S3 test server: s3s-fs from crates.io (0.14.1 is the last that builds on this Rust),
# kept under target/tools.
if ! [ -x target/tools/bin/s3s-fs ]; then
    echo "test.sh: installing s3s-fs 0.14.1 into target/tools"
    cargo install --quiet --root target/tools s3s-fs --version 0.14.1 --features binary --locked
fi

# The Azure test server: Azurite (the Azure Storage emulator) from npm, kept under
# target/tools/azurite. 3.35.0 runs on Debian 12's Node.js 18 (later releases ask for 22).
azurite_version=3.35.0
if ! grep -qs "\"version\": \"$azurite_version\"" target/tools/azurite/node_modules/azurite/package.json; then
    echo "test.sh: installing azurite $azurite_version into target/tools/azurite"
    rm -rf target/tools/azurite
    npm install --prefix target/tools/azurite --no-audit --no-fund --silent "azurite@$azurite_version"
fi

# The pip wheel that tests/wheel.rs installs (maturin in target/venv-wheel).
bash scripts/build-wheel.sh

# zarrs' reader of whole arrays (benches/zarrs-read): the write tests read back with it.
CARGO_TARGET_DIR=target/zarrs-read cargo build --release -q --manifest-path benches/zarrs-read/Cargo.toml

# How long each step took, printed as it ends (a fresh clone must stay well inside CI's
# limit).
step_began=0
step() { echo "test.sh: $1 took $((SECONDS - step_began)) s"; step_began=$SECONDS; }
step "installing and writing fixtures"

cargo fmt --check
cargo clippy --release --all-targets -- -D warnings
step "fmt and clippy"
# The build without FUSE (`zarrfs serve`, `cat`, `inspect`, `header`; no fuser in its
# tree): its binary serving every fixture array. It keeps the remote stores, so that its
# dependencies are built as for the default build and only zarrfs is compiled again
# (`--features serve` alone, local stores only, builds the same way; its unit tests,
# those of the default build less the FUSE front's, are left to `cargo test --release
# --no-default-features --features serve`, to keep CI inside its time). Built first, so
# that the default build below puts the binary the other tests run back in place.
no_fuse=(--no-default-features --features serve,remote)
no_fuse_tree="$(cargo tree "${no_fuse[@]}" -e normal)"
if grep -q ' fuser ' <<<"$no_fuse_tree"; then
    echo "test.sh: the build without FUSE has fuser in its tree" >&2
    exit 1
fi
cargo test --release "${no_fuse[@]}" --test serve -- --test-threads=2 without_fuse
step "the build without FUSE"
# The mount tests use the venv's Python (numpy) for memmap checks.
export ZARRFS_TEST_PYTHON="$PWD/target/venv-zarr3/bin/python"
cargo test --release -- --test-threads=2
step "every test (io auto)"
# The mount tests again in each fixed I/O mode (the run above used the default, auto):
# direct (every read reaches the daemon, mmap goes through the page cache), then cache.
# The two modes run side by side (their tests share no files, ports or mountpoints; most
# of their time is waiting on refresh intervals and servers), each into its own log,
# printed when both are done.
io_tests=(mount views stress hostile remote references icechunk refresh inodes geo ome write)
mapfile -t io_bins < <(cargo test --release --no-run --message-format=json \
    $(printf -- '--test %s ' "${io_tests[@]}") 2>/dev/null \
    | python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"]:
        print(m["executable"])')
[ "${#io_bins[@]}" -eq "${#io_tests[@]}" ] || { echo "test.sh: found ${#io_bins[@]} of ${#io_tests[@]} test binaries" >&2; exit 1; }
io_pass() {
    local io=$1 bin rc=0
    for bin in "${io_bins[@]}"; do
        echo "test.sh: $io: $(basename "$bin")"
        ZARRFS_TEST_IO=$io ZARRFS_STRESS_SECONDS="${ZARRFS_STRESS_SECONDS:-20}" \
            "$bin" --test-threads=2 || rc=1
    done
    return $rc
}
io_pass direct > target/test-io-direct.log 2>&1 &
direct_pid=$!
io_pass cache > target/test-io-cache.log 2>&1 && cache_rc=0 || cache_rc=$?
wait $direct_pid && direct_rc=0 || direct_rc=$?
cat target/test-io-direct.log target/test-io-cache.log
[ "$direct_rc" -eq 0 ] && [ "$cache_rc" -eq 0 ] || { echo "test.sh: an io pass failed (direct $direct_rc, cache $cache_rc)" >&2; exit 1; }
step "the io passes (direct and cache)"
# Fuzz smoke run: every fuzz target (fuzz/) for 15 s under afl-fuzz; fails on a crash.
bash scripts/fuzz.sh 15
step "fuzz smoke run"
