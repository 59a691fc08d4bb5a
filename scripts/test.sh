#!/usr/bin/env bash
# The test command (README; .ci/run calls it): installs what the tests need on a fresh
# machine (fuse3, attr, GDAL and netCDF-C, the test servers' runtimes, script(1) and man,
# the user zarrfs-test), makes or finds the Python venvs, fixtures and test servers in the
# machine-wide test cache (scripts/test_cache.sh), builds zarrfs once for every use,
# then runs formatting, lint and every test (mount tests included, for real).
#
#   bash scripts/test.sh            everything (CI's run)
#   bash scripts/test.sh --quick    the daily loop: fmt, clippy, unit tests and the
#                                   end-to-end tests that need no server and no fixture
#
# No C library is needed to build zarrfs: c-blosc, zstd, lz4, liblzma and libbz2 are
# built from source by their crates. Each step's time is printed as it ends, and a table
# of the steps against their budgets at the end (docs/developing.md).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD

quick=
case "${1:-}" in
    --quick) quick=1 ;;
    "") ;;
    *) echo "usage: bash scripts/test.sh [--quick]" >&2; exit 2 ;;
esac

# shellcheck source=scripts/test_cache.sh
. scripts/test_cache.sh
mkdir -p target
# zarrfs itself is compiled incrementally (its dependencies never are): a restored build
# then compiles again only the parts of the crate that a change touched, in each of its
# builds (the default one, the one without FUSE, the tests, the fuzz targets). Every
# cargo command of the run sees it, or cargo would build again what the others built.
export CARGO_INCREMENTAL=1
# Clippy lints zarrfs while it is compiled: cargo runs clippy-driver (rustc with clippy's
# lints; RUSTC_WORKSPACE_WRAPPER, cargo's hook for such tools) in place of rustc for the
# workspace's own crates, and CLIPPY_ARGS is how `cargo clippy -- -D warnings` hands the
# flags to it. The build the tests run is then the linted one (the library, binary, tests
# and examples, as `cargo clippy --all-targets` sees them), and no second build, checking
# every dependency, is made. Every cargo command of the run (and of the tests) sees this,
# or cargo would compile zarrfs again without it; the builds that are not zarrfs's default
# one (fuzz targets, the build without FUSE) unset it.
RUSTC_WORKSPACE_WRAPPER=$(command -v clippy-driver) || { echo "test.sh: clippy-driver not found (rustup component add clippy)" >&2; exit 1; }
export RUSTC_WORKSPACE_WRAPPER
export CLIPPY_ARGS=-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__
# unlinted COMMAND...: a command of the builds that are not zarrfs's default one, at the
# build path (below).
unlinted() { at_build_path env -u RUSTC_WORKSPACE_WRAPPER -u CLIPPY_ARGS "$@"; }
# rustc's incremental cache holds only for the folder it was compiled in: a build
# restored into a clone at another path (every CI clone) compiles zarrfs from scratch in
# each of its builds, 2 to 3 minutes each. So every cargo command of the run that
# compiles zarrfs sees the clone at one fixed path, bound there in a mount namespace of
# its own (each run has its own, so runs side by side do not meet). Where no namespace
# can be made (no CAP_SYS_ADMIN), the commands run in the clone itself.
build_path=/var/tmp/zarrfs-test-build
mkdir -p "$build_path"
if unshare --mount --propagation private -- true 2>/dev/null; then
    at_build_path() {
        unshare --mount --propagation private -- \
            bash -c 'mount --bind "$1" "$2" && cd "$2" && shift 2 && exec "$@"' _ "$root" "$build_path" "$@"
    }
else
    echo "test.sh: no mount namespace: zarrfs is compiled in the clone (slower after a restore)" >&2
    build_path=$root
    at_build_path() { "$@"; }
fi

