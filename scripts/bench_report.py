"""Turn the raw figures of scripts/bench.sh into the results table with acceptance ratios.

Usage: bench_report.py RAW DATA_JSON OUT_MD
    RAW        `KEY VALUE` lines written by bench.sh (target/bench-raw.txt)
    DATA_JSON  target/bench-data/bench-data.json from bench_data.py (stored sizes)
    OUT_MD     where the markdown goes (target/bench-results.md); also printed to stdout

Missing or failed figures show as "n/a" / "error" and their criteria as n/a or FAIL;
the report never fails because one measurement did.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import sys

MIB = 1 << 20
VARIANTS = [
    ("raw", "uncompressed"),
    ("zstd", "zstd 3"),
    ("blosc", "blosc lz4 + shuffle"),
    ("sharded", "sharded, zstd 3 inner"),
]


def default_cache() -> int:
    """The daemon's `--cache-size auto` (src/memory.rs): an eighth of the memory, at
    least 256 MiB and at most 4 GiB."""
    with open("/proc/meminfo") as fh:
        total = next(int(line.split()[1]) * 1024 for line in fh if line.startswith("MemTotal:"))
    return min(max(total // 8, 256 * MIB), 4096 * MIB)


def cache_label(s: str) -> str:
    """A --cache-size as the report names it."""
    return f"auto ({default_cache() / MIB:.0f} MiB here)" if s == "auto" else s


def parse_size(s: str) -> int:
    if s == "auto":
        return default_cache()
    m = re.fullmatch(r"\s*([0-9.]+)\s*([a-zA-Z]*)\s*", s)
    if not m:
        raise ValueError(f"bad size {s!r}")
    shift = {"": 0, "b": 0, "k": 10, "kb": 10, "kib": 10, "m": 20, "mb": 20, "mib": 20,
             "g": 30, "gb": 30, "gib": 30, "t": 40, "tb": 40, "tib": 40}[m.group(2).lower()]
    return int(float(m.group(1)) * (1 << shift))


class Raw:
    """The raw figures; a key recorded several times (repeated runs) reads as its median."""

    def __init__(self, path: str):
        self.values: dict[str, list[str]] = {}
        with open(path) as fh:
            for line in fh:
                key, _, value = line.rstrip("\n").partition(" ")
                if key:
                    self.values.setdefault(key, []).append(value)

    def text(self, key: str) -> str:
        vals = self.values.get(key)
        return "n/a" if not vals else vals[-1]

    def num(self, key: str):
        """The median of the key's values; None if missing or any run failed."""
        try:
            return statistics.median(float(v) for v in self.values[key])
        except (KeyError, ValueError):
            return None

    def nums(self, key: str) -> list[float]:
        out = []
        for v in self.values.get(key, []):
            try:
                out.append(float(v))
            except ValueError:
                pass
        return out


def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b


def fmt_seconds(raw: Raw, key: str, nbytes: int) -> str:
    s = raw.num(key)
    if s is None:
        return "error" if "error" in raw.values.get(key, []) else "n/a"
    return f"{s:.2f} s, {nbytes / MIB / s:,.0f} MiB/s"


def fmt_us(v) -> str:
    if v is None:
        return "n/a"
    return f"{v / 1000:.2f} ms" if v >= 1000 else f"{v:.0f} µs"


