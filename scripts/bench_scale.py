"""The scale section's data and its tensorstore baseline (scripts/bench_scale.sh; run with
target/venv-bench/bin/python: zarr-python 3, tensorstore).

    bench_scale.py data OUTDIR
        writes, with zarr-python 3 (OUTDIR is deleted and made again; .stamp last):
          flat1k.zarr     a v3 group of 1,000 tiny int32 arrays (4,) a0000..a0999
          flat10k.zarr    the same with 10,000 arrays
          tree100k.zarr   100 groups g000..g099 x 1,000 tiny arrays (100,000 arrays)
          chunks.zarr     two uncompressed float32 (4096, 4096) arrays (64 MiB each):
                          c1k in 65,536 chunks of (16, 16) = 1 KiB, c16k in 4,096
                          chunks of (64, 64) = 16 KiB; the same values
          plain10k        10,000 plain files of 16 bytes (the `ls -l` reference)
    bench_scale.py readall STORE ARRAY PREFIX
        tensorstore reads STORE/ARRAY whole into memory: PREFIX.seconds, and
        PREFIX.sha256 of its C-order bytes (what `zarrfs cat` must write)

Every command prints `KEY VALUE` lines on stdout for bench.sh to collect.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import time

import numpy as np

STAMP = "scale-1"


def tiny_arrays(root, names) -> None:
    import zarr

    for name in names:
        zarr.create_array(root.store, name=name, shape=(4,), chunks=(4,), dtype="int32",
                          fill_value=0, compressors=None)


def cmd_data(out: str) -> None:
    import zarr

    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    for name, n in (("flat1k", 1000), ("flat10k", 10000)):
        t0 = time.perf_counter()
        root = zarr.open_group(os.path.join(out, f"{name}.zarr"), mode="w", zarr_format=3)
        tiny_arrays(root, [f"a{i:04d}" for i in range(n)])
        print(f"{name}: {n} arrays in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    root = zarr.open_group(os.path.join(out, "chunks.zarr"), mode="w", zarr_format=3)
    values = (np.arange(4096 * 4096, dtype=np.float32) % 65521).reshape(4096, 4096)
    for name, chunk in (("c1k", 16), ("c16k", 64)):
        a = root.create_array(name, shape=values.shape, chunks=(chunk, chunk),
                              dtype="float32", compressors=None, fill_value=0)
        a[...] = values
    plain = os.path.join(out, "plain10k")
    os.makedirs(plain)
    for i in range(10000):
        with open(os.path.join(plain, f"f{i:05d}"), "wb") as fh:
            fh.write(b"\0" * 16)
    t0 = time.perf_counter()
    root = zarr.open_group(os.path.join(out, "tree100k.zarr"), mode="w", zarr_format=3)
    for g in range(100):
        root.create_group(f"g{g:03d}")
        tiny_arrays(root, [f"g{g:03d}/a{i:04d}" for i in range(1000)])
    print(f"tree100k: 100,000 arrays in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    with open(os.path.join(out, ".stamp"), "w") as fh:
        fh.write(STAMP)


def cmd_readall(store: str, array: str, prefix: str) -> None:
    import tensorstore as ts

    t0 = time.perf_counter()
    arr = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": os.path.join(store, array)}},
                  read=True).result()
    data = arr.read().result()
    seconds = time.perf_counter() - t0
    print(f"{prefix}.seconds {seconds:.6g}")
    print(f"{prefix}.sha256 {hashlib.sha256(np.ascontiguousarray(data).tobytes()).hexdigest()}")


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "data":
        cmd_data(sys.argv[2])
    elif len(sys.argv) == 5 and sys.argv[1] == "readall":
        cmd_readall(*sys.argv[2:])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
