"""Writers timed by scripts/bench.sh (section w): a zarr library writing a whole 1 GiB
array from the same bytes the mount is given, into an empty copy of the array (same
shape, chunks and codecs).

Usage (target/venv-bench/bin/python; prints the seconds of the write on stdout):

    bench_write.py tensorstore|zarr STORE ARRAY PLAIN
        write PLAIN (C-order float32 bytes, read through a memory map from the page
        cache, as `dd` reads it for the mount) into STORE/ARRAY, whole
"""

from __future__ import annotations

import json
import os
import sys
import time

import numpy as np


def main() -> int:
    library, store, array, plain = sys.argv[1:5]
    path = os.path.join(store, array)
    with open(os.path.join(path, "zarr.json")) as f:
        meta = json.load(f)
    shape = tuple(meta["shape"])
    data = np.memmap(plain, dtype="<f4", mode="r", shape=shape)
    t0 = time.perf_counter()
    if library == "tensorstore":
        import tensorstore as ts

        arr = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": path + "/"}},
                      open=True, write=True).result()
        arr.write(data).result()
    else:
        import zarr

        z = zarr.open_array(store=store, path=array, mode="r+")
        z[...] = data
    print(f"{time.perf_counter() - t0:.6f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