def fmt_bytes(v) -> str:
    if v is None:
        return "n/a"
    if v >= MIB:
        return f"{v / MIB:.2f} MiB"
    if v >= 1024:
        return f"{v / 1024:.0f} KiB"
    return f"{v:.0f} B"


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def remote_section(raw: Raw, nbytes: int, add, tput, cache_bytes: int) -> list[str]:
    """The remote table (r.* keys of scripts/bench_remote.sh); adds its criteria."""
    rtt = raw.num("r.meta.latency_ms")
    lines = ["## Remote: S3 (s3s-fs) behind a proxy adding %.0f ms per request (r)" % rtt, ""]
    rows = []
    for key in ("zstd", "sharded"):
        gets = raw.num(f"r.a.{key}.gets")
        hwm = raw.num(f"r.h.{key}.vmhwm_kib")
        rows.append([key, fmt_seconds(raw, f"r.a.{key}", nbytes),
                     fmt_seconds(raw, f"r.c.{key}", nbytes),
                     fmt_seconds(raw, f"r.d.tensorstore.{key}.seconds", nbytes),
                     fmt_seconds(raw, f"r.d.zarr.{key}.seconds", nbytes),
                     "n/a" if gets is None else f"{gets / (nbytes / MIB):.2f}",
                     fmt_us(raw.num(f"r.f.{key}.cold.p50_us")),
                     fmt_us(raw.num(f"r.f.{key}.cold.p99_us")),
                     "n/a" if hwm is None else f"{hwm / 1024:.0f} MiB",
                     fmt_seconds(raw, f"r.o.{key}", nbytes)])
    lines += table(["array", "cold mount", "zarrfs cat", "tensorstore", "zarr-python",
                    "GETs per MiB", "random 4 KiB p50", "p99", "daemon peak RSS",
                    "cold mount, --refresh off"], rows)
    ls_mount, ls_local = raw.num("r.g.ls_mount"), raw.num("r.g.ls_local")
    lines += ["", f"`ls -lR` of the consolidated 10k-array hierarchy: mount "
              f"{'n/a' if ls_mount is None else f'{ls_mount:.2f} s'}, local copy "
              f"{'n/a' if ls_local is None else f'{ls_local:.2f} s'}, "
              f"{raw.text('r.g.lists')} LIST and {raw.text('r.g.requests')} requests in all; "
              f"again within the refresh interval: {raw.text('r.g.requests_again')} requests; "
              f"again after a 10 s interval: {raw.text('r.g.requests_after')}.", ""]
    for key in ("zstd", "sharded"):
        add(f"(r) cold mount / tensorstore read-all over S3, {key}",
            ratio(tput(f"r.a.{key}"), tput(f"r.d.tensorstore.{key}.seconds")), 1.2, True)
        add(f"(r) cold mount / zarrfs cat over S3, {key}",
            ratio(tput(f"r.a.{key}"), tput(f"r.c.{key}")), 0.8, True)
        add(f"(r) cold mount, --refresh 60s / --refresh off, {key}",
            ratio(tput(f"r.a.{key}"), tput(f"r.o.{key}")), 0.95, True)
        p50 = raw.num(f"r.f.{key}.cold.p50_us")
        add(f"(r) random 4 KiB p50 in round trips, {key}",
            None if p50 is None else p50 / 1000 / rtt, 2.0, False)
    for key in ("zstd", "sharded"):
        gets = raw.num(f"r.k.{key}.gets")
        lines += [f"Second mount sharing a disk cache, {key}: {fmt_seconds(raw, f'r.k.{key}', nbytes)} "
                  f"({'n/a' if gets is None else f'{gets:.0f}'} GETs), local folder "
                  f"{fmt_seconds(raw, f'r.l.{key}', nbytes)}.", ""]
        add(f"(r) second mount from a shared disk cache / local folder, {key}",
            ratio(tput(f"r.k.{key}"), tput(f"r.l.{key}")), 0.8, True)
    lists = raw.num("r.g.lists")
    add("(r) LIST requests of `ls -lR`, consolidated 10k hierarchy", lists, 0, False, "{:.0f}")
    add("(r) requests of a second `ls -lR` within the refresh interval",
        raw.num("r.g.requests_again"), 0, False, "{:.0f}")
    add("(r) requests of an `ls -lR` after the refresh interval (one per interval)",
        raw.num("r.g.requests_after"), 1, False, "{:.0f}")
    add("(r) `ls -lR` mount / (local copy + one round trip)",
        None if ls_mount is None or ls_local is None else ls_mount / (ls_local + rtt / 1000),
        2.0, False)
    hwm = raw.num("r.s.vmhwm_kib")
    add("(r) daemon peak RSS, 16 concurrent sequential readers (MiB)",
        None if hwm is None else hwm / 1024, (cache_bytes + 64 * MIB) / MIB, False, "{:.0f}")
    return lines


def fmt_spread(raw: Raw, key: str, nbytes: int) -> str:
    """The median as `fmt_seconds` does, with the runs' spread (fastest–slowest)."""
    runs = raw.nums(key)
    text = fmt_seconds(raw, key, nbytes)
    if len(runs) > 1:
        text += f" ({min(runs):.2f}–{max(runs):.2f} s, {len(runs)} runs)"
    return text


