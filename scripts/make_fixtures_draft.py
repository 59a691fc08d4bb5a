"""Write the zarr-python 2.18.7 fixtures: the 2020 draft-v3 layout, plus one v2 store.

Run by make_fixtures.py under target/venv-zarr2/bin/python with
ZARR_V3_EXPERIMENTAL_API=1 and ZARR_V3_SHARDING=1:

    make_fixtures_draft.py OUTDIR

Writes into OUTDIR (which must exist):

    draft/             draft v3 (zarr.json entry point, meta/root/<path>.array.json,
                       data/root/<path>/c<i>/<j>): core and extension data types,
                       chunk_memory_layout F, each compressor, filters (kept by
                       zarr 2.18 in attributes["filters"]), "/" and "." separators,
                       the sharding storage transformer, fill values, 0-5 dims,
                       explicit and implicit groups
    draft_root_array/  draft v3 whose root node is an array (meta/root.array.json)
    v2_zarr2/          Zarr v2 written by zarr-python 2.18.7: what zarr-python 3.1
                       refuses to write or to read back (categorize on an object
                       array, nested structured dtypes) or reads differently (an
                       object array with a null fill value)
    manifest-draft.json  {"stores", "arrays", "groups"} for the above, merged by
                       make_fixtures.py into manifest.json

Expected bytes are zarr-python 2.18.7's read-back, except for the arrays whose
fill value is patched after writing (see their notes).
"""

from __future__ import annotations

import json
import os
import sys
import warnings

import numcodecs
import numpy as np
import zarr
from zarr._storage.v3 import DirectoryStoreV3
from zarr._storage.v3_storage_transformers import ShardingStorageTransformer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixture_common import (  # noqa: E402
    array_entry, list_groups, pin_gzip_mtime, sample_data, sample_vlen, seeded_rng)

warnings.simplefilter("ignore")
pin_gzip_mtime()

WRITER = f"zarr-python {zarr.__version__}"
CORE = ["bool", "|i1", "|u1"] + [f"{e}{t}" for t in ["i2", "i4", "i8", "u2", "u4", "u8", "f2", "f4", "f8"]
                                 for e in "<>"]
NESTED_STRUCT = np.dtype([("id", "<i4"), ("pos", [("x", "<f4"), ("y", ">f8")]), ("flag", "?"),
                          ("name", "<U3"), ("tag", "S2")])


def type_name(typestring: str) -> str:
    return typestring.replace("<", "lt_").replace(">", "gt_").replace("|", "").replace("[", "_").replace("]", "")


def shard(*chunks_per_shard: int) -> list:
    return [ShardingStorageTransformer("indexed", chunks_per_shard=chunks_per_shard)]


