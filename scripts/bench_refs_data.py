"""The data and the Python readers of the reference-set section of scripts/bench.sh.

    bench_refs_data.py write DIR BUCKET_URL   four NetCDF-4 files (netCDF4-python, zlib 1 +
                                              shuffle) of 64 x 1024 x 1024 float32 each,
                                              DIR/nc/fK.nc, and DIR/combined.json: kerchunk's
                                              MultiZarrToZarr of them along time (1 GiB of
                                              `t`), its targets renamed to BUCKET_URL/nc/fK.nc
    bench_refs_data.py fsspec JSON ENDPOINT   zarr-python 3 over fsspec's reference
                                              filesystem (targets through s3fs) reads all
                                              of `t`; prints `seconds SHA256`
    bench_refs_data.py xarray ENDPOINT URL... xarray + h5netcdf over the NetCDF files on S3
                                              (s3fs) reads all of `t`; prints `seconds SHA256`

Run under target/venv-refs (scripts/setup_python.sh). The digests let the bench check that
every reader returned the same bytes.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time

import numpy as np

FILES = 4
STEPS = 64
SHAPE = (1024, 1024)


def write(out: str, bucket_url: str) -> None:
    import kerchunk.combine
    import kerchunk.hdf
    import netCDF4

    os.makedirs(os.path.join(out, "nc"), exist_ok=True)
    y, x = np.meshgrid(np.arange(SHAPE[0]), np.arange(SHAPE[1]), indexing="ij")
    singles = []
    for k in range(FILES):
        path = os.path.join(out, "nc", f"f{k}.nc")
        with netCDF4.Dataset(path, "w") as ds:
            ds.createDimension("time", None)
            ds.createDimension("y", SHAPE[0])
            ds.createDimension("x", SHAPE[1])
            t = ds.createVariable("time", "f8", ("time",))
            t[:] = np.arange(k * STEPS, (k + 1) * STEPS, dtype="f8")
            v = ds.createVariable("t", "f4", ("time", "y", "x"), zlib=True, complevel=1, shuffle=True,
                                  chunksizes=(1, SHAPE[0], SHAPE[1]))
            for s in range(STEPS):
                step = k * STEPS + s
                v[s] = (np.sin(x / 37.0 + step / 11.0) * np.cos(y / 29.0) * 40.0).astype("f4")
        singles.append(kerchunk.hdf.SingleHdf5ToZarr(path, inline_threshold=0).translate())
    # Combined from the local files (MultiZarrToZarr reads the time values), then renamed.
    combined = kerchunk.combine.MultiZarrToZarr(singles, concat_dims=["time"]).translate()
    for k in range(FILES):
        combined = rename(combined, os.path.join(out, "nc", f"f{k}.nc"), f"{bucket_url}/nc/f{k}.nc")
    with open(os.path.join(out, "combined.json"), "w") as f:
        json.dump(combined, f)


def rename(refs: dict, path: str, url: str) -> dict:
    """`refs` with every target `path` named `url`."""
    out = dict(refs)
    out["refs"] = {k: ([url, *v[1:]] if isinstance(v, list) and v and v[0] == path else v)
                   for k, v in refs["refs"].items()}
    return out


def s3_options(endpoint: str) -> dict:
    return {"anon": True, "client_kwargs": {"endpoint_url": endpoint, "region_name": "us-east-1"}}


def fsspec_read(json_path: str, endpoint: str) -> None:
    import zarr

    t0 = time.perf_counter()
    store = zarr.storage.FsspecStore.from_url(
        "reference://",
        storage_options={"fo": json_path, "remote_protocol": "s3",
                         "remote_options": {**s3_options(endpoint), "asynchronous": True}},
        read_only=True)
    data = zarr.open_array(store, path="t", mode="r", zarr_format=2)[...]
    seconds = time.perf_counter() - t0
    print(f"{seconds:.6f} {hashlib.sha256(np.ascontiguousarray(data, '<f4').tobytes()).hexdigest()}")


def xarray_read(endpoint: str, urls: list) -> None:
    import s3fs
    import xarray as xr

    t0 = time.perf_counter()
    fs = s3fs.S3FileSystem(**s3_options(endpoint))
    parts = []
    for u in urls:
        with fs.open(u, "rb") as f:
            ds = xr.open_dataset(f, engine="h5netcdf", mask_and_scale=False, decode_times=False)
            parts.append(ds["t"].values)
    data = np.concatenate(parts)
    seconds = time.perf_counter() - t0
    print(f"{seconds:.6f} {hashlib.sha256(np.ascontiguousarray(data, '<f4').tobytes()).hexdigest()}")


def main() -> None:
    command, *args = sys.argv[1:] or [""]
    if command == "write" and len(args) == 2:
        write(*args)
    elif command == "fsspec" and len(args) == 2:
        fsspec_read(*args)
    elif command == "xarray" and len(args) >= 2:
        xarray_read(args[0], args[1:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
