#!/usr/bin/env bash
# The benchmark: zarrfs against baselines measured in the same run, as ratios.
#
#   bash scripts/bench.sh          (as root: drops the page cache, mounts with /dev/fuse)
#
# Steps (each idempotent, data regenerated only when its stamp is missing or stale):
#   1. cargo build --release; the binary is copied to target/bench-bin/ so that a
#      concurrent rebuild cannot swap it mid-run (set ZARRFS=/path/to/zarrfs to skip).
#   2. target/venv-bench: zarr-python 3, numpy, numcodecs, tensorstore (stamp file).
#   3. target/bench-data: scripts/bench_data.py writes four 1 GiB float32 arrays
#      (uncompressed, zstd 3, blosc lz4+shuffle, sharded zstd), the same bytes as a
#      plain file, and a hierarchy of 10,000 small arrays in 100 groups.
#   4. Measurements, every cold one after `sync; echo 3 > /proc/sys/vm/drop_caches`
#      and on a fresh mount:
#        a  cold `dd bs=1M` of each array through the mount (C order; F order for zstd),
#           the daemon's peak RSS (VmHWM) at the end
#        b  warm re-read through the same mount
#        c  `zarrfs cat` to /dev/null (no FUSE; cold store)
#        d  tensorstore and zarr-python reading the whole array into memory (cold store)
#        e  the plain file, cold and warm
#        f  10,000 random 4 KiB preads on zstd, sharded and the plain file: p50 / p99,
#           cold then warm, and store bytes fetched per read (xattr
#           user.zarrfs.bytes_fetched; "n/a" when the mount has none)
#        g  `ls -lR` and `find -type f | wc -l` on the mounted 10k hierarchy against
#           `find` on the store folder
#        z  `zarrfs cat` against zarrs (the Rust Zarr library; benches/zarrs-read, built
#           with its own target dir target/bench-zarrs-read) reading each whole array into
#           memory, cold; both outputs' SHA-256 must match (scripts/bench_zarrs.sh;
#           BENCH_ZARRS=0 skips it)
#        bb three back-to-back reads of each array per --io mode with the default
#           materialization, the daemon's CPU seconds, against `zarrfs cat`
#           (scripts/bench_b2b.sh; BENCH_B2B=0 skips it)
#        k  kerchunk references to four NetCDF-4 files on s3s-fs: the mount and `zarrfs
#           cat` against zarr-python + fsspec and xarray + h5netcdf
#           (scripts/bench_refs.sh; BENCH_REFS=0 skips it)
#        l  an Icechunk repository on s3s-fs: the mount and `zarrfs cat` against the
#           icechunk package + zarr-python (scripts/bench_icechunk.sh; BENCH_ICECHUNK=0
#           skips it)
#        i  decode limit, direct-IO reads, materialized warm re-reads, eight concurrent
#           readers in each mode against eight `zarrfs cat` (scripts/bench_io.sh;
#           BENCH_IO=0 skips it)
#        w  writing the zstd array whole through a `--writable` mount and `zarrfs
#           write`, against zarr-python 3 and tensorstore writing the same bytes, and
#           the bytes one chunk row's rewrite puts (scripts/bench_write.sh; BENCH_WRITE=0
#           skips it)
#        sv `zarrfs serve` over loopback read by curl: one GET of the zstd array, and
#           eight concurrent GETs of the four arrays in C and F, against `zarrfs cat`
#           of the same (scripts/bench_serve.sh; BENCH_SERVE=0 skips it)
#        r  remote: the arrays served by s3s-fs behind a proxy adding 20 ms per
#           request (scripts/bench_remote.sh; BENCH_REMOTE=0 skips it)
#        sc scale: `ls -l` of 1,000 and 10,000 arrays and memory after, a 100,000-array
#           hierarchy, 64 MiB in 1 KiB and 16 KiB chunks against tensorstore
#           (scripts/bench_scale.sh; BENCH_SCALE=0 skips it)
#   5. scripts/bench_report.py prints the table with the acceptance ratios (PASS/FAIL)
#      and writes it to target/bench-results.md (raw figures: target/bench-raw.txt).
#
# Cold figures are the median of BENCH_REPEAT runs (default 5), warm ones of 5.
# Environment: BENCH_CACHE_SIZE (the mounts' --cache-size; default auto, the daemon's own),
# BENCH_RANDOM_READS (default 10000), BENCH_REPEAT, ZARRFS (a prebuilt binary, skips the
# build), PYTHON (for the venv), BENCH_MAIN=0 (skip sections a to g).
# The daemons' logs go to target/bench-zarrfs.log.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