def io_section(raw: Raw, nbytes: int, add, tput) -> list[str]:
    """The I/O-mode table (i.* keys of scripts/bench_io.sh); adds its criteria."""
    lines = ["## Page cache, direct IO and materialized arrays (i)", "",
             "Decode limit: every stored chunk already in memory, all read units decoded on "
             "every core and nothing else. Mount reads are `dd bs=1M`; the page-cache mount "
             "is (a) and (b) above, repeated here with each run's spread.", ""]
    rows = []
    for key, label in VARIANTS:
        rows.append([label, fmt_spread(raw, f"i.limit.{key}", nbytes),
                     fmt_spread(raw, f"c.{key}", nbytes),
                     fmt_spread(raw, f"a.{key}", nbytes),
                     fmt_spread(raw, f"i.direct.{key}", nbytes),
                     fmt_spread(raw, f"b.{key}", nbytes),
                     fmt_spread(raw, f"i.direct_warm.{key}", nbytes),
                     fmt_spread(raw, f"i.mat.{key}", nbytes),
                     fmt_spread(raw, f"i.mat_plain.{key}", nbytes)])
    lines += table(["array", "decode limit", "zarrfs cat", "cold, page cache", "cold, direct",
                    "warm, page cache", "warm, direct", "warm, materialized",
                    "warm plain file (alternating)"], rows)
    eight = 8 * nbytes
    small = raw.text("meta.small_cache")
    cache = cache_label(raw.text("meta.cache_size"))
    lines += ["", f"Eight concurrent cold readers (the four arrays in C and F order, through "
              f"two mounts, cache {cache} each), aggregate. `auto` reads each file through "
              "the page cache when it is opened alone, else direct; the last two rows give "
              f"each mount a cache of {small} only, too small for the four 256 MiB layers "
              "of units four F-order readers each work through:", ""]
    rows = [[way, fmt_spread(raw, f"i.eight.{way}", eight)]
            for way in ("cache", "direct", "auto", "cat")]
    rows += [[f"{way}, cache {small}", fmt_spread(raw, f"i.eight_small.{way}", eight)]
             for way in ("direct", "auto")]
    lines += table(["readers", "time"], rows)
    lines += [""]
    for key, what in (("i.rand_direct.zstd", f"cache {cache}"),
                      ("i.rand_direct_small.zstd", f"cache {small}")):
        lines += [f"Random 4 KiB preads of zstd through a direct-IO mount ({what}): cold p50 "
                  f"{fmt_us(raw.num(key + '.cold.p50_us'))}, p99 "
                  f"{fmt_us(raw.num(key + '.cold.p99_us'))}; warm p50 "
                  f"{fmt_us(raw.num(key + '.warm.p50_us'))}, p99 "
                  f"{fmt_us(raw.num(key + '.warm.p99_us'))}.", ""]
    for key in ("zstd", "blosc", "sharded"):
        add(f"(i) cold mount (page cache) / zarrfs cat, {key}",
            ratio(tput(f"a.{key}"), tput(f"c.{key}")), 0.95, True)
        add(f"(i) cold mount (direct) / zarrfs cat, {key}",
            ratio(tput(f"i.direct.{key}"), tput(f"c.{key}")), 0.95, True)
    add("(i) cold mount (direct) / cold plain file, uncompressed",
        ratio(tput("i.direct.raw"), tput("e.cold")), 0.8, True)
    for key in ("zstd", "sharded"):
        add(f"(i) zarrfs cat / decode limit (time), {key}",
            ratio(raw.num(f"c.{key}"), raw.num(f"i.limit.{key}")), 1.15, False)
    for key, _ in VARIANTS:
        add(f"(i) warm materialized / warm plain file, {key}",
            ratio(tput(f"i.mat.{key}"), tput(f"i.mat_plain.{key}")), 0.9, True)
    for way in ("cache", "direct", "auto"):
        add(f"(i) eight readers: mount ({way}) / eight zarrfs cat, aggregate",
            ratio(raw.num("i.eight.cat"), raw.num(f"i.eight.{way}")), 0.9, True)
    for way in ("direct", "auto"):
        add(f"(i) eight readers: mount ({way}, cache {small}) / eight zarrfs cat, aggregate",
            ratio(raw.num("i.eight.cat"), raw.num(f"i.eight_small.{way}")), 0.9, True)
    for key, what in (("i.rand_direct.zstd", cache), ("i.rand_direct_small.zstd", small)):
        p99 = raw.num(key + ".warm.p99_us")
        add(f"(i) random 4 KiB warm p99 through a direct mount (cache {what}), zstd (ms)",
            None if p99 is None else p99 / 1000, 1.0, False)
    return lines


def b2b_section(raw: Raw, nbytes: int, add, tput) -> list[str]:
    """The back-to-back table (bb.* keys of scripts/bench_b2b.sh); adds its criteria."""
    lines = ["## Back-to-back reads (bb)", "",
             "Three `dd bs=1M` reads of each array through a fresh mount with the default "
             "materialization, each started the moment the last ends; the daemon's CPU "
             "seconds for the first read and for all three, and for one read followed by "
             "10 s idle, against `zarrfs cat` of the same array (cold).", ""]
    rows = []
    for key, label in VARIANTS:
        for mode in ("auto", "direct", "cache"):
            reads = [fmt_seconds(raw, f"bb.{mode}.{n}.{key}", nbytes) for n in (1, 2, 3)]
            cpu = [raw.num(f"bb.{mode}.cpu{n}.{key}") for n in (1, 3)]
            rows.append([label, mode, *reads,
                         *("n/a" if c is None else f"{c:.2f} s" for c in cpu)])
        idle, cat_cpu = raw.num(f"bb.idle_cpu.{key}"), raw.num(f"bb.cat_cpu.{key}")
        rows.append([label, "zarrfs cat", fmt_seconds(raw, f"bb.cat.{key}", nbytes), "", "",
                     "n/a" if cat_cpu is None else f"{cat_cpu:.2f} s",
                     "n/a" if idle is None else f"one read + 10 s idle: {idle:.2f} s"])
    lines += table(["array", "mode", "read 1", "read 2", "read 3", "CPU, read 1",
                    "CPU, reads 1-3"], rows)
    lines += ["", f"Warm plain file: {fmt_seconds(raw, 'bb.plain_warm', nbytes)}.", ""]
    for key in ("zstd", "blosc", "sharded"):
        for n in (2, 3):
            add(f"(bb) read {n} / read 1 (time), auto, {key}",
                ratio(raw.num(f"bb.auto.{n}.{key}"), raw.num(f"bb.auto.1.{key}")), 0.5, False)
        add(f"(bb) read 2 / warm plain file (throughput), auto, {key}",
            ratio(tput(f"bb.auto.2.{key}"), tput("bb.plain_warm")), 0.5, True)
    for key, _ in VARIANTS:
        for mode in ("auto", "direct", "cache"):
            worst = max((raw.num(f"bb.{mode}.{n}.{key}") or 0) for n in (2, 3))
            add(f"(bb) slower of reads 2, 3 / read 1 (time), {mode}, {key}",
                ratio(worst or None, raw.num(f"bb.{mode}.1.{key}")), 1.05, False)
    for key in ("zstd", "sharded"):
        add(f"(bb) daemon CPU, three reads / one read, auto, {key}",
            ratio(raw.num(f"bb.auto.cpu3.{key}"), raw.num(f"bb.auto.cpu1.{key}")), 1.15, False)
        add(f"(bb) daemon CPU, one read + 10 s idle / zarrfs cat CPU, {key}",
            ratio(raw.num(f"bb.idle_cpu.{key}"), raw.num(f"bb.cat_cpu.{key}")), 1.15, False)
    for key in ("zstd", "blosc", "sharded"):
        add(f"(bb) cold first read, auto / zarrfs cat (throughput), {key}",
            ratio(tput(f"bb.auto.1.{key}"), tput(f"bb.cat.{key}")), 0.9, True)
    return lines


