"""Readers timed by scripts/bench.sh: zarr libraries reading a whole array, random preads
through a file, a sampled content check, and the byte cost of a random read on a mount.

Usage (target/venv-bench/bin/python; every command prints `KEY VALUE` lines on stdout,
KEY prefixed with PREFIX, for bench.sh to collect; nothing else goes to stdout):

    bench_readers.py readall tensorstore|zarr STORE ARRAY PREFIX [--s3-endpoint URL]
        open STORE/ARRAY and read it whole into memory; PREFIX.seconds, PREFIX.bytes.
        With --s3-endpoint, STORE is BUCKET/PREFIX on that S3 server, read anonymously
        (tensorstore's s3 kvstore; zarr-python through obstore)
    bench_readers.py randread FILE PREFIX [--count N] [--size B] [--seed S]
        N random B-byte preads (offsets aligned to B, fixed seed, POSIX_FADV_RANDOM as fio
        does) twice: the first pass as the caller left the caches (cold), the second on a
        fresh descriptor (warm). PREFIX.{cold,warm}.{p50_us,p99_us,mean_us,max_us,seconds},
        and PREFIX.{cold,warm}.fetched_per_read from the user.zarrfs.bytes_fetched xattr
        ("n/a" when the file has none)
    bench_readers.py fetchprobe FILE PREFIX SHAPE INNER [--count N] [--size B] [--seed S]
        on a fresh mount: N random B-byte preads, each on inner chunks (INNER, e.g.
        16,128,128) no earlier probe touched, with the xattr read before and after each;
        PREFIX.{mean,max,min}_bytes per read, PREFIX.chunks_per_read (inner chunks one
        read spans, C order), or PREFIX.status n/a without the xattr
    bench_readers.py check FILE PLAIN SHAPE ORDER PREFIX [--count N]
        compare N random 4 KiB blocks of FILE (a mounted float32 array, C or F order) with
        PLAIN (the same values, C order); PREFIX.mismatches, PREFIX.blocks
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

XATTR = "user.zarrfs.bytes_fetched"


def emit(key: str, value) -> None:
    if isinstance(value, float):
        value = f"{value:.6g}"
    print(f"{key} {value}", flush=True)


def bytes_fetched(path: str):
    """The mount's cumulative store bytes for this file, or None without the xattr."""
    try:
        return int(os.getxattr(path, XATTR).decode().strip())
    except (OSError, ValueError):
        return None


def open_s3(library: str, endpoint: str, store: str, array: str):
    """The array at s3://STORE/ARRAY on ENDPOINT, opened by LIBRARY (anonymous)."""
    bucket, _, prefix = store.partition("/")
    path = f"{prefix}/{array}".strip("/")
    if library == "tensorstore":
        import tensorstore as ts

        kvstore = {"driver": "s3", "bucket": bucket, "path": path + "/", "endpoint": endpoint,
                   "aws_region": "us-east-1", "aws_credentials": {"type": "anonymous"}}
        return ts.open({"driver": "zarr3", "kvstore": kvstore}, read=True).result()
    import obstore.store
    import zarr

    s3 = obstore.store.S3Store(bucket, endpoint=endpoint, region="us-east-1",
                               skip_signature=True, client_options={"allow_http": True})
    return zarr.open_array(zarr.storage.ObjectStore(s3, read_only=True), path=path, mode="r")


def cmd_readall(args) -> None:
    path = os.path.join(args.store, args.array)
    t0 = time.perf_counter()
    if args.s3_endpoint:
        arr = open_s3(args.library, args.s3_endpoint, args.store, args.array)
        data = arr.read().result() if args.library == "tensorstore" else arr[...]
        seconds = time.perf_counter() - t0
    elif args.library == "tensorstore":
        import tensorstore as ts

        arr = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": path}},
                      read=True).result()
        data = arr.read().result()
        seconds = time.perf_counter() - t0
    else:
        import zarr

        arr = zarr.open_array(path, mode="r")
        data = arr[...]
        seconds = time.perf_counter() - t0
    emit(f"{args.prefix}.seconds", seconds)
    emit(f"{args.prefix}.bytes", int(data.nbytes))
    # Cheap sanity: a strided sample of the values is finite and not all zero.
    sample = np.asarray(data[::17, ::129, ::127])
    emit(f"{args.prefix}.sample_ok", int(bool(np.isfinite(sample).all() and sample.any())))