target_dir="$repo_root/target"
data="$target_dir/bench-data"
mnt_root="$target_dir/bench-mnt"
raw="$target_dir/bench-raw.txt"
results="$target_dir/bench-results.md"
daemon_log="$target_dir/bench-zarrfs.log"
venv="$target_dir/venv-bench"
py="$venv/bin/python"
cache_size="${BENCH_CACHE_SIZE:-auto}"
random_reads="${BENCH_RANDOM_READS:-10000}"
repeat="${BENCH_REPEAT:-5}"
count_file="$target_dir/bench-count"
variants=(raw zstd blosc sharded)
shape="256,1024,1024"
inner="16,128,128"

say() { echo "bench: $*" >&2; }
die() { say "error: $*"; exit 1; }

[ "$(id -u)" -eq 0 ] || die "run as root (drop_caches and FUSE mounts)"
[ -w /dev/fuse ] || die "/dev/fuse is not writable"
command -v fusermount3 >/dev/null || die "fusermount3 missing (apt-get install fuse3)"

# ---------------------------------------------------------------- 1. the binary
if [ -n "${ZARRFS:-}" ]; then
    zarrfs="$ZARRFS"
else
    say "cargo build --release"
    cargo build --release --quiet
    mkdir -p "$target_dir/bench-bin"
    cp -f target/release/zarrfs "$target_dir/bench-bin/zarrfs"
    zarrfs="$target_dir/bench-bin/zarrfs"
fi
[ -x "$zarrfs" ] || die "no zarrfs binary at $zarrfs"

# ---------------------------------------------------------------- 2. the venv
requirements='zarr>=3.1,<4
numpy
numcodecs
tensorstore
obstore'
stamp="$venv/.requirements-stamp"
if [[ -f "$stamp" && -x "$py" ]] && [[ "$(cat "$stamp")" == "$requirements" ]]; then
    say "venv-bench up to date"
else
    say "creating $venv"
    rm -rf "$venv"
    "${PYTHON:-python3}" -m venv "$venv"
    printf '%s\n' "$requirements" >"$venv/requirements.txt"
    "$py" -m pip install --quiet --disable-pip-version-check --upgrade pip
    "$py" -m pip install --quiet --disable-pip-version-check -r "$venv/requirements.txt"
    printf '%s' "$requirements" >"$stamp"
fi

# ---------------------------------------------------------------- 3. the data
# The 1 GiB arrays are written only when a section reads them: the reference, Icechunk
# and scale sections have data of their own.
big_data=
for section in MAIN ZARRS B2B IO WRITE SERVE REMOTE; do
    flag="BENCH_$section"
    [ "${!flag:-1}" = 0 ] || big_data=1
done
want_stamp="$("$py" -c 'import sys; sys.path.insert(0, "scripts"); import bench_data; print(bench_data.STAMP)')"
if [ -z "$big_data" ]; then
    say "no section reads the 1 GiB arrays: not written"
elif [[ -f "$data/.stamp" ]] && [[ "$(cat "$data/.stamp")" == "$want_stamp" ]]; then
    say "bench data up to date in $data"
else
    say "writing bench data to $data (a few minutes)"
    "$py" scripts/bench_data.py "$data"
fi
big="$data/big.zarr"
small="$data/small.zarr"
plain="$data/plain_c.bin"

# ---------------------------------------------------------------- helpers
: >"$raw"
record() { echo "$1 $2" >>"$raw"; }

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.6f", b - a }'; }

drop_caches() {
    sync
    echo 3 >/proc/sys/vm/drop_caches
}

daemon_pid() {
    pgrep -f -- "zarrfs mount .*$1( |\$)" | head -n 1 || true
}

is_mounted() { awk -v m="$1" '$5 == m { found = 1 } END { exit !found }' /proc/self/mountinfo; }