def readers_section(raw: Raw, add, key: str, title: str, blurb: str, readers: dict,
                    against: str) -> list[str]:
    """A table of 1 GiB cold reads (KEY.* keys): the mount and `zarrfs cat` against the
    Python `readers` (key: label); adds the criteria of both against the fastest of them."""
    nbytes = 1 << 30
    lines = [f"## {title} ({key})", "", blurb, ""]
    labels = {"mount": "zarrfs mount (`dd bs=1M`)", "cat": "`zarrfs cat`", **readers}
    rows = [[label, fmt_seconds(raw, f"{key}.{k}", nbytes)] for k, label in labels.items()]
    lines += table(["reader", "time"], rows)
    want = raw.text(f"{key}.mount.sha256")
    same = [k for k in readers if raw.text(f"{key}.{k}.sha256") == want]
    lines += ["", f"Same bytes as the mount: {', '.join(same) or 'none'}.", ""]
    python = [raw.num(f"{key}.{k}") for k in readers]
    fastest = min((p for p in python if p is not None), default=None)
    add(f"({key}) mount / {against} (throughput)", ratio(fastest, raw.num(f"{key}.mount")), 1.5, True)
    add(f"({key}) zarrfs cat / {against} (throughput)", ratio(fastest, raw.num(f"{key}.cat")), 1.5, True)
    return lines


def zarrs_section(raw: Raw, nbytes: int) -> list[str]:
    """The zarrs table (z.* keys of scripts/bench_zarrs.sh): `zarrfs cat` against zarrs
    reading the same array whole, and their time ratio; no criteria."""
    lines = ["## zarrfs cat against zarrs (z)", "",
             f"zarrs {raw.text('z.meta.zarrs')} (benches/zarrs-read: filesystem store, "
             "`retrieve_array_subset` of the whole array into memory as C-order bytes, "
             "zarrs' default codec options and concurrency) against `zarrfs cat` to "
             "/dev/null (streamed, not held), each process timed whole, page cache dropped "
             "before each, back to back in each repetition. The ratio is zarrfs's time over zarrs' (below 1: "
             "zarrfs faster). In-process: the reader's own seconds for opening the array "
             "and reading it, without the process's start and exit.", ""]
    rows = []
    for key, label in VARIANTS:
        cat, zarrs = raw.num(f"z.cat.{key}"), raw.num(f"z.zarrs.{key}")
        inner = raw.num(f"z.zarrs_inner.{key}")
        r = ratio(cat, zarrs)
        rows.append([label, fmt_spread(raw, f"z.cat.{key}", nbytes),
                     fmt_spread(raw, f"z.zarrs.{key}", nbytes),
                     "n/a" if inner is None else f"{inner:.2f} s",
                     "n/a" if r is None else f"{r:.2f}"])
    lines += table(["array", "zarrfs cat", "zarrs", "zarrs, in-process",
                    "zarrfs / zarrs (time)"], rows)
    same = [key for key, _ in VARIANTS
            if raw.text(f"z.cat.{key}.sha256") not in ("n/a", "")
            and raw.text(f"z.cat.{key}.sha256") == raw.text(f"z.zarrs.{key}.sha256")]
    lines += ["", f"Same bytes (SHA-256) from both: {', '.join(same) or 'none'}.", ""]
    return lines


def refs_section(raw: Raw, add) -> list[str]:
    """The reference-set table (k.* keys of scripts/bench_refs.sh); adds its criteria."""
    return readers_section(
        raw, add, "k", "Kerchunk references over S3",
        "A 1 GiB float32 variable in four NetCDF-4 files (zlib 1 + shuffle) on s3s-fs, "
        "described by kerchunk's MultiZarrToZarr references; cold reads.",
        {"fsspec": "zarr-python 3 + fsspec reference filesystem",
         "xarray": "xarray + h5netcdf over the NetCDF files"},
        "fastest Python reader")


def icechunk_section(raw: Raw, add) -> list[str]:
    """The Icechunk table (l.* keys of scripts/bench_icechunk.sh); adds its criteria."""
    return readers_section(
        raw, add, "l", "Icechunk over S3",
        "A 1 GiB float32 array (zstd, 4 MiB chunks) in an Icechunk repository written by "
        "the icechunk package, on s3s-fs; cold reads.",
        {"icechunk": "icechunk + zarr-python 3"},
        "icechunk + zarr-python")


