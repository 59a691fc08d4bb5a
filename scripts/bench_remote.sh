# The remote section of scripts/bench.sh (sourced by it: uses its helpers, variables and
# raw file; keys start with `r.`). The bench data is served by s3s-fs (S3) through the
# fault proxy (scripts/fault_proxy.py) adding BENCH_LATENCY_MS (20) per request, on
# loopback ports picked free; both are ended by their PIDs when the section ends.
#   r.a.ARRAY      cold `dd bs=1M` through a fresh anonymous s3:// mount (default
#                  --refresh: 60s); r.a.ARRAY.gets GET requests it issued;
#                  r.h.ARRAY.vmhwm_kib the daemon's peak RSS
#   r.o.ARRAY      the same with --refresh off
#   r.c.ARRAY      `zarrfs cat` of the same URL to /dev/null
#   r.d.LIB.ARRAY  tensorstore (s3 kvstore) and zarr-python 3 (obstore) reading it all
#   r.f.ARRAY      random 4 KiB preads (BENCH_REMOTE_READS, 200) on a fresh mount: p50/p99
#   r.g.*          `ls -lR` of the 10k-array hierarchy, consolidated by zarr-python, on a
#                  fresh mount, the LIST requests it issued, and `ls -lR` of the local copy;
#                  r.g.requests_again the requests of a second `ls -lR` within the refresh
#                  interval, r.g.requests_after those of one made after a 10 s interval
#                  (longer than one `ls -lR`)
#   r.s.vmhwm_kib  daemon peak RSS with 16 concurrent sequential readers (4 per array)
#   r.k.ARRAY      `dd bs=1M` through a second mount of the same URL that shares the disk
#                  cache folder a first mount filled (a second daemon on the node, page
#                  cache dropped), and r.l.ARRAY the same through a mount of the local
#                  folder of the same data, back to back
latency_ms="${BENCH_LATENCY_MS:-20}"
remote_reads="${BENCH_REMOTE_READS:-200}"
remote_arrays=(zstd sharded)
bench_s3s_fs
remote_dir="$target_dir/bench-remote"
rm -rf "$remote_dir"
mkdir -p "$remote_dir/buckets/bench"
# The 10k-array hierarchy is read for its metadata only: its folder is served as it is.
# The arrays read are put through the API (see serve_bucket): s3s-fs then answers a
# ranged GET without hashing the whole object first.
ln -s "$data/small_consolidated.zarr" "$remote_dir/buckets/bench/small_consolidated.zarr"

# The 10k-array hierarchy with consolidated metadata (zarr-python writes it).
consolidated="$data/small_consolidated.zarr"
if ! [ -f "$consolidated/zarr.json" ] || ! grep -q consolidated_metadata "$consolidated/zarr.json"; then
    say "(r) consolidating a copy of the 10k-array hierarchy"
    rm -rf "$consolidated"
    cp -r "$small" "$consolidated"
    "$py" -c 'import sys, zarr; zarr.consolidate_metadata(sys.argv[1])' "$consolidated"
fi

s3_port="$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
"$s3s_fs" --host 127.0.0.1 --port "$s3_port" "$remote_dir/buckets" >"$remote_dir/s3s-fs.log" 2>&1 &
s3s_pid=$!
"$py" scripts/fault_proxy.py "$s3_port" --latency-ms "$latency_ms" >"$remote_dir/proxy.out" 2>"$remote_dir/proxy.log" &
proxy_pid=$!
remote_stop() { kill "$s3s_pid" "$proxy_pid" 2>/dev/null || true; wait "$s3s_pid" "$proxy_pid" 2>/dev/null || true; }
for _ in $(seq 100); do [ -s "$remote_dir/proxy.out" ] && break; sleep 0.1; done
read -r proxy_port control_port <"$remote_dir/proxy.out" || { remote_stop; die "fault proxy did not start"; }
endpoint="http://127.0.0.1:$proxy_port"
# proxy_cmd CMD: one control command; prints the reply.
proxy_cmd() { "$py" -c 'import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall((sys.argv[2] + "\n").encode()); print(s.makefile().readline().strip())' "$control_port" "$1"; }
# proxy_count METHOD: requests of METHOD since the last reset.
proxy_count() { proxy_cmd stats | tr ' ' '\n' | awk -F= -v m="$1" '$1 == m { n = $2 } END { print n + 0 }'; }
for _ in $(seq 100); do "$py" -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])))' "$s3_port" 2>/dev/null && break; sleep 0.1; done
for part in zarr.json raw zstd blosc sharded; do
    "$py" scripts/s3_upload.py "http://127.0.0.1:$s3_port" bench "$big/$part" "big.zarr/$part" 2>>"$remote_dir/s3s-fs.log" \
        || { remote_stop; die "putting big.zarr/$part into the bucket failed"; }
done
record r.meta.latency_ms "$latency_ms"
s3_args=(--anonymous -o "endpoint=$endpoint,allow_http=true,region=us-east-1")
rmnt="$mnt_root/remote"

