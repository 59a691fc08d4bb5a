#!/usr/bin/env bash
# Fuzz zarrfs with AFL++ through cargo-afl (stable Rust).
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]
#   scripts/fuzz.sh --build        only build the targets (scripts/test.sh builds them
#                                  beside its tests)
#   scripts/fuzz.sh --tools        only make cargo-afl and AFL++ (scripts/test.sh makes
#                                  them with its other test tools, before its tests)
#
# Runs each TARGET (default: all of metadata, codec_chain, sharding, view) for SECONDS
# (default 60) under afl-fuzz, one after the other, niced. cargo-afl and AFL++ (built
# from source) come from the test cache (scripts/test_cache.sh), keyed by cargo-afl's
# version and the toolchain; target/tools/afl links to them. It builds the targets into
# target/fuzz and writes seed corpora into target/fuzz-seeds from target/fixtures and
# target/hostile (scripts/test.sh writes both). Each run starts from the seeds plus the
# corpus the previous run of the target left in target/fuzz-out/TARGET, so long fuzzing
# can be done in pieces; each run's time and exec count are appended to
# target/fuzz-runs/TARGET.log.
#
# New crashing inputs are kept in target/fuzz-crashes/TARGET, and hangs in
# target/fuzz-hangs/TARGET; every run checks all of them against the current build and
# drops those that no longer crash or that end within 20 s. Exits 1 while any remains,
# printing how to reproduce it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD

build_only=
tools_only=
if [ "${1:-}" = --build ]; then build_only=1; shift; fi
if [ "${1:-}" = --tools ]; then tools_only=1; shift; fi
seconds=${1:-60}
if ! [[ $seconds =~ ^[0-9]+$ ]] || [ "$seconds" -lt 1 ]; then
    echo "usage: scripts/fuzz.sh [SECONDS] [TARGET...]" >&2
    exit 2
fi
shift || true
all=(metadata codec_chain sharding view)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")
for t in "${targets[@]}"; do
    [[ " ${all[*]} " == *" $t "* ]] || { echo "fuzz.sh: unknown target $t (known: ${all[*]})" >&2; exit 2; }
done

