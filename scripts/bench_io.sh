# The I/O-mode section of scripts/bench.sh (sourced by it: uses its helpers, variables
# and raw file; keys start with `i.`). Each figure is the median of BENCH_REPEAT runs.
#   i.limit.ARRAY       decode limit: every stored chunk already in memory, all read units
#                       decoded on every core (examples/decode_limit.rs), nothing else
#   i.direct.ARRAY      cold `dd bs=1M` through a fresh `--io direct` mount
#   i.direct_warm.ARRAY a second read through that mount (no page cache in direct mode)
#   i.mat.ARRAY         warm re-read through a mount that has materialized the array
#                       (`--materialize`, FUSE passthrough), alternating with
#   i.mat_plain.ARRAY   the warm plain file
#   i.eight.MODE        eight concurrent cold `dd bs=1M` readers of different files (the
#                       four arrays in C and in F order) through cache / direct / auto
#                       mounts, against i.eight.cat: eight `zarrfs cat` processes of the same
#   i.eight_small.MODE  the same through direct / auto mounts with a cache of
#                       BENCH_SMALL_CACHE (default 1GiB): too small for the four 256 MiB
#                       layers of units that four F-order readers each hold
#   i.rand_direct.*     random 4 KiB preads on zstd through a direct mount, cold then warm
#   i.rand_direct_small.* the same with a cache of BENCH_SMALL_CACHE, which does not hold
#                       the whole array
say "(i) building examples/decode_limit"
cargo build --release --quiet --example decode_limit
cp -f target/release/examples/decode_limit "$target_dir/bench-bin/decode_limit"
decode_limit="$target_dir/bench-bin/decode_limit"

# materialized MNT FILE: wait (up to 60 s) until FILE is served by the kernel.
materialized() {
    local state
    for _ in $(seq 600); do
        state="$(getfattr --only-values -n user.zarrfs.materialized "$1/$2" 2>/dev/null || true)"
        case "$state" in ready*) return 0 ;; esac
        sleep 0.1
    done
    say "warning: $2 not materialized: $state"
    return 1
}

# eight_readers WAY: eight concurrent cold readers; WAY is cache, direct or cat.
eight_readers() {
    local way="$1" pids=() v
    for v in "${variants[@]}"; do
        case "$way" in
            cat)
                "$zarrfs" cat "$big" "$v" --order C >/dev/null & pids+=($!)
                "$zarrfs" cat "$big" "$v" --order F >/dev/null & pids+=($!)
                ;;
            *)
                dd_read "$mnt_root/big/$v" & pids+=($!)
                dd_read "$mnt_root/bigF/$v" & pids+=($!)
                ;;
        esac
    done
    local failed=0 p
    for p in "${pids[@]}"; do wait "$p" || failed=1; done
    return "$failed"
}

for v in "${variants[@]}"; do
    for r in $(seq "$repeat"); do
        say "$v: (i) decode limit, direct-IO mount cold and warm, run $r/$repeat"
        drop_caches
        record "i.limit.$v" "$("$decode_limit" "$big" "$v")"
        drop_caches
        fresh_mount "$big" "$mnt_root/big" --io direct
        timed "i.direct.$v" dd_read "$mnt_root/big/$v"
        timed "i.direct_warm.$v" dd_read "$mnt_root/big/$v"
        unmount "$mnt_root/big"
    done
    say "$v: (i) materialized warm re-read against the warm plain file"
    materialize=2GiB fresh_mount "$big" "$mnt_root/big"
    dd_read "$mnt_root/big/$v"
    if materialized "$mnt_root/big" "$v"; then
        dd_read "$plain"
        for _ in $(seq "$repeat"); do
            timed "i.mat.$v" dd_read "$mnt_root/big/$v"
            timed "i.mat_plain.$v" dd_read "$plain"
        done
        pyrecord check "$mnt_root/big/$v" "$plain" "$shape" C "check.mat.$v"
    fi
    unmount "$mnt_root/big"
done

small_cache="${BENCH_SMALL_CACHE:-1GiB}"
record meta.small_cache "$small_cache"
for r in $(seq "$repeat"); do
    for way in cache direct auto cat small:direct small:auto; do
        say "(i) eight concurrent readers, $way, run $r/$repeat"
        drop_caches
        key="i.eight.$way"
        size="$cache_size"
        case "$way" in small:*) way="${way#small:}" key="i.eight_small.${way#small:}" size="$small_cache" ;; esac
        if [ "$way" != cat ]; then
            cache_size="$size" fresh_mount "$big" "$mnt_root/big" --io "$way"
            cache_size="$size" fresh_mount "$big" "$mnt_root/bigF" --io "$way" --order F
        fi
        timed "$key" eight_readers "$way"
        unmount "$mnt_root/big"
        unmount "$mnt_root/bigF"
    done
done

for size in "$cache_size" "$small_cache"; do
    key=i.rand_direct.zstd
    [ "$size" = "$cache_size" ] || key=i.rand_direct_small.zstd
    say "zstd: (i) random 4 KiB preads through a direct-IO mount (cache $size), cold then warm"
    drop_caches
    cache_size="$size" fresh_mount "$big" "$mnt_root/big" --io direct
    pyrecord randread "$mnt_root/big/zstd" "$key" --count "$random_reads"
    unmount "$mnt_root/big"
done
