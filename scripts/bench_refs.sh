# The reference-set section of scripts/bench.sh (sourced by it: uses its helpers,
# variables and raw file; keys start with `k.`). A 1 GiB float32 variable `t` in four
# NetCDF-4 files (zlib 1 + shuffle, one 4 MiB chunk per time step) served by s3s-fs on a
# loopback port, described by kerchunk references (MultiZarrToZarr, a local JSON naming
# the s3:// files), read cold (page cache dropped) by:
#   k.mount        `dd bs=1M` of `t` through a fresh mount of the JSON
#   k.cat          `zarrfs cat` of `t`
#   k.fsspec       zarr-python 3 over fsspec's reference filesystem (s3fs for the targets)
#   k.xarray       xarray + h5netcdf over the four files (s3fs)
# Each reader's SHA-256 of the bytes is checked against the mount's (k.check.*).
refs_py="$target_dir/venv-refs/bin/python"
[ -x "$refs_py" ] || bash scripts/setup_python.sh >&2
refs_dir="$data/refs"
refs_stamp="1"
if ! [[ -f "$refs_dir/.stamp" && "$(cat "$refs_dir/.stamp")" == "$refs_stamp" ]]; then
    say "(k) writing the NetCDF-4 files and their kerchunk references (a minute)"
    rm -rf "$refs_dir"
    mkdir -p "$refs_dir"
    "$refs_py" scripts/bench_refs_data.py write "$refs_dir" s3://refbench
    printf '%s' "$refs_stamp" >"$refs_dir/.stamp"
fi
serve_bucket refbench "$refs_dir"
refs_endpoint=$served_endpoint
refs_args=(--anonymous -o "endpoint=$refs_endpoint,allow_http=true,region=us-east-1" --virtual-prefix s3://refbench/nc/)
kmnt="$mnt_root/refs"
cat_refs() { "$zarrfs" cat "$refs_dir/combined.json" t "${refs_args[@]}" >/dev/null; }
for r in $(seq "$repeat"); do
    say "(k) kerchunk references over S3: mount, zarrfs cat, fsspec + zarr, xarray + h5netcdf, run $r/$repeat"
    drop_caches
    fresh_mount "$refs_dir/combined.json" "$kmnt" "${refs_args[@]}"
    timed k.mount dd_read "$kmnt/t"
    if [ "$r" -eq 1 ]; then
        record k.mount.sha256 "$(sha_of "$kmnt/t")"
    fi
    unmount "$kmnt"
    drop_caches
    timed k.cat cat_refs
    drop_caches
    py_reader k.fsspec "$refs_py" scripts/bench_refs_data.py fsspec "$refs_dir/combined.json" "$refs_endpoint"
    drop_caches
    py_reader k.xarray "$refs_py" scripts/bench_refs_data.py xarray "$refs_endpoint" \
        s3://refbench/nc/f0.nc s3://refbench/nc/f1.nc s3://refbench/nc/f2.nc s3://refbench/nc/f3.nc
done
kill "$served_pid" 2>/dev/null || true
wait "$served_pid" 2>/dev/null || true
