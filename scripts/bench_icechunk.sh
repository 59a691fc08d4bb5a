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
s3s_fs="$target_dir/tools/bin/s3s-fs"
[ -x "$s3s_fs" ] || cargo install --quiet --root "$target_dir/tools" s3s-fs --version 0.14.1 --features binary --locked
ice_buckets="$target_dir/bench-icechunk-buckets"
rm -rf "$ice_buckets"
mkdir -p "$ice_buckets"
ln -s "$ice_dir" "$ice_buckets/icebench"
ice_port="$("$ice_py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
"$s3s_fs" --host 127.0.0.1 --port "$ice_port" "$ice_buckets" >"$ice_buckets.log" 2>&1 &
ice_s3_pid=$!
for _ in $(seq 100); do "$ice_py" -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])))' "$ice_port" 2>/dev/null && break; sleep 0.1; done
ice_endpoint="http://127.0.0.1:$ice_port"
ice_args=(--anonymous -o "endpoint=$ice_endpoint,allow_http=true,region=us-east-1")
lmnt="$mnt_root/icechunk"
cat_ice() { "$zarrfs" cat s3://icebench/repo t "${ice_args[@]}" >/dev/null; }
for r in $(seq "$repeat"); do
    say "(l) Icechunk over S3: mount, zarrfs cat, icechunk + zarr-python, run $r/$repeat"
    drop_caches
    fresh_mount s3://icebench/repo "$lmnt" "${ice_args[@]}"
    timed l.mount dd_read "$lmnt/t"
    if [ "$r" -eq 1 ]; then
        record l.mount.sha256 "$(sha256sum "$lmnt/t" | cut -d' ' -f1)"
    fi
    unmount "$lmnt"
    drop_caches
    timed l.cat cat_ice
    drop_caches
    if out="$(RUST_LOG=error "$ice_py" scripts/bench_icechunk_data.py read "$ice_endpoint" s3://icebench/repo)"; then
        record l.icechunk "${out%% *}"
        record l.icechunk.sha256 "${out##* }"
    else
        say "warning: l.icechunk failed"
        record l.icechunk error
    fi
done
kill "$ice_s3_pid" 2>/dev/null || true
wait "$ice_s3_pid" 2>/dev/null || true
