# The Icechunk section of scripts/bench.sh (sourced by it: uses its helpers, variables
# and raw file; keys start with `l.`). A 1 GiB float32 array `t` (zstd, 4 MiB chunks) in
# an Icechunk repository written by the icechunk package, served by s3s-fs on a loopback
# port, read cold (page cache dropped) by:
#   l.mount        `dd bs=1M` of `t` through a fresh mount of s3://icebench/repo
#   l.cat          `zarrfs cat` of `t`
#   l.icechunk     the icechunk package + zarr-python 3 (its own S3 client)
# Each reader's SHA-256 of the bytes is checked against the mount's.
ice_py="$target_dir/venv-icechunk/bin/python"
[ -x "$ice_py" ] || bash scripts/setup_python.sh >&2
ice_dir="$data/icechunk"
ice_stamp="1"
if ! [[ -f "$ice_dir/.stamp" && "$(cat "$ice_dir/.stamp")" == "$ice_stamp" ]]; then
    say "(l) writing the Icechunk repository (a minute)"
    rm -rf "$ice_dir"
    mkdir -p "$ice_dir"
    RUST_LOG=error "$ice_py" scripts/bench_icechunk_data.py write "$ice_dir"
    printf '%s' "$ice_stamp" >"$ice_dir/.stamp"
fi
serve_bucket icebench "$ice_dir"
ice_endpoint=$served_endpoint
ice_args=(--anonymous -o "endpoint=$ice_endpoint,allow_http=true,region=us-east-1")
lmnt="$mnt_root/icechunk"
cat_ice() { "$zarrfs" cat s3://icebench/repo t "${ice_args[@]}" >/dev/null; }
for r in $(seq "$repeat"); do
    say "(l) Icechunk over S3: mount, zarrfs cat, icechunk + zarr-python, run $r/$repeat"
    drop_caches
    fresh_mount s3://icebench/repo "$lmnt" "${ice_args[@]}"
    timed l.mount dd_read "$lmnt/t"
    if [ "$r" -eq 1 ]; then
        record l.mount.sha256 "$(sha_of "$lmnt/t")"
    fi
    unmount "$lmnt"
    drop_caches
    timed l.cat cat_ice
    drop_caches
    RUST_LOG=error py_reader l.icechunk "$ice_py" scripts/bench_icechunk_data.py read "$ice_endpoint" \
        s3://icebench/repo
done
kill "$served_pid" 2>/dev/null || true
wait "$served_pid" 2>/dev/null || true
