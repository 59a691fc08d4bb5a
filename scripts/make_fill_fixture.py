"""Write a Zarr v3 store of huge arrays made only of their fill value (metadata, no chunks).

Usage (the stress tests run it at test time):

    target/venv-zarr3/bin/python scripts/make_fill_fixture.py OUTDIR

OUTDIR/fill.zarr is deleted and recreated by zarr-python 3.x with three arrays, none of
which has a single chunk written:

    f32_1d    20 GiB: float32, shape (5 * 2**30,), chunks (2**28,) = 1 GiB, fill 1.5
    i16_2d    20 GiB: int16, shape (81920, 131072), chunks (5000, 100000) (~0.93 GiB,
              edge chunks clipped in both dimensions), fill -3
    f64_small  2 GiB: float64, shape (2**28,), chunks (2**27,) = 1 GiB, fill -2.25

It prints one JSON document on stdout: {"store": path, "arrays": [{"path", "shape",
"chunks", "dtype" (numpy str, little-endian), "nbytes", "element" (the bytes of one
element, little-endian, hex)}]}. "element" comes from zarr-python reading back a few
small slices (first, last and middle elements); the script fails if they disagree.
"""

from __future__ import annotations

import json
import os
import shutil
import sys

import numpy as np
import zarr

ARRAYS = [
    ("f32_1d", (5 * 2**30,), (2**28,), "float32", 1.5),
    ("i16_2d", (81920, 131072), (5000, 100000), "int16", -3),
    ("f64_small", (2**28,), (2**27,), "float64", -2.25),
]


def read_back(arr: zarr.Array) -> np.ndarray:
    """A few elements of `arr` as zarr-python reads them, from its corners and middle."""
    if arr.ndim == 1:
        n = arr.shape[0]
        parts = [arr[:4], arr[n // 2 - 2 : n // 2 + 2], arr[n - 4 :]]
    else:
        rows, cols = arr.shape
        parts = [
            arr[0, :3],
            arr[rows // 2, 99_998:100_002],
            arr[rows - 1, cols - 3 :],
            arr[4999:5001, 0],
        ]
    return np.concatenate([np.asarray(p).ravel() for p in parts])


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = os.path.abspath(sys.argv[1])
    store = os.path.join(out, "fill.zarr")
    shutil.rmtree(store, ignore_errors=True)
    os.makedirs(out, exist_ok=True)
    root = zarr.open_group(store, mode="w", zarr_format=3)
    entries = []
    for name, shape, chunks, dtype, fill in ARRAYS:
        root.create_array(
            name, shape=shape, chunks=chunks, dtype=dtype, fill_value=fill, compressors=None
        )
    for name, shape, chunks, dtype, fill in ARRAYS:
        arr = zarr.open_array(store, path=name, mode="r")
        values = read_back(arr)
        first = values[:1]
        if not np.array_equal(values, np.repeat(first, len(values))):
            sys.exit(f"{name}: read-back is not one value: {values!r}")
        element = first.astype(first.dtype.newbyteorder("<")).tobytes()
        entries.append(
            {
                "path": name,
                "shape": list(arr.shape),
                "chunks": list(arr.chunks),
                "dtype": first.dtype.newbyteorder("<").str,
                "nbytes": int(np.prod(arr.shape, dtype=np.uint64)) * first.dtype.itemsize,
                "element": element.hex(),
            }
        )
    chunk_files = [
        os.path.join(d, f)
        for d, _, files in os.walk(store)
        for f in files
        if f != "zarr.json"
    ]
    if chunk_files:
        sys.exit(f"expected metadata only, found {chunk_files[:5]}")
    json.dump({"store": store, "arrays": entries}, sys.stdout)
    print()


if __name__ == "__main__":
    main()