def offsets(file_size: int, size: int, count: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(0, file_size // size, size=count, dtype=np.int64) * size


def timed_preads(path: str, offs: np.ndarray, size: int) -> np.ndarray:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        lat = np.empty(len(offs), dtype=np.int64)
        pread = os.pread
        clock = time.perf_counter_ns
        for i, off in enumerate(offs.tolist()):
            t0 = clock()
            buf = pread(fd, size, off)
            lat[i] = clock() - t0
            if len(buf) != size:
                raise OSError(f"short read at {off}: {len(buf)} bytes")
    finally:
        os.close(fd)
    return lat


def cmd_randread(args) -> None:
    size_total = os.path.getsize(args.file)
    offs = offsets(size_total, args.size, args.count, args.seed)
    for phase in ("cold", "warm"):
        before = bytes_fetched(args.file)
        t0 = time.perf_counter()
        lat = timed_preads(args.file, offs, args.size)
        seconds = time.perf_counter() - t0
        after = bytes_fetched(args.file)
        p = f"{args.prefix}.{phase}"
        emit(f"{p}.p50_us", float(np.percentile(lat, 50)) / 1e3)
        emit(f"{p}.p99_us", float(np.percentile(lat, 99)) / 1e3)
        emit(f"{p}.mean_us", float(lat.mean()) / 1e3)
        emit(f"{p}.max_us", float(lat.max()) / 1e3)
        emit(f"{p}.seconds", seconds)
        if before is None or after is None:
            emit(f"{p}.fetched_per_read", "n/a")
        else:
            emit(f"{p}.fetched_per_read", (after - before) / len(offs))


def chunks_spanned(off: int, size: int, shape, inner, itemsize: int = 4) -> set:
    """Inner-chunk coordinates that bytes [off, off+size) of the C-order file touch."""
    first, last = off // itemsize, (off + size - 1) // itemsize
    idx = np.unravel_index(np.arange(first, last + 1), shape)
    coords = np.stack([i // c for i, c in zip(idx, inner)], axis=1)
    return {tuple(int(v) for v in row) for row in np.unique(coords, axis=0)}


def cmd_fetchprobe(args) -> None:
    shape = tuple(int(v) for v in args.shape.split(","))
    inner = tuple(int(v) for v in args.inner.split(","))
    if bytes_fetched(args.file) is None:
        emit(f"{args.prefix}.status", "n/a")
        return
    size_total = os.path.getsize(args.file)
    candidates = offsets(size_total, args.size, args.count * 20, args.seed + 1)
    seen: set = set()
    deltas, spans = [], []
    fd = os.open(args.file, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        for off in candidates.tolist():
            touched = chunks_spanned(off, args.size, shape, inner)
            if touched & seen:
                continue
            seen |= touched
            before = bytes_fetched(args.file)
            os.pread(fd, args.size, off)
            after = bytes_fetched(args.file)
            deltas.append(after - before)
            spans.append(len(touched))
            if len(deltas) == args.count:
                break
    finally:
        os.close(fd)
    d = np.array(deltas, dtype=np.float64)
    emit(f"{args.prefix}.status", "ok")
    emit(f"{args.prefix}.reads", len(deltas))
    emit(f"{args.prefix}.mean_bytes", float(d.mean()))
    emit(f"{args.prefix}.max_bytes", int(d.max()))
    emit(f"{args.prefix}.min_bytes", int(d.min()))
    emit(f"{args.prefix}.chunks_per_read", float(np.mean(spans)))


def cmd_check(args) -> None:
    shape = tuple(int(v) for v in args.shape.split(","))
    plain = np.memmap(args.plain, dtype="<f4", mode="r", shape=shape)
    block = 4096
    offs = offsets(os.path.getsize(args.file), block, args.count, 7)
    bad = 0
    with open(args.file, "rb", buffering=0) as fh:
        for off in offs.tolist():
            got = np.frombuffer(os.pread(fh.fileno(), block, off), dtype="<f4")
            flat = np.arange(off // 4, off // 4 + block // 4)
            idx = np.unravel_index(flat, shape, order=args.order)
            if not np.array_equal(got, plain[idx]):
                bad += 1
    emit(f"{args.prefix}.blocks", len(offs))
    emit(f"{args.prefix}.mismatches", bad)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("readall")
    p.add_argument("library", choices=["tensorstore", "zarr"])
    p.add_argument("store")
    p.add_argument("array")
    p.add_argument("prefix")
    p.add_argument("--s3-endpoint")
    p.set_defaults(func=cmd_readall)
    for name, func in (("randread", cmd_randread), ("fetchprobe", cmd_fetchprobe)):
        p = sub.add_parser(name)
        p.add_argument("file")
        p.add_argument("prefix")
        if name == "fetchprobe":
            p.add_argument("shape")
            p.add_argument("inner")
        p.add_argument("--count", type=int, default=10000 if name == "randread" else 100)
        p.add_argument("--size", type=int, default=4096)
        p.add_argument("--seed", type=int, default=12345)
        p.set_defaults(func=func)
    p = sub.add_parser("check")
    p.add_argument("file")
    p.add_argument("plain")
    p.add_argument("shape")
    p.add_argument("order", choices=["C", "F"])
    p.add_argument("prefix")
    p.add_argument("--count", type=int, default=200)
    p.set_defaults(func=cmd_check)
    args = ap.parse_args()
    args.func(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