# fresh_mount STORE MNT [ARGS...]: (re)mount STORE at MNT; prints nothing.
# serve_bucket NAME DIR: s3s-fs on a free loopback port, DIR's files put into bucket NAME
# through its API (target/bench-NAME-buckets, log beside it); sets served_pid and
# served_endpoint. Put through the API, each object keeps the ETag computed as it
# arrived, as on S3; a file dropped into s3s-fs's folder has none, and s3s-fs would hash
# the whole file on every request for any range of it, a cost no S3 service has.
# bench_s3s_fs: the s3s-fs the bench serves with, fully optimized, built once into
# target/bench-tools (the test run's copy, target/tools, is built with less optimization).
bench_s3s_fs() {
    s3s_fs="$target_dir/bench-tools/bin/s3s-fs"
    [ -x "$s3s_fs" ] && return
    say "installing s3s-fs 0.14.1 into target/bench-tools"
    cargo install --quiet --root "$target_dir/bench-tools" s3s-fs --version 0.14.1 --features binary --locked
}
serve_bucket() {
    local name="$1" dir="$2"
    local s3s_fs buckets="$target_dir/bench-$1-buckets" port
    bench_s3s_fs
    rm -rf "$buckets"
    mkdir -p "$buckets"
    port="$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    "$s3s_fs" --host 127.0.0.1 --port "$port" "$buckets" >"$buckets.log" 2>&1 &
    served_pid=$!
    for _ in $(seq 100); do "$py" -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])))' "$port" 2>/dev/null && break; sleep 0.1; done
    served_endpoint="http://127.0.0.1:$port"
    "$py" scripts/s3_upload.py "$served_endpoint" "$name" "$dir" 2>>"$buckets.log" \
        || die "putting $dir into bucket $name failed; see $buckets.log"
}

# sha_of FILE: its SHA-256.
sha_of() { sha256sum "$1" | cut -d' ' -f1; }

# py_reader KEY PYTHON SCRIPT ARGS...: run a reader script that prints its seconds and
# the SHA-256 of what it read; record KEY and KEY.sha256 (KEY error when it fails).
py_reader() {
    local key="$1" python="$2" script="$3" out
    shift 3
    if out="$("$python" "$script" "$@")"; then
        record "$key" "${out%% *}"
        record "$key.sha256" "${out##* }"
    else
        say "warning: $key failed"
        record "$key" error
    fi
}

fresh_mount() {
    local store="$1" mnt="$2"
    shift 2
    unmount "$mnt"
    mkdir -p "$mnt"
    # Materialization is off unless a measurement asks for it (materialize=SIZE
    # fresh_mount ...): it decodes arrays read through once again in the background,
    # which would load the runs that follow.
    timeout 120 "$zarrfs" mount "$store" "$mnt" --cache-size "$cache_size" \
        --materialize "${materialize:-off}" \
        --log-file "$daemon_log" "$@" </dev/null >/dev/null 2>>"$daemon_log" \
        || die "zarrfs mount $store $mnt failed; see $daemon_log"
}

# unmount MNT: unmount if mounted and wait for its daemon to exit.
unmount() {
    local mnt="$1" pid
    is_mounted "$mnt" || return 0
    pid="$(daemon_pid "$mnt")"
    "$zarrfs" umount "$mnt" 2>>"$daemon_log" || say "warning: zarrfs umount $mnt failed"
    for _ in $(seq 100); do
        if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then break; fi
        sleep 0.1
    done
}