for r in $(seq "$repeat"); do
    for a in "${remote_arrays[@]}"; do
        say "(r) $a over S3 with $latency_ms ms per request, run $r/$repeat"
        drop_caches
        fresh_mount "s3://bench/big.zarr" "$rmnt" "${s3_args[@]}"
        proxy_cmd reset >/dev/null
        timed "r.a.$a" dd if="$rmnt/$a" of=/dev/null bs=1M status=none
        record "r.a.$a.gets" "$(proxy_count GET)"
        record "r.h.$a.vmhwm_kib" "$(vm_hwm "$rmnt")"
        unmount "$rmnt"
        drop_caches
        fresh_mount "s3://bench/big.zarr" "$rmnt" "${s3_args[@]}" --refresh off
        timed "r.o.$a" dd if="$rmnt/$a" of=/dev/null bs=1M status=none
        unmount "$rmnt"
        timed "r.c.$a" sh -c '"$0" cat "$@" >/dev/null' "$zarrfs" "s3://bench/big.zarr" "$a" "${s3_args[@]}"
        for lib in tensorstore zarr; do
            "$py" scripts/bench_readers.py readall "$lib" bench/big.zarr "$a" "r.d.$lib.$a" \
                --s3-endpoint "$endpoint" >>"$raw" 2>>"$remote_dir/readers.log" \
                || record "r.d.$lib.$a.seconds" error
        done
    done
done

shared_cache="$remote_dir/disk-cache"
for r in $(seq "$repeat"); do
    for a in "${remote_arrays[@]}"; do
        say "(r) $a through a second mount sharing a disk cache, run $r/$repeat"
        rm -rf "$shared_cache"
        fresh_mount "s3://bench/big.zarr" "$rmnt" "${s3_args[@]}" --disk-cache "$shared_cache"
        dd_read "$rmnt/$a" || say "warning: filling the disk cache from $a failed"
        unmount "$rmnt"
        drop_caches
        fresh_mount "s3://bench/big.zarr" "$rmnt" "${s3_args[@]}" --disk-cache "$shared_cache"
        proxy_cmd reset >/dev/null
        timed "r.k.$a" dd_read "$rmnt/$a"
        record "r.k.$a.gets" "$(proxy_count GET)"
        unmount "$rmnt"
        drop_caches
        fresh_mount "$big" "$rmnt"
        timed "r.l.$a" dd_read "$rmnt/$a"
        unmount "$rmnt"
    done
done
rm -rf "$shared_cache"

for a in "${remote_arrays[@]}"; do
    say "(r) $a: $remote_reads random 4 KiB preads over S3"
    fresh_mount "s3://bench/big.zarr" "$rmnt" "${s3_args[@]}"
    "$py" scripts/bench_readers.py randread "$rmnt/$a" "r.f.$a" --count "$remote_reads" >>"$raw" \
        || record "r.f.$a.cold.p50_us" error
    unmount "$rmnt"
done

say "(r) ls -lR of the consolidated 10k-array hierarchy over S3"
fresh_mount "s3://bench/small_consolidated.zarr" "$rmnt" "${s3_args[@]}"
proxy_cmd reset >/dev/null
timed r.g.ls_mount ls_tree "$rmnt"
record r.g.lists "$(proxy_count LIST)"
# meta_requests: requests since the last reset, data and listings left out.
meta_requests() { proxy_cmd stats | tr ' ' '\n' | awk -F= 'NF == 2 && $1 != "DATA" && $1 != "LIST" { n += $2 } END { print n + 0 }'; }
record r.g.requests "$(meta_requests)"
proxy_cmd reset >/dev/null
ls_tree "$rmnt" >/dev/null
record r.g.requests_again "$(meta_requests)"
unmount "$rmnt"
say "(r) ls -lR again after a 10 s refresh interval"
fresh_mount "s3://bench/small_consolidated.zarr" "$rmnt" "${s3_args[@]}" --refresh 10s
ls_tree "$rmnt" >/dev/null
sleep 10.5
proxy_cmd reset >/dev/null
ls_tree "$rmnt" >/dev/null
record r.g.requests_after "$(meta_requests)"
unmount "$rmnt"
drop_caches
fresh_mount "$consolidated" "$rmnt"
timed r.g.ls_local ls_tree "$rmnt"
unmount "$rmnt"

say "(r) 16 concurrent sequential readers over S3 (4 per array)"
fresh_mount "s3://bench/big.zarr" "$rmnt" "${s3_args[@]}"
pids=()
for a in raw zstd blosc sharded; do
    for k in 0 1 2 3; do
        dd if="$rmnt/$a" of=/dev/null bs=1M skip=$((k * 256)) count=256 status=none &
        pids+=($!)
    done
done
wait "${pids[@]}" || say "warning: a concurrent reader failed"
record r.s.vmhwm_kib "$(vm_hwm "$rmnt")"
unmount "$rmnt"
remote_stop
