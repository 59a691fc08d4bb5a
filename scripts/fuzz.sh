#!/usr/bin/env bash
# Fuzz zarrfs with AFL++ through cargo-afl (stable Rust).
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]
#
# Runs each TARGET (default: all of metadata, codec_chain, sharding, view) for SECONDS
# (default 60) under afl-fuzz, one after the other. Installs cargo-afl and builds AFL++
# under target/tools on first use, builds the targets into target/fuzz, writes seed
# corpora from target/fixtures (scripts/test.sh writes them) into target/fuzz-seeds, and
# keeps each target's corpus in target/fuzz-out/TARGET (later runs resume it; each run's
# time and execs are appended to target/fuzz-out/TARGET/runs.log).
# Prints every target's exec count and crash count; exits 1 when any input in a crash
# folder still crashes the current build (the inputs are copied to target/fuzz-crashes).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD

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

afl_version=0.18.2
tools=$root/target/tools
export PATH="$tools/bin:$PATH"
export XDG_DATA_HOME="$tools/afl-data"
export CARGO_TARGET_DIR="$root/target/fuzz"

# cargo-afl, pinned to the afl crate of fuzz/Cargo.lock.
if ! cargo afl --version 2>/dev/null | grep -q "$afl_version"; then
    echo "fuzz.sh: installing cargo-afl $afl_version into $tools"
    cargo install cargo-afl --locked --version "$afl_version" --root "$tools"
fi
# AFL++ itself (afl-fuzz and the LLVM runtime), built from source for this rustc.
if ! out=$(cargo afl config --build 2>&1); then
    if ! grep -q 'already built' <<<"$out"; then
        echo "$out" >&2
        exit 1
    fi
fi

echo "fuzz.sh: building the fuzz targets"
(cd fuzz && nice -n 10 cargo afl build --release)
bin=$CARGO_TARGET_DIR/release

[ -d target/fixtures ] || { echo "fuzz.sh: target/fixtures is missing: run scripts/test.sh first" >&2; exit 1; }
rm -rf target/fuzz-seeds
"$bin/seeds" target/fixtures target/fuzz-seeds

# afl-fuzz settings for a shared machine: no CPU binding or frequency check, no UI, and
# core dumps may go to a handler (the crashes are still seen as signals).
export AFL_SKIP_CPUFREQ=1 AFL_NO_AFFINITY=1 AFL_NO_UI=1 AFL_AUTORESUME=1 AFL_FAST_CAL=1
export AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_SKIP_CRASHES=1 AFL_QUIET=1

stat() { awk -F' *: *' -v k="$1" '$1 == k { print $2 }' "$2"; }

status=0
summary=()
for t in "${targets[@]}"; do
    out_dir=target/fuzz-out/$t
    mkdir -p "$out_dir"
    dict=()
    [ "$t" = view ] || dict=(-x fuzz/dict/zarr.dict)
    echo "fuzz.sh: $t for ${seconds}s"
    nice -n 10 cargo afl fuzz -i "target/fuzz-seeds/$t" -o "$out_dir" -V "$seconds" -t 2000 \
        -m none "${dict[@]}" -- "$bin/$t" >"$out_dir/afl.log" 2>&1 || {
        echo "fuzz.sh: afl-fuzz failed for $t; last lines of $out_dir/afl.log:" >&2
        tail -20 "$out_dir/afl.log" >&2
        exit 1
    }
    stats=$out_dir/default/fuzzer_stats
    execs=$(stat execs_done "$stats")
    run_time=$(stat run_time "$stats")
    paths=$(stat corpus_count "$stats")
    # Crash inputs (of this run or earlier ones) that still crash this build.
    open=0
    crash_dir=target/fuzz-crashes/$t
    rm -rf "$crash_dir"
    for f in "$out_dir"/default/crashes/id:*; do
        [ -e "$f" ] || continue
        if ! timeout 20 "$bin/$t" <"$f" >/dev/null 2>&1; then
            mkdir -p "$crash_dir"
            cp "$f" "$crash_dir/"
            open=$((open + 1))
        fi
    done
    hangs=$(find "$out_dir/default/hangs" -name 'id:*' 2>/dev/null | wc -l)
    echo "$(date -u +%FT%TZ) run_time $run_time execs $execs" >>"$out_dir/runs.log"
    total=$(awk '{ t += $3; e += $5 } END { printf "%ds %d execs", t, e }' "$out_dir/runs.log")
    summary+=("$(printf '%-12s execs %-10s in %5ss (all runs: %s)  corpus %-6s hangs %-4s crashes %s' \
        "$t" "$execs" "$run_time" "$total" "$paths" "$hangs" "$open")")
    if [ "$open" -gt 0 ]; then
        status=1
    fi
done

echo "fuzz.sh: results"
printf '  %s\n' "${summary[@]}"
if [ "$status" -ne 0 ]; then
    echo "fuzz.sh: crashes found; inputs in target/fuzz-crashes/<target>/. Reproduce with" >&2
    echo "  $bin/<target> < target/fuzz-crashes/<target>/<file>" >&2
    echo "and minimize with" >&2
    echo "  cargo afl tmin -i <file> -o min -- $bin/<target>   (PATH=$tools/bin:\$PATH XDG_DATA_HOME=$tools/afl-data)" >&2
fi
exit "$status"
