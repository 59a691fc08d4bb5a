# The scale section of scripts/bench.sh (sourced by it: uses its helpers, variables and
# raw file; keys start with `sc.`): what costs grow with the count of arrays and chunks.
# Data: scripts/bench_scale.py (zarr-python 3) into target/bench-scale, once per stamp.
# Every cold figure on a fresh mount with the page cache dropped; medians of BENCH_REPEAT.
#   sc.ls1k.cold / sc.ls10k.cold   `ls -l` of a group of 1,000 / 10,000 tiny arrays
#   sc.ls10k.warm                  the same `ls -l` again on that mount
#   sc.ls10k.rss_kib               the daemon's resident set after both
#   sc.ls10k.warm_requests         FUSE requests the daemon read (strace of its reads of
#                                  /dev/fuse) while `stat` ran on every array file after
#                                  the listing: a warm `stat` the kernel answers reads none
#   sc.plain10k.cold / .warm       `ls -l` of 10,000 plain files (the reference)
#   sc.tree100k.ls                 `ls -lR` of 100 groups x 1,000 arrays, then
#   sc.tree100k.rss_kib            the daemon's resident set
#   sc.tree100k.stat1              `stat` of one array on a fresh mount
#   sc.cat.c1k / sc.mount.c1k      `zarrfs cat` / `dd bs=1M` of the mount, 64 MiB in
#   sc.ts.c1k                      65,536 chunks of 1 KiB, against tensorstore reading it
#   sc.*.c16k                      the same in 4,096 chunks of 16 KiB
scale="$target_dir/bench-scale"
if [[ "$(cat "$scale/.stamp" 2>/dev/null)" != "$("$py" -c 'import sys; sys.path.insert(0, "scripts"); import bench_scale; print(bench_scale.STAMP)')" ]]; then
    say "(sc) writing the scale data to $scale (several minutes)"
    "$py" scripts/bench_scale.py data "$scale"
fi
mnt="$mnt_root/scale"

# rss_kib MNT: the daemon's resident set now, in KiB.
rss_kib() {
    local pid
    pid="$(daemon_pid "$1")"
    awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status" 2>/dev/null || echo n/a
}
ls_long() { ls -l "$1" >/dev/null; }
ls_long_tree() { ls -lR "$1" >/dev/null; }
# fuse_requests MNT CMD...: run CMD while strace counts the reads of /dev/fuse by the
# daemon of MNT that returned a request; prints the count.
fuse_requests() {
    local mnt="$1" pid trace="$target_dir/bench-scale-strace.txt" tracer fds
    shift
    pid="$(daemon_pid "$mnt")"
    fds="$(find "/proc/$pid/fd" -lname /dev/fuse -printf '%f\n' | paste -sd'|')"
    strace -f -qq -e trace=read,readv -e status=successful -p "$pid" -o "$trace" &
    tracer=$!
    sleep 1
    "$@" >/dev/null
    sleep 0.5
    kill "$tracer"
    wait "$tracer" 2>/dev/null || true
    grep -cE "read[v]?\(($fds)," "$trace" || true
}
stat_one() { stat "$1" >/dev/null; }
# stat_listed LIST: stat of every file named in LIST (made before, so that no listing of
# the folder is among the requests counted).
stat_listed() { xargs -d '\n' stat -c %s <"$1" >/dev/null; }

for r in $(seq "$repeat"); do
    say "(sc) ls -l of 1,000 and 10,000 arrays and of 10,000 plain files, run $r/$repeat"
    drop_caches
    fresh_mount "$scale/flat1k.zarr" "$mnt"
    timed sc.ls1k.cold ls_long "$mnt"
    drop_caches
    fresh_mount "$scale/flat10k.zarr" "$mnt"
    timed sc.ls10k.cold ls_long "$mnt"
    timed sc.ls10k.warm ls_long "$mnt"
    record sc.ls10k.rss_kib "$(rss_kib "$mnt")"
    if [ "$r" -eq 1 ]; then
        record sc.ls10k.files "$(find "$mnt" -maxdepth 1 -type f -not -name '.*' | wc -l)"
        find "$mnt" -maxdepth 1 -type f -not -name '.*' >"$target_dir/bench-scale-files.txt"
        record sc.ls10k.warm_requests "$(fuse_requests "$mnt" stat_listed "$target_dir/bench-scale-files.txt")"
    fi
    unmount "$mnt"
    drop_caches
    timed sc.plain10k.cold ls_long "$scale/plain10k"
    timed sc.plain10k.warm ls_long "$scale/plain10k"

    say "(sc) 100,000 arrays: ls -lR, memory, one stat on a fresh mount, run $r/$repeat"
    drop_caches
    fresh_mount "$scale/tree100k.zarr" "$mnt"
    timed sc.tree100k.ls ls_long_tree "$mnt"
    record sc.tree100k.rss_kib "$(rss_kib "$mnt")"
    if [ "$r" -eq 1 ]; then
        record sc.tree100k.files "$(find "$mnt" -type f -not -name '.*' | wc -l)"
    fi
    drop_caches
    fresh_mount "$scale/tree100k.zarr" "$mnt"
    timed sc.tree100k.stat1 stat_one "$mnt/g050/a0500"
    unmount "$mnt"

    for a in c1k c16k; do
        say "(sc) $a: zarrfs cat, the mount and tensorstore, run $r/$repeat"
        drop_caches
        timed "sc.cat.$a" sh -c '"$1" cat "$2" "$3" >/dev/null' _ "$zarrfs" "$scale/chunks.zarr" "$a"
        drop_caches
        fresh_mount "$scale/chunks.zarr" "$mnt"
        timed "sc.mount.$a" dd_read "$mnt/$a"
        unmount "$mnt"
        drop_caches
        "$py" scripts/bench_scale.py readall "$scale/chunks.zarr" "$a" "sc.ts.$a" >>"$raw" \
            || say "warning: tensorstore read of $a failed"
        if [ "$r" -eq 1 ]; then
            got="$("$zarrfs" cat "$scale/chunks.zarr" "$a" | sha256sum | cut -d' ' -f1)"
            want="$(awk -v k="sc.ts.$a.sha256" '$1 == k { v = $2 } END { print v }' "$raw")"
            [ "$got" = "$want" ] || die "(sc) zarrfs cat of $a is not what tensorstore read"
        fi
    done
done