def write_section(raw: Raw, nbytes: int, add) -> list[str]:
    """The write table (w.* keys of scripts/bench_write.sh); adds its criteria."""
    lines = ["## Writing a 1 GiB array", "",
             "The zstd array (float32, 16 x 256 x 256 chunks, zstd 3) written whole from the "
             "plain file in the page cache into an empty copy of it; medians.", ""]
    names = {"mount": "`dd bs=1M` into a `--writable` mount (close included)",
             "cli": "`zarrfs write --from`", "zarr": "zarr-python 3",
             "tensorstore": "tensorstore"}
    rows = [[label, fmt_spread(raw, f"w.{key}", nbytes)] for key, label in names.items()]
    lines += table(["writer", "seconds (MB/s)"], rows)
    lines.append("")
    fastest = [raw.num(f"w.{k}") for k in ("zarr", "tensorstore")]
    fastest = min((s for s in fastest if s is not None), default=None)
    for key in ("mount", "cli"):
        t = raw.num(f"w.{key}")
        add(f"(w) {key} write / faster of zarr-python and tensorstore (speed)",
            None if t is None or fastest is None else fastest / t, 1.5, True)
    written, chunks = raw.num("w.row.written"), raw.num("w.row.chunks")
    add("(w) bytes written for one chunk row / its chunk objects' size",
        None if written is None or not chunks else written / chunks, 1.0, False)
    return lines


def serve_section(raw: Raw, nbytes: int, add) -> list[str]:
    """The HTTP table (sv.* keys of scripts/bench_serve.sh); adds its criteria."""
    lines = ["## Serving over HTTP", "",
             "`zarrfs serve` on loopback read by curl, cold (page cache dropped, a fresh "
             "server), against `zarrfs cat` of the same arrays; medians.", ""]
    rows = [["one GET of the zstd array", fmt_spread(raw, "sv.get.zstd", nbytes)],
            ["`zarrfs cat` of it", fmt_spread(raw, "sv.cat.zstd", nbytes)],
            ["eight concurrent GETs (four arrays, C and F)", fmt_spread(raw, "sv.eight.get", 8 * nbytes)],
            ["eight concurrent `zarrfs cat`", fmt_spread(raw, "sv.eight.cat", 8 * nbytes)]]
    lines += table(["reader", "seconds (MB/s)"], rows)
    lines.append("")
    add("(sv) GET of the zstd array / zarrfs cat (speed)",
        ratio(raw.num("sv.cat.zstd"), raw.num("sv.get.zstd")), 0.9, True)
    add("(sv) eight concurrent GETs / eight zarrfs cat (speed)",
        ratio(raw.num("sv.eight.cat"), raw.num("sv.eight.get")), 0.9, True)
    fetched, chunk = raw.num("sv.window.fetched"), raw.num("sv.window.chunk")
    lines.append(f"GDAL `/vsicurl/` read of one 256 x 256 window of the `.tif` view: "
                 f"{fetched:.0f} stored bytes read, the chunk under it {chunk:.0f}." if fetched is not None
                 and chunk else "GDAL window read: n/a.")
    lines.append("")
    add("(sv) stored bytes read for a 256 x 256 GeoTIFF window / the chunk under it",
        ratio(fetched, chunk), 1.0, False)
    return lines


def scale_section(raw: Raw, add) -> list[str]:
    """The scale table (sc.* keys of scripts/bench_scale.sh); adds its criteria."""
    lines = ["## Scale: counts of arrays and chunks", "",
             "Cold figures on a fresh mount with the page cache dropped; medians.", ""]

    def s(key):
        v = raw.num(key)
        return "n/a" if v is None else f"{v:.3f} s"

    def per(key, n):
        v = raw.num(key)
        return "" if v is None else f"{v / n * 1e6:.0f} µs each"

    def mib(key):
        v = raw.num(key)
        return None if v is None else v / 1024

    rows = [["`ls -l` of 1,000 arrays, cold", s("sc.ls1k.cold"), per("sc.ls1k.cold", 1000)],
            ["`ls -l` of 10,000 arrays, cold", s("sc.ls10k.cold"), per("sc.ls10k.cold", 10000)],
            ["`ls -l` of 10,000 arrays, warm", s("sc.ls10k.warm"), per("sc.ls10k.warm", 10000)],
            ["`ls -l` of 10,000 plain files, cold (reference)", s("sc.plain10k.cold"), ""],
            ["`ls -l` of 10,000 plain files, warm (reference)", s("sc.plain10k.warm"), ""],
            ["`ls -lR` of 100,000 arrays", s("sc.tree100k.ls"), per("sc.tree100k.ls", 100000)],
            ["`stat` of one array on a fresh mount (100,000 arrays)", s("sc.tree100k.stat1"), ""]]
    for a, n in (("c1k", 65536), ("c16k", 4096)):
        for who, label in (("cat", "`zarrfs cat`"), ("mount", "the mount (`dd`)"), ("ts", "tensorstore")):
            key = f"sc.{who}.{a}.seconds" if who == "ts" else f"sc.{who}.{a}"
            rows.append([f"64 MiB in {n:,} chunks: {label}", s(key), per(key, n)])
    lines += table(["operation", "time", "per item"], rows)
    lines.append("")
    rss10k, rss100k = mib("sc.ls10k.rss_kib"), mib("sc.tree100k.rss_kib")
    lines.append(f"Daemon RSS after `ls -l` of 10,000 arrays: "
                 f"{'n/a' if rss10k is None else f'{rss10k:.0f} MiB'}; after `ls -lR` of 100,000: "
                 f"{'n/a' if rss100k is None else f'{rss100k:.0f} MiB'}. FUSE requests read while "
                 f"every listed file was stat'ed again: {raw.text('sc.ls10k.warm_requests')}.")
    lines.append("")
    add("(sc) `ls -l` of 10,000 arrays, cold (s)", raw.num("sc.ls10k.cold"), 1.5, False)
    add("(sc) `ls -l` of 10,000 arrays, warm (s)", raw.num("sc.ls10k.warm"), 0.6, False)
    add("(sc) daemon RSS after it (MiB)", rss10k, 60, False, "{:.0f}")
    add("(sc) FUSE requests for a warm `stat` of each of them", raw.num("sc.ls10k.warm_requests"),
        0, False, "{:.0f}")
    add("(sc) daemon RSS after `ls -lR` of 100,000 arrays (MiB)", rss100k, 400, False, "{:.0f}")
    add("(sc) `stat` of one array on a fresh mount (ms)",
        None if raw.num("sc.tree100k.stat1") is None else raw.num("sc.tree100k.stat1") * 1000,
        10, False, "{:.1f}")
    for a in ("c1k", "c16k"):
        ts = raw.num(f"sc.ts.{a}.seconds")
        add(f"(sc) {a}: zarrfs cat speed / tensorstore", ratio(ts, raw.num(f"sc.cat.{a}")), 1.5, True)
        add(f"(sc) {a}: mount speed / tensorstore", ratio(ts, raw.num(f"sc.mount.{a}")), 1.5, True)
    return lines


