# The write section of scripts/bench.sh (sourced by it: uses its helpers, variables and
# raw file; keys start with `w.`). The zstd array of big.zarr (1 GiB float32, 16 x 256 x
# 256 chunks, zstd 3) written whole from the plain file (in the page cache, as a tool's
# output would be) into an empty copy of it (its zarr.json alone), each run on a fresh
# copy:
#   w.mount          `dd bs=1M conv=notrunc` into the array's file on a `--writable`
#                    mount, the close (the commit) included
#   w.cli            `zarrfs write STORE zstd --from PLAIN`
#   w.zarr, w.tensorstore   zarr-python 3 and tensorstore writing the same bytes
#                    (scripts/bench_write.py)
#   w.*.sha256       once per writer, outside the timing: `zarrfs cat` of what it wrote,
#                    which must be the plain file's bytes, else the bench stops
#   w.row.written    rewriting chunk row 0 (16 rows of axis 0) through a mount of what
#                    w.mount wrote: the mount's user.zarrfs.bytes_written
#   w.row.chunks     the size of that row's chunk objects after it (they must be equal)
write_root="$target_dir/bench-write"
write_staging="$target_dir/bench-write-staging"
template="$big/zstd/zarr.json"
# empty_copy NAME: a folder store NAME with an empty copy of the zstd array; its path.
empty_copy() {
    local store="$write_root/$1"
    rm -rf "$store"
    mkdir -p "$store/zstd"
    cp "$big/zarr.json" "$store/zarr.json"
    cp "$template" "$store/zstd/zarr.json"
    echo "$store"
}
dd_write() { dd if="$plain" of="$1" bs=1M conv=notrunc status=none; }
write_mount() {
    local store="$1" mnt="$mnt_root/write"
    fresh_mount "$store" "$mnt" --writable --write-staging "$write_staging"
    dd_write "$mnt/zstd" || return 1
    unmount "$mnt"
}
write_cli() { "$zarrfs" write "$1" zstd --from "$plain" 2>>"$daemon_log"; }
write_py() {
    local t
    t="$("$py" scripts/bench_write.py "$1" "$2" zstd "$plain")" || return 1
    record "w.$1" "$t"
}
plain_sha="$(sha_of "$plain")"
check_written() {
    local who="$1" store="$2" sha
    sha="$("$zarrfs" cat "$store" zstd | sha256sum | cut -d' ' -f1)"
    record "w.$who.sha256" "$sha"
    [ "$sha" = "$plain_sha" ] || die "(w) $who wrote other bytes than the plain file ($sha)"
}
cat "$plain" >/dev/null
for r in $(seq "$repeat"); do
    for who in mount cli zarr tensorstore; do
        store="$(empty_copy "$who")"
        sync
        cat "$plain" >/dev/null
        say "(w) $who: writing 1 GiB, run $r/$repeat"
        case "$who" in
            mount) timed w.mount write_mount "$store" ;;
            cli) timed w.cli write_cli "$store" ;;
            *) write_py "$who" "$store" || record "w.$who" error ;;
        esac
        if [ "$r" = 1 ]; then check_written "$who" "$store"; fi
    done
done
# One chunk row rewritten through a mount of what the mount wrote.
store="$write_root/mount"
mnt="$mnt_root/write"
fresh_mount "$store" "$mnt" --writable --write-staging "$write_staging"
row_bytes=$((16 * 1024 * 1024 * 4))
dd if="$plain" of="$mnt/zstd" bs=1M count=$((row_bytes / 1048576)) skip=64 conv=notrunc status=none \
    || die "(w) rewriting chunk row 0 failed"
record w.row.written "$(getfattr --only-values -n user.zarrfs.bytes_written "$mnt/zstd")"
unmount "$mnt"
record w.row.chunks "$(du -bc "$store"/zstd/c/0/*/* | tail -n 1 | cut -f1)"
rm -rf "$write_root" "$write_staging"
