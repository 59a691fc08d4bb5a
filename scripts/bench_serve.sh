# The HTTP section of scripts/bench.sh (sourced by it: uses its helpers, variables and
# raw file; keys start with `sv.`). `zarrfs serve` of big.zarr on a loopback port, read
# by curl, against `zarrfs cat` of the same arrays; every run cold (page cache dropped,
# a fresh server):
#   sv.get.zstd      one `curl` GET of the whole zstd array
#   sv.cat.zstd      `zarrfs cat` of it
#   sv.eight.get     eight concurrent GETs: the four arrays from a C-order and an
#                    F-order server
#   sv.eight.cat     eight concurrent `zarrfs cat` of the same
#   sv.*.sha256      once, outside the timing: what a GET gave, which must be what
#                    `zarrfs cat` writes, else the bench stops
#   sv.window.fetched  GDAL's `/vsicurl/` read of one 256 x 256 window (the first page,
#                    rows and columns 256-511: one chunk) of the zstd array's `.tif` view:
#                    the stored bytes the server read for it (the JSON listing's
#                    bytes_fetched, before and after)
#   sv.window.chunk  the stored size of the one chunk under that window
serve_log="$target_dir/bench-serve.log"
serve_pids=()
# start_server ORDER: a server of big.zarr in ORDER on a free port; its URL in
# served_url.
start_server() {
    local out="$target_dir/bench-serve-$1.out"
    : >"$out"
    "$zarrfs" serve "$big" --order "$1" --http 127.0.0.1:0 --cache-size "$cache_size" \
        --views raw,tiff --log-level warn >"$out" 2>>"$serve_log" &
    serve_pids+=($!)
    for _ in $(seq 100); do
        grep -q 'serving' "$out" && break
        sleep 0.1
    done
    served_url="$(grep -o 'http://[^ ]*' "$out" | head -n 1)" \
        || die "(sv) zarrfs serve did not start; see $serve_log"
}
stop_servers() {
    local p
    for p in "${serve_pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
    serve_pids=()
}
get() { curl -sf -o /dev/null "$1"; }
eight_gets() {
    local pids=() v failed=0 p
    for v in "${variants[@]}"; do
        get "${url_c}$v" & pids+=($!)
        get "${url_f}$v" & pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || failed=1; done
    return "$failed"
}
eight_cats() {
    local pids=() v failed=0 p
    for v in "${variants[@]}"; do
        cat_array "$v" C & pids+=($!)
        cat_array "$v" F & pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || failed=1; done
    return "$failed"
}
start_server C; url_c="$served_url"
got="$(curl -sf "${url_c}zstd" | sha256sum | cut -d' ' -f1)"
want="$("$zarrfs" cat "$big" zstd | sha256sum | cut -d' ' -f1)"
record sv.get.zstd.sha256 "$got"
[ "$got" = "$want" ] || die "(sv) a GET gave other bytes than zarrfs cat ($got)"
stop_servers
for r in $(seq "$repeat"); do
    say "(sv) GET against zarrfs cat of the zstd array, run $r/$repeat"
    drop_caches
    start_server C; url_c="$served_url"
    timed sv.get.zstd get "${url_c}zstd"
    stop_servers
    drop_caches
    timed sv.cat.zstd cat_array zstd C
    say "(sv) eight concurrent GETs against eight zarrfs cat, run $r/$repeat"
    drop_caches
    start_server C; url_c="$served_url"
    start_server F; url_f="$served_url"
    timed sv.eight.get eight_gets
    stop_servers
    drop_caches
    timed sv.eight.cat eight_cats
done
stop_servers
# bytes_fetched URL: the zstd array's stored bytes read by the server so far.
bytes_fetched() {
    curl -sf "$1?format=json" | "$py" -c 'import json, sys
print(next(e["array"].get("bytes_fetched", 0) for e in json.load(sys.stdin)["entries"] if e["name"] == "zstd"))'
}
say "(sv) GDAL reads one 256 x 256 window of the .tif view by URL"
drop_caches
start_server C
before="$(bytes_fetched "$served_url")"
GDAL_DISABLE_READDIR_ON_OPEN=EMPTY_DIR gdal_translate -q -b 1 -srcwin 256 256 256 256 \
    "/vsicurl/${served_url}zstd.tif" "$target_dir/bench-window.tif" \
    || die "(sv) gdal_translate of a window failed"
record sv.window.fetched "$(( $(bytes_fetched "$served_url") - before ))"
record sv.window.chunk "$(stat -c %s "$big/zstd/c/0/1/1")"
stop_servers
rm -f "$target_dir/bench-window.tif"