class Store:
    """One output store written by zarr-python 2.18.7 (draft v3 or v2)."""

    def __init__(self, outdir: str, name: str, fmt: str):
        self.name, self.fmt = name, fmt
        self.dir = os.path.join(outdir, name)
        self.version = 3 if fmt == "draft" else 2
        self.entries: list[dict] = []

    def store(self):
        return DirectoryStoreV3(self.dir) if self.version == 3 else zarr.DirectoryStore(self.dir)

    def meta_path(self, path: str) -> str:
        if self.version == 2:
            return os.path.join(self.dir, path, ".zarray")
        if path == "":
            return os.path.join(self.dir, "meta", "root.array.json")
        return os.path.join(self.dir, "meta", "root", path + ".array.json")

    def metadata(self, path: str) -> dict:
        with open(self.meta_path(path)) as f:
            return json.load(f)

    def group(self, path: str, attributes: dict | None = None):
        if path == "":
            g = zarr.open_group(store=self.store(), mode="w", zarr_version=self.version)
        else:
            g = zarr.open_group(store=self.store(), path=path, mode="w", zarr_version=self.version)
        g.attrs.update(attributes or {})
        return g

    def array(self, path: str, note: str, *, shape, chunks, dtype, write="partial", data=None, vlen=None, **kw):
        """Create, fill and record one array; `vlen` is "text" or "bytes" for object arrays."""
        kw.setdefault("compressor", None)
        if vlen is not None:
            kw["object_codec"] = numcodecs.VLenUTF8() if vlen == "text" else numcodecs.VLenBytes()
            dtype = object
        attributes = kw.pop("attributes", None)
        z = zarr.create(store=self.store(), path=path or None, shape=shape, chunks=chunks, dtype=dtype,
                        zarr_version=self.version, **kw)
        if attributes:
            z.attrs.update(attributes)
        if data is None:
            rng = seeded_rng(self.name, path)
            data = sample_vlen(vlen, z.shape, rng) if vlen else sample_data(z.dtype, z.shape, rng)
        mask = write_data(z, data, write)
        if path == "" and self.version == 3:
            # zarr 2.18.7 writes a draft root array but cannot open one again.
            return self.record(path, note, z[...]), mask
        return self.record(path, note), mask

    def open(self, path: str):
        return zarr.open_array(store=self.store(), path=path or None, mode="r", zarr_version=self.version)

    def record(self, path: str, note: str, expected: np.ndarray | None = None) -> np.ndarray:
        if expected is None:
            expected = self.open(path)[...]
        expected = np.asarray(expected)
        meta = self.metadata(path)
        if self.version == 3:
            chunks, zarr_dtype = meta["chunk_grid"]["chunk_shape"], meta["data_type"]
        else:
            chunks, zarr_dtype = meta["chunks"], meta["dtype"]
        extra = {}
        for transformer in meta.get("storage_transformers", []):
            per_shard = transformer["configuration"]["chunks_per_shard"]
            extra["chunks_per_shard"] = per_shard
        self.entries.append(array_entry(self.name, path, expected, chunks=chunks, zarr_dtype=zarr_dtype,
                                        fill_value=meta["fill_value"], note=note,
                                        vlen=expected.dtype.kind == "O", **extra))
        return expected

    def patch_fill(self, path: str, note: str, fill_json, fill_bits, bits_dtype, *, shape, chunks, dtype):
        """Write whole chunks, then patch the fill value to an encoding zarr 2.18 does
        not write; unwritten chunks are expected to hold the raw fill bits."""
        expected, mask = self.array(path, note, shape=shape, chunks=chunks, dtype=dtype, write="checker")
        self.entries.pop()
        expected = expected.copy()
        fill = np.frombuffer(np.asarray(fill_bits, dtype=bits_dtype).tobytes(), dtype=expected.dtype)
        expected[~mask] = fill[0]
        assert expected[~mask][:1].tobytes() == fill.tobytes()
        meta = self.metadata(path)
        meta["fill_value"] = fill_json
        with open(self.meta_path(path), "w") as f:
            json.dump(meta, f, indent=4, sort_keys=True)
        try:
            same = self.open(path)[...].tobytes() == expected.tobytes()
            how = "reads the same bytes" if same else "reads different bytes"
        except Exception as e:  # noqa: BLE001 - any failure is worth recording
            how = f"cannot read it ({type(e).__name__})"
        self.record(path, f"{note}; fill_value patched to {json.dumps(fill_json)} after writing; expected "
                          f"bytes computed with numpy ({WRITER} {how})", expected)

    def manifest(self) -> tuple[dict, list, list]:
        groups, arrays_on_disk = list_groups(self.name, self.dir, self.fmt)
        recorded = sorted(e["path"] for e in self.entries)
        if sorted(arrays_on_disk) != recorded:
            raise RuntimeError(f"{self.name}: arrays on disk {sorted(arrays_on_disk)} != recorded {recorded}")
        return {"name": self.name, "dir": self.name, "format": self.fmt, "writer": WRITER}, self.entries, groups