def criterion_adder(crit: list):
    """add(name, measured, threshold, higher_better, fmt): appends one acceptance row to
    crit (PASS or FAIL against the threshold; n/a when nothing was measured)."""
    def add(name: str, measured, threshold: float, higher_better: bool, fmt="{:.2f}") -> None:
        if measured is None:
            crit.append([name, "n/a", "", "n/a"])
            return
        ok = measured >= threshold if higher_better else measured <= threshold
        op = "≥" if higher_better else "≤"
        crit.append([name, fmt.format(measured), f"{op} {fmt.format(threshold)}",
                     "PASS" if ok else "FAIL"])
    return add


def report_without_big_data(raw: Raw, out: str) -> int:
    """The report of a run whose sections read no 1 GiB array (no bench-data.json): the
    reference, Icechunk and scale sections that ran, and their criteria."""
    lines = ["# zarrfs benchmark", "",
             f"{raw.text('meta.date')}, zarrfs {raw.text('meta.commit')}, kernel "
             f"{raw.text('meta.kernel')}, {raw.text('meta.cores')} cores; cold figures are "
             f"medians of {raw.text('meta.repeat')} runs. Load average (1/5/15 min) at the "
             f"start {raw.text('meta.loadavg_start')}, at the end {raw.text('meta.loadavg_end')}.",
             ""]
    crit = []
    add = criterion_adder(crit)
    if raw.nums("k.mount"):
        lines += refs_section(raw, add)
    if raw.nums("l.mount"):
        lines += icechunk_section(raw, add)
    if raw.nums("sc.ls10k.cold"):
        lines += scale_section(raw, add)
    lines += ["## Acceptance", ""] + table(["criterion", "measured", "target", "result"], crit)
    lines += ["", f"{sum(1 for c in crit if c[3] == 'PASS')} of {len(crit)} criteria pass."]
    text = "\n".join(lines) + "\n"
    with open(out, "w") as fh:
        fh.write(text)
    sys.stdout.write(text)
    return 0