# Step times: `step NAME BUDGET` ends the step begun at the last call; the table at the
# end sets each against its budget (seconds, on a machine where the suite ran before).
run_began=$SECONDS
step_began=$SECONDS
steps=()
step() {
    local took=$((SECONDS - step_began))
    echo "test.sh: $1 took $took s"
    steps+=("$1|$took|$2")
    step_began=$SECONDS
}
table() {
    local row name took budget over=0
    echo "test.sh: step times (budgets are for a machine where the suite ran before)"
    printf '  %-44s %7s %7s\n' step seconds budget
    for row in "${steps[@]}"; do
        IFS='|' read -r name took budget <<<"$row"
        printf '  %-44s %7s %7s%s\n' "$name" "$took" "$budget" "$([ "$took" -le "$budget" ] || echo '  over')"
    done
    printf '  %-44s %7s %7s\n' "whole run" "$((SECONDS - run_began))" "$1"
}

# --- What the machine needs (Debian's packages, once) ---
missing=()
command -v fusermount3 >/dev/null || missing+=(fuse3)
command -v getfattr >/dev/null || missing+=(attr)
command -v flock >/dev/null || missing+=(util-linux)
# The progress bar test runs `zarrfs cat` on a terminal through script(1); the man page
# test renders the page with man(1).
command -v script >/dev/null || missing+=(bsdutils)
command -v man >/dev/null || missing+=(man-db)
# The wheel test makes a fresh venv.
/usr/bin/python3 -c "import ensurepip, venv" 2>/dev/null || missing+=(python3-venv)
if [ -z "$quick" ]; then
    # Fixtures from the other Zarr writers: GDAL (gdal_translate, python3-gdal) and netCDF-C.
    command -v gdal_translate >/dev/null || missing+=(gdal-bin)
    /usr/bin/python3 -c "from osgeo import gdal" 2>/dev/null || missing+=(python3-gdal)
    { command -v ncgen && command -v nccopy && command -v ncdump; } >/dev/null || missing+=(netcdf-bin)
    # The file views' readers (tests/it/views.rs, scripts/check_views.py): libtiff's
    # tiffinfo and tiffdump.
    command -v tiffinfo >/dev/null || missing+=(libtiff-tools)
    # The HTTP test server: nginx with WebDAV PROPFIND (tests/it/remote.rs).
    [ -x /usr/sbin/nginx ] || missing+=(nginx-light)
    [ -e /usr/lib/nginx/modules/ngx_http_dav_ext_module.so ] || missing+=(libnginx-mod-http-dav-ext)
    # rclone's WebDAV remote reads what `zarrfs serve` serves (tests/it/serve.rs).
    command -v rclone >/dev/null || missing+=(rclone)
    # A real browser loads its listings (tests/it/serve.rs): headless Chromium.
    command -v chromium >/dev/null || missing+=(chromium)
    # A davfs2 mount of the server is read against the FUSE mount (tests/it/serve.rs).
    [ -x /usr/sbin/mount.davfs ] || missing+=(davfs2)
    # The Azure test server, Azurite, comes from npm (Node.js).
    command -v npm >/dev/null || missing+=(npm)
fi
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
# The unprivileged user of tests/it/non_root.rs.
if ! id -u zarrfs-test >/dev/null 2>&1; then
    echo "test.sh: creating the system user zarrfs-test"
    useradd --system --no-create-home --shell /usr/sbin/nologin zarrfs-test
fi
step "installing Debian's packages" 10