def write_data(z, data, write) -> np.ndarray:
    """Write `data` into `z` ("all", "none", "partial", "checker"); returns the written mask."""
    mask = np.zeros(z.shape, dtype=bool)
    if z.size == 0 or write == "none":
        return mask
    if write == "all" or z.ndim == 0:
        boxes = [(Ellipsis,)]
    elif write == "partial":
        boxes = [tuple(slice(s // 5, max(s // 5 + 1, (3 * s) // 5)) for s in z.shape)]
    elif write == "checker":
        grid = [-(-s // c) for s, c in zip(z.shape, z.chunks)]
        boxes = [tuple(slice(i * c, min((i + 1) * c, s)) for i, c, s in zip(idx, z.chunks, z.shape))
                 for idx in np.ndindex(*grid) if sum(idx) % 2 == 0]
    else:
        raise ValueError(f"unknown write mode {write!r}")
    for box in boxes:
        z[box] = data[box]
        mask[box] = True
    return mask


# --- draft v3 ----------------------------------------------------------------

def write_draft(outdir: str) -> Store:
    s = Store(outdir, "draft", "draft")
    s.group("", {"title": "zarrfs draft-v3 fixtures"})
    draft_dtypes(s)
    draft_layout(s)
    draft_compressors(s)
    draft_filters(s)
    draft_keys(s)
    draft_sharding(s)
    draft_fill(s)
    draft_shapes(s)
    draft_groups(s)
    return s


def draft_dtypes(s: Store) -> None:
    for t in CORE:
        s.array(f"dtypes/{type_name(t)}", f"draft core data type {t}; partial write", shape=(7, 9),
                chunks=(3, 4), dtype=t)
    for t in ["<c8", ">c16", "<M8[ns]", ">M8[s]", "<m8[ms]", "|S4", "<U3", ">U3", "|V5"]:
        s.array(f"dtypes/{type_name(t)}", f"draft extension data type {t}", shape=(4, 5), chunks=(3, 2), dtype=t)
    s.array("dtypes/structured", "draft structured extension type (type is the numpy descr list)",
            shape=(7,), chunks=(3,), dtype=NESTED_STRUCT)
    s.array("dtypes/object_vlen_utf8", "draft |O with vlen-utf8 in attributes.filters, fill_value null: "
            "unwritten elements read as None (null)", shape=(5, 6), chunks=(2, 4), dtype=object, vlen="text",
            fill_value=None)
    s.array("dtypes/object_vlen_bytes", "draft |O with vlen-bytes in attributes.filters", shape=(5, 6),
            chunks=(2, 4), dtype=object, vlen="bytes", write="all", fill_value=None)


def draft_layout(s: Store) -> None:
    s.array("layout/F_2d", "chunk_memory_layout F", shape=(7, 9), chunks=(3, 4), dtype="<i4", order="F")
    s.array("layout/F_3d", "chunk_memory_layout F, 3-d, >f8, gzip", shape=(5, 6, 7), chunks=(2, 4, 3),
            dtype=">f8", order="F", compressor=numcodecs.GZip(level=1))
    s.array("layout/F_structured", "chunk_memory_layout F, structured", shape=(5, 4), chunks=(2, 3),
            dtype=[("a", "<i2"), ("b", ">f4")], order="F")
    s.array("layout/F_U", "chunk_memory_layout F, <U3", shape=(5, 4), chunks=(2, 3), dtype="<U3", order="F")


def draft_compressors(s: Store) -> None:
    compressors = {
        "gzip": numcodecs.GZip(level=5),
        "zlib": numcodecs.Zlib(level=1),
        "blosc_lz4": numcodecs.Blosc(cname="lz4", clevel=5, shuffle=1),
        "blosc_zstd_bitshuffle": numcodecs.Blosc(cname="zstd", clevel=3, shuffle=2),
        "blosc_blosclz_noshuffle": numcodecs.Blosc(cname="blosclz", clevel=9, shuffle=0),
        "bz2": numcodecs.BZ2(level=9),
        "lz4": numcodecs.LZ4(acceleration=1),
        "lzma": numcodecs.LZMA(preset=1),
        "zstd": numcodecs.Zstd(level=3),
    }
    for name, compressor in compressors.items():
        s.array(f"compressors/{name}", f"draft compressor {name}", shape=(20, 30), chunks=(8, 16), dtype="<u2",
                write="all", compressor=compressor)
    s.array("compressors/none", "no compressor key", shape=(20, 30), chunks=(8, 16), dtype="<u2", write="all")
    s.array("compressors/default", "zarr 2.18 default compressor (blosc lz4)", shape=(20, 30), chunks=(8, 16),
            dtype="<f4", write="all", compressor="default")


def draft_filters(s: Store) -> None:
    def arr(name, note, filters, dtype, data=None, compressor=None):
        s.array(f"filters/{name}", note + " (filters kept in attributes.filters)", shape=(20, 30), chunks=(8, 16),
                dtype=dtype, write="all", filters=filters, data=data, compressor=compressor)

    arr("delta", "delta filter", [numcodecs.Delta(dtype="<i4")], "<i4", compressor=numcodecs.Zlib())
    arr("fixedscaleoffset", "fixedscaleoffset f8 -> i4", [numcodecs.FixedScaleOffset(0, 100, "<f8", "<i4")], "<f8")
    arr("quantize", "quantize digits 2", [numcodecs.Quantize(digits=2, dtype="<f8")], "<f8")
    arr("astype", "astype f8 stored as f4", [numcodecs.AsType(encode_dtype="<f4", decode_dtype="<f8")], "<f8")
    arr("shuffle", "shuffle elementsize 4", [numcodecs.Shuffle(elementsize=4)], ">i4")
    arr("bitround", "bitround keepbits 5", [numcodecs.BitRound(keepbits=5)], "<f4")
    arr("packbits", "packbits on bool", [numcodecs.PackBits()], "bool")
    fruit = np.array(["apple", "kiwi", "fig", ""], dtype="<U5")
    arr("categorize", "categorize <U5 -> |u1", [numcodecs.Categorize(["apple", "kiwi", "fig"], "<U5")], "<U5",
        data=fruit[seeded_rng("draft", "categorize").integers(0, 4, 600)].reshape(20, 30))


def draft_keys(s: Store) -> None:
    for name, sep in [("slash", "/"), ("dot", ".")]:
        s.array(f"keys/{name}", f"chunk_grid separator '{sep}', 3-d", shape=(5, 6, 7), chunks=(2, 4, 3),
                dtype="<i2", dimension_separator=sep)


def draft_sharding(s: Store) -> None:
    def arr(name, note, per_shard, shape=(10, 12), chunks=(2, 3), dtype="<i4", write="partial", **kw):
        s.array(f"sharding/{name}", f"sharding storage transformer, chunks_per_shard {list(per_shard)}: {note}",
                shape=shape, chunks=chunks, dtype=dtype, write=write, storage_transformers=shard(*per_shard), **kw)

    arr("partial", "partial write: missing shards and shards with empty chunk slots", (2, 2))
    arr("full_zstd", "all chunks, zstd compressor", (2, 2), write="all", compressor=numcodecs.Zstd(level=1))
    arr("dot_separator", "chunk_grid separator '.'", (3, 2), dimension_separator=".")
    arr("layout_F", "chunk_memory_layout F, edge shards", (2, 3), order="F", dtype=">f8")
    arr("d1", "1-d", (3,), shape=(17,), chunks=(2,), dtype="<u2")
    arr("d3", "3-d, gzip", (2, 1, 2), shape=(5, 6, 7), chunks=(2, 4, 3), dtype="<f4",
        compressor=numcodecs.GZip(level=1))
    arr("scalar", "0-d (chunks_per_shard [])", (), shape=(), chunks=(), dtype="<f8")


def draft_fill(s: Store) -> None:
    def arr(name, note, dtype, fill_value):
        s.array(f"fill/{name}", note + "; partial write so the fill value shows", shape=(7, 5), chunks=(3, 2),
                dtype=dtype, fill_value=fill_value)

    arr("nan", "fill NaN", "<f4", np.nan)
    arr("inf", "fill Infinity", ">f8", np.inf)
    arr("neg_inf", "fill -Infinity", "<f2", -np.inf)
    arr("neg_zero", "fill -0.0", "<f8", -0.0)
    arr("u8_max", "fill uint64 max", ">u8", np.iinfo("u8").max)
    arr("i8_min", "fill int64 min", "<i8", np.iinfo("i8").min)
    arr("complex", "complex fill [NaN, 1.0]", "<c8", complex(np.nan, 1.0))
    arr("nat", "fill NaT", "<M8[ns]", np.datetime64("NaT"))
    arr("bool_true", "fill true", "bool", True)
    arr("bytes", "|S3 fill b'ab' (base64)", "|S3", b"ab")
    s.array("fill/null_int", "fill_value null; every chunk written, as zarr 2.18.7 leaves unwritten elements "
            "of a null-fill array uninitialized", shape=(7, 5), chunks=(3, 2), dtype="<i4", fill_value=None,
            write="all")
    arr("structured", "structured fill (base64)", [("a", "<i2"), ("b", ">f8")],
        np.array((7, 1.5), dtype=[("a", "<i2"), ("b", ">f8")])[()])
    patch = dict(shape=(7, 5), chunks=(3, 2))
    s.patch_fill("fill/plus_infinity", "draft spec string '+Infinity'", "+Infinity", [0x7F800000], "<u4",
                 dtype="<f4", **patch)
    s.patch_fill("fill/hex_nan_payload", "draft spec hex fill of a NaN with payload", "0x7fc00001", [0x7FC00001],
                 "<u4", dtype="<f4", **patch)
    s.patch_fill("fill/binary", "draft spec binary fill (0b + 32 bits) of a NaN with payload",
                 "0b01111111110000000000000000000011", [0x7FC00003], "<u4", dtype="<f4", **patch)
    s.patch_fill("fill/hex_big_endian_type", "hex fill on a >f8 array (the bits of the value, not of the "
                 "stored bytes)", "0x400921fb54442d18", [0x400921FB54442D18], ">u8", dtype=">f8", **patch)


def draft_shapes(s: Store) -> None:
    s.array("shapes/scalar", "0-d (zarr 2.18 writes its chunk as data/root/shapes/scalar/c0)", shape=(),
            chunks=(), dtype="<i4")
    s.array("shapes/zero_len", "zero-length dimension [0, 5]", shape=(0, 5), chunks=(2, 2), dtype="<f4")
    s.array("shapes/d1", "1-d", shape=(17,), chunks=(5,), dtype="<i8")
    s.array("shapes/d4", "4-d", shape=(3, 4, 5, 2), chunks=(2, 3, 2, 1), dtype=">u2")
    s.array("shapes/d5", "5-d", shape=(3, 2, 4, 2, 3), chunks=(2, 1, 3, 2, 2), dtype="<f8")


def draft_groups(s: Store) -> None:
    s.group("grp", {"level": 1})
    s.group("grp/sub", {"level": 2})
    s.array("grp/sub/arr", "array in explicit groups", shape=(4, 6), chunks=(3, 3), dtype="<f4",
            attributes={"kind": "nested"})
    s.array("implicit/deeper/arr", "array under implicit groups (no group metadata documents)", shape=(5,),
            chunks=(2,), dtype="|u1")


def write_draft_root_array(outdir: str) -> Store:
    s = Store(outdir, "draft_root_array", "draft")
    s.array("", "draft root node is an array (meta/root.array.json, data/root/c<i>/<j>); read back through "
            "the array object that wrote it, as zarr 2.18.7 cannot reopen a draft root array", shape=(6, 5),
            chunks=(4, 4), dtype="<i2", attributes={"root": "array"})
    return s


# --- v2 by zarr 2.18.7 ---------------------------------------------------------

def write_v2_zarr2(outdir: str) -> Store:
    s = Store(outdir, "v2_zarr2", "2")
    s.group("", {"writer": "zarr-python 2.18.7"})
    labels = ["apple", "kiwi", "fig"]
    data = np.array(labels + [""], dtype=object)[seeded_rng("v2_zarr2", "categorize").integers(0, 3, 30)]
    s.array("categorize_object", "v2 |O with filters [categorize(labels, dtype |O, astype |u1)] as the only "
            "object codec", shape=(30,), chunks=(8,), dtype=object, write="all", data=data,
            filters=[numcodecs.Categorize(labels, dtype=object, astype="u1")])
    s.array("structured_nested", "v2 nested structured dtype, mixed byte order (list-of-lists dtype JSON)",
            shape=(7,), chunks=(3,), dtype=NESTED_STRUCT)
    s.array("structured_nested_F", "v2 nested structured dtype, order F", shape=(5, 4), chunks=(2, 3),
            dtype=NESTED_STRUCT, order="F")
    s.array("object_null_fill", "v2 |O vlen-utf8 with fill_value null: zarr 2.18 reads unwritten elements as "
            "None (null)", shape=(5, 6), chunks=(2, 4), dtype=object, vlen="text", fill_value=None)
    return s


def main() -> None:
    outdir = os.path.abspath(sys.argv[1])
    stores = [write_draft(outdir), write_draft_root_array(outdir), write_v2_zarr2(outdir)]
    manifest = {"stores": [], "arrays": [], "groups": []}
    for store in stores:
        info, arrays, groups = store.manifest()
        manifest["stores"].append(info)
        manifest["arrays"] += arrays
        manifest["groups"] += groups
    with open(os.path.join(outdir, "manifest-draft.json"), "w") as f:
        json.dump(manifest, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
