"""Data and the Python reader of the Icechunk section (l) of scripts/bench.sh.

    bench_icechunk_data.py write DIR          an Icechunk repository in DIR/repo (local
                                              filesystem storage) written by the icechunk
                                              package through zarr-python 3: array `t`,
                                              float32 (256, 1024, 1024), chunks (16, 256,
                                              256), zstd (zarr's default codecs), one commit
    bench_icechunk_data.py read ENDPOINT URL  the icechunk package + zarr-python 3 read all
                                              of `t` from the repository at s3:// URL on
                                              the S3 endpoint (anonymous): prints the
                                              seconds and the SHA-256 of the C-order bytes
"""

from __future__ import annotations

import hashlib
import os
import sys
import time

import icechunk
import numpy as np
import zarr

SHAPE = (256, 1024, 1024)
CHUNKS = (16, 256, 256)


def write(top: str) -> None:
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(os.path.join(top, "repo")))
    session = repo.writable_session("main")
    root = zarr.group(store=session.store, zarr_format=3)
    t = root.create_array("t", shape=SHAPE, chunks=CHUNKS, dtype="f4", fill_value=0.0)
    y, x = np.meshgrid(np.arange(SHAPE[1]), np.arange(SHAPE[2]), indexing="ij")
    rng = np.random.default_rng(7)
    for k in range(0, SHAPE[0], CHUNKS[0]):
        steps = np.arange(k, k + CHUNKS[0])[:, None, None]
        field = np.sin(x / 97.0 + steps / 11.0) * np.cos(y / 61.0) * 100
        noise = rng.normal(0, 0.01, size=(CHUNKS[0], *SHAPE[1:]))
        t[k:k + CHUNKS[0]] = (field + noise).astype("f4")
    session.commit("bench data")


def read(endpoint: str, url: str) -> None:
    bucket, _, prefix = url.removeprefix("s3://").partition("/")
    t0 = time.perf_counter()
    storage = icechunk.s3_storage(bucket=bucket, prefix=prefix, endpoint_url=endpoint, region="us-east-1",
                                  allow_http=True, anonymous=True, force_path_style=True)
    repo = icechunk.Repository.open(storage)
    session = repo.readonly_session(branch="main")
    data = zarr.open_array(session.store, path="t", mode="r")[...]
    seconds = time.perf_counter() - t0
    print(f"{seconds:.6f} {hashlib.sha256(np.ascontiguousarray(data, '<f4').tobytes()).hexdigest()}")


def main() -> None:
    command, *args = sys.argv[1:] or [""]
    if command == "write" and len(args) == 1:
        write(*args)
    elif command == "read" and len(args) == 2:
        read(*args)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