# AFL++ is built from source: it needs a C compiler and make.
need=()
command -v make >/dev/null || need+=(make)
command -v cc >/dev/null || need+=(gcc)
if [ ${#need[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "fuzz.sh: need root to install ${need[*]}" >&2
        exit 1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
fi

# One fuzz.sh at a time: runs share the corpora and the build.
mkdir -p target
exec 9>target/fuzz.lock
flock 9

# cargo-afl, pinned to the afl crate of Cargo.lock, and AFL++ itself (afl-fuzz and
# the LLVM runtime), built from source for this rustc.
afl_version=0.18.2
# shellcheck source=scripts/test_cache.sh
. scripts/test_cache.sh
build_afl() {
    cargo install cargo-afl --locked --version "$afl_version" --root "$1"
    PATH="$1/bin:$PATH" XDG_DATA_HOME="$1/afl-data" cargo afl config --build
}
cache_link afl "$(cache_key "$afl_version" "$(rustc -vV)")" target/tools/afl build_afl
[ -z "$tools_only" ] || exit 0
# The entry's own path, not the clone's link to it: cargo-afl puts it into RUSTFLAGS,
# which must stay the same from clone to clone for the saved build to be of use.
tools=$(cd target/tools/afl && pwd -P)
export PATH="$tools/bin:$PATH"
export XDG_DATA_HOME="$tools/afl-data"
export CARGO_TARGET_DIR="$root/target/fuzz"

echo "fuzz.sh: building the fuzz targets"
nice -n 10 cargo afl build --release -p zarrfs-fuzz
bin=$CARGO_TARGET_DIR/release
[ -z "$build_only" ] || exit 0

# Seeds: the writers' fixtures, and the bad-input corpus when it was written.
[ -d target/fixtures ] || { echo "fuzz.sh: target/fixtures is missing: run scripts/test.sh first" >&2; exit 1; }
roots=(target/fixtures)
[ -d target/hostile ] && roots+=(target/hostile)
rm -rf target/fuzz-seeds
"$bin/seeds" target/fuzz-seeds "${roots[@]}"

# afl-fuzz settings for a shared machine: no CPU binding or frequency check, no UI, and
# core dumps may go to a handler (the crashes are still seen as signals). Seeds that
# crash are skipped (the crash folder holds them).
export AFL_SKIP_CPUFREQ=1 AFL_NO_AFFINITY=1 AFL_NO_UI=1 AFL_FAST_CAL=1 AFL_QUIET=1
export AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_SKIP_CRASHES=1

stat() { awk -F' *: *' -v k="$1" '$1 == k { print $2 }' "$2"; }

status=0
summary=()
mkdir -p target/fuzz-runs
for t in "${targets[@]}"; do
    out_dir=target/fuzz-out/$t
    in_dir=target/fuzz-in/$t
    crash_dir=target/fuzz-crashes/$t
    # This run's inputs: the seeds and the corpus of the previous run (which holds the
    # seeds it started from), named by content so that each input is there once.
    rm -rf "$in_dir"
    mkdir -p "$in_dir" "$crash_dir"
    for f in target/fuzz-seeds/"$t"/* "$out_dir"/default/queue/id:*; do
        [ -e "$f" ] || continue
        cp "$f" "$in_dir/$(sha1sum <"$f" | cut -c1-16)"
    done
    rm -rf "$out_dir"
    mkdir -p "$out_dir"
    dict=()
    [ "$t" = view ] || dict=(-x fuzz/dict/zarr.dict)
    echo "fuzz.sh: $t for ${seconds}s ($(find "$in_dir" -type f | wc -l) inputs)"
    nice -n 10 cargo afl fuzz -i "$in_dir" -o "$out_dir" -V "$seconds" -t 2000 -m none \
        "${dict[@]}" -- "$bin/$t" >"$out_dir/afl.log" 2>&1 || {
        echo "fuzz.sh: afl-fuzz failed for $t; last lines of $out_dir/afl.log:" >&2
        tail -20 "$out_dir/afl.log" >&2
        exit 1
    }
    stats=$out_dir/default/fuzzer_stats
    execs=$(stat execs_done "$stats")
    run_time=$(stat run_time "$stats")
    corpus=$(stat corpus_count "$stats")
    hangs=$(find "$out_dir/default/hangs" -name 'id:*' | wc -l)
    for f in "$out_dir"/default/crashes/id:*; do
        [ -e "$f" ] || continue
        cp "$f" "$crash_dir/$(sha1sum <"$f" | cut -c1-16)"
    done
    # Crashes of this run and earlier ones that still crash this build.
    open=0
    for f in "$crash_dir"/*; do
        [ -e "$f" ] || continue
        if timeout 20 "$bin/$t" <"$f" >/dev/null 2>&1; then
            echo "fuzz.sh: $f no longer crashes; dropped"
            rm -f "$f"
        else
            open=$((open + 1))
        fi
    done
    # Hangs (over afl-fuzz's 2 s) that still run past 20 s on this build are failures too:
    # a request that never ends takes a worker from the mount.
    hang_dir="target/fuzz-hangs/$t"
    mkdir -p "$hang_dir"
    for f in "$out_dir"/default/hangs/id:*; do
        [ -e "$f" ] || continue
        cp "$f" "$hang_dir/$(sha1sum <"$f" | cut -c1-16)"
    done
    for f in "$hang_dir"/*; do
        [ -e "$f" ] || continue
        if timeout 20 "$bin/$t" <"$f" >/dev/null 2>&1 || [ $? -ne 124 ]; then
            rm -f "$f"
        else
            echo "fuzz.sh: $f still runs past 20 s" >&2
            open=$((open + 1))
        fi
    done
    echo "$(date -u +%FT%TZ) run_time $run_time execs $execs" >>"target/fuzz-runs/$t.log"
    total=$(awk '{ t += $3; e += $5 } END { printf "%ds, %d execs", t, e }' "target/fuzz-runs/$t.log")
    summary+=("$(printf '%-12s %10s execs in %5ss (all runs: %s)  corpus %-6s hangs %-3s open crashes+hangs %s' \
        "$t" "$execs" "$run_time" "$total" "$corpus" "$hangs" "$open")")
    [ "$open" -eq 0 ] || status=1
done

echo "fuzz.sh: results"
printf '  %s\n' "${summary[@]}"
if [ "$status" -ne 0 ]; then
    echo "fuzz.sh: crashes or hangs found; inputs in target/fuzz-crashes/<target>/ and" >&2
    echo "target/fuzz-hangs/<target>/. Reproduce with" >&2
    echo "  $bin/<target> < target/fuzz-crashes/<target>/<file>" >&2
    echo "and minimize with (PATH=$tools/bin:\$PATH XDG_DATA_HOME=$tools/afl-data)" >&2
    echo "  cargo afl tmin -i <file> -o <file>.min -- $bin/<target>" >&2
fi
exit "$status"