cleanup() {
    local m
    for m in "$mnt_root"/*; do
        [ -d "$m" ] && unmount "$m"
    done
    return 0
}
trap cleanup EXIT

# vm_hwm MNT: the daemon's peak resident set in KiB ("n/a" when it cannot be found).
vm_hwm() {
    local pid
    pid="$(daemon_pid "$1")"
    if [ -n "$pid" ] && [ -r "/proc/$pid/status" ]; then
        awk '/^VmHWM:/ { print $2 }' "/proc/$pid/status"
    else
        echo n/a
    fi
}

# timed KEY CMD...: run CMD, record KEY seconds (or "error" if it fails).
timed() {
    local key="$1" t0
    shift
    t0="$(now)"
    if "$@"; then
        record "$key" "$(since "$t0")"
    else
        say "warning: $key failed: $*"
        record "$key" error
    fi
}

dd_read() { dd if="$1" of=/dev/null bs=1M status=none; }
cat_array() { "$zarrfs" cat "$big" "$1" --order "$2" >/dev/null; }
ls_tree() { ls -lR "$1" >/dev/null; }
count_files() { find "$1" -type f | wc -l >"$2"; }

# pyrecord ARGS...: run a bench_readers.py command and record its KEY VALUE lines.
pyrecord() {
    local out
    if out="$("$py" scripts/bench_readers.py "$@")"; then
        printf '%s\n' "$out" >>"$raw"
    else
        say "warning: bench_readers.py $* failed"
    fi
}

mkdir -p "$mnt_root"
cleanup
: >"$daemon_log"
record meta.date "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
record meta.commit "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- src 2>/dev/null || echo +dirty)"
record meta.kernel "$(uname -r)"
record meta.cores "$(nproc)"
record meta.cache_size "$cache_size"
record meta.random_reads "$random_reads"
record meta.repeat "$repeat"
[ -z "$big_data" ] || record meta.file_bytes "$(stat -c %s "$plain")"
record meta.loadavg_start "$(cut -d' ' -f1-3 /proc/loadavg | tr ' ' /)"

# ---------------------------------------------------------------- a, b, c, d, h
# BENCH_MAIN=0 skips sections a to g (to run only the sections after them).
if [ "${BENCH_MAIN:-1}" != 0 ]; then
# Each repetition takes the cold mount read, zarrfs cat and the two libraries back to
# back (and the cold plain file with the uncompressed array), so that the VM's drifting
# speed affects them alike; warm mount reads alternate with warm plain-file reads. The
# report shows medians.
warm_repeat=5
for v in "${variants[@]}"; do
    mnt="$mnt_root/big"
    for r in $(seq "$repeat"); do
        say "$v: (a) cold mount read, (c) zarrfs cat, (d) tensorstore, zarr-python, run $r/$repeat"
        drop_caches
        fresh_mount "$big" "$mnt"
        timed "a.$v" dd_read "$mnt/$v"
        record "h.$v.vmhwm_kib" "$(vm_hwm "$mnt")"
        if [ "$r" -eq 1 ]; then
            say "$v: (b) warm re-read, (e) warm plain file, content check"
            dd_read "$plain"
            for _ in $(seq "$warm_repeat"); do
                timed "b.$v" dd_read "$mnt/$v"
                timed e.warm dd_read "$plain"
                record "e.warm.$v" "$(awk '$1 == "e.warm" { t = $2 } END { print t }' "$raw")"
            done
            pyrecord check "$mnt/$v" "$plain" "$shape" C "check.$v"
        fi
        unmount "$mnt"
        drop_caches
        timed "c.$v" cat_array "$v" C
        if [ "$v" = raw ]; then
            drop_caches
            timed e.cold dd_read "$plain"
        fi
        drop_caches
        pyrecord readall tensorstore "$big" "$v" "d.tensorstore.$v"
        drop_caches
        pyrecord readall zarr "$big" "$v" "d.zarr.$v"
        if [ "$v" = zstd ]; then
            say "zstd F order: (a) cold mount read, (c) zarrfs cat, run $r/$repeat"
            drop_caches
            fresh_mount "$big" "$mnt_root/bigF" --order F
            timed a.zstdF dd_read "$mnt_root/bigF/zstd"
            record h.zstdF.vmhwm_kib "$(vm_hwm "$mnt_root/bigF")"
            if [ "$r" -eq 1 ]; then
                for _ in $(seq "$warm_repeat"); do timed b.zstdF dd_read "$mnt_root/bigF/zstd"; done
                pyrecord check "$mnt_root/bigF/zstd" "$plain" "$shape" F check.zstdF
            fi
            unmount "$mnt_root/bigF"
            drop_caches
            timed c.zstdF cat_array zstd F
        fi
    done
done

# ---------------------------------------------------------------- f
for v in zstd sharded; do
    say "$v: (f) $random_reads random 4 KiB preads, cold then warm"
    mnt="$mnt_root/big"
    drop_caches
    fresh_mount "$big" "$mnt"
    pyrecord randread "$mnt/$v" "f.$v" --count "$random_reads"
    unmount "$mnt"
done
say "sharded: (f) store bytes per random read on a fresh mount"
drop_caches
fresh_mount "$big" "$mnt_root/big"
pyrecord fetchprobe "$mnt_root/big/sharded" f.probe "$shape" "$inner" --count 100
unmount "$mnt_root/big"
say "plain file: (f) random preads"
drop_caches
pyrecord randread "$plain" f.plain --count "$random_reads"

# ---------------------------------------------------------------- g
# Each first walk on its own fresh mount with the page cache dropped; warm walks follow.
mnt="$mnt_root/small"
for r in $(seq "$repeat"); do
    say "(g) 10k-array hierarchy: mount listing against the store folder, run $r/$repeat"
    drop_caches
    t0="$(now)"
    fresh_mount "$small" "$mnt"
    record g.mount "$(since "$t0")"
    timed g.find_mount_cold count_files "$mnt" "$count_file"
    record g.find_mount_count "$(cat "$count_file")"
    drop_caches
    fresh_mount "$small" "$mnt"
    timed g.ls_mount_cold ls_tree "$mnt"
    timed g.ls_mount_warm ls_tree "$mnt"
    timed g.find_mount_warm count_files "$mnt" "$count_file"
    if [ "$r" -eq 1 ]; then
        record g.array_files "$(find "$mnt" -type f -not -name '.*' | wc -l)"
    fi
    unmount "$mnt"
    drop_caches
    timed g.find_store_cold count_files "$small" "$count_file"
    record g.find_store_count "$(cat "$count_file")"
    timed g.find_store_warm count_files "$small" "$count_file"
    drop_caches
    timed g.ls_store_cold ls_tree "$small"
    timed g.ls_store_warm ls_tree "$small"
done
rm -f "$count_file"
fi

# ---------------------------------------------------------------- zarrs (z)
if [ "${BENCH_ZARRS:-1}" != 0 ]; then
    # shellcheck source=scripts/bench_zarrs.sh
    source scripts/bench_zarrs.sh
fi

# ---------------------------------------------------------------- back to back (bb)
if [ "${BENCH_B2B:-1}" != 0 ]; then
    # shellcheck source=scripts/bench_b2b.sh
    source scripts/bench_b2b.sh
fi

# ---------------------------------------------------------------- references (k)
if [ "${BENCH_REFS:-1}" != 0 ]; then
    # shellcheck source=scripts/bench_refs.sh
    source scripts/bench_refs.sh
fi

# ---------------------------------------------------------------- icechunk (l)
if [ "${BENCH_ICECHUNK:-1}" != 0 ]; then
    # shellcheck source=scripts/bench_icechunk.sh
    source scripts/bench_icechunk.sh
fi

# ---------------------------------------------------------------- io modes (i)
if [ "${BENCH_IO:-1}" != 0 ]; then
    # shellcheck source=scripts/bench_io.sh
    source scripts/bench_io.sh
fi

# ---------------------------------------------------------------- remote (r)
if [ "${BENCH_WRITE:-1}" != 0 ]; then
    # shellcheck source=scripts/bench_write.sh
    source scripts/bench_write.sh
fi

# ---------------------------------------------------------------- serve (sv)
if [ "${BENCH_SCALE:-1}" != 0 ]; then
    # shellcheck source=scripts/bench_scale.sh
    source scripts/bench_scale.sh
fi

if [ "${BENCH_SERVE:-1}" != 0 ]; then
    # shellcheck source=scripts/bench_serve.sh
    source scripts/bench_serve.sh
fi

if [ "${BENCH_REMOTE:-1}" != 0 ]; then
    # shellcheck source=scripts/bench_remote.sh
    source scripts/bench_remote.sh
fi

# ---------------------------------------------------------------- report
cleanup
record meta.daemon_log_lines "$(wc -l <"$daemon_log")"
record meta.loadavg_end "$(cut -d' ' -f1-3 /proc/loadavg | tr ' ' /)"
"$py" scripts/bench_report.py "$raw" "$data/bench-data.json" "$results"
say "results in $results (raw figures: $raw)"