# --- The builds (cargo), in the background while the caches are made ---
# The cargo builds the tests need, in one job: the cargo build restored from the test
# cache (only what changed since is compiled), fmt, the wheel (maturin links the binary
# of this same build), the build without FUSE, the test binaries, linted as they are
# compiled. The fuzz targets are built by a job of their own (fuzz_build), and the cargo
# build is saved after them.
build_all() {
    local began=$SECONDS
    cache_restore_target
    touch target/test-restored
    cargo fmt --check
    if [ -n "$quick" ]; then
        at_build_path cargo test --release --no-run
        return
    fi
    # The pip wheel that tests/it/wheel.rs installs (maturin in the cache's venv-wheel).
    at_build_path bash scripts/build-wheel.sh
    # The build without FUSE (`zarrfs serve`, `cat`, `inspect`, `header`; no fuser in its
    # tree), which serves every fixture array (serve::the_build_without_fuse_...). It
    # keeps the remote stores, so that its dependencies are those of the default build
    # and only zarrfs is compiled again. Built before the default build, which puts the
    # binary the other tests run back in place.
    local no_fuse=(--no-default-features --features serve,remote)
    if cargo tree "${no_fuse[@]}" -e normal | grep -q ' fuser '; then
        echo "test.sh: the build without FUSE has fuser in its tree" >&2
        return 1
    fi
    # zarrfs itself at opt-level 1 (its dependencies are the default build's): the test
    # reads the small fixtures through it, and it compiles in about half the time.
    unlinted cargo build --release "${no_fuse[@]}" --bin zarrfs \
        --config 'profile.release.package.zarrfs.opt-level=1'
    cp target/release/zarrfs target/zarrfs-no-fuse
    at_build_path cargo test --release --no-run
    echo "test.sh: build: everything took $((SECONDS - began)) s"
}
# The test server and reader built from crates.io, each an entry of the test cache:
# s3s-fs (0.14.1 is the last that builds on this Rust) and zarrs' reader of whole arrays
# (benches/zarrs-read), which the write tests read back with. A job of its own: on a new
# machine it runs beside the others. They serve and read the tests' small stores, so they
# are built with less optimization and no debug information, which halves their compile
# time; scripts/bench.sh builds its own, fully optimized, copies of both.
build_tools() {
    local quick_profile=(CARGO_PROFILE_RELEASE_OPT_LEVEL=1 CARGO_PROFILE_RELEASE_DEBUG=false
        CARGO_PROFILE_RELEASE_LTO=false CARGO_INCREMENTAL=0)
    build_s3s() { env "${quick_profile[@]}" cargo install --quiet --root "$1" s3s-fs --version 0.14.1 --features binary --locked; }
    local s3s
    s3s=$(cache_entry s3s-fs "$(cache_key 0.14.1 "$(rustc -vV)" "${quick_profile[*]}")" build_s3s)
    cache_point target/tools/bin/s3s-fs "$s3s/bin/s3s-fs"
    build_zarrs_read() {
        env "${quick_profile[@]}" CARGO_TARGET_DIR="$1" cargo build --release -q --locked \
            --manifest-path benches/zarrs-read/Cargo.toml
    }
    local zr_key
    zr_key=$(cache_key "$(rustc -vV)" "${quick_profile[*]}" benches/zarrs-read/Cargo.toml benches/zarrs-read/Cargo.lock benches/zarrs-read/src/*.rs)
    cache_link zarrs-read "$zr_key" target/zarrs-read build_zarrs_read
}
# The fuzz targets' build (AFL-instrumented, in target/fuzz, with cargo-afl and AFL++ from
# the test cache): niced to the lowest priority from the start, so that it takes only the
# CPU the other builds and the tests leave idle (on a new machine, the minutes of its
# build would otherwise come after the others'). It waits for the saved build to be
# restored, which holds target/fuzz; the smoke run beside the tests waits for it (fuzz.sh
# runs one at a time).
fuzz_build() {
    while ! [ -e target/test-restored ]; do
        kill -0 "$build_pid" 2>/dev/null || { echo "test.sh: the build ended before its restore" >&2; return 1; }
        sleep 1
    done
    unlinted nice -n 19 bash scripts/fuzz.sh --build
}
rm -f target/test-build.log target/test-tools.log target/test-fuzz-build.log target/test-restored
build_all >target/test-build.log 2>&1 &
build_pid=$!
tools_pid=
fuzz_build_pid=
if [ -z "$quick" ]; then
    build_tools >target/test-tools.log 2>&1 &
    tools_pid=$!
    fuzz_build >target/test-fuzz-build.log 2>&1 &
    fuzz_build_pid=$!
fi
# A run killed meanwhile ends its build jobs too.
trap 'kill $build_pid $tools_pid $fuzz_build_pid 2>/dev/null || true' EXIT

# --- The caches: venvs, fixtures, test servers, the container base ---
if [ -z "$quick" ]; then
    # The container image of tests/it/container.rs: podman, runc, uidmap and mmdebstrap from
    # Debian's packages, and its Debian base made once by mmdebstrap into the test cache.
    export ZARRFS_CONTAINER_BASE_DIR="$cache_root/container"
    bash scripts/container.sh install
    bash scripts/container.sh base

    bash scripts/setup_python.sh
    # The fixtures: every writer's stores, the bad-input corpus and zip archives, one entry
    # keyed by the scripts that write them, the venvs they run in and the system writers.
    build_fixtures() {
        local out=$1
        target/venv-zarr3/bin/python scripts/make_fixtures.py "$out/fixtures"
        # Kerchunk and VirtualiZarr reference sets of NetCDF-4 / HDF5 files
        # (tests/it/references.rs).
        target/venv-refs/bin/python scripts/make_fixtures_refs.py "$out/fixtures"
        # Icechunk repositories written by the icechunk package (tests/it/icechunk.rs).
        RUST_LOG=error target/venv-icechunk/bin/python scripts/make_fixtures_icechunk.py "$out/fixtures"
        # Georeferenced stores written by xarray + rioxarray, netCDF4 + xarray and GDAL's
        # own Zarr writer (tests/it/geo.rs).
        target/venv-geo/bin/python scripts/make_fixtures_geo.py "$out/fixtures"
        # OME-Zarr images (NGFF 0.4 and 0.5) written by ome-zarr-py (tests/it/ome.rs).
        target/venv-ome/bin/python scripts/make_fixtures_ome.py "$out/fixtures"
        # The bad-input corpus of tests/it/hostile.rs: broken and hostile stores (FIFOs
        # and device files among them, so this runs as root).
        target/venv-zarr3/bin/python scripts/make_hostile.py "$out/hostile"
        # Zip archives of the fixture stores (tests/it/remote.rs).
        target/venv-zarr3/bin/python scripts/make_zips.py "$out/fixtures" "$out/fixtures-zip"
        touch "$out/.made"
    }
    venvs=()
    for v in zarr3 zarr2 refs icechunk geo ome; do venvs+=("$v=$(readlink "target/venv-$v")"); done
    fixtures_key=$(cache_key scripts/make_*.py scripts/fixture_common.py "${venvs[@]}" \
        "$(gdalinfo --version)" "$(ncgen -version 2>&1 | head -1)" "$(/usr/bin/python3 -VV)")
    fixtures=$(cache_entry fixtures "$fixtures_key" build_fixtures)
    for part in fixtures hostile fixtures-zip; do
        cache_point "target/$part" "$fixtures/$part"
    done

    # The Azure test server: Azurite (the Azure Storage emulator) from npm. 3.35.0 runs on
    # Debian 12's Node.js 18 (later releases ask for 22).
    azurite_version=3.35.0
    build_azurite() { npm install --prefix "$1" --no-audit --no-fund --silent "azurite@$azurite_version"; }
    cache_link azurite "$(cache_key "$azurite_version" "$(node --version)")" target/tools/azurite build_azurite
    step "the caches (venvs, fixtures, servers)" 20
fi

build_rc=0
wait $build_pid || build_rc=$?
tools_rc=0
[ -z "$tools_pid" ] || wait $tools_pid || tools_rc=$?
trap 'kill $fuzz_build_pid 2>/dev/null || true' EXIT
cat target/test-build.log
[ -z "$tools_pid" ] || cat target/test-tools.log
[ "$build_rc" -eq 0 ] || { echo "test.sh: the build failed" >&2; exit 1; }
[ "$tools_rc" -eq 0 ] || { echo "test.sh: building the test servers failed" >&2; exit 1; }
step "the builds (after the caches)" 40

# The test binaries of this build, as cargo lists them ("NAME PATH" a line): the unit
# tests of the library (zarrfs) and of the binary (zarrfs too), memory, fuzz_regressions,
# and it, the end-to-end suites. The run starts them itself, so that no cargo command of
# its own waits for the target directory while the fuzz build holds it.
# Listed at the build path, as they were built; their paths are the clone's.
mapfile -t test_bins < <(at_build_path cargo test --release --no-run --message-format=json 2>/dev/null | python3 -c 'import json, sys
at, root = sys.argv[1:]
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        path = m["executable"]
        if path.startswith(at + "/"):
            path = root + path[len(at):]
        print(m["target"]["name"], path)' "$build_path" "$root")
it_bin=$(printf '%s\n' "${test_bins[@]}" | sed -n 's/^it //p')
[ ${#test_bins[@]} -eq 5 ] && [ -x "$it_bin" ] || { echo "test.sh: not the five test binaries: ${test_bins[*]}" >&2; exit 1; }
# Run as cargo test runs them: from the repository, which the tests find in the
# environment with the binary under test (tests/it/common: repo, zarrfs).
run_bin() {
    CARGO_MANIFEST_DIR=$root CARGO_BIN_EXE_zarrfs=$root/target/release/zarrfs "$@"
}
run_it() { run_bin "$it_bin" "$@"; }
# The unit tests, memory and fuzz_regressions: every test binary but it.
run_others() {
    local b
    for b in "${test_bins[@]}"; do
        [ "${b%% *}" = it ] || run_bin "${b#* }" "$@" || return 1
    done
}
# The suites' times: note_test_ends passes the test binary's output on as it comes and
# notes the second at which each test ended in target/test-times.log; suite_times then
# prints, for each suite, the seconds from the end of the suite before it (or from BEGAN)
# to the end of its last test. libtest hands the tests out in the order of their names,
# so the suites run one after the other, overlapping only at their edges.
note_test_ends() {
    local line
    while IFS= read -r line; do
        printf '%s\n' "$line"
        case $line in
            "test "*" ... "*) printf '%s %s\n' "$SECONDS" "${line#test }" >>target/test-times.log ;;
        esac
    done
}
suite_times() {
    echo "test.sh: the suites' times (s) in $2, each from the end of the one before"
    awk -v began="$1" '{ split($2, p, "::"); s = p[1]; if (!(s in end)) order[n++] = s; end[s] = $1 }
        END { prev = began
              for (i = 0; i < n; i++) { t = end[order[i]] - prev; if (t < 0) t = 0
                  printf "  %-16s %5d\n", order[i], t; if (end[order[i]] > prev) prev = end[order[i]] } }' \
        target/test-times.log
}
quick_tests=(layers:: view_props:: store_suite::folder_store store_suite::store_opener_on_a_folder store_suite::memory)
# The suites that would disturb others, or that others would disturb, run apart, one
# group after the other:
apart=(
    inodes::   # drops the kernel's inode caches machine-wide (other mounts lose their copies)
    refresh::  # promises within twice a 1 s interval: no heavy neighbour beside it
    stress::   # loads both cores with readers and kills daemons under them
)

# The tests whose outcome depends on how reads reach the daemon run again in each fixed
# I/O mode: direct (every read reaches the daemon, mmap goes through the page cache),
# then cache (every open through the page cache). Writes are direct in every mode, so a
# write test is here only where a read-only open meets a write. One line each on why.
io_tests=(
    # mount: the kernel's path, copies, mmap, errors, concurrency
    mount::every_fixture_array_reads_whole_in_c_and_f_order  # page cache or direct, copies filled
    mount::random_preads_match_the_expected_bytes            # readahead windows or the reader's exact requests
    mount::numpy_memmap_reads_the_right_values               # mmap through the page cache in every mode
    mount::eight_concurrent_readers_over_a_small_cache       # auto goes direct when other files are read
    mount::a_corrupt_chunk_fails_only_its_own_reads          # EIO confined to its chunk through the page cache too
    mount::arrays_read_through_are_served_by_the_kernel_and_stay_exact  # copies beside page-cache opens
    mount::each_open_reads_through_the_page_cache_or_direct_as_the_io_mode_says  # asserts the mode
    mount::a_first_read_fills_the_copy_as_it_is_served       # copies filled by direct or cached reads
    mount::copies_filled_from_the_middle_at_random_and_by_two_readers_are_exact  # same, under readahead
    # views: readers of the headed files, and ranges across header and data
    views::readers_read_every_view_of_a_c_order_mount        # numpy (its mmap too), tifffile, libtiff, GDAL
    views::readers_read_every_view_of_an_f_order_mount       # the same in F order
    views::readers_read_every_view_of_a_big_endian_mount     # the same big-endian
    views::headed_views_at_random_ranges_equal_cat_as        # preads across the header/data boundary and EOF
    views::bigtiff_of_fill_value_past_4_gib                  # preads past 4 GiB and at EOF
    # hostile: broken chunks read through the mount, their siblings byte-exact
    hostile::
    # ome: tiled files are direct in auto, through the page cache in cache mode
    ome::tifffile_reads_every_ome_tiff_as_ome_zarr_py_reads_the_image
    ome::big_endian_ome_tiffs_read_the_same
    ome::a_tile_of_the_top_level_reads_only_that_levels_chunks  # readahead into the next level
    # references, icechunk, remote: errors beside good reads, files opened before a change
    references::a_bad_chunk_fails_only_reads_of_its_own_bytes_in_every_io_mode
    references::a_reference_file_rewritten_while_mounted_is_followed_and_files_opened_before_read_on
    references::a_reference_file_on_a_web_server_rewritten_while_mounted_is_followed
    references::a_parquet_reference_folder_rewritten_while_mounted_is_followed
    references::a_parquet_reference_folder_on_s3_rewritten_while_mounted_is_followed
    references::hostile_references_fail_alone_and_the_mount_stays_alive
    references::a_million_parquet_references_list_at_once_and_read_only_their_own_files
    icechunk::a_mount_follows_a_moving_branch_and_files_opened_before_stay_on_their_snapshot
    icechunk::hostile_virtual_chunks_fail_alone_and_virtual_prefixes_narrow_or_open_others
    icechunk::broken_objects_of_a_repository_fail_alone_and_the_mount_stays_alive
    remote::stalls_fail_only_their_reads_drops_are_retried_and_recovery_needs_no_remount
    remote::broken_zip_archives_fail_with_clear_errors_and_bad_entries_alone
    remote::a_zip_archive_on_s3_is_read_in_runs_of_entries_and_then_from_the_disk_cache  # GETs follow read sizes
    # write: a read-only open before a write and read after it, or after a resize
    write::a_writable_mount_takes_whole_rows_only_and_refuses_views  # stale pages after O_TRUNC
    write::a_sidecar_written_back_with_new_attributes_rewrites_them_and_nothing_else_may_change
    write::cat_appends_rows_and_truncate_cuts_them_read_back_by_zarr_python  # the size after a resize
)
# Of the groups apart, in each mode too (run after the others, one mode at a time):
io_apart=(
    # stress: concurrent readers, killed daemons, edges and bounded memory through the mount
    stress::sixteen_random_readers_and_a_listing_loop_over_a_1mib_cache
    stress::sigkill_under_streaming_readers_fails_them_then_umount_and_remount_work
    stress::sigterm_under_streaming_readers_detaches_and_exits_zero_once_they_close
    stress::reads_at_and_past_the_end_and_near_2_pow_63_are_exact
    stress::twenty_gib_fill_only_arrays_read_exactly_within_bounded_memory
    stress::ls_stat_and_other_reads_answer_while_a_store_read_is_stuck_and_a_fifo_chunk_fails
    # refresh: the kernel's caches invalidated after the store changes
    refresh::readers_follow_a_changing_v
    refresh::zarrfs_refresh_shows_a_change_at_once_and_refresh_off_never
    refresh::a_watched_local_folder_shows_a_metadata_change_at_once
    refresh::new_arrays_and_rewritten_chunks_of_a
    refresh::a_row_rewritten_on_s3_shows_through_the_disk_cache_within_twice_the_interval_by_any_name
    # inodes: a file open on an old reading, a number kept for a new one
    inodes::a_changed_node_gets_another_number_and_a_file_open_on_the_old_one_reads_on
    inodes::a_number_kept_for_a_new_reading_never_serves_the_older_readings_bytes
)

# A name here that no test has any more fails the run (a filter matching nothing would
# run nothing and pass).
listed=$(run_it --list 2>/dev/null | sed -n 's/: test$//p')
for t in "${io_tests[@]}" "${io_apart[@]}" "${apart[@]}" "${quick_tests[@]}"; do
    grep -qF -- "$t" <<<"$listed" || { echo "test.sh: no test matches $t" >&2; exit 1; }
done

if [ -n "$quick" ]; then
    run_others --test-threads=2
    run_it --test-threads=2 "${quick_tests[@]}"
    step "unit and end-to-end tests (quick)" 60
    table 180
    exit 0
fi

# The mount tests use the venv's Python (numpy) for memmap checks.
export ZARRFS_TEST_PYTHON="$root/target/venv-zarr3/bin/python"
# Every test once, with the default --io auto: the unit tests and the binaries of their
# own, then the end-to-end suites, the groups apart one after the other.
skip_apart=()
for t in "${apart[@]}"; do skip_apart+=(--skip "$t"); done
# Beside them, once the fuzz build is done: the fuzz smoke run, every fuzz target for 15 s
# under afl-fuzz, failing on a crash (its own cargo afl build finds the targets up to
# date). Its log and the fuzz build's are printed when the suites are done.
beside() { unlinted bash scripts/fuzz.sh 15; }
beside >target/test-beside.log 2>&1 &
beside_pid=$!
trap 'kill $fuzz_build_pid $beside_pid 2>/dev/null || true' EXIT
run_others --test-threads=2
rm -f target/test-times.log
began=$SECONDS
run_it --test-threads=2 --skip serve::the_build_without_fuse "${skip_apart[@]}" | note_test_ends
suite_times "$began" "the suites together"
step "every test (io auto)" 530

io_pass() {
    ZARRFS_TEST_IO=$1 ZARRFS_STRESS_SECONDS="${ZARRFS_STRESS_SECONDS:-20}" \
        run_it --test-threads=2 "${@:2}"
}
# io_modes FUNCTION STEP BUDGET: FUNCTION MODE run for both fixed I/O modes side by side
# (their tests share no files, ports or mountpoints; most of their time is waiting),
# each into its own log, printed when both are done.
io_modes() {
    local direct_pid direct_rc cache_rc
    "$1" direct >target/test-io-direct.log 2>&1 &
    direct_pid=$!
    "$1" cache >target/test-io-cache.log 2>&1 && cache_rc=0 || cache_rc=$?
    wait $direct_pid && direct_rc=0 || direct_rc=$?
    cat target/test-io-direct.log target/test-io-cache.log
    [ "$direct_rc" -eq 0 ] && [ "$cache_rc" -eq 0 ] || { echo "test.sh: an io pass failed (direct $direct_rc, cache $cache_rc)" >&2; exit 1; }
    step "$2" "$3"
}
# The io passes of the tests that run with the others come next, while the fuzz build
# may still run beside (on a new machine it outlasts the suites); the groups apart wait
# for it, and their io passes come last, one group after the other.
io_together() { io_pass "$1" "${io_tests[@]}"; }
io_modes io_together "the io passes of the suites together" 110

fuzz_build_rc=0
wait $fuzz_build_pid || fuzz_build_rc=$?
beside_rc=0
wait $beside_pid || beside_rc=$?
trap - EXIT
cat target/test-fuzz-build.log target/test-beside.log
[ "$fuzz_build_rc" -eq 0 ] || { echo "test.sh: the fuzz build failed" >&2; exit 1; }
[ "$beside_rc" -eq 0 ] || { echo "test.sh: the fuzz smoke run failed" >&2; exit 1; }
step "the fuzz build and smoke run beside (waited for)" 10
# Every build of the run is done: it becomes the saved cargo build (scripts/test_cache.sh).
cache_save_target
step "the cargo build saved" 20
# The stress suite's random readers run 30 s here (60 s by default), 20 s in each io pass.
for t in "${apart[@]}"; do
    began=$SECONDS
    ZARRFS_STRESS_SECONDS="${ZARRFS_STRESS_SECONDS:-30}" run_it --test-threads=2 "$t"
    echo "test.sh: ${t%::} (apart) took $((SECONDS - began)) s"
done
step "the suites apart (io auto)" 260

ZARRFS_TEST_BIN="$root/target/zarrfs-no-fuse" run_it --test-threads=2 --exact \
    serve::the_build_without_fuse_serves_every_fixture_array
step "the build without FUSE" 5

io_apart_groups() {
    local t rc=0
    for t in "${apart[@]}"; do
        mapfile -t these < <(printf '%s\n' "${io_apart[@]}" | grep "^$t")
        io_pass "$1" "${these[@]}" || rc=1
    done
    return $rc
}
io_modes io_apart_groups "the io passes of the suites apart" 195

# The fixtures are shared by every run on the machine: no test may change them.
changed=$(find "$fixtures"/ -newer "$fixtures/.made" ! -type d -print | head -5)
[ -z "$changed" ] || { echo "test.sh: tests changed the shared fixtures:" >&2; echo "$changed" >&2; exit 1; }

table 1200