def main() -> int:
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    raw = Raw(sys.argv[1])
    if not os.path.exists(sys.argv[2]):
        return report_without_big_data(raw, sys.argv[3])
    with open(sys.argv[2]) as fh:
        data = json.load(fh)
    nbytes = int(data["decoded_bytes"])
    cache_bytes = parse_size(raw.text("meta.cache_size"))
    arrays = data["arrays"]
    sh = arrays["sharded"]
    lines: list[str] = []
    lines.append("# zarrfs benchmark")
    lines.append("")
    lines.append(
        f"{raw.text('meta.date')}, zarrfs {raw.text('meta.commit')}, kernel "
        f"{raw.text('meta.kernel')}, {raw.text('meta.cores')} cores, "
        f"`--cache-size {cache_label(raw.text('meta.cache_size'))}`, "
        f"data by zarr-python {data['zarr']}. "
        f"Arrays: float32 {tuple(data['shape'])} = {nbytes / MIB:.0f} MiB decoded, chunks "
        f"{tuple(data['chunks'])}; sharded: shards {tuple(data['shards'])} of inner chunks "
        f"{tuple(data['inner_chunks'])}. Cold = `sync; echo 3 > /proc/sys/vm/drop_caches` "
        "first (and a fresh mount for mount reads). MiB/s is decoded bytes per second. "
        f"Cold figures are medians of {raw.text('meta.repeat')} runs, warm ones of 5 "
        f"(the warm plain file: {len(raw.values.get('e.warm', []))} runs, alternating with "
        "the warm mount reads; (b)/(e) sets each array against the 5 that alternated with "
        "its own); each cold repetition reads through the mount, with "
        "`zarrfs cat` and the libraries back to back; "
        "peak RSS is the maximum over the runs. Load average (1/5/15 min) at the start "
        f"{raw.text('meta.loadavg_start')}, at the end {raw.text('meta.loadavg_end')}; "
        f"the zarrfs daemons logged {raw.text('meta.daemon_log_lines')} lines."
    )
    lines.append("")

    # -- sequential reads
    lines.append("## Sequential read of the whole array (a–e, h)")
    lines.append("")
    rows = []
    for key, label in VARIANTS + [("zstdF", "zstd 3, F order")]:
        src = "zstd" if key == "zstdF" else key
        stored = arrays[src]["stored_bytes"]
        hwm = max(raw.nums(f"h.{key}.vmhwm_kib"), default=None)
        rows.append([
            label,
            f"{stored / MIB:.0f} MiB ({arrays[src]['ratio']:.2f}x)",
            fmt_seconds(raw, f"a.{key}", nbytes),
            fmt_seconds(raw, f"b.{key}", nbytes),
            fmt_seconds(raw, f"c.{key}", nbytes),
            fmt_seconds(raw, f"d.tensorstore.{key}.seconds", nbytes) if key != "zstdF" else "—",
            fmt_seconds(raw, f"d.zarr.{key}.seconds", nbytes) if key != "zstdF" else "—",
            "n/a" if hwm is None else f"{hwm / 1024:.0f} MiB",
        ])
    rows.append([
        "plain file (same bytes)",
        f"{nbytes / MIB:.0f} MiB",
        fmt_seconds(raw, "e.cold", nbytes) + " (e)",
        fmt_seconds(raw, "e.warm", nbytes) + " (e)",
        "—", "—", "—", "—",
    ])
    lines += table(
        ["array", "stored", "(a) cold, mount", "(b) warm, same mount", "(c) zarrfs cat, cold",
         "(d) tensorstore, cold", "(d) zarr-python, cold", "(h) daemon peak RSS"],
        rows,
    )
    checks = []
    for key in [k for k, _ in VARIANTS] + ["zstdF"]:
        bad = raw.num(f"check.{key}.mismatches")
        blocks = raw.num(f"check.{key}.blocks")
        if bad is None:
            checks.append(f"{key}: not checked")
        else:
            checks.append(f"{key}: {int(bad)}/{int(blocks)} mismatching")
    noisy = []
    for key in sorted(raw.values):
        if (key.split(".")[0] in ("a", "b", "c", "e") and key.count(".") == 1) or (
                key.startswith("d.") and key.endswith(".seconds")):
            runs = raw.nums(key)
            if len(runs) > 1 and min(runs) > 0 and max(runs) / min(runs) > 1.3:
                noisy.append(f"{key} {min(runs):.2f}–{max(runs):.2f} s")
    lines.append("")
    lines.append("Noisy figures (slowest run more than 1.3x the fastest): "
                 + ("; ".join(noisy) if noisy else "none") + ".")
    lines.append("")
    lines.append("Content check (random 4 KiB blocks of the mounted file against the plain "
                 "file): " + "; ".join(checks) + ".")
    lines.append("")

    # -- random reads
    n = raw.text("meta.random_reads")
    lines.append(f"## Random 4 KiB preads (f): {n} reads, fixed seed, POSIX_FADV_RANDOM")
    lines.append("")
    lines.append("Cold: fresh mount, page cache dropped, first pass; warm: the same offsets "
                 "again on a new descriptor, same mount. Fetched: store bytes per read from "
                 "the `user.zarrfs.bytes_fetched` xattr.")
    lines.append("")
    rows = []
    for key, label in (("zstd", "zstd 3"), ("sharded", "sharded"), ("plain", "plain file")):
        p = f"f.{key}"
        fetched = []
        for phase in ("cold", "warm"):
            v = raw.num(f"{p}.{phase}.fetched_per_read")
            fetched.append(fmt_bytes(v) if v is not None else raw.text(f"{p}.{phase}.fetched_per_read"))
        rows.append([
            label,
            fmt_us(raw.num(f"{p}.cold.p50_us")), fmt_us(raw.num(f"{p}.cold.p99_us")),
            fmt_us(raw.num(f"{p}.cold.max_us")),
            fmt_us(raw.num(f"{p}.warm.p50_us")), fmt_us(raw.num(f"{p}.warm.p99_us")),
            fmt_us(raw.num(f"{p}.warm.max_us")),
            "—" if key == "plain" else fetched[0],
            "—" if key == "plain" else fetched[1],
        ])
    lines += table(["file", "cold p50", "cold p99", "cold max", "warm p50", "warm p99",
                    "warm max", "fetched/read cold", "fetched/read warm"], rows)
    lines.append("")
    probe = raw.text("f.probe.status")
    lines.append(
        f"Sharded inner chunk: {fmt_bytes(sh['inner_chunk_decoded_bytes'])} decoded, "
        f"{fmt_bytes(sh['inner_chunk_stored_mean'])} stored on average "
        f"(max {fmt_bytes(sh['inner_chunk_stored_max'])}; shard index "
        f"{sh['shard_index_bytes']} B)."
    )
    if probe == "ok":
        lines.append(
            f"Fetch probe (fresh mount, {raw.text('f.probe.reads')} reads each on inner chunks "
            f"not touched before): {fmt_bytes(raw.num('f.probe.mean_bytes'))} mean, "
            f"{fmt_bytes(raw.num('f.probe.max_bytes'))} max fetched per read; one 4 KiB "
            f"C-order read spans {raw.num('f.probe.chunks_per_read'):.1f} inner chunks "
            "(a 1024-element row of the last axis crosses 1024/128 = 8 inner chunks), so "
            "the max is "
            f"{raw.num('f.probe.max_bytes') / (raw.num('f.probe.chunks_per_read') * sh['inner_chunk_stored_mean']):.2f}"
            "x the stored size of the inner chunks one read spans (1.00x = only those "
            "chunks fetched; the two-inner-chunk criterion below cannot hold for a 4 KiB "
            "C-order read of this array)."
        )
    else:
        lines.append(f"Fetch probe: {probe} (the mount has no `user.zarrfs.bytes_fetched` xattr).")
    lines.append("")

    # -- hierarchy
    lines.append("## 10,000-array hierarchy (g)")
    lines.append("")
    g = lambda k: raw.num(f"g.{k}")  # noqa: E731
    fs = lambda v: "n/a" if v is None else f"{v:.3f} s"  # noqa: E731
    rows = [
        ["`zarrfs mount` (until mounted, cold)", fs(g("mount")), ""],
        ["`find -type f | wc -l` mount, first walk (cold)", fs(g("find_mount_cold")),
         f"{raw.text('g.find_mount_count')} files ({raw.text('g.array_files')} arrays, "
         "the rest hidden sidecars)"],
        ["`ls -lR` mount, first walk (cold)", fs(g("ls_mount_cold")), ""],
        ["`ls -lR` mount, warm", fs(g("ls_mount_warm")), ""],
        ["`find -type f | wc -l` mount, warm", fs(g("find_mount_warm")), ""],
        ["`find -type f | wc -l` store folder, cold", fs(g("find_store_cold")),
         f"{raw.text('g.find_store_count')} files"],
        ["`find -type f | wc -l` store folder, warm", fs(g("find_store_warm")), ""],
        ["`ls -lR` store folder, cold (reference)", fs(g("ls_store_cold")), ""],
        ["`ls -lR` store folder, warm (reference)", fs(g("ls_store_warm")), ""],
    ]
    lines += table(["operation", "time", "entries"], rows)
    lines.append("")

    # -- acceptance
    crit = []
    add = criterion_adder(crit)

    def tput(key):
        s = raw.num(key)
        return None if s is None else nbytes / s

    for key in ("zstd", "blosc", "sharded"):
        add(f"(a)/(c) cold mount / zarrfs cat, {key}", ratio(tput(f"a.{key}"), tput(f"c.{key}")),
            0.8, True)
    for key in ("zstd", "sharded"):
        add(f"(c)/(d) zarrfs cat / tensorstore read-all, {key}",
            ratio(tput(f"c.{key}"), tput(f"d.tensorstore.{key}.seconds")), 1.0, True)
    for key in ("raw", "zstd", "blosc", "sharded"):
        # Against the plain-file reads that alternated with this array's warm reads.
        plain = f"e.warm.{key}" if raw.num(f"e.warm.{key}") is not None else "e.warm"
        add(f"(b)/(e) warm mount / warm plain file, {key}",
            ratio(tput(f"b.{key}"), tput(plain)), 0.9, True)
    add("(a)/(e) uncompressed cold mount / cold plain file", ratio(tput("a.raw"), tput("e.cold")),
        0.8, True)
    add("(a) F order cold / C order cold, zstd", ratio(tput("a.zstdF"), tput("a.zstd")), 0.5, True)
    for key in ("zstd", "sharded"):
        v = raw.num(f"f.{key}.warm.p99_us")
        add(f"(f) random 4 KiB warm p99, {key} (ms)", None if v is None else v / 1000, 1.0,
            False, "{:.3f}")
    mean_inner = sh["inner_chunk_stored_mean"]
    add("(f) sharded: max store bytes per random read / mean stored inner chunk",
        ratio(raw.num("f.probe.max_bytes"), mean_inner), 2.0, False)
    add("(g) `ls -lR` mount / `find` store folder (both first walks, cold)",
        ratio(g("ls_mount_cold"), g("find_store_cold")), 2.0, False)
    hwms = [h for k in ("raw", "zstd", "blosc", "sharded", "zstdF")
            for h in raw.nums(f"h.{k}.vmhwm_kib")]
    limit = (cache_bytes + 64 * MIB) / MIB
    add(f"(h) daemon peak RSS at the end of (a), max of {len(hwms)} mounts (MiB)",
        max(hwms) / 1024 if hwms else None, limit, False, "{:.0f}")
    if any(raw.values.get(f"z.{who}.{key}") for who in ("cat", "zarrs") for key, _ in VARIANTS):
        lines += zarrs_section(raw, nbytes)
    if raw.nums("k.mount"):
        lines += refs_section(raw, add)
    if raw.nums("l.mount"):
        lines += icechunk_section(raw, add)
    if raw.nums("bb.auto.1.zstd"):
        lines += b2b_section(raw, nbytes, add, tput)
    if raw.nums("i.limit.zstd"):
        lines += io_section(raw, nbytes, add, tput)
    if raw.nums("w.mount"):
        lines += write_section(raw, nbytes, add)
    if raw.nums("sv.get.zstd"):
        lines += serve_section(raw, nbytes, add)
    if raw.nums("sc.ls10k.cold"):
        lines += scale_section(raw, add)
    if raw.num("r.meta.latency_ms") is not None:
        lines += remote_section(raw, nbytes, add, tput, cache_bytes)
    lines.append("## Acceptance")
    lines.append("")
    lines += table(["criterion", "measured", "target", "result"], crit)
    passed = sum(1 for c in crit if c[3] == "PASS")
    lines.append("")
    lines.append(f"{passed} of {len(crit)} criteria pass.")
    text = "\n".join(lines) + "\n"
    with open(sys.argv[3], "w") as fh:
        fh.write(text)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
