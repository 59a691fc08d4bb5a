"""Write the benchmark data for scripts/bench.sh (zarr-python 3.x, in target/venv-bench).

Usage (from the repository root; bench.sh calls it when the stamp is missing):

    target/venv-bench/bin/python scripts/bench_data.py target/bench-data

Writes into OUTDIR (deleted and recreated):

    big.zarr/            Zarr v3 group with four float32 arrays of shape (256, 1024, 1024),
                         1 GiB decoded each, chunks (16, 256, 256), the same values in each:
        raw              no compression
        zstd             zstd level 3
        blosc            blosc lz4, clevel 5, byte shuffle
        sharded          shards (64, 512, 512) of inner chunks (16, 128, 128), zstd level 3
    plain_c.bin          the same 1 GiB of decoded values, C order, little-endian
    small.zarr/          Zarr v3, 100 groups g000..g099 x 100 int32 (16, 16) arrays a000..a099
                         (10,000 arrays), not consolidated
    bench-data.json      shapes, stored sizes, compression ratios, the mean stored inner
                         chunk size of the sharded array (read from its shard indexes)
    .stamp               written last; holds STAMP below (bench.sh regenerates when it differs)

The values are a smooth 3-D field plus Gaussian noise (sigma 0.05), rounded to multiples of
1/256 so that the low mantissa bits are zero and compression is realistic (a few x), not
the all-zero best case. Deterministic: fixed seed. Generated slab by slab (16 z-slices) so
it stays cheap on two cores.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import sys
import time

import numpy as np
import zarr
from zarr.codecs import BloscCodec, ZstdCodec

# Bump when anything below changes: bench.sh regenerates when the stamp differs.
STAMP = "bench-data v1: f4 (256,1024,1024) chunks (16,256,256) raw/zstd3/blosc-lz4-shuffle/sharded(64,512,512|16,128,128 zstd3); 100x100 int32 (16,16)"

SHAPE = (256, 1024, 1024)
CHUNKS = (16, 256, 256)
SHARDS = (64, 512, 512)
INNER = (16, 128, 128)
SEED = 20240601
N_GROUPS = 100
N_PER_GROUP = 100
SMALL_SHAPE = (16, 16)


def log(msg: str) -> None:
    print(f"bench_data: {msg}", file=sys.stderr, flush=True)


def make_field() -> np.ndarray:
    """The 1 GiB float32 field, built 16 z-slices at a time."""
    nz, ny, nx = SHAPE
    y = np.linspace(0.0, 2.0 * np.pi, ny, dtype=np.float32)[:, None]
    x = np.linspace(0.0, 2.0 * np.pi, nx, dtype=np.float32)[None, :]
    a2 = (np.sin(3.0 * x) * np.cos(2.0 * y)).astype(np.float32)
    b2 = (np.cos(1.5 * x + 0.5 * y) + 0.25 * np.sin(7.0 * y)).astype(np.float32)
    rng = np.random.default_rng(SEED)
    out = np.empty(SHAPE, dtype=np.float32)
    step = CHUNKS[0]
    for z0 in range(0, nz, step):
        z = np.arange(z0, z0 + step, dtype=np.float32)[:, None, None]
        slab = out[z0 : z0 + step]
        np.multiply(a2, np.cos(z * 0.021), out=slab)
        slab += b2 * np.sin(z * 0.013 + 0.4)
        slab += 10.0
        noise = rng.standard_normal(slab.shape, dtype=np.float32)
        noise *= 0.05
        slab += noise
        slab *= 256.0
        np.rint(slab, out=slab)
        slab *= 1.0 / 256.0
    return out


def write_big(outdir: str, field: np.ndarray) -> dict:
    root = zarr.open_group(os.path.join(outdir, "big.zarr"), mode="w", zarr_format=3)
    variants = {
        "raw": dict(chunks=CHUNKS, compressors=None),
        "zstd": dict(chunks=CHUNKS, compressors=ZstdCodec(level=3)),
        "blosc": dict(
            chunks=CHUNKS,
            compressors=BloscCodec(cname="lz4", clevel=5, shuffle="shuffle", typesize=4),
        ),
        "sharded": dict(chunks=INNER, shards=SHARDS, compressors=ZstdCodec(level=3)),
    }
    info = {}
    for name, kwargs in variants.items():
        t0 = time.perf_counter()
        arr = root.create_array(name, shape=SHAPE, dtype="float32", fill_value=0.0, **kwargs)
        # Slabs of one shard depth so the sharded array is written shard by shard.
        step = SHARDS[0]
        for z0 in range(0, SHAPE[0], step):
            arr[z0 : z0 + step] = field[z0 : z0 + step]
        stored = dir_size(os.path.join(outdir, "big.zarr", name))
        info[name] = {"stored_bytes": stored, "ratio": field.nbytes / stored}
        log(f"{name}: {stored / 2**20:.0f} MiB stored, ratio {field.nbytes / stored:.2f}, "
            f"{time.perf_counter() - t0:.1f} s")
    info["sharded"].update(inner_chunk_stats(os.path.join(outdir, "big.zarr", "sharded")))
    return info


def dir_size(path: str) -> int:
    total = 0
    for dirpath, _, files in os.walk(path):
        for f in files:
            if f != "zarr.json":
                total += os.path.getsize(os.path.join(dirpath, f))
    return total


def inner_chunk_stats(array_dir: str) -> dict:
    """Stored sizes of the inner chunks, from each shard's index (at the end of the shard:
    (offset, nbytes) uint64 pairs, then a crc32c)."""
    n_inner = 1
    for s, c in zip(SHARDS, INNER):
        n_inner *= s // c
    index_bytes = n_inner * 16 + 4
    sizes = []
    n_shards = 0
    for dirpath, _, files in os.walk(os.path.join(array_dir, "c")):
        for f in files:
            with open(os.path.join(dirpath, f), "rb") as fh:
                fh.seek(-index_bytes, os.SEEK_END)
                idx = fh.read(index_bytes)
            n_shards += 1
            pairs = struct.unpack(f"<{2 * n_inner}Q", idx[: 16 * n_inner])
            for i in range(n_inner):
                offset, nbytes = pairs[2 * i], pairs[2 * i + 1]
                if offset != 2**64 - 1:
                    sizes.append(nbytes)
    return {
        "shards": n_shards,
        "inner_chunks": len(sizes),
        "inner_chunk_decoded_bytes": int(np.prod(INNER)) * 4,
        "inner_chunk_stored_mean": float(np.mean(sizes)),
        "inner_chunk_stored_max": int(np.max(sizes)),
        "shard_index_bytes": index_bytes,
    }


def write_small(outdir: str) -> dict:
    t0 = time.perf_counter()
    root = zarr.open_group(os.path.join(outdir, "small.zarr"), mode="w", zarr_format=3)
    base = np.arange(np.prod(SMALL_SHAPE), dtype=np.int32).reshape(SMALL_SHAPE)
    for g in range(N_GROUPS):
        grp = root.create_group(f"g{g:03d}", attributes={"index": g})
        for a in range(N_PER_GROUP):
            grp.create_array(
                f"a{a:03d}",
                data=base + (g * N_PER_GROUP + a),
                chunks=SMALL_SHAPE,
                attributes={"group": g, "array": a},
            )
        if g % 20 == 19:
            log(f"small: {g + 1} groups, {time.perf_counter() - t0:.0f} s")
    return {"groups": N_GROUPS, "arrays": N_GROUPS * N_PER_GROUP, "shape": list(SMALL_SHAPE)}


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    outdir = sys.argv[1]
    shutil.rmtree(outdir, ignore_errors=True)
    os.makedirs(outdir)
    t0 = time.perf_counter()
    field = make_field()
    log(f"field: {field.nbytes / 2**30:.2f} GiB, min {field.min():.3f} max {field.max():.3f}, "
        f"{time.perf_counter() - t0:.1f} s")
    t1 = time.perf_counter()
    field.tofile(os.path.join(outdir, "plain_c.bin"))
    log(f"plain_c.bin: {time.perf_counter() - t1:.1f} s")
    big = write_big(outdir, field)
    del field
    small = write_small(outdir)
    meta = {
        "zarr": zarr.__version__,
        "numpy": np.__version__,
        "shape": list(SHAPE),
        "dtype": "<f4",
        "chunks": list(CHUNKS),
        "shards": list(SHARDS),
        "inner_chunks": list(INNER),
        "decoded_bytes": int(np.prod(SHAPE)) * 4,
        "arrays": big,
        "small": small,
        "seconds": time.perf_counter() - t0,
    }
    with open(os.path.join(outdir, "bench-data.json"), "w") as fh:
        json.dump(meta, fh, indent=1)
    os.sync()
    with open(os.path.join(outdir, ".stamp"), "w") as fh:
        fh.write(STAMP)
    log(f"done in {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
