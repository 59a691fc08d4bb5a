"""Write the bad-input corpus: broken and hostile Zarr stores, and their manifest.

Usage (from the repository root, after `bash scripts/setup_python.sh`):

    target/venv-zarr3/bin/python scripts/make_hostile.py [OUTDIR]     # default target/hostile

Run as root: some cases are device files (mknod). OUTDIR is deleted and recreated.
Every case lives in its own folder:

    OUTDIR/<case>/store/     the store: written by zarr-python, then broken
    OUTDIR/<case>/outside/   files outside the store root (symlink targets)

Each store starts as a real store written by zarr-python 3.x (v2 and v3 layouts) or
zarr-python 2.18.7 (the 2020 draft layout and nested structured v2 types, run under
target/venv-zarr2 by this same script with `--zarr2`), holding at least one good sibling
array `good`; then one node (usually `hostile`) is broken: JSON edited, chunk files
truncated, corrupted or replaced by bombs, files replaced by FIFOs, devices, sockets,
directories or symlinks leaving the root.

OUTDIR/manifest.json: {"writer", "euid", "cases": [case, ...]}, one case per line:

    {"name", "category": "metadata"|"chunks"|"filesystem", "format": "3"|"2"|"draft",
     "store": folder relative to OUTDIR, "what": what is broken,
     "root_unusable": true when the root metadata itself is broken: `zarrfs mount` must
                      exit 1 with a message (no hang), `cat` and `inspect` exit 1,
     "good":   [{"path", "nbytes", "sha256"}]   siblings, byte-exact (zarr-python's read-back,
                                                 little-endian C order, as `zarrfs cat` prints),
     "expect": [expectation, ...],
     "listings": [{"dir", "present": {name: "file"|"dir"}, "absent": [name, ...]}]}

Expectations ("path" is the node path, "keys" substrings of which one must appear in
`cat`'s message and in the daemon log; "errnos" what a failing mount read may give,
["EIO"] unless said otherwise):

    meta     the node's metadata is unusable: listed as a file, stat works, open or read
             fails; `cat` exits 1 naming a key; `inspect` exits 0 and reports an error
             for the node naming a key.
    fail     unusable sizes (the node may be refused at its metadata or at its first
             chunk): listed as a file, open or read fails; `cat` exits 1 naming a key.
    chunk    metadata fine, chunk bytes broken: `inspect` shows the node without error;
             for fixed-size arrays the file has "nbytes" bytes, every range in "broken"
             [offset, length] fails, every range in "intact" [offset, length, sha256]
             reads byte-exact, a whole-file read fails; for variable-length arrays
             ("vlen": true) open or read fails; `cat` exits 1 naming a key.
    bytes    reads byte-exact: "nbytes", "sha256" (zarr-python's read-back).
    uniform  "nbytes" bytes of "pattern" repeated (hex; zarr-python's read-back of the first
             element or elements), and "regions" [offset, length, sha256] match
             zarr-python's read-back of those elements; memory stays bounded.
    refused  never readable: either left out of the listing, or listed with open or read
             failing; `cat` exits 1 naming a key.
    optional either not found (the reader does not go that deep), or byte-exact as in
             "bytes"; `cat` either prints the bytes or exits 1 naming the path.

Unreadable files (mode 000) are written by root, and root reads them: "euid" records
who wrote the corpus; the expectations for those cases follow from it (root: the files
read normally; anyone else: the reads fail).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import warnings
import zlib

import numpy as np

SCRIPT_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(SCRIPT_DIR)
sys.path.insert(0, SCRIPT_DIR)
from fixture_common import pin_gzip_mtime, seeded_rng, vlen_text  # noqa: E402

warnings.simplefilter("ignore")
pin_gzip_mtime()

GOOD_SHAPE, GOOD_CHUNKS = (10, 12), (4, 6)
# The array broken chunk by chunk: four chunks of 64 KiB, each a band of 16 whole rows,
# so a page-sized read touches exactly one chunk.
BAND_SHAPE, BAND_CHUNKS, BAND_BYTES = (64, 1024), (16, 1024), 16 * 1024 * 4
GIB = 1 << 30
U64_MAX = (1 << 64) - 1


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def le_bytes(a: np.ndarray) -> bytes:
    """The flat element bytes, little-endian, C order (what `zarrfs cat` prints)."""
    a = np.asarray(a)
    return np.ascontiguousarray(a.astype(a.dtype.newbyteorder("<"))).tobytes(order="C")


def good_data(name: str) -> np.ndarray:
    rng = seeded_rng("hostile", name, "good")
    return rng.integers(-(2**31), 2**31 - 1, size=GOOD_SHAPE, dtype="<i4")


def band_data(name: str) -> np.ndarray:
    rng = seeded_rng("hostile", name, "band")
    return rng.integers(0, 2**32 - 1, size=BAND_SHAPE, dtype="<u4")


# --- zarr-python 2.18.7 side (draft layout, nested structured v2) ------------------

def zarr2_main(spec_path: str) -> None:
    """Run under target/venv-zarr2: write the arrays a JSON spec lists, and save each
    one's read-back bytes (little-endian C order) beside the spec."""
    import numcodecs
    import zarr
    from zarr._storage.v3 import DirectoryStoreV3

    with open(spec_path) as f:
        spec = json.load(f)
    draft = spec["format"] == "draft"
    store = DirectoryStoreV3(spec["dir"]) if draft else zarr.DirectoryStore(spec["dir"])
    version = 3 if draft else 2
    zarr.open_group(store=store, mode="w", zarr_version=version)
    out = {}
    for a in spec["arrays"]:
        dtype = np.dtype(json_to_descr(a["dtype"]))
        compressor = numcodecs.Zstd(level=1) if a.get("zstd") else None
        z = zarr.create(store=store, path=a["path"], shape=a["shape"], chunks=a["chunks"], dtype=dtype,
                        compressor=compressor, fill_value=a.get("fill_value", 0), zarr_version=version)
        data = np.asarray(a["data"], dtype="<i8") if "data" in a else None
        if a["kind"] == "good":
            z[...] = good_data(a["name"])
        elif a["kind"] == "band":
            z[...] = band_data(a["name"])
        elif a["kind"] == "struct":
            z[...] = np.frombuffer(bytes(range(256)) * (z.size * dtype.itemsize // 256 + 1),
                                   dtype="u1")[: z.size * dtype.itemsize].view(dtype).reshape(z.shape)
        elif data is not None:
            z[...] = data
        back = z[...]
        path = os.path.join(os.path.dirname(spec_path), a["path"].replace("/", "_") + ".bin")
        with open(path, "wb") as f:
            f.write(le_bytes(back))
        out[a["path"]] = path
    with open(spec_path + ".out", "w") as f:
        json.dump(out, f)


def json_to_descr(d):
    """A numpy dtype description from JSON (lists back to tuples for structured types)."""
    if isinstance(d, str):
        return d
    return [tuple(json_to_descr(x) if isinstance(x, list) else x for x in field) for field in d]


def run_zarr2(case: "Case", fmt: str, arrays: list) -> dict:
    """Write arrays with zarr-python 2.18.7; {path: read-back bytes}."""
    python = os.path.join(REPO_ROOT, "target", "venv-zarr2", "bin", "python")
    spec_path = os.path.join(case.dir, "zarr2-spec.json")
    with open(spec_path, "w") as f:
        json.dump({"format": fmt, "dir": case.store, "arrays": arrays}, f)
    env = dict(os.environ, ZARR_V3_EXPERIMENTAL_API="1", ZARR_V3_SHARDING="1")
    subprocess.run([python, os.path.abspath(__file__), "--zarr2", spec_path], check=True, env=env)
    with open(spec_path + ".out") as f:
        files = json.load(f)
    out = {}
    for path, file in files.items():
        with open(file, "rb") as f:
            out[path] = f.read()
        os.remove(file)
    os.remove(spec_path)
    os.remove(spec_path + ".out")
    return out


# --- cases -------------------------------------------------------------------------

class Case:
    def __init__(self, outdir: str, name: str, category: str, fmt: str, what: str):
        self.name, self.category, self.fmt, self.what = name, category, fmt, what
        self.dir = os.path.join(outdir, name)
        self.store = os.path.join(self.dir, "store")
        self.outside = os.path.join(self.dir, "outside")
        os.makedirs(self.store)
        os.makedirs(self.outside)
        self.good: list = []
        self.expect: list = []
        self.listings: list = []
        self.root_unusable = False

    # --- paths
    def p(self, *parts: str) -> str:
        return os.path.join(self.store, *parts)

    def meta_key(self, path: str) -> str:
        if self.fmt == "3":
            return f"{path}/zarr.json" if path else "zarr.json"
        if self.fmt == "2":
            return f"{path}/.zarray" if path else ".zarray"
        return f"meta/root/{path}.array.json"

    def chunk_key(self, path: str, *index: int) -> str:
        if self.fmt == "3":
            return f"{path}/c/" + "/".join(map(str, index))
        if self.fmt == "2":
            return f"{path}/" + ".".join(map(str, index))
        return f"data/root/{path}/c" + "/".join(map(str, index))

    # --- expectations
    def add_good(self, path: str, raw: bytes) -> None:
        self.good.append({"path": path, "nbytes": len(raw), "sha256": sha256(raw)})

    def meta(self, path: str, *keys: str) -> None:
        self.expect.append({"path": path, "kind": "meta", "keys": list(keys or [self.meta_key(path)])})

    def fail(self, path: str, *keys: str, errnos=("EIO",)) -> None:
        self.expect.append({"path": path, "kind": "fail", "keys": list(keys or [path + "/"]),
                            "errnos": list(errnos)})

    def refused(self, path: str, *keys: str) -> None:
        self.expect.append({"path": path, "kind": "refused", "keys": list(keys or [path])})

    def chunk_broken(self, path: str, raw: bytes, key: str, broken: list, intact: list,
                     errnos=("EIO",)) -> None:
        self.expect.append({
            "path": path, "kind": "chunk", "keys": [key], "vlen": False, "nbytes": len(raw),
            "broken": [[o, n] for o, n in broken],
            "intact": [[o, n, sha256(raw[o:o + n])] for o, n in intact], "errnos": list(errnos)})

    def band_broken(self, path: str, raw: bytes, key: str, bad_band: int = 1) -> None:
        """Band `bad_band` broken; the first and last 4 KiB of the others intact."""
        intact = []
        for band in range(len(raw) // BAND_BYTES):
            if band == bad_band:
                continue
            start = band * BAND_BYTES
            intact += [(start, 4096), (start + BAND_BYTES - 4096, 4096)]
        self.chunk_broken(path, raw, key, [(bad_band * BAND_BYTES + 8192, 4096)], intact)

    def vlen_broken(self, path: str, key: str) -> None:
        self.expect.append({"path": path, "kind": "chunk", "keys": [key], "vlen": True, "errnos": ["EIO"]})

    def bytes_ok(self, path: str, raw: bytes) -> None:
        self.expect.append({"path": path, "kind": "bytes", "nbytes": len(raw), "sha256": sha256(raw)})

    def optional(self, path: str, raw: bytes) -> None:
        self.expect.append({"path": path, "kind": "optional", "nbytes": len(raw), "sha256": sha256(raw),
                            "keys": [path]})

    def uniform(self, path: str, nbytes: int, pattern: bytes, regions: list) -> None:
        assert nbytes % len(pattern) == 0
        self.expect.append({"path": path, "kind": "uniform", "nbytes": nbytes, "pattern": pattern.hex(),
                            "regions": [[o, len(b), sha256(b)] for o, b in regions]})

    def listing(self, dir: str, present: dict | None = None, absent: list | None = None) -> None:
        self.listings.append({"dir": dir, "present": present or {}, "absent": absent or []})

    def manifest_entry(self, outdir: str) -> dict:
        listings = list(self.listings)
        if not self.root_unusable:
            # Every sibling and every node expected to show up is listed by its parent.
            shown = [(g["path"], "file") for g in self.good]
            shown += [(e["path"], "file") for e in self.expect if e["kind"] not in ("refused", "optional")]
            for path, kind in shown:
                parent, _, name = path.rpartition("/")
                entry = next((li for li in listings if li["dir"] == parent), None)
                if entry is None:
                    entry = {"dir": parent, "present": {}, "absent": []}
                    listings.append(entry)
                entry["present"].setdefault(name, kind)
        return {"name": self.name, "category": self.category, "format": self.fmt,
                "store": os.path.relpath(self.store, outdir), "what": self.what,
                "root_unusable": self.root_unusable, "good": self.good, "expect": self.expect,
                "listings": listings}


CASES: list = []


def case(category: str, fmt: str, what: str):
    def register(fn):
        CASES.append((fn.__name__, category, fmt, what, fn))
        return fn
    return register


# --- zarr-python 3 writers ---------------------------------------------------------

def zarr3():
    import zarr
    return zarr


def zstd_compressors(fmt: int):
    """zstd level 1 as zarr-python 3 takes it for format `fmt` (3 or 2)."""
    if fmt == 3:
        from zarr.codecs import ZstdCodec
        return [ZstdCodec(level=1)]
    import numcodecs
    return numcodecs.Zstd(level=1)


def new_store(c: Case) -> None:
    """Root group and the good sibling."""
    zarr = zarr3()
    fmt = int(c.fmt)
    zarr.create_group(c.store, zarr_format=fmt)
    a = zarr.create_array(c.store, name="good", shape=GOOD_SHAPE, chunks=GOOD_CHUNKS, dtype="<i4",
                          fill_value=7, zarr_format=fmt, compressors=zstd_compressors(fmt))
    # The last row of chunks stays unwritten: it reads as the fill value.
    a[0:8, :] = good_data(c.name)[0:8, :]
    c.add_good("good", le_bytes(zarr.open_array(c.store, path="good", mode="r")[...]))


def small_array(c: Case, path: str = "hostile", **kw) -> np.ndarray:
    """A small int32 array, zstd-compressed unless told otherwise; its read-back."""
    zarr = zarr3()
    fmt = int(c.fmt)
    if "compressors" not in kw:
        kw["compressors"] = zstd_compressors(fmt)
    kw.setdefault("dtype", "<i4")
    a = zarr.create_array(c.store, name=path, shape=GOOD_SHAPE, chunks=GOOD_CHUNKS, zarr_format=fmt, **kw)
    a[...] = np.arange(120).reshape(GOOD_SHAPE).astype(kw["dtype"])
    return zarr.open_array(c.store, path=path, mode="r")[...]


def band_array(c: Case, path: str = "hostile", shape=BAND_SHAPE, chunks=BAND_CHUNKS, **kw) -> bytes:
    """The 64 x 1024 uint32 array of 64 KiB bands; its read-back bytes."""
    zarr = zarr3()
    a = zarr.create_array(c.store, name=path, shape=shape, chunks=chunks, dtype="<u4",
                          zarr_format=int(c.fmt), **kw)
    data = band_data(c.name)
    if shape != BAND_SHAPE:
        data = np.concatenate([data, band_data(c.name + "/2")])
    a[...] = data
    return le_bytes(zarr.open_array(c.store, path=path, mode="r")[...])


def vlen_array(c: Case, kind: str = "text", path: str = "hostile") -> None:
    """64 variable-length elements in two uncompressed chunks of 32."""
    zarr = zarr3()
    from zarr.dtype import VariableLengthBytes, VariableLengthUTF8
    fmt = int(c.fmt)
    if kind == "text":
        values = np.array([f"value {i} é漢" for i in range(64)], dtype=object)
        dtype = VariableLengthUTF8() if fmt == 3 else str
    else:
        values = np.array([bytes([i]) * (i % 7) for i in range(64)], dtype=object)
        dtype = VariableLengthBytes()
    a = zarr.create_array(c.store, name=path, shape=(64,), chunks=(32,), dtype=dtype, compressors=None,
                          zarr_format=fmt)
    a[...] = values
    back = zarr.open_array(c.store, path=path, mode="r")[...]
    assert list(back) == list(values)


# --- editing helpers -----------------------------------------------------------------

def read_json(path: str):
    with open(path) as f:
        return json.load(f)


def write_json(path: str, doc) -> None:
    with open(path, "w") as f:
        json.dump(doc, f, indent=2)


def edit_json(path: str, fn) -> None:
    doc = read_json(path)
    out = fn(doc)
    write_json(path, doc if out is None else out)


def write_text(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def write_bytes(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)


def read_bytes(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def replace(path: str) -> None:
    """Remove a file or folder so that something else can take its place."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    else:
        os.remove(path)


def set_path(doc: dict, dotted: str, value) -> None:
    keys = dotted.split(".")
    for k in keys[:-1]:
        doc = doc[k]
    doc[keys[-1]] = value


def meta_edit(c: Case, path: str, **changes) -> None:
    """Set metadata members (dotted names reach into nested objects)."""
    edit_json(c.p(c.meta_key(path)), setter(**changes))


# --- compressed-stream builders ------------------------------------------------------

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def zstd_block(last: bool, btype: int, size: int) -> bytes:
    header = int(last) | (btype << 1) | (size << 3)
    return header.to_bytes(3, "little")


def zstd_rle_frame(total: int, content_size: int | None) -> bytes:
    """A valid zstd frame of `total` zero bytes as RLE blocks of 128 KiB (4 bytes per
    block): a decompression bomb. `content_size` goes into the header when given."""
    block = 128 << 10
    if content_size is None:
        frame = ZSTD_MAGIC + bytes([0x00, (7 << 3)])  # no FCS; window 2^17
    else:
        frame = ZSTD_MAGIC + bytes([0xC0, (7 << 3)]) + content_size.to_bytes(8, "little")
    parts = [frame]
    remaining = total
    while remaining > 0:
        n = min(block, remaining)
        remaining -= n
        parts.append(zstd_block(remaining == 0, 1, n) + b"\x00")
    return b"".join(parts)


def zstd_lying_frame(claimed: int, payload: bytes) -> bytes:
    """A zstd frame whose header claims `claimed` bytes but holds one raw block."""
    return (ZSTD_MAGIC + bytes([0xC0, (7 << 3)]) + claimed.to_bytes(8, "little")
            + zstd_block(True, 0, len(payload)) + payload)


def check_zstd_builders() -> None:
    import numcodecs
    z = numcodecs.Zstd()
    assert z.decode(zstd_rle_frame(300 << 10, 300 << 10)) == bytes(300 << 10)
    assert z.decode(zstd_rle_frame(300 << 10, None)) == bytes(300 << 10)


def deflate_bomb(total: int, wbits: int) -> bytes:
    """`total` zero bytes through zlib (wbits 31: gzip, 15: zlib), streamed."""
    co = zlib.compressobj(9, zlib.DEFLATED, wbits)
    block = bytes(8 << 20)
    parts = []
    for _ in range(total // len(block)):
        parts.append(co.compress(block))
    parts.append(co.flush())
    return b"".join(parts)


def blosc_header(nbytes: int, blocksize: int, cbytes: int, flags: int = 0x02, typesize: int = 4) -> bytes:
    """A blosc 1 header: version 2, versionlz 1, flags (0x02: memcpyed), typesize, sizes."""
    return bytes([2, 1, flags, typesize]) + struct.pack("<III", nbytes, blocksize, cbytes)


# ================================ metadata ==========================================

def edited_meta_case(meta_file: str, doc_fn=None, text: str | None = None, kind: str = "meta", keys=(),
                     errnos=("EIO",), **arr):
    """Good sibling plus `hostile` (a small array, `arr` passed on) whose metadata file
    `meta_file` is edited by `doc_fn` (or replaced by `text`)."""
    def run(c: Case):
        new_store(c)
        small_array(c, **arr)
        path = c.p("hostile", meta_file)
        if text is not None:
            write_text(path, text)
        else:
            edit_json(path, doc_fn)
        if kind == "meta":
            c.meta("hostile", *keys)
        else:
            c.fail("hostile", *keys, errnos=errnos)
    return run


def v3_meta_case(**kw):
    """A v3 case: `hostile/zarr.json` edited (see `edited_meta_case`)."""
    return edited_meta_case("zarr.json", **kw)


def v2_meta_case(**kw):
    """A v2 case: `hostile/.zarray` edited (see `edited_meta_case`)."""
    return edited_meta_case(".zarray", **kw)


def setter(**changes):
    def fn(doc):
        for k, v in changes.items():
            set_path(doc, k.replace("__", "."), v)
    return fn


def deleter(*names):
    def fn(doc):
        for n in names:
            del doc[n]
    return fn


def codec_setter(codecs):
    return setter(codecs=codecs)


def nested_struct_v2(depth: int) -> list:
    dt = "<i4"
    for _ in range(depth):
        dt = [["f", dt]]
    return dt


META_V3 = [
    ("m3_invalid_json", "hostile/zarr.json is cut off mid-document",
     dict(text='{"shape": [10, 12], "data_type": "int')),
    ("m3_json_list", "hostile/zarr.json holds a JSON list", dict(text="[1, 2, 3]")),
    ("m3_json_number", "hostile/zarr.json holds a JSON number", dict(text="42")),
    ("m3_json_string", "hostile/zarr.json holds a JSON string", dict(text='"zarr"')),
    ("m3_json_null", "hostile/zarr.json holds null", dict(text="null")),
    ("m3_binary_garbage", "hostile/zarr.json is binary garbage", dict(text="\u0000\u00ff\u00fe{[" * 100)),
    ("m3_missing_shape", "no shape", dict(doc_fn=deleter("shape"))),
    ("m3_missing_chunk_grid", "no chunk_grid", dict(doc_fn=deleter("chunk_grid"))),
    ("m3_missing_data_type", "no data_type", dict(doc_fn=deleter("data_type"))),
    ("m3_missing_codecs", "no codecs", dict(doc_fn=deleter("codecs"))),
    ("m3_node_type_unknown", "node_type 'table'", dict(doc_fn=setter(node_type="table"))),
    ("m3_negative_shape", "shape [-5, 12]", dict(doc_fn=setter(shape=[-5, 12]))),
    ("m3_float_shape", "shape [10.5, 12]", dict(doc_fn=setter(shape=[10.5, 12]))),
    ("m3_shape_2pow64", "shape [2^64, 12]: past u64", dict(doc_fn=setter(shape=[1 << 64, 12]))),
    ("m3_shape_string", "shape as a string", dict(doc_fn=setter(shape="10,12"))),
    ("m3_rank_mismatch", "shape of rank 2, chunk_shape of rank 3",
     dict(doc_fn=setter(chunk_grid__configuration__chunk_shape=[4, 6, 2]))),
    ("m3_zero_chunk", "chunk_shape [0, 6]", dict(doc_fn=setter(chunk_grid__configuration__chunk_shape=[0, 6]))),
    ("m3_negative_chunk", "chunk_shape [-4, 6]", dict(doc_fn=setter(chunk_grid__configuration__chunk_shape=[-4, 6]))),
    ("m3_shape_product_overflow", "shape [2^40, 2^40, 2^40]: the element count overflows 2^64",
     dict(doc_fn=setter(shape=[1 << 40] * 3, chunk_grid__configuration__chunk_shape=[1 << 20] * 3))),
    ("m3_file_size_overflow", "shape [2^62, 8] of int32: the byte size overflows 2^64",
     dict(doc_fn=setter(shape=[1 << 62, 8], chunk_grid__configuration__chunk_shape=[1 << 20, 8]))),
    ("m3_chunk_grid_unknown", "chunk_grid 'rectangular-ish'",
     dict(doc_fn=setter(chunk_grid={"name": "spiral", "configuration": {"chunk_shape": [4, 6]}}))),
    ("m3_r_2pow64_bits", "data_type r18446744073709551616: element size past u64",
     dict(doc_fn=setter(data_type="r18446744073709551616"))),
    ("m3_r_zero_bits", "data_type r0", dict(doc_fn=setter(data_type="r0"))),
    ("m3_r_odd_bits", "data_type r7 (not whole bytes)", dict(doc_fn=setter(data_type="r7"))),
    ("m3_r_max_bits", "data_type r18446744073709551608 (2^61 bytes per element): 120 elements overflow",
     dict(doc_fn=setter(data_type="r18446744073709551608", fill_value=[0]))),
    ("m3_null_terminated_overflow", "null_terminated_bytes of 9e18 bytes: 120 elements overflow u64",
     dict(doc_fn=setter(data_type={"name": "null_terminated_bytes",
                                   "configuration": {"length_bytes": 9_000_000_000_000_000_000}}, fill_value=""))),
    ("m3_struct_field_overflow", "structured type with two fields of 2^60 bytes each, 120 elements",
     dict(doc_fn=setter(data_type={"name": "structured", "configuration": {"fields": [
         ["a", "r9223372036854775800"], ["b", "r9223372036854775800"]]}}, fill_value="AAAA"))),
    ("m3_fill_string_for_int", "int32 with fill_value 'seven'", dict(doc_fn=setter(fill_value="seven"))),
    ("m3_fill_list_for_int", "int32 with fill_value [1, 2]", dict(doc_fn=setter(fill_value=[1, 2]))),
    ("m3_fill_out_of_range", "int32 with fill_value 2^40", dict(doc_fn=setter(fill_value=1 << 40))),
    ("m3_fill_object", "int32 with fill_value {}", dict(doc_fn=setter(fill_value={}))),
    ("m3_fill_hex_short", "int32 with fill_value 0x7f (one byte)", dict(doc_fn=setter(fill_value="0x7f"))),
    ("m3_unknown_codec", "a bytes->bytes codec nobody knows",
     dict(doc_fn=codec_setter([{"name": "bytes", "configuration": {"endian": "little"}},
                               {"name": "no.such.codec", "configuration": {}}]))),
    ("m3_codec_not_object", "codecs list holding a number", dict(doc_fn=codec_setter([42]))),
    ("m3_no_array_to_bytes", "codecs with no array->bytes codec",
     dict(doc_fn=codec_setter([{"name": "zstd", "configuration": {"level": 1}}]))),
    ("m3_two_array_to_bytes", "codecs with two array->bytes codecs",
     dict(doc_fn=codec_setter([{"name": "bytes", "configuration": {"endian": "little"}},
                               {"name": "bytes", "configuration": {"endian": "little"}}]))),
    ("m3_bytes_endian_invalid", "bytes codec with endian 'middle'",
     dict(doc_fn=codec_setter([{"name": "bytes", "configuration": {"endian": "middle"}},
                               {"name": "zstd", "configuration": {"level": 1}}]))),
    ("m3_bytes_swap_units_overflow", "bytes codec with swap unit [u64 max, 2] (offset + length overflows)",
     dict(doc_fn=codec_setter([{"name": "bytes", "configuration": {"swap_units": [[U64_MAX, 2]]}}]))),
    ("m3_transpose_out_of_range", "transpose order [0, 5]",
     dict(doc_fn=codec_setter([{"name": "transpose", "configuration": {"order": [0, 5]}},
                               {"name": "bytes", "configuration": {"endian": "little"}}]))),
    ("m3_transpose_duplicate", "transpose order [1, 1]",
     dict(doc_fn=codec_setter([{"name": "transpose", "configuration": {"order": [1, 1]}},
                               {"name": "bytes", "configuration": {"endian": "little"}}]))),
    ("m3_transpose_wrong_rank", "transpose order [0, 1, 2] for a 2-d array",
     dict(doc_fn=codec_setter([{"name": "transpose", "configuration": {"order": [0, 1, 2]}},
                               {"name": "bytes", "configuration": {"endian": "little"}}]))),
    ("m3_transpose_huge", "transpose order [u64 max, 0]",
     dict(doc_fn=codec_setter([{"name": "transpose", "configuration": {"order": [U64_MAX, 0]}},
                               {"name": "bytes", "configuration": {"endian": "little"}}]))),
    ("m3_sharding_not_dividing", "sharding inner chunk_shape [3, 4] in shards of [4, 6]",
     dict(doc_fn=codec_setter([{"name": "sharding_indexed", "configuration": {
         "chunk_shape": [3, 4], "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
         "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}], "index_location": "end"}}]))),
    ("m3_sharding_zero_inner", "sharding inner chunk_shape [0, 6]",
     dict(doc_fn=codec_setter([{"name": "sharding_indexed", "configuration": {
         "chunk_shape": [0, 6], "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
         "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}], "index_location": "end"}}]))),
    ("m3_sharding_index_codecs_nonsense", "sharding index_codecs [zstd] (no array->bytes codec)",
     dict(doc_fn=codec_setter([{"name": "sharding_indexed", "configuration": {
         "chunk_shape": [2, 3], "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
         "index_codecs": [{"name": "zstd", "configuration": {"level": 1}}], "index_location": "end"}}]))),
    ("m3_sharding_index_codecs_transpose", "sharding index_codecs with transpose order [7, 7, 7]",
     dict(doc_fn=codec_setter([{"name": "sharding_indexed", "configuration": {
         "chunk_shape": [2, 3], "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
         "index_codecs": [{"name": "transpose", "configuration": {"order": [7, 7, 7]}},
                          {"name": "bytes", "configuration": {"endian": "little"}}],
         "index_location": "middle"}}]))),
    ("m3_key_encoding_unknown", "chunk_key_encoding 'scrambled'",
     dict(doc_fn=setter(chunk_key_encoding={"name": "scrambled", "configuration": {}}))),
    ("m3_key_separator_invalid", "chunk_key_encoding separator '-'",
     dict(doc_fn=setter(chunk_key_encoding={"name": "default", "configuration": {"separator": "-"}}))),
]

# Sizes that may be refused at the metadata or at the first chunk: "fail" expectations.
FAIL_V3 = [
    ("m3_r_8e9_bits", "data_type r8000000000 (1 GB per element)",
     dict(doc_fn=setter(data_type="r8000000000", fill_value=[0]))),
    ("m3_raw_bytes_billions", "raw_bytes of 3,000,000,000 bytes per element",
     dict(doc_fn=setter(data_type={"name": "raw_bytes", "configuration": {"length_bytes": 3_000_000_000}},
                        fill_value=[0]))),
    ("m3_fixed_utf32_billions", "fixed_length_utf32 of 4,000,000,000 bytes per element",
     dict(doc_fn=setter(data_type={"name": "fixed_length_utf32", "configuration": {"length_bytes": 4_000_000_000}},
                        fill_value=""))),
    ("m3_null_terminated_billions", "null_terminated_bytes of 5,000,000,000 bytes per element",
     dict(doc_fn=setter(data_type={"name": "null_terminated_bytes", "configuration": {"length_bytes": 5_000_000_000}},
                        fill_value=""))),
    ("m3_chunk_huge_present", "chunk_shape [2^30, 2^30] (2^62 bytes) with chunk c/0/0 present",
     dict(doc_fn=setter(chunk_grid__configuration__chunk_shape=[1 << 30, 1 << 30]), errnos=("EIO", "ENOMEM"))),
    ("m3_sharding_many_inner", "shards of [2^31, 2^31] inner chunks of [1, 1]: an index of 2^62 entries",
     dict(doc_fn=setter(
         chunk_grid__configuration__chunk_shape=[1 << 31, 1 << 31],
         codecs=[{"name": "sharding_indexed", "configuration": {
             "chunk_shape": [1, 1], "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
             "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
             "index_location": "end"}}]), errnos=("EIO", "ENOMEM"))),
    ("m3_fixedscaleoffset_huge_dtype", "numcodecs.fixedscaleoffset with dtype |V3000000000 and astype >U1000000000",
     dict(doc_fn=codec_setter([{"name": "numcodecs.fixedscaleoffset", "configuration": {
         "dtype": "|V3000000000", "astype": ">U1000000000", "scale": 1, "offset": 0}},
         {"name": "bytes", "configuration": {"endian": "little"}}]))),
    ("m3_astype_huge_dtype", "numcodecs.astype encoding as >U1000000000",
     dict(doc_fn=codec_setter([{"name": "numcodecs.astype", "configuration": {
         "encode_dtype": ">U1000000000", "decode_dtype": "<i4"}},
         {"name": "bytes", "configuration": {"endian": "little"}}]))),
    ("m3_key_separator_escape", "chunk_key_encoding separator '/../../' (keys leave the root)",
     dict(doc_fn=setter(chunk_key_encoding={"name": "default", "configuration": {"separator": "/../../"}}))),
]


def register_table(table, fmt, kind, runner):
    for name, what, kw in table:
        kw = dict(kw)
        errnos = kw.pop("errnos", ("EIO",))
        CASES.append((name, "metadata", fmt, what,
                      runner(kind=kind, errnos=errnos, **kw)))


register_table(META_V3, "3", "meta", v3_meta_case)
register_table(FAIL_V3, "3", "fail", v3_meta_case)


def struct_deep(c: Case, meta_file: str, leaf: str, opening: str, closing: str) -> None:
    """`hostile`'s data type `leaf` (a JSON string) wrapped 5,000 times in `opening` ...
    `closing`: a structured type nested 5,000 deep."""
    new_store(c)
    small_array(c)
    text = json.dumps(read_json(c.p("hostile", meta_file)))
    deep = opening * 5000 + leaf + closing * 5000
    write_text(c.p("hostile", meta_file), text.replace(leaf, deep, 1))
    c.meta("hostile")


@case("metadata", "3", "a structured data type nested 5,000 deep")
def m3_struct_deep(c: Case):
    struct_deep(c, "zarr.json", '"int32"', '{"name": "structured", "configuration": {"fields": [["f", ', "]]}}")


@case("metadata", "3", "shape [2^63 - 1] of uint8 with chunks [2^20], all missing: the file is 2^63 - 1 "
      "bytes of fill value")
def m3_shape_i63_missing(c: Case):
    new_store(c)
    zarr = zarr3()
    zarr.create_array(c.store, name="hostile", shape=((1 << 63) - 1,), chunks=(1 << 20,), dtype="uint8",
                      fill_value=0xA5, compressors=None)
    a = zarr.open_array(c.store, path="hostile", mode="r")
    n = (1 << 63) - 1
    c.uniform("hostile", n, le_bytes(a[0:1]),
              [(0, le_bytes(a[0:4096])), (n - 4096, le_bytes(a[n - 4096:n])),
               (1 << 62, le_bytes(a[1 << 62:(1 << 62) + 4096]))])


@case("metadata", "3", "chunk_shape [2^30, 2^30] on a 10 x 12 array, chunks missing: reads as the fill value")
def m3_chunk_huge_missing(c: Case):
    new_store(c)
    zarr = zarr3()
    zarr.create_array(c.store, name="hostile", shape=GOOD_SHAPE, chunks=GOOD_CHUNKS, dtype="<i4", fill_value=3)
    meta_edit(c, "hostile", chunk_grid__configuration__chunk_shape=[1 << 30, 1 << 30])
    c.bytes_ok("hostile", le_bytes(zarr.open_array(c.store, path="hostile", mode="r")[...]))


@case("metadata", "3", "chunk_shape [2^31] of float32 (an 8 GiB chunk) with its chunk present: a zstd frame of 1 MiB")
def m3_chunk_8gib_present(c: Case):
    new_store(c)
    zarr = zarr3()
    from zarr.codecs import ZstdCodec
    zarr.create_array(c.store, name="hostile", shape=(1 << 31,), chunks=(1 << 31,), dtype="<f4",
                      compressors=[ZstdCodec(level=1)])
    import numcodecs
    os.makedirs(c.p("hostile", "c"))
    write_bytes(c.p("hostile", "c", "0"), numcodecs.Zstd(level=1).encode(bytes(1 << 20)))
    c.fail("hostile", "hostile/", errnos=("EIO", "ENOMEM"))


@case("metadata", "3", "blosc-compressed array whose blosc typesize is patched to 2^40 and blocksize to 2^63: "
      "expected as zarr-python reads it (blosc decodes from its own header)")
def m3_blosc_typesize_huge(c: Case):
    zarr = zarr3()
    from zarr.codecs import BloscCodec
    new_store(c)
    small_array(c, compressors=[BloscCodec(cname="zstd", clevel=5, shuffle="shuffle")])

    def fn(doc):
        doc["codecs"][-1]["configuration"].update(typesize=1 << 40, blocksize=1 << 63)
    edit_json(c.p("hostile", "zarr.json"), fn)
    try:
        expected = le_bytes(zarr.open_array(c.store, path="hostile", mode="r")[...])
    except Exception:  # zarr-python refuses it: so must zarrfs
        c.meta("hostile")
    else:
        c.bytes_ok("hostile", expected)


@case("metadata", "3", "root zarr.json is invalid JSON")
def m3_root_invalid_json(c: Case):
    new_store(c)
    write_text(c.p("zarr.json"), '{"zarr_format": 3, "node_type": "gro')
    c.root_unusable = True


@case("metadata", "3", "root zarr.json holds a JSON list")
def m3_root_json_list(c: Case):
    new_store(c)
    write_text(c.p("zarr.json"), "[3]")
    c.root_unusable = True


def deep_chain(c: Case, explicit: bool) -> tuple:
    """An array at the end of a chain of 500 group folders; (its path, its read-back)."""
    zarr = zarr3()
    new_store(c)
    path = "/".join(["d"] * 500 + ["leaf"])
    a = zarr.create_array(c.store, name=path, shape=(3, 4), chunks=(2, 2), dtype="<i2")
    a[...] = np.arange(12).reshape(3, 4)
    raw = le_bytes(zarr.open_array(c.store, path=path, mode="r")[...])
    if not explicit:
        folder = c.store
        for _ in range(500):
            folder = os.path.join(folder, "d")
            os.remove(os.path.join(folder, "zarr.json"))
    return path, raw


@case("metadata", "3", "an array under a chain of 500 explicit groups (zarr-python writes each one): lists "
      "and reads byte-exact")
def m3_deep_explicit(c: Case):
    path, raw = deep_chain(c, explicit=True)
    c.bytes_ok(path, raw)
    c.listing("", present={"d": "dir"})


@case("metadata", "3", "an array under a chain of 500 implicit groups (folders without metadata): how deep "
      "implicit groups are discovered is the reader's choice, but what it shows must read right")
def m3_deep_implicit(c: Case):
    path, raw = deep_chain(c, explicit=False)
    c.optional(path, raw)


# --- v2 metadata

META_V2 = [
    ("m2_invalid_json", "hostile/.zarray cut off", dict(text='{"shape": [10, 12], "chunks": [4')),
    ("m2_json_list", "hostile/.zarray holds a list", dict(text="[]")),
    ("m2_missing_dtype", "no dtype", dict(doc_fn=deleter("dtype"))),
    ("m2_missing_chunks", "no chunks", dict(doc_fn=deleter("chunks"))),
    ("m2_negative_shape", "shape [-1, 12]", dict(doc_fn=setter(shape=[-1, 12]))),
    ("m2_float_chunks", "chunks [4.5, 6]", dict(doc_fn=setter(chunks=[4.5, 6]))),
    ("m2_zero_chunk", "chunks [4, 0]", dict(doc_fn=setter(chunks=[4, 0]))),
    ("m2_rank_mismatch", "shape rank 2, chunks rank 1", dict(doc_fn=setter(chunks=[4]))),
    ("m2_shape_product_overflow", "shape [2^33, 2^33, 2^33]",
     dict(doc_fn=setter(shape=[1 << 33] * 3, chunks=[1 << 10] * 3))),
    ("m2_dtype_garbage", "dtype '<q9'", dict(doc_fn=setter(dtype="<q9"))),
    ("m2_struct_subarray_overflow", "structured dtype with a subarray field of shape [2^31, 2^31] float64",
     dict(doc_fn=setter(dtype=[["a", "<f8", [1 << 31, 1 << 31]]], fill_value=None))),
    ("m2_struct_subarray_u64", "structured dtype with a subarray field of shape [u64 max]",
     dict(doc_fn=setter(dtype=[["a", "<i4"], ["b", "<i2", [U64_MAX]]], fill_value=None))),
    ("m2_fill_base64_wrong_size", "|V8 with a 3-byte base64 fill value",
     dict(doc_fn=setter(dtype="|V8", fill_value=base64.b64encode(b"abc").decode()))),
    ("m2_fill_string_for_int", "<i4 with fill_value 'abc'", dict(doc_fn=setter(fill_value="abc"))),
    ("m2_fill_bool_for_float", "<i4 with fill_value [true]", dict(doc_fn=setter(fill_value=[True]))),
    ("m2_compressor_unknown", "compressor id 'nosuch'", dict(doc_fn=setter(compressor={"id": "nosuch"}))),
    ("m2_compressor_not_object", "compressor 'zstd' as a string", dict(doc_fn=setter(compressor="zstd"))),
    ("m2_filters_not_list", "filters 5", dict(doc_fn=setter(filters=5))),
    ("m2_order_invalid", "order 'Z'", dict(doc_fn=setter(order="Z"))),
    ("m2_separator_invalid", "dimension_separator '-'", dict(doc_fn=setter(dimension_separator="-"))),
]

FAIL_V2 = [
    ("m2_V3000000000", "dtype |V3000000000", dict(doc_fn=setter(dtype="|V3000000000", fill_value=None))),
    ("m2_S3000000000", "dtype |S3000000000", dict(doc_fn=setter(dtype="|S3000000000", fill_value=None))),
    ("m2_U1000000000", "dtype <U1000000000", dict(doc_fn=setter(dtype="<U1000000000", fill_value=None))),
    ("m2_bigU1000000000", "dtype >U1000000000 (big-endian: the byte swap of 4e9-byte elements)",
     dict(doc_fn=setter(dtype=">U1000000000", fill_value=None))),
    ("m2_fixedscaleoffset_huge", "fixedscaleoffset filter with astype >U1000000000",
     dict(doc_fn=setter(filters=[{"id": "fixedscaleoffset", "dtype": "<i4", "astype": ">U1000000000",
                                  "scale": 1, "offset": 0}]))),
    ("m2_delta_huge", "delta filter with dtype |S3000000000",
     dict(doc_fn=setter(filters=[{"id": "delta", "dtype": "|S3000000000"}]))),
    ("m2_astype_huge", "astype filter encoding as >U1000000000",
     dict(doc_fn=setter(filters=[{"id": "astype", "encode_dtype": ">U1000000000", "decode_dtype": "<i4"}]))),
    ("m2_separator_escape", "dimension_separator '/../../' (keys leave the root)",
     dict(doc_fn=setter(dimension_separator="/../../"))),
]

register_table(META_V2, "2", "meta", v2_meta_case)
register_table(FAIL_V2, "2", "fail", v2_meta_case)


@case("metadata", "2", "a structured dtype nested 5,000 deep")
def m2_struct_deep(c: Case):
    struct_deep(c, ".zarray", '"<i4"', '[["f", ', "]]")


@case("metadata", "2", "root .zgroup is invalid JSON")
def m2_root_invalid_json(c: Case):
    new_store(c)
    write_text(c.p(".zgroup"), '{"zarr_format": ')
    c.root_unusable = True


@case("metadata", "2", "a structured dtype nested 40 deep, written by zarr-python 2.18.7: reads byte-exact")
def m2_struct_nested_40(c: Case):
    dt = nested_struct_v2(40)
    out = run_zarr2(c, "2", [
        {"name": c.name, "path": "good", "kind": "good", "shape": list(GOOD_SHAPE), "chunks": list(GOOD_CHUNKS),
         "dtype": "<i4", "zstd": True, "fill_value": 7},
        {"name": c.name, "path": "hostile", "kind": "struct", "shape": [6], "chunks": [4], "dtype": dt,
         "fill_value": None}])
    c.add_good("good", out["good"])
    c.bytes_ok("hostile", out["hostile"])


# --- draft

def draft_store(c: Case, hostile: str = "small") -> dict:
    arrays = [{"name": c.name, "path": "good", "kind": "good", "shape": list(GOOD_SHAPE),
               "chunks": list(GOOD_CHUNKS), "dtype": "<i4", "zstd": True, "fill_value": 7}]
    if hostile == "small":
        arrays.append({"name": c.name, "path": "hostile", "kind": "data", "shape": list(GOOD_SHAPE),
                       "chunks": list(GOOD_CHUNKS), "dtype": "<i4", "zstd": True,
                       "data": np.arange(120).reshape(GOOD_SHAPE).tolist()})
    else:
        arrays.append({"name": c.name, "path": "hostile", "kind": "band", "shape": list(BAND_SHAPE),
                       "chunks": list(BAND_CHUNKS), "dtype": "<u4", "zstd": True})
    out = run_zarr2(c, "draft", arrays)
    c.add_good("good", out["good"])
    return out


@case("metadata", "draft", "meta/root/hostile.array.json is invalid JSON")
def md_invalid_json(c: Case):
    draft_store(c)
    write_text(c.p("meta", "root", "hostile.array.json"), '{"shape": [10, ')
    c.meta("hostile")


@case("metadata", "draft", "draft data_type <U1000000000")
def md_U1000000000(c: Case):
    draft_store(c)
    meta_edit(c, "hostile", data_type="<U1000000000", fill_value=None)
    c.fail("hostile", "hostile")


@case("metadata", "draft", "draft structured data_type with a subarray of [2^31, 2^31, 4] float64")
def md_struct_subarray_overflow(c: Case):
    draft_store(c)
    meta_edit(c, "hostile", data_type=[["a", "<f8", [1 << 31, 1 << 31, 4]]], fill_value=None)
    c.meta("hostile")


@case("metadata", "draft", "draft chunk_grid chunk_shape [0, 6]")
def md_zero_chunk(c: Case):
    draft_store(c)
    meta_edit(c, "hostile", chunk_grid__chunk_shape=[0, 6])
    c.meta("hostile")


@case("metadata", "draft", "draft root zarr.json entry point is invalid JSON")
def md_root_invalid_json(c: Case):
    draft_store(c)
    write_text(c.p("zarr.json"), '{"zarr_format": "https://purl.org/zarr/spec/protocol/co')
    c.root_unusable = True


# --- consolidated metadata that lies

LIES = [
    ("dotdot", "..", "../.zarray", []),
    ("slash", "/", "//.zarray", []),
    ("escape", "a/../../b", "a/../../b/.zarray", ["b"]),
    ("empty", "", "/.zarray", []),
    ("long", "x" * 5000, "x" * 5000 + "/.zarray", []),
    ("nul", "nul\u0000name", "nul\u0000name/.zarray", []),
    ("dot", ".", "./.zarray", []),
]


def consolidated_store(c: Case) -> dict:
    """Good sibling plus `other`, consolidated; the consolidated document (v2: the
    .zmetadata "metadata" object, v3: consolidated_metadata.metadata)."""
    zarr = zarr3()
    new_store(c)
    other = small_array(c, path="other")
    c.bytes_ok("other", le_bytes(other))
    zarr.consolidate_metadata(c.store)


def lie_case(name: str, fmt: str, v3_name: str, v2_key: str, absent: list):
    def run(c: Case):
        consolidated_store(c)
        if fmt == "3":
            def fn(doc):
                md = doc["consolidated_metadata"]["metadata"]
                md[v3_name] = md["good"]
            edit_json(c.p("zarr.json"), fn)
        else:
            def fn(doc):
                md = doc["metadata"]
                md[v2_key] = md["good/.zarray"]
            edit_json(c.p(".zmetadata"), fn)
        c.listing("", present={"other": "file"}, absent=absent)
    run.__name__ = name
    return run


for lie, v3_name, v2_key, absent in LIES:
    for fmt in ("3", "2"):
        CASES.append((f"cm{fmt}_name_{lie}", "metadata", fmt,
                      f"consolidated metadata naming a node {json.dumps(v3_name if fmt == '3' else v2_key)[:60]}: "
                      "left out of the listing, everything else lists", lie_case(lie, fmt, v3_name, v2_key, absent)))


def ghost_case(fmt: str):
    def run(c: Case):
        zarr = zarr3()
        consolidated_store(c)
        if fmt == "3":
            edit_json(c.p("zarr.json"), lambda d: d["consolidated_metadata"]["metadata"].__setitem__(
                "ghost", d["consolidated_metadata"]["metadata"]["good"]))
            g = zarr.open_group(c.store, mode="r", use_consolidated=True)
        else:
            edit_json(c.p(".zmetadata"), lambda d: d["metadata"].__setitem__(
                "ghost/.zarray", d["metadata"]["good/.zarray"]))
            g = zarr.open_consolidated(c.store, mode="r", zarr_format=2)
        c.bytes_ok("ghost", le_bytes(g["ghost"][...]))
    return run


def garbage_case(fmt: str):
    def run(c: Case):
        consolidated_store(c)
        if fmt == "3":
            edit_json(c.p("zarr.json"), lambda d: d["consolidated_metadata"]["metadata"].__setitem__(
                "hostile", {"node_type": "array", "shape": "garbage", "zarr_format": 3}))
        else:
            edit_json(c.p(".zmetadata"), lambda d: d["metadata"].__setitem__("hostile/.zarray", [1, 2, 3]))
        c.meta("hostile", "hostile")
    return run


for fmt in ("3", "2"):
    CASES.append((f"cm{fmt}_ghost_node", "metadata", fmt,
                  "consolidated metadata naming an array with no folder: reads as the fill value (as zarr-python does)",
                  ghost_case(fmt)))
    CASES.append((f"cm{fmt}_garbage_node", "metadata", fmt,
                  "consolidated metadata whose entry for `hostile` is garbage", garbage_case(fmt)))


# ================================= chunks ===========================================

def chunk_case(fmt: str, breaker, sharded: bool = False, **array_kw):
    """The band array with zstd (unless told otherwise); `breaker(c, key_path)` breaks
    band 1 (its chunk file, or for sharded arrays inner chunk 1 of shard 0)."""
    def run(c: Case):
        new_store(c)
        kw = dict(array_kw)
        if "compressors" not in kw and not (fmt == "3" and "serializer" in kw):
            kw["compressors"] = zstd_compressors(int(fmt))
        if sharded:
            raw = band_array(c, shape=(128, 1024), chunks=(64, 1024), **kw)
            key = c.chunk_key("hostile", 0, 0)
            breaker(c, c.p(key))
            c.chunk_broken("hostile", raw, key, [(BAND_BYTES + 8192, 4096)],
                           [(4 * BAND_BYTES, 4096), (8 * BAND_BYTES - 4096, 4096)])
        else:
            raw = band_array(c, **kw)
            key = c.chunk_key("hostile", 1, 0)
            breaker(c, c.p(key))
            c.band_broken("hostile", raw, key)
    return run


def truncate_half(c, path):
    data = read_bytes(path)
    write_bytes(path, data[: len(data) // 2])


def flip_middle(c, path):
    data = bytearray(read_bytes(path))
    for i in range(len(data) // 3, len(data) // 3 + 16):
        data[i] ^= 0x5A
    write_bytes(path, bytes(data))


def flip_byte(path, at):
    data = bytearray(read_bytes(path))
    data[at] ^= 0x01
    write_bytes(path, bytes(data))


def empty_file(c, path):
    write_bytes(path, b"")


def append_garbage(c, path):
    write_bytes(path, read_bytes(path) + b"trailing garbage" * 100)


def put(data_fn):
    def breaker(c, path):
        write_bytes(path, data_fn())
    return breaker


def raw_codecs(**kw):
    return dict(compressors=None, **kw)


def crc_codecs():
    from zarr.codecs import Crc32cCodec
    return dict(compressors=[Crc32cCodec()])


def gzip_codecs():
    from zarr.codecs import GzipCodec
    return dict(compressors=[GzipCodec(level=1)])


def blosc_codecs():
    from zarr.codecs import BloscCodec
    return dict(compressors=[BloscCodec(cname="lz4", clevel=5, shuffle="shuffle")])


def _blosc_cbytes_lie(c, path):
    data = bytearray(read_bytes(path))
    data[12:16] = struct.pack("<I", (1 << 31) - 1)
    write_bytes(path, bytes(data))


def _blosc_bomb(c, path):
    import numcodecs
    blosc = numcodecs.Blosc(cname="blosclz", clevel=9, shuffle=0, blocksize=0)
    write_bytes(path, blosc.encode(np.zeros(256 << 20, dtype="u1")))


CHUNK_CASES = [
    ("k3_truncated", "3", "chunk c/1/0 (zstd) cut in half", truncate_half, {}),
    ("k3_empty_chunk", "3", "chunk c/1/0 is an empty file", empty_file, {}),
    ("k3_crc32c_corrupt", "3", "chunk c/1/0 with [bytes, crc32c]: 16 bytes flipped", flip_middle, "crc"),
    ("k3_crc32c_truncated", "3", "chunk c/1/0 with [bytes, crc32c] shorter than the checksum",
     put(lambda: b"\x01\x02"), "crc"),
    ("k3_raw_too_long", "3", "uncompressed chunk c/1/0 with trailing bytes", append_garbage, "raw"),
    ("k3_raw_too_short", "3", "uncompressed chunk c/1/0 cut in half", truncate_half, "raw"),
    ("k3_zstd_lying_header", "3", "zstd frame whose header claims 2^42 bytes, holding 100",
     put(lambda: zstd_lying_frame(1 << 42, b"x" * 100)), {}),
    ("k3_zstd_bomb_no_size", "3", "zstd bomb: 128 KiB of RLE blocks inflating to 4 GiB, no content size",
     put(lambda: zstd_rle_frame(4 * GIB, None)), {}),
    ("k3_zstd_bomb_sized", "3", "zstd bomb: RLE blocks inflating to 4 GiB, content size 4 GiB in the header",
     put(lambda: zstd_rle_frame(4 * GIB, 4 * GIB)), {}),
    ("k3_zstd_garbage", "3", "chunk c/1/0 is not a zstd frame at all", put(lambda: b"not zstd" * 50), {}),
    ("k3_gzip_bomb", "3", "gzip bomb: about 1 MiB inflating to 1 GiB of zeros",
     put(lambda: deflate_bomb(GIB, 31)), "gzip"),
    ("k3_gzip_truncated", "3", "gzip chunk cut in half", truncate_half, "gzip"),
    ("k3_blosc_nbytes_lie", "3", "blosc header claiming 2 GiB decoded (memcpyed, 64 bytes present)",
     put(lambda: blosc_header((1 << 31) - 1, 1 << 17, 16 + 64) + b"\x00" * 64), "blosc"),
    ("k3_blosc_cbytes_lie", "3", "blosc header whose cbytes (2^31 - 1) exceeds the chunk", _blosc_cbytes_lie,
     "blosc"),
    ("k3_blosc_bomb", "3", "blosc bomb: a real blosc frame of 256 MiB of zeros (blosclz) for a 64 KiB chunk",
     _blosc_bomb, "blosc"),
    ("k3_blosc_garbage_header", "3", "blosc chunk of 16 random header bytes",
     put(lambda: bytes(range(7, 23))), "blosc"),
]


for name, fmt, what, breaker, codecs in CHUNK_CASES:
    def make(fmt=fmt, breaker=breaker, codecs=codecs):
        def run(c: Case):
            kw = {"crc": crc_codecs, "raw": raw_codecs, "gzip": gzip_codecs, "blosc": blosc_codecs}[codecs]() \
                if isinstance(codecs, str) else dict(codecs)
            chunk_case(fmt, breaker, **kw)(c)
        return run
    CASES.append((name, "chunks", fmt, what, make()))


# --- v2 and draft chunks

def lz4_size_lie(c, path):
    data = bytearray(read_bytes(path))
    data[0:4] = struct.pack("<I", 0x7FFFFFFF)
    write_bytes(path, bytes(data))


def v2_case(breaker, compressor):
    def run(c: Case):
        import numcodecs
        comp = {"zlib": numcodecs.Zlib(level=1), "lz4": numcodecs.LZ4(), "zstd": numcodecs.Zstd(level=1),
                "bz2": numcodecs.BZ2(level=1), "blosc": numcodecs.Blosc(cname="zstd")}[compressor]
        chunk_case("2", breaker, compressors=comp)(c)
    return run


CASES += [
    ("k2_truncated", "chunks", "2", "v2 zstd chunk 1.0 cut in half", v2_case(truncate_half, "zstd")),
    ("k2_zlib_bomb", "chunks", "2", "v2 zlib bomb: about 1 MiB inflating to 1 GiB",
     v2_case(put(lambda: deflate_bomb(GIB, 15)), "zlib")),
    ("k2_lz4_size_lie", "chunks", "2", "v2 lz4 chunk whose size prefix claims 2 GiB", v2_case(lz4_size_lie, "lz4")),
    ("k2_bz2_corrupt", "chunks", "2", "v2 bz2 chunk with flipped bytes", v2_case(flip_middle, "bz2")),
    ("k2_blosc_nbytes_lie", "chunks", "2", "v2 blosc header claiming 2 GiB decoded",
     v2_case(put(lambda: blosc_header((1 << 31) - 1, 1 << 17, 16 + 64) + b"\x00" * 64), "blosc")),
]


def draft_chunk_case(c: Case, breaker) -> None:
    """The draft band array with chunk c1/0 broken by `breaker(c, path)`."""
    out = draft_store(c, hostile="band")
    key = c.chunk_key("hostile", 1, 0)
    breaker(c, c.p(key))
    c.band_broken("hostile", out["hostile"], key)


@case("chunks", "draft", "draft chunk c1/0 (zstd) cut in half")
def kd_truncated(c: Case):
    draft_chunk_case(c, truncate_half)


# --- shards: index at the end, [bytes] index codecs (no checksum), [bytes, crc32c] inside

def shard_codecs(index_crc: bool = False):
    from zarr.codecs import BytesCodec, Crc32cCodec, ShardingCodec
    index = [BytesCodec(), Crc32cCodec()] if index_crc else [BytesCodec()]
    return dict(serializer=ShardingCodec(chunk_shape=BAND_CHUNKS, codecs=[BytesCodec(), Crc32cCodec()],
                                         index_codecs=index), compressors=None)


def shard_edit(fn):
    """Edit the 4-entry index (offset, nbytes) at the end of shard 0."""
    def breaker(c, path):
        data = bytearray(read_bytes(path))
        index = list(struct.unpack("<8Q", data[-64:]))
        entries = [[index[2 * i], index[2 * i + 1]] for i in range(4)]
        fn(entries)
        data[-64:] = struct.pack("<8Q", *[v for e in entries for v in e])
        write_bytes(path, bytes(data))
    return breaker


def shard_case(breaker, index_crc=False):
    def run(c: Case):
        chunk_case("3", breaker, sharded=True, **shard_codecs(index_crc))(c)
    return run


def _set(entries, i, off=None, n=None):
    if off is not None:
        entries[i][0] = off
    if n is not None:
        entries[i][1] = n


CASES += [
    ("k3_shard_offset_out_of_range", "chunks", "3", "shard index: inner chunk 1 at offset 2^40 (zarr-python 3.1 reads "
     "the short range as a missing chunk; an index pointing outside its shard is corrupt)",
     shard_case(shard_edit(lambda e: _set(e, 1, off=1 << 40)))),
    ("k3_shard_length_out_of_range", "chunks", "3", "shard index: inner chunk 1 of 2^40 bytes",
     shard_case(shard_edit(lambda e: _set(e, 1, n=1 << 40)))),
    ("k3_shard_offset_len_overflow", "chunks", "3", "shard index: offset 2^64 - 8 and length 16 (sum overflows)",
     shard_case(shard_edit(lambda e: _set(e, 1, off=U64_MAX - 7, n=16)))),
    ("k3_shard_overlapping", "chunks", "3", "shard index: inner chunk 1 starts in the middle of inner chunk 0",
     shard_case(shard_edit(lambda e: _set(e, 1, off=e[0][0] + e[0][1] // 2)))),
    ("k3_shard_half_sentinel", "chunks", "3", "shard index: offset u64 max with a real length",
     shard_case(shard_edit(lambda e: _set(e, 1, off=U64_MAX)))),
    ("k3_shard_shorter_than_index", "chunks", "3", "shard 0 cut to 10 bytes (shorter than its index)",
     shard_case(put(lambda: b"0123456789"))),
    ("k3_shard_index_crc_mismatch", "chunks", "3", "shard index with crc32c: one index byte flipped",
     shard_case(lambda c, path: flip_byte(path, -68 + 20), index_crc=True)),
]


# --- vlen

def vlen_case(kind: str, fmt: str, fn):
    def run(c: Case):
        new_store(c)
        vlen_array(c, kind)
        key = c.chunk_key("hostile", 1)
        write_bytes(c.p(key), fn(read_bytes(c.p(key))))
        c.vlen_broken("hostile", key)
    return run


def set_u32(data: bytes, at: int, value: int) -> bytes:
    return data[:at] + struct.pack("<I", value) + data[at + 4:]


CASES += [
    ("k3_vlen_count_billions", "chunks", "3", "vlen-utf8 chunk whose element count is 4,294,967,295",
     vlen_case("text", "3", lambda d: set_u32(d, 0, 0xFFFFFFFF))),
    ("k3_vlen_count_short", "chunks", "3", "vlen-utf8 chunk counting 31 elements of 32",
     vlen_case("text", "3", lambda d: set_u32(d, 0, 31))),
    ("k3_vlen_length_past_end", "chunks", "3", "vlen-utf8 element length 2^31 past the end of the chunk",
     vlen_case("text", "3", lambda d: set_u32(d, 4, 1 << 31))),
    ("k3_vlen_bad_utf8", "chunks", "3", "vlen-utf8 element bytes that are not UTF-8",
     vlen_case("text", "3", lambda d: d[:8] + b"\xff\xfe" + d[10:])),
    ("k3_vlen_bytes_length_max", "chunks", "3", "vlen-bytes element length u32 max",
     vlen_case("bytes", "3", lambda d: set_u32(d, 4, 0xFFFFFFFF))),
    ("k2_vlen_count_billions", "chunks", "2", "v2 vlen-utf8 filter chunk whose element count is 4,000,000,000",
     vlen_case("text", "2", lambda d: set_u32(d, 0, 4_000_000_000))),
]


def zarrs_vlen_case(offsets_fn):
    """vlen-utf8 array switched to zarrs.vlen (uint32 index at the start); chunk 1
    rewritten with the offsets `offsets_fn` gives."""
    def run(c: Case):
        new_store(c)
        vlen_array(c, "text")
        meta_edit(c, "hostile", codecs=[{"name": "zarrs.vlen", "configuration": {
            "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
            "data_codecs": [{"name": "bytes"}], "index_data_type": "uint32", "index_location": "start"}}])
        data = b"".join(f"v{i}".encode() for i in range(32))
        offsets = offsets_fn(data)
        index = struct.pack(f"<{len(offsets)}I", *offsets)
        key = c.chunk_key("hostile", 1)
        # Chunk 0 (in the vlen-utf8 layout) goes: it reads as missing.
        os.remove(c.p(c.chunk_key("hostile", 0)))
        write_bytes(c.p(key), struct.pack("<Q", len(index)) + index + data)
        c.vlen_broken("hostile", key)
    return run


def _unordered(data):
    offs = [0]
    for i in range(32):
        offs.append(offs[-1] + len(f"v{i}"))
    offs[5], offs[6] = offs[6] + 3, offs[5]
    return offs


CASES += [
    ("k3_zarrs_vlen_unordered", "chunks", "3", "zarrs.vlen offsets out of order", zarrs_vlen_case(_unordered)),
    ("k3_zarrs_vlen_past_end", "chunks", "3", "zarrs.vlen last offset 4,294,967,295 (far past the data)",
     zarrs_vlen_case(lambda d: list(range(0, 32)) + [0xFFFFFFFF])),
]


# --- fill value of huge missing chunks

@case("chunks", "3", "a 1 GiB float32 array of one 1 GiB chunk, missing: fill value with bounded memory")
def k3_missing_1gib_chunk(c: Case):
    new_store(c)
    zarr = zarr3()
    zarr.create_array(c.store, name="hostile", shape=(1 << 28,), chunks=(1 << 28,), dtype="<f4", fill_value=1.5)
    a = zarr.open_array(c.store, path="hostile", mode="r")
    n = GIB
    c.uniform("hostile", n, le_bytes(a[0:1]),
              [(0, le_bytes(a[0:1024])), (n // 2, le_bytes(a[(1 << 27):(1 << 27) + 1024])),
               (n - 4096, le_bytes(a[(1 << 28) - 1024:]))])


@case("chunks", "3", "a 1 GiB int16 array of one 1 GiB shard (inner chunks of 2^20), missing")
def k3_missing_1gib_shard(c: Case):
    new_store(c)
    zarr = zarr3()
    from zarr.codecs import BytesCodec, ShardingCodec
    zarr.create_array(c.store, name="hostile", shape=(1 << 29,), chunks=(1 << 29,), dtype="<i2", fill_value=-2,
                      serializer=ShardingCodec(chunk_shape=(1 << 20,), codecs=[BytesCodec()]), compressors=None)
    a = zarr.open_array(c.store, path="hostile", mode="r")
    n = GIB
    c.uniform("hostile", n, le_bytes(a[0:1]),
              [(0, le_bytes(a[0:2048])), (n - 4096, le_bytes(a[(1 << 29) - 2048:]))])


@case("chunks", "2", "a v2 1 GiB uint8 array of one 1 GiB chunk, missing")
def k2_missing_1gib_chunk(c: Case):
    new_store(c)
    zarr = zarr3()
    zarr.create_array(c.store, name="hostile", shape=(GIB,), chunks=(GIB,), dtype="u1", fill_value=9,
                      zarr_format=2, compressors=None)
    a = zarr.open_array(c.store, path="hostile", mode="r")
    c.uniform("hostile", GIB, le_bytes(a[0:1]), [(0, le_bytes(a[0:4096])), (GIB - 4096, le_bytes(a[GIB - 4096:]))])


# ================================ filesystem ========================================

def fifo(c, path):
    replace(path)
    os.mkfifo(path)


def device(major, minor):
    def breaker(c, path):
        replace(path)
        os.mknod(path, 0o644 | __import__("stat").S_IFCHR, os.makedev(major, minor))
    return breaker


def unix_socket(c, path):
    replace(path)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    s.close()


def directory(c, path):
    replace(path)
    os.makedirs(os.path.join(path, "inner"))
    write_bytes(os.path.join(path, "inner", "data"), b"x" * 100)


def symlink_outside(absolute: bool):
    """Chunk replaced by a symlink to an intact copy of itself outside the root."""
    def breaker(c, path):
        target = os.path.join(c.outside, "chunk")
        shutil.copyfile(path, target)
        replace(path)
        os.symlink(target if absolute else os.path.relpath(target, os.path.dirname(path)), path)
    return breaker


def sparse(size):
    def breaker(c, path):
        replace(path)
        with open(path, "wb") as f:
            f.truncate(size)
    return breaker


CASES += [
    ("f3_fifo_chunk", "filesystem", "3", "chunk c/1/0 is a FIFO (no writer)", chunk_case("3", fifo)),
    ("f2_fifo_chunk", "filesystem", "2", "v2 chunk 1.0 is a FIFO", chunk_case("2", fifo)),
    ("f3_devnull_chunk", "filesystem", "3", "chunk c/1/0 is a character device like /dev/null (1, 3)",
     chunk_case("3", device(1, 3))),
    ("f3_devzero_chunk", "filesystem", "3", "chunk c/1/0 is a character device like /dev/zero (1, 5): endless bytes",
     chunk_case("3", device(1, 5))),
    ("f3_socket_chunk", "filesystem", "3", "chunk c/1/0 is a Unix socket", chunk_case("3", unix_socket)),
    ("f3_chunk_is_directory", "filesystem", "3", "chunk c/1/0 is a directory", chunk_case("3", directory)),
    ("f2_chunk_is_directory", "filesystem", "2", "v2 chunk 1.0 is a directory", chunk_case("2", directory)),
    ("f3_symlink_chunk_outside", "filesystem", "3",
     "chunk c/1/0 is a relative symlink to an intact copy outside the store root",
     chunk_case("3", symlink_outside(False))),
    ("f3_symlink_chunk_outside_abs", "filesystem", "3",
     "chunk c/1/0 is an absolute symlink to an intact copy outside the store root",
     chunk_case("3", symlink_outside(True))),
    ("f2_symlink_chunk_outside", "filesystem", "2", "v2 chunk 1.0 is a symlink leaving the root",
     chunk_case("2", symlink_outside(False))),
    ("f3_sparse_chunk_8gib", "filesystem", "3", "uncompressed chunk c/1/0 is a sparse 8 GiB file",
     chunk_case("3", sparse(8 * GIB), compressors=None)),
]


@case("filesystem", "draft", "draft chunk c1/0 is a FIFO")
def fd_fifo_chunk(c: Case):
    draft_chunk_case(c, fifo)


def meta_file_case(fmt: str, breaker, kind="meta"):
    def run(c: Case):
        if fmt == "draft":
            draft_store(c)
        else:
            new_store(c)
            small_array(c)
        breaker(c, c.p(c.meta_key("hostile")))
        if kind == "meta":
            c.meta("hostile")
        else:
            c.refused("hostile")
    return run


def symlink_meta_outside(c, path):
    target = os.path.join(c.outside, os.path.basename(path))
    shutil.copyfile(path, target)
    replace(path)
    os.symlink(os.path.relpath(target, os.path.dirname(path)), path)


def self_loop(c, path):
    replace(path)
    os.symlink(os.path.basename(path), path)


CASES += [
    ("f3_fifo_array_meta", "filesystem", "3", "hostile/zarr.json is a FIFO", meta_file_case("3", fifo)),
    ("f2_fifo_array_meta", "filesystem", "2", "hostile/.zarray is a FIFO", meta_file_case("2", fifo)),
    ("fd_fifo_array_meta", "filesystem", "draft", "meta/root/hostile.array.json is a FIFO",
     meta_file_case("draft", fifo)),
    ("f3_devzero_array_meta", "filesystem", "3", "hostile/zarr.json is a /dev/zero-like device (endless bytes)",
     meta_file_case("3", device(1, 5))),
    ("f3_socket_array_meta", "filesystem", "3", "hostile/zarr.json is a Unix socket", meta_file_case("3", unix_socket)),
    ("f3_symlink_meta_outside", "filesystem", "3", "hostile/zarr.json is a symlink to a valid copy outside the root",
     meta_file_case("3", symlink_meta_outside)),
    ("f2_symlink_meta_outside", "filesystem", "2", "hostile/.zarray is a symlink leaving the root",
     meta_file_case("2", symlink_meta_outside)),
    ("f3_symlink_meta_loop", "filesystem", "3", "hostile/zarr.json is a symlink to itself",
     meta_file_case("3", self_loop)),
    ("f3_sparse_meta_8gib", "filesystem", "3", "hostile/zarr.json is a sparse 8 GiB file of zeros",
     meta_file_case("3", sparse(8 * GIB))),
    ("f2_zarray_is_directory", "filesystem", "2", "hostile/.zarray is a directory",
     meta_file_case("2", directory, kind="refused")),
]


def root_meta_case(breaker):
    def run(c: Case):
        new_store(c)
        breaker(c, c.p("zarr.json"))
        c.root_unusable = True
    return run


CASES += [
    ("f3_fifo_root_meta", "filesystem", "3", "the root zarr.json is a FIFO", root_meta_case(fifo)),
    ("f3_devzero_root_meta", "filesystem", "3", "the root zarr.json is a /dev/zero-like device",
     root_meta_case(device(1, 5))),
    ("f3_symlink_root_meta_outside", "filesystem", "3", "the root zarr.json is a symlink leaving the root",
     root_meta_case(symlink_meta_outside)),
]


@case("filesystem", "3", "`hostile` is a symlink to a complete array folder outside the root")
def f3_symlink_dir_outside(c: Case):
    new_store(c)
    zarr = zarr3()
    a = zarr.create_array(c.outside, name="arr", shape=(4,), chunks=(2,), dtype="<i4")
    a[...] = [1, 2, 3, 4]
    os.symlink(os.path.relpath(os.path.join(c.outside, "arr"), c.store), c.p("hostile"))
    c.refused("hostile")


@case("filesystem", "3", "chunk c/1/0 is a symlink to chunk c/0/0 inside the root: reads as zarr-python reads it")
def f3_symlink_chunk_inside(c: Case):
    new_store(c)
    zarr = zarr3()
    band_array(c, compressors=None)
    os.remove(c.p("hostile", "c", "1", "0"))
    os.symlink(os.path.join("..", "0", "0"), c.p("hostile", "c", "1", "0"))
    c.bytes_ok("hostile", le_bytes(zarr.open_array(c.store, path="hostile", mode="r")[...]))


@case("filesystem", "3", "chunk c/1/0 is a dangling symlink: reads as missing (fill), as zarr-python reads it")
def f3_dangling_symlink_chunk(c: Case):
    new_store(c)
    zarr = zarr3()
    band_array(c, compressors=None, fill_value=0xDEAD)
    os.remove(c.p("hostile", "c", "1", "0"))
    os.symlink("no-such-file", c.p("hostile", "c", "1", "0"))
    c.bytes_ok("hostile", le_bytes(zarr.open_array(c.store, path="hostile", mode="r")[...]))


def unreadable(target: str):
    def run(c: Case):
        zarr = zarr3()
        new_store(c)
        raw = band_array(c)
        if target == "dir":
            g = zarr.create_group(c.store, path="grp")
            a = g.create_array("inner", shape=(4,), chunks=(2,), dtype="<i4")
            a[...] = [5, 6, 7, 8]
            inner = le_bytes(zarr.open_array(c.store, path="grp/inner", mode="r")[...])
            os.chmod(c.p("grp"), 0)
        else:
            os.chmod(c.p(c.chunk_key("hostile", 1, 0) if target == "chunk" else c.meta_key("hostile")), 0)
        if os.geteuid() == 0:
            # Root reads mode-000 files and folders: everything reads normally.
            c.bytes_ok("hostile", raw)
            if target == "dir":
                c.bytes_ok("grp/inner", inner)
        elif target == "chunk":
            c.band_broken("hostile", raw, c.chunk_key("hostile", 1, 0))
        elif target == "meta":
            c.meta("hostile")
        else:
            c.bytes_ok("hostile", raw)
            c.refused("grp/inner")
    return run


CASES += [
    ("f3_unreadable_chunk", "filesystem", "3", "chunk c/1/0 has mode 000", unreadable("chunk")),
    ("f3_unreadable_meta", "filesystem", "3", "hostile/zarr.json has mode 000", unreadable("meta")),
    ("f3_unreadable_group_dir", "filesystem", "3", "group folder grp has mode 000", unreadable("dir")),
]


@case("filesystem", "3", "a group folder holding 100,000 entries that are not nodes, beside one array")
def f3_100k_junk_entries(c: Case):
    zarr = zarr3()
    new_store(c)
    zarr.create_group(c.store, path="many")
    a = zarr.create_array(c.store, name="many/arr", shape=(5,), chunks=(5,), dtype="<i4")
    a[...] = [1, 2, 3, 4, 5]
    for i in range(100_000):
        open(c.p("many", f"junk{i:06d}"), "wb").close()
    c.bytes_ok("many/arr", le_bytes(zarr.open_array(c.store, path="many/arr", mode="r")[...]))
    c.listing("many", present={"arr": "file"}, absent=["junk000000", "junk099999"])


@case("filesystem", "3", "an array with 100,000 chunk files in one folder (copies of one chunk zarr-python wrote)")
def f3_100k_chunk_entries(c: Case):
    zarr = zarr3()
    new_store(c)
    n = 100_000
    a = zarr.create_array(c.store, name="hostile", shape=(n * 2,), chunks=(2,), dtype="<i4", fill_value=0,
                          compressors=None, chunk_key_encoding={"name": "default", "separator": "."})
    a[0:2] = [0x01020304, 0x05060708]
    first = read_bytes(c.p("hostile", "c.0"))
    for i in range(1, n):
        write_bytes(c.p("hostile", f"c.{i}"), first)
    a = zarr.open_array(c.store, path="hostile", mode="r")
    pair = le_bytes(a[0:2])
    # Every chunk holds the same bytes: the array is that pair of elements, repeated.
    c.uniform("hostile", n * 8, pair, [(0, le_bytes(a[0:512])), (n * 8 - 4096, le_bytes(a[n * 2 - 1024:])),
                                       (400_000, le_bytes(a[100_000:101_024]))])


@case("filesystem", "3", "a fan-out of implicit-group folders, each holding four symlinks to its parent")
def f3_symlink_fanout(c: Case):
    new_store(c)
    zarr = zarr3()
    a = zarr.create_array(c.store, name="fan/x/leaf", shape=(3,), chunks=(3,), dtype="<i4")
    a[...] = [1, 2, 3]
    os.remove(c.p("fan", "zarr.json"))
    os.remove(c.p("fan", "x", "zarr.json"))
    for folder in (c.p("fan"), c.p("fan", "x")):
        for i in range(4):
            os.symlink("..", os.path.join(folder, f"up{i}"))
    c.bytes_ok("fan/x/leaf", le_bytes(zarr.open_array(c.store, path="fan/x/leaf", mode="r")[...]))
    c.listing("", present={"fan": "dir"})
    c.listing("fan", present={"x": "dir"})


# ================================== driver ==========================================

def write_manifest(manifest: dict, path: str) -> None:
    cases = ",\n".join("  " + json.dumps(c, ensure_ascii=True) for c in manifest.pop("cases"))
    head = json.dumps(manifest)[1:-1]
    with open(path, "w") as f:
        f.write("{" + head + ',\n "cases": [\n' + cases + "\n ]\n}\n")


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--zarr2":
        zarr2_main(sys.argv[2])
        return
    if len(sys.argv) > 2:
        sys.exit("usage: make_hostile.py [OUTDIR]")
    outdir = os.path.abspath(sys.argv[1] if len(sys.argv) == 2 else os.path.join(REPO_ROOT, "target", "hostile"))
    if os.path.exists(outdir):
        # Mode-000 folders are removable by root; give them back their bits first anyway.
        for root, dirs, _ in os.walk(outdir):
            for d in dirs:
                p = os.path.join(root, d)
                if not os.path.islink(p):
                    os.chmod(p, 0o755)
        shutil.rmtree(outdir)
    os.makedirs(outdir)
    check_zstd_builders()
    zarr = zarr3()
    names = [c[0] for c in CASES]
    dupes = {n for n in names if names.count(n) > 1}
    assert not dupes, f"duplicate case names {dupes}"
    entries = []
    for name, category, fmt, what, fn in CASES:
        c = Case(outdir, name, category, fmt, what)
        fn(c)
        assert c.good, f"{name}: no good sibling"
        assert c.root_unusable or c.expect or c.listings, f"{name}: nothing expected"
        entries.append(c.manifest_entry(outdir))
    write_manifest({"writer": f"zarr-python {zarr.__version__}", "euid": os.geteuid(), "cases": entries},
                   os.path.join(outdir, "manifest.json"))
    counts = {}
    for e in entries:
        counts[e["category"]] = counts.get(e["category"], 0) + 1
    print(f"make_hostile: {len(entries)} cases in {outdir}: "
          + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))


if __name__ == "__main__":
    main()
