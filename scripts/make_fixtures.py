"""Write the Zarr test fixtures and their manifest: the ground truth of the Rust tests.

Usage (from the repository root, after `bash scripts/setup_python.sh`):

    target/venv-zarr3/bin/python scripts/make_fixtures.py target/fixtures

OUTDIR is deleted and recreated. Stores written here with zarr-python 3.x:

    v3/               Zarr v3: every data type, codec, key encoding, fill value, shape
    v3_consolidated/  Zarr v3 with inline consolidated_metadata in the root zarr.json
    v3_root_array/    Zarr v3 whose root node is an array (path "")
    v2/               Zarr v2: typestrings, compressors, filters, separators, fills
    v2_consolidated/  Zarr v2 with .zmetadata
    v2_root_array/    Zarr v2 whose root node is an array

then scripts/make_fixtures_draft.py runs under target/venv-zarr2 (zarr-python
2.18.7) for the 2020 draft-v3 layout (draft/, draft_root_array/) and a v2 store
of what zarr-python 3 cannot write or read back (v2_zarr2/); it leaves
OUTDIR/manifest-draft.json, merged here into OUTDIR/manifest.json; and
scripts/make_fixtures_writers.py runs under /usr/bin/python3 (Debian's python3-gdal)
for stores written by GDAL and netCDF-C (gdal_v2/, gdal_draft/, nczarr/,
netcdf_zarr/), merged the same way from OUTDIR/manifest-writers.json.

Manifest (one store, array or group per line):
    {"stores": [{"name", "dir", "format": "3"|"2"|"draft", "writer"}],
     "arrays": [{"store", "path" ("" = root array), "shape", "chunks" (chunk grid
                 as in the metadata: the shard shape when sharded), "dtype" (numpy
                 dtype.str of the read-back, little-endian; "|O" for vlen),
                 "descr" (structured only), "itemsize" (null for vlen), "vlen",
                 "sha256", "nbytes", "zarr_dtype" and "fill_value" (as in the
                 metadata JSON), "note", optional "inner_chunks" (v3 sharding) or
                 "chunks_per_shard" (draft sharding transformer)}],
     "groups": [{"store", "path", "kind": "group"|"implicit_group",
                 "children": [{"name", "kind"}] sorted by name}]}

Every array's expected bytes come from zarr-python reading the array back from
disk (see fixture_common.py for the digest rules). A few arrays carry metadata
that zarr-python cannot write (hex fill values with NaN payloads, r<bits>); they
are written with zarr-python, their zarr.json patched, and their expected
bytes computed with numpy: each one's "note" says so.

Deterministic: fixed seeds, gzip headers with mtime 0; two runs give identical files.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import warnings

import numcodecs
import numpy as np
import zarr
from zarr.codecs import (
    BloscCodec,
    BytesCodec,
    Crc32cCodec,
    GzipCodec,
    ShardingCodec,
    TransposeCodec,
    VLenBytesCodec,
    VLenUTF8Codec,
    ZstdCodec,
)
import zarr.codecs.numcodecs as zn
from zarr.dtype import VariableLengthBytes, VariableLengthUTF8

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixture_common import (  # noqa: E402
    array_entry, list_groups, pin_gzip_mtime, sample_data, sample_vlen, seeded_rng)

# zarr-python warns about numcodecs.* and unstable extension data types in v3; expected here.
warnings.simplefilter("ignore")
pin_gzip_mtime()

WRITER = f"zarr-python {zarr.__version__}"
SCRIPT_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(SCRIPT_DIR)

NUMERIC = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
           "float16", "float32", "float64", "complex64", "complex128"]
BLOSC_CNAMES = numcodecs.blosc.list_compressors()  # blosclz, lz4, lz4hc, zlib, zstd (+ snappy if built)
BLOSC_SHUFFLES = {"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}
NESTED_STRUCT = np.dtype([("id", "<i4"), ("pos", [("x", "<f4"), ("y", "<f8")]), ("flag", "?"),
                          ("name", "<U3"), ("tag", "S2"), ("when", "<M8[s]"), ("z", "<c8")])
FLAT_STRUCT = np.dtype([("id", "<i4"), ("x", "<f4"), ("flag", "?"), ("name", "<U3"), ("tag", "S2"),
                        ("when", "<M8[s]"), ("z", "<c8")])


class Store:
    """One output store: creates arrays with zarr-python 3 and collects manifest entries."""

    def __init__(self, outdir: str, name: str, fmt: str):
        self.name, self.fmt = name, fmt
        self.dir = os.path.join(outdir, name)
        self.entries: list[dict] = []

    # --- metadata files -------------------------------------------------

    def meta_path(self, path: str) -> str:
        return os.path.join(self.dir, path, "zarr.json" if self.fmt == "3" else ".zarray")

    def metadata(self, path: str) -> dict:
        with open(self.meta_path(path)) as f:
            return json.load(f)

    def patch_metadata(self, path: str, **changes) -> dict:
        meta = self.metadata(path)
        meta.update(changes)
        with open(self.meta_path(path), "w") as f:
            json.dump(meta, f, indent=2)
        return meta

    def drop_group_metadata(self, path: str) -> None:
        """Turn an explicit group into an implicit one (a folder with no metadata)."""
        names = ["zarr.json"] if self.fmt == "3" else [".zgroup", ".zattrs"]
        for name in names:
            full = os.path.join(self.dir, path, name)
            if os.path.exists(full):
                os.remove(full)

    # --- nodes ----------------------------------------------------------

    def group(self, path: str, attributes: dict | None = None) -> zarr.Group:
        return zarr.create_group(self.dir, path=path, zarr_format=int(self.fmt), attributes=attributes or {})

    def array(self, path: str, note: str, *, shape, dtype, chunks, write="partial",
              data=None, **create_kw) -> np.ndarray:
        """Create, fill (per `write`) and record one array; returns the read-back data."""
        create_kw.setdefault("compressors", None)
        arr = zarr.create_array(self.dir, name=path or None, shape=shape, dtype=dtype, chunks=chunks,
                                zarr_format=int(self.fmt), **create_kw)
        if data is None:
            data = sample_for(arr, self.name, path)
        write_data(arr, data, write)
        return self.record(path, note)

    def record(self, path: str, note: str, expected: np.ndarray | None = None) -> np.ndarray:
        """Add the manifest entry of `path`, read back with zarr-python unless given."""
        if expected is None:
            expected = zarr.open_array(self.dir, path=path, mode="r", zarr_format=int(self.fmt))[...]
        expected = np.asarray(expected)
        meta = self.metadata(path)
        extra = {}
        if self.fmt == "3":
            chunks = meta["chunk_grid"]["configuration"]["chunk_shape"]
            zarr_dtype = meta["data_type"]
            sharding = [c for c in meta["codecs"] if c["name"] == "sharding_indexed"]
            if sharding:
                extra["inner_chunks"] = sharding[0]["configuration"]["chunk_shape"]
        else:
            chunks, zarr_dtype = meta["chunks"], meta["dtype"]
        # A 0-d string array reads back as a numpy str scalar: keep it variable-length.
        vlen = expected.dtype.kind in "OT" or zarr_dtype in ("string", "variable_length_bytes", "|O")
        if vlen and expected.dtype.kind not in "OT":
            expected = expected.astype(object)
        self.entries.append(array_entry(self.name, path, expected, chunks=chunks, zarr_dtype=zarr_dtype,
                                        fill_value=meta["fill_value"], note=note, vlen=vlen, **extra))
        return expected

    def manifest(self) -> tuple[dict, list, list]:
        groups, arrays_on_disk = list_groups(self.name, self.dir, self.fmt)
        recorded = sorted(e["path"] for e in self.entries)
        if sorted(arrays_on_disk) != recorded:
            raise RuntimeError(f"{self.name}: arrays on disk {sorted(arrays_on_disk)} != recorded {recorded}")
        store = {"name": self.name, "dir": self.name, "format": self.fmt, "writer": WRITER}
        return store, self.entries, groups


# --- data --------------------------------------------------------------------

def sample_for(arr, store: str, path: str):
    rng = seeded_rng(store, path)
    zdtype = arr.metadata.dtype
    if isinstance(zdtype, VariableLengthUTF8):
        return sample_vlen("text", arr.shape, rng)
    if isinstance(zdtype, VariableLengthBytes):
        return sample_vlen("bytes", arr.shape, rng)
    return sample_data(zdtype.to_native_dtype(), arr.shape, rng)


def partial_box(shape) -> tuple:
    """A box touching some chunks partly and leaving trailing chunks unwritten."""
    return tuple(slice(s // 5, max(s // 5 + 1, (3 * s) // 5)) for s in shape)


def chunk_boxes(shape, chunks):
    """Every chunk's box, in C order of the chunk grid, with its grid index."""
    grid = [-(-s // c) for s, c in zip(shape, chunks)]
    for idx in np.ndindex(*grid):
        yield idx, tuple(slice(i * c, min((i + 1) * c, s)) for i, c, s in zip(idx, chunks, shape))


def write_data(arr, data, write) -> np.ndarray:
    """Write `data` into `arr` and return the mask of written elements.

    write: "all", "none", "partial" (partial_box), "checker" (whole chunks whose
    grid indices sum to an even number) or a tuple of slices (one box)."""
    mask = np.zeros(arr.shape, dtype=bool)
    if arr.size == 0 or write == "none":
        return mask
    if write == "all" or arr.ndim == 0:
        boxes = [(Ellipsis,)]
    elif write == "partial":
        boxes = [partial_box(arr.shape)]
    elif write == "checker":
        boxes = [box for idx, box in chunk_boxes(arr.shape, arr.chunks) if sum(idx) % 2 == 0]
    elif isinstance(write, tuple):
        boxes = [write]
    else:
        raise ValueError(f"unknown write mode {write!r}")
    for box in boxes:
        arr[box] = data[box]
        mask[box] = True
    return mask


def patched_fill(store: Store, path: str, note: str, *, dtype, shape, chunks, fill_json, fill_bits,
                 bits_dtype, data_type_json=None):
    """Write whole chunks with zarr-python, then patch the metadata's fill value
    (and optionally data type); the expected bytes come from numpy: written
    chunks as read back, unwritten chunks hold the raw fill bits."""
    arr = zarr.create_array(store.dir, name=path, shape=shape, dtype=dtype, chunks=chunks,
                            zarr_format=int(store.fmt), compressors=None)
    mask = write_data(arr, sample_for(arr, store.name, path), "checker")
    expected = np.array(arr[...])
    fill = np.frombuffer(np.asarray(fill_bits, dtype=bits_dtype).tobytes(), dtype=expected.dtype.newbyteorder("<"))
    expected[~mask] = fill[0]
    _check_bits(expected[~mask], fill)
    changes = {"fill_value": fill_json}
    if data_type_json is not None:
        changes["data_type"] = data_type_json
    store.patch_metadata(path, **changes)
    store.record(path, note + f"; zarr.json patched after writing: fill_value {json.dumps(fill_json)}"
                 + (f", data_type {json.dumps(data_type_json)}" if data_type_json else "")
                 + "; expected bytes computed with numpy" + _zarr_reading_note(store, path, expected), expected)


def _check_bits(values: np.ndarray, fill: np.ndarray) -> None:
    """The fill bits must survive numpy's assignment and byte swapping (NaN payloads)."""
    if values.size == 0:
        return
    want = fill.tobytes()
    assert values[:1].tobytes() == want, (values[:1].tobytes(), want)
    if values.dtype.kind in "fc":
        part = values.dtype.itemsize // (2 if values.dtype.kind == "c" else 1)
        swapped = b"".join(want[i:i + part][::-1] for i in range(0, len(want), part))
        assert values[:1].astype(values.dtype.newbyteorder(">")).tobytes() == swapped, "byte swap lost bits"


def _zarr_reading_note(store: Store, path: str, expected: np.ndarray) -> str:
    """How zarr-python itself reads the patched array, when it differs."""
    try:
        got = np.asarray(zarr.open_array(store.dir, path=path, mode="r")[...])
    except Exception as e:  # noqa: BLE001 - any failure is worth recording
        return f" (zarr-python {zarr.__version__} cannot read it: {type(e).__name__})"
    if got.tobytes() == expected.tobytes():
        return f" (zarr-python {zarr.__version__} reads the same bytes)"
    return f" (zarr-python {zarr.__version__} reads different bytes, e.g. it drops NaN payloads)"


# --- Zarr v3 -------------------------------------------------------------------

def write_v3(outdir: str) -> Store:
    s = Store(outdir, "v3", "3")
    s.group("", {"title": "zarrfs v3 fixtures", "nested": {"list": [1, 2.5, None, "x"]}})
    v3_dtypes(s)
    v3_order(s)
    v3_codecs(s)
    v3_sharding(s)
    v3_keys(s)
    v3_fill(s)
    v3_shapes(s)
    v3_groups(s)
    return s


def v3_dtypes(s: Store) -> None:
    for name in NUMERIC:
        s.array(f"dtypes/{name}", f"v3 core data type {name}, little endian; partial write (missing and edge chunks)",
                shape=(7, 9), chunks=(3, 4), dtype=name)
        if np.dtype(name).itemsize > 1:
            s.array(f"dtypes_big/{name}", f"v3 {name} with bytes codec endian big",
                    shape=(7, 9), chunks=(3, 4), dtype=name, serializer=BytesCodec(endian="big"))
    for unit in ["Y", "M", "D", "h", "m", "s", "ms", "us", "ns", "10s"]:
        s.array(f"dtypes/datetime64_{unit}", f"numpy.datetime64 unit {unit} (NaT mixed in)",
                shape=(11,), chunks=(4,), dtype=f"M8[{unit}]")
    for unit in ["W", "D", "s", "ms", "ns", "5us"]:
        s.array(f"dtypes/timedelta64_{unit}", f"numpy.timedelta64 unit {unit}",
                shape=(11,), chunks=(4,), dtype=f"m8[{unit}]")
    s.array("dtypes_big/datetime64_ns", "numpy.datetime64[ns], bytes endian big",
            shape=(11,), chunks=(4,), dtype="M8[ns]", serializer=BytesCodec(endian="big"))
    s.array("dtypes/fixed_length_utf32", "fixed_length_utf32 (numpy <U5), non-ASCII and astral chars",
            shape=(4, 5), chunks=(3, 2), dtype="U5")
    s.array("dtypes_big/fixed_length_utf32", "fixed_length_utf32 with bytes endian big (UTF-32BE code units)",
            shape=(4, 5), chunks=(3, 2), dtype="U5", serializer=BytesCodec(endian="big"))
    s.array("dtypes/null_terminated_bytes", "null_terminated_bytes (numpy S6)", shape=(9,), chunks=(4,), dtype="S6")
    s.array("dtypes/raw_bytes", "raw_bytes (numpy V5)", shape=(9,), chunks=(4,), dtype="V5")
    s.array("dtypes/structured", "structured, flat: <i2, <f8, |u1",
            shape=(6, 3), chunks=(4, 2), dtype=[("a", "<i2"), ("b", "<f8"), ("c", "u1")])
    s.array("dtypes/structured_nested", "structured with a nested struct, bool, U, S, datetime64, complex fields",
            shape=(7,), chunks=(3,), dtype=NESTED_STRUCT)
    s.array("dtypes/string", "string (vlen-utf8 codec), partial write: missing elements read as fill ''",
            shape=(5, 6), chunks=(2, 4), dtype=VariableLengthUTF8())
    s.array("dtypes/bytes", "variable_length_bytes (vlen-bytes codec)",
            shape=(5, 6), chunks=(2, 4), dtype=VariableLengthBytes())
    s.array("dtypes/string_zstd", "string with vlen-utf8 then zstd", shape=(9,), chunks=(4,),
            dtype=VariableLengthUTF8(), write="all", compressors=[ZstdCodec(level=3)])
    patched_fill(s, "dtypes/r16", "r16 raw bits: written as raw_bytes (V2), data_type patched to r16",
                 dtype="V2", shape=(5, 3), chunks=(2, 2), fill_json=[171, 205], fill_bits=[171, 205],
                 bits_dtype="u1", data_type_json="r16")


def v3_order(s: Store) -> None:
    s.array("order/transpose_2d", "transpose codec order [1,0] (F order chunks)", shape=(7, 9), chunks=(3, 4),
            dtype="int32", filters=[TransposeCodec(order=(1, 0))])
    s.array("order/transpose_3d", "transpose codec order [2,0,1]", shape=(5, 6, 7), chunks=(2, 4, 3),
            dtype="uint16", filters=[TransposeCodec(order=(2, 0, 1))], compressors=[GzipCodec(level=1)])
    s.array("order/transpose_3d_f", "transpose codec order [2,1,0] (full F) with bytes endian big",
            shape=(5, 6, 7), chunks=(2, 4, 3), dtype="float64", filters=[TransposeCodec(order=(2, 1, 0))],
            serializer=BytesCodec(endian="big"))
    s.array("order/transpose_identity", "transpose codec order [0,1] (identity)", shape=(5, 4), chunks=(2, 3),
            dtype="int8", filters=[TransposeCodec(order=(0, 1))])
    s.array("order/transpose_string", "transpose [1,0] before vlen-utf8", shape=(5, 4), chunks=(2, 3),
            dtype=VariableLengthUTF8(), filters=[TransposeCodec(order=(1, 0))], write="all")
    s.array("order/transpose_structured", "transpose [1,0] on a structured dtype", shape=(5, 4), chunks=(2, 3),
            dtype=[("a", "<i2"), ("b", "<f4")], filters=[TransposeCodec(order=(1, 0))])
    s.array("order/transpose_in_shard", "sharding whose inner chain has transpose [1,0,2]",
            shape=(6, 5, 4), chunks=(4, 4, 4), dtype="int16", write="all",
            serializer=ShardingCodec(chunk_shape=(2, 2, 4), codecs=[TransposeCodec(order=(1, 0, 2)), BytesCodec()]))


def v3_codecs(s: Store) -> None:
    def arr(name, note, dtype="int32", shape=(20, 30), chunks=(8, 16), write="all", **kw):
        s.array(f"codecs/{name}", note, shape=shape, chunks=chunks, dtype=dtype, write=write, **kw)

    arr("gzip_1", "gzip level 1", compressors=[GzipCodec(level=1)])
    arr("gzip_9", "gzip level 9, float64", dtype="float64", compressors=[GzipCodec(level=9)])
    arr("zstd_3", "zstd level 3", compressors=[ZstdCodec(level=3)])
    arr("zstd_checksum", "zstd with checksum true", compressors=[ZstdCodec(level=5, checksum=True)])
    arr("zstd_negative", "zstd level -3", compressors=[ZstdCodec(level=-3)])
    for cname in BLOSC_CNAMES:
        for shuffle in BLOSC_SHUFFLES:
            arr(f"blosc_{cname}_{shuffle}", f"blosc cname {cname} shuffle {shuffle}", dtype="uint16",
                compressors=[BloscCodec(cname=cname, shuffle=shuffle, clevel=5)])
    arr("blosc_typesize_mismatch", "blosc typesize 2 on int64 data, lz4hc, clevel 9, blocksize 256", dtype="int64",
        compressors=[BloscCodec(cname="lz4hc", shuffle="shuffle", typesize=2, clevel=9, blocksize=256)])
    arr("blosc_clevel0", "blosc clevel 0 (stored uncompressed inside the blosc frame)", dtype="float32",
        compressors=[BloscCodec(cname="zstd", shuffle="bitshuffle", clevel=0)])
    arr("crc32c", "crc32c alone", compressors=[Crc32cCodec()])
    arr("gzip_crc32c", "gzip then crc32c", compressors=[GzipCodec(level=4), Crc32cCodec()])
    arr("chain_delta_blosc_crc32c", "numcodecs.delta, bytes big, blosc, crc32c", dtype="int64",
        filters=[zn.Delta(dtype=">i8")], serializer=BytesCodec(endian="big"),
        compressors=[BloscCodec(cname="lz4", shuffle="shuffle"), Crc32cCodec()])
    arr("partial_gzip", "gzip, partial write (missing chunks)", write="partial", compressors=[GzipCodec()])
    v3_numcodecs(arr)


def v3_numcodecs(arr) -> None:
    """The numcodecs.* codecs zarr-python 3 writes in v3 (zarr.codecs.numcodecs).

    Left out: numcodecs.zfpy and numcodecs.pcodec (array->bytes; need the optional
    zfpy / pcodec packages), numcodecs.blosc/gzip/zstd (duplicates of core codecs,
    but numcodecs.blosc is kept once to show the config shape)."""
    arr("numcodecs_delta", "numcodecs.delta filter", dtype="int32", filters=[zn.Delta(dtype="<i4")])
    arr("numcodecs_delta_astype", "numcodecs.delta with astype <i2 on int32 data", dtype="int32",
        data=np.arange(600, dtype="int32").reshape(20, 30) % 300 - 100,
        filters=[zn.Delta(dtype="<i4", astype="<i2")])
    arr("numcodecs_fixedscaleoffset", "numcodecs.fixedscaleoffset (lossy) f8 -> i4", dtype="float64",
        filters=[zn.FixedScaleOffset(offset=100, scale=10, dtype="<f8", astype="<i4")])
    arr("numcodecs_quantize", "numcodecs.quantize digits 3 (lossy)", dtype="float64",
        filters=[zn.Quantize(digits=3, dtype="<f8")])
    arr("numcodecs_bitround", "numcodecs.bitround keepbits 6 (lossy)", dtype="float32",
        filters=[zn.BitRound(keepbits=6)])
    arr("numcodecs_packbits", "numcodecs.packbits on bool", dtype="bool", filters=[zn.PackBits()])
    arr("numcodecs_astype", "numcodecs.astype f8 stored as f4 (lossy)", dtype="float64",
        filters=[zn.AsType(encode_dtype="<f4", decode_dtype="<f8")])
    arr("numcodecs_shuffle", "numcodecs.shuffle", dtype="int32", compressors=[zn.Shuffle(elementsize=4)])
    arr("numcodecs_lz4", "numcodecs.lz4", compressors=[zn.LZ4(acceleration=1)])
    arr("numcodecs_zlib", "numcodecs.zlib", compressors=[zn.Zlib(level=6)])
    arr("numcodecs_bz2", "numcodecs.bz2", compressors=[zn.BZ2(level=9)])
    arr("numcodecs_lzma", "numcodecs.lzma", compressors=[zn.LZMA(preset=1)])
    arr("numcodecs_blosc", "numcodecs.blosc (numcodecs config: integer shuffle)",
        compressors=[zn.Blosc(cname="zstd", clevel=3, shuffle=2, blocksize=0)])
    arr("numcodecs_crc32", "numcodecs.crc32 checksum", compressors=[zn.CRC32()])
    arr("numcodecs_crc32c", "numcodecs.crc32c checksum", compressors=[zn.CRC32C()])
    arr("numcodecs_adler32", "numcodecs.adler32 checksum", compressors=[zn.Adler32()])
    arr("numcodecs_fletcher32", "numcodecs.fletcher32 checksum", compressors=[zn.Fletcher32()])
    arr("numcodecs_jenkins_lookup3", "numcodecs.jenkins_lookup3 checksum", compressors=[zn.JenkinsLookup3()])


def v3_sharding(s: Store) -> None:
    def arr(name, note, serializer, shape=(10, 12), chunks=(4, 6), dtype="int32", write="partial", **kw):
        s.array(f"sharding/{name}", note, shape=shape, chunks=chunks, dtype=dtype, write=write,
                serializer=serializer, **kw)

    arr("end_crc32c", "sharding, index at end with [bytes, crc32c] index codecs; partial write: missing "
        "shards, partly filled shards (empty inner chunks), edge shards",
        ShardingCodec(chunk_shape=(2, 3)))
    arr("start_no_crc", "sharding, index_location start, index codecs [bytes] only",
        ShardingCodec(chunk_shape=(2, 3), index_location="start", index_codecs=[BytesCodec()]))
    arr("start_crc32c", "sharding, index_location start with crc32c",
        ShardingCodec(chunk_shape=(2, 3), index_location="start"))
    arr("end_no_crc_full", "sharding, index at end, [bytes] index codecs, all chunks written",
        ShardingCodec(chunk_shape=(2, 3), index_codecs=[BytesCodec()]), write="all")
    arr("inner_gzip", "sharding with inner codecs [bytes, gzip]",
        ShardingCodec(chunk_shape=(2, 3), codecs=[BytesCodec(), GzipCodec(level=6)]), dtype="float64")
    arr("inner_blosc_big", "sharding with inner [bytes endian big, blosc]",
        ShardingCodec(chunk_shape=(2, 3), codecs=[BytesCodec(endian="big"), BloscCodec(cname="lz4", shuffle="bitshuffle")]),
        dtype="uint16")
    arr("outer_compressor", "sharding followed by a bytes->bytes codec on the whole shard (zstd)",
        ShardingCodec(chunk_shape=(2, 3)), compressors=[ZstdCodec(level=1)])
    arr("nested", "nested sharding: 8x8 shards of 4x4 sub-shards of 2x2 gzip chunks",
        ShardingCodec(chunk_shape=(4, 4), codecs=[ShardingCodec(chunk_shape=(2, 2), codecs=[BytesCodec(), GzipCodec()],
                                                                 index_location="start")]),
        shape=(13, 11), chunks=(8, 8), dtype="int16")
    arr("sparse", "sharding where a single inner chunk, (2,2) of shard (1,1), is written",
        ShardingCodec(chunk_shape=(2, 3)), data=np.arange(1, 121, dtype="int32").reshape(10, 12),
        write=(slice(4, 6), slice(6, 9)))
    arr("shape_3d", "3-d sharding with edge shards", ShardingCodec(chunk_shape=(2, 2, 3), codecs=[BytesCodec(), ZstdCodec()]),
        shape=(5, 7, 6), chunks=(4, 4, 6), dtype="float32")
    arr("string", "sharding around vlen-utf8 inner chunks", ShardingCodec(chunk_shape=(2,), codecs=[VLenUTF8Codec(), ZstdCodec()]),
        shape=(9,), chunks=(4,), dtype=VariableLengthUTF8())
    arr("bytes", "sharding around vlen-bytes inner chunks", ShardingCodec(chunk_shape=(2,), codecs=[VLenBytesCodec()]),
        shape=(9,), chunks=(4,), dtype=VariableLengthBytes(), write="all")
    s.array("sharding/shards_kw", "sharding via create_array(shards=...) defaults (zstd inside shards)",
            shape=(9, 9), chunks=(2, 2), shards=(4, 4), dtype="int16", compressors="auto")


def v3_keys(s: Store) -> None:
    encodings = {
        "default_slash": {"name": "default", "separator": "/"},
        "default_dot": {"name": "default", "separator": "."},
        "v2_dot": {"name": "v2", "separator": "."},
        "v2_slash": {"name": "v2", "separator": "/"},
    }
    for name, enc in encodings.items():
        s.array(f"keys/{name}", f"chunk_key_encoding {enc['name']} separator '{enc['separator']}', 3-d",
                shape=(5, 6, 7), chunks=(2, 4, 3), dtype="int16", chunk_key_encoding=enc)
        s.array(f"keys/{name}_0d", f"0-d array with chunk_key_encoding {enc['name']} '{enc['separator']}'",
                shape=(), chunks=(), dtype="float32", chunk_key_encoding=enc)


def v3_fill(s: Store) -> None:
    def arr(name, note, dtype, fill_value, shape=(7, 5), chunks=(3, 2)):
        s.array(f"fill/{name}", note + "; partial write so the fill value shows", shape=shape, chunks=chunks,
                dtype=dtype, fill_value=fill_value)

    arr("float32_nan", "fill NaN", "float32", np.nan)
    arr("float64_inf", "fill +Infinity", "float64", np.inf)
    arr("float16_neg_inf", "fill -Infinity", "float16", -np.inf)
    arr("float64_neg_zero", "fill -0.0", "float64", -0.0)
    arr("float32_value", "fill 1.5", "float32", 1.5)
    arr("uint64_max", "fill uint64 max", "uint64", np.iinfo("uint64").max)
    arr("int64_min", "fill int64 min", "int64", np.iinfo("int64").min)
    arr("int8_min", "fill int8 -128", "int8", -128)
    arr("complex64", "complex fill [NaN, -Infinity]", "complex64", complex(np.nan, -np.inf))
    arr("complex128", "complex fill [1.5, -0.0]", "complex128", complex(1.5, -0.0))
    arr("datetime_nat", "datetime64[s] fill NaT", "M8[s]", np.datetime64("NaT"))
    arr("datetime_value", "datetime64[ms] fill 1970-01-02", "M8[ms]", np.datetime64("1970-01-02", "ms"))
    arr("timedelta_value", "timedelta64[s] fill 42s", "m8[s]", np.timedelta64(42, "s"))
    arr("bool_true", "bool fill true", "bool", True)
    arr("bytes_fixed", "null_terminated_bytes fill b'ab' (base64 in JSON)", "S3", b"ab")
    arr("raw_bytes", "raw_bytes fill (base64 in JSON)", "V3", np.void(b"\x01\x02\x03"))
    arr("utf32", "fixed_length_utf32 fill 'hé'", "U3", "hé")
    arr("structured", "structured fill (7, 1.5) (base64 in JSON)", np.dtype([("a", "<i2"), ("b", "<f8")]),
        np.array((7, 1.5), dtype=[("a", "<i2"), ("b", "<f8")])[()])
    arr("string", "string fill 'fill'", VariableLengthUTF8(), "fill")
    arr("bytes_vlen", "variable_length_bytes fill b'\\x00\\x01'", VariableLengthBytes(), b"\x00\x01")
    patched_fill(s, "fill/float32_nan_payload", "float32 NaN with payload", dtype="float32", shape=(7, 5),
                 chunks=(3, 2), fill_json="0x7fc00001", fill_bits=[0x7FC00001], bits_dtype="<u4")
    patched_fill(s, "fill/float64_hex_nan", "float64 hex NaN with payload", dtype="float64", shape=(7, 5),
                 chunks=(3, 2), fill_json="0x7ff8000000000abc", fill_bits=[0x7FF8000000000ABC], bits_dtype="<u8")
    patched_fill(s, "fill/float64_hex_one", "float64 hex fill 0x3ff0000000000000 (1.0)", dtype="float64",
                 shape=(7, 5), chunks=(3, 2), fill_json="0x3ff0000000000000", fill_bits=[0x3FF0000000000000],
                 bits_dtype="<u8")
    patched_fill(s, "fill/float16_hex_nan", "float16 hex NaN with payload", dtype="float16", shape=(7, 5),
                 chunks=(3, 2), fill_json="0x7e01", fill_bits=[0x7E01], bits_dtype="<u2")
    patched_fill(s, "fill/complex64_hex", "complex64 fill with a hex NaN-payload real part", dtype="complex64",
                 shape=(7, 5), chunks=(3, 2), fill_json=["0x7fc00001", "-Infinity"],
                 fill_bits=[0x7FC00001, 0xFF800000], bits_dtype="<u4")


def v3_shapes(s: Store) -> None:
    s.array("shapes/scalar", "0-d float64 (shape [], chunk key 'c')", shape=(), chunks=(), dtype="float64")
    s.array("shapes/scalar_unwritten", "0-d int32 never written: reads as fill 42", shape=(), chunks=(),
            dtype="int32", fill_value=42, write="none")
    s.array("shapes/scalar_string", "0-d string", shape=(), chunks=(), dtype=VariableLengthUTF8())
    s.array("shapes/scalar_bool", "0-d bool (a one-byte file: no ENVI view)", shape=(), chunks=(), dtype="bool")
    s.array("shapes/one_uint8", "one uint8 element (a one-byte file: no ENVI view)", shape=(1,), chunks=(1,),
            dtype="uint8")
    s.array("shapes/zero_len", "zero-length dimension [0, 5]", shape=(0, 5), chunks=(2, 2), dtype="int32")
    s.array("shapes/zero_len_3d", "zero-length middle dimension [3, 0, 2]", shape=(3, 0, 2), chunks=(2, 1, 2),
            dtype="float32")
    s.array("shapes/zero_len_string", "zero-length string array [0]", shape=(0,), chunks=(3,),
            dtype=VariableLengthUTF8())
    s.array("shapes/d1", "1-d, 17 elements in chunks of 5", shape=(17,), chunks=(5,), dtype="int64")
    s.array("shapes/d2_chunk_bigger", "chunk larger than the array", shape=(3, 2), chunks=(10, 10), dtype="uint8",
            write="all")
    s.array("shapes/d3", "3-d", shape=(4, 5, 6), chunks=(3, 2, 4), dtype="int16")
    s.array("shapes/d4", "4-d", shape=(3, 4, 5, 2), chunks=(2, 3, 2, 1), dtype="float32")
    s.array("shapes/d5", "5-d with F-like transpose [4,3,2,1,0]", shape=(3, 2, 4, 2, 3), chunks=(2, 1, 3, 2, 2),
            dtype="uint32", filters=[TransposeCodec(order=(4, 3, 2, 1, 0))])
    s.array("shapes/d5_c", "5-d", shape=(3, 2, 4, 2, 3), chunks=(2, 1, 3, 2, 2), dtype="int8", write="all")
    s.array("shapes/dims_named", "dimension_names [y, x] and array attributes", shape=(4, 3), chunks=(2, 2),
            dtype="float32", dimension_names=["y", "x"], attributes={"units": "m", "scale": [1, 2]})


def v3_groups(s: Store) -> None:
    s.group("grp", {"level": 1})
    s.group("grp/sub", {"level": 2, "unicode": "é漢"})
    s.group("grp/empty_group", {"empty": True})
    s.array("grp/sub/arr", "array in nested explicit groups", shape=(4, 6), chunks=(3, 3), dtype="float32",
            attributes={"kind": "nested"})
    s.array("grp/implicit_child/arr", "array under an implicit group inside an explicit group",
            shape=(5,), chunks=(2,), dtype="int32")
    s.array("implicit/deeper/arr", "array under two implicit groups (no zarr.json in implicit/ or implicit/deeper/)",
            shape=(5,), chunks=(2,), dtype="uint8")
    for path in ["grp/implicit_child", "implicit", "implicit/deeper"]:
        s.drop_group_metadata(path)


def write_v3_consolidated(outdir: str) -> Store:
    s = Store(outdir, "v3_consolidated", "3")
    s.group("", {"consolidated": True})
    s.group("a", {"x": 1})
    s.group("a/b")
    s.array("a/b/data", "array listed in consolidated_metadata", shape=(6, 4), chunks=(4, 4), dtype="float64")
    s.array("top", "root-level array in a consolidated store", shape=(5,), chunks=(2,), dtype="int16",
            fill_value=-1)
    s.array("a/names", "string array in a consolidated store", shape=(3,), chunks=(2,), dtype=VariableLengthUTF8())
    zarr.consolidate_metadata(s.dir)
    return s


def write_v3_large(outdir: str) -> Store:
    """One 16 MiB zstd array with many chunks: larger than the small caches the
    concurrent-reader mount tests use."""
    s = Store(outdir, "v3_large", "3")
    z, y, x = np.meshgrid(np.arange(64), np.arange(256), np.arange(256), indexing="ij")
    field = (np.sin(x / 17.0 + z / 9.0) * np.cos(y / 23.0) * 100.0).astype("float32")
    field += seeded_rng("v3_large", "field").integers(0, 16, field.shape).astype("float32") / 16.0
    s.array("field", "16 MiB float32, zstd, 512 chunks", shape=field.shape, chunks=(8, 64, 64),
            dtype="float32", write="all", data=field,
            compressors=[zarr.codecs.ZstdCodec(level=1)])
    return s


def write_root_array(outdir: str, name: str, fmt: str) -> Store:
    s = Store(outdir, name, fmt)
    s.array("", f"root node is an array (zarr format {fmt})", shape=(6, 5), chunks=(4, 4), dtype="int16",
            attributes={"root": "array"})
    return s


# --- Zarr v2 -------------------------------------------------------------------

V2_NUMERIC = ["|b1", "|i1", "|u1"] + [f"{e}{t}" for t in
                                      ["i2", "i4", "i8", "u2", "u4", "u8", "f2", "f4", "f8", "c8", "c16"]
                                      for e in "<>"]


def v2_name(typestring: str) -> str:
    return typestring.replace("<", "lt_").replace(">", "gt_").replace("|", "").replace("[", "_").replace("]", "")


def write_v2(outdir: str) -> Store:
    s = Store(outdir, "v2", "2")
    s.group("", {"title": "zarrfs v2 fixtures"})
    v2_dtypes(s)
    v2_order(s)
    v2_compressors(s)
    v2_filters(s)
    v2_keys(s)
    v2_fill(s)
    v2_shapes(s)
    v2_groups(s)
    return s


def v2_dtypes(s: Store) -> None:
    for t in V2_NUMERIC:
        s.array(f"dtypes/{v2_name(t)}", f"v2 typestring {t}; partial write", shape=(7, 9), chunks=(3, 4), dtype=t)
    for t in ["<M8[ns]", ">M8[s]", "<M8[D]", "<M8[Y]", ">M8[10s]", "<m8[ms]", ">m8[us]", "<m8[h]"]:
        s.array(f"dtypes/{v2_name(t)}", f"v2 typestring {t}", shape=(11,), chunks=(4,), dtype=t)
    for t in ["|S5", "<U4", ">U4", "|V6"]:
        s.array(f"dtypes/{v2_name(t)}", f"v2 typestring {t}", shape=(4, 5), chunks=(3, 2), dtype=t)
    s.array("dtypes/structured", "v2 structured, mixed byte order fields",
            shape=(6, 3), chunks=(4, 2), dtype=[("a", "<i2"), ("b", ">f8"), ("c", "|u1")])
    # Nested v2 structs: zarr-python 3.1 writes them but cannot open them again,
    # so they come from zarr-python 2.18.7 (store v2_zarr2).
    s.array("dtypes/structured_rich", "v2 structured with bool, U, S, datetime64, complex fields",
            shape=(7,), chunks=(3,), dtype=FLAT_STRUCT)
    s.array("dtypes/structured_big", "v2 structured, all fields big endian",
            shape=(7,), chunks=(3,), dtype=FLAT_STRUCT.newbyteorder(">"))
    s.array("dtypes/object_vlen_utf8", "|O with vlen-utf8 filter (object codec)",
            shape=(5, 6), chunks=(2, 4), dtype=VariableLengthUTF8())
    s.array("dtypes/object_vlen_bytes", "|O with vlen-bytes filter (object codec)",
            shape=(5, 6), chunks=(2, 4), dtype=VariableLengthBytes())
    s.array("dtypes/object_vlen_utf8_zlib", "|O vlen-utf8 then zlib compressor", shape=(9,), chunks=(4,),
            dtype=VariableLengthUTF8(), compressors=[numcodecs.Zlib(level=1)], write="all")


def v2_order(s: Store) -> None:
    s.array("order/F_2d", "order F", shape=(7, 9), chunks=(3, 4), dtype="<i4", order="F")
    s.array("order/F_3d_big", "order F, >f8", shape=(5, 6, 7), chunks=(2, 4, 3), dtype=">f8", order="F",
            compressors=[numcodecs.Zstd(level=1)])
    s.array("order/F_structured", "order F, structured", shape=(5, 4), chunks=(2, 3),
            dtype=[("a", "<i2"), ("b", ">f4")], order="F")
    s.array("order/F_string", "order F, |O vlen-utf8 (elements of each chunk in F order)", shape=(5, 4),
            chunks=(2, 3), dtype=VariableLengthUTF8(), order="F", write="all")
    s.array("order/F_U", "order F, <U3", shape=(5, 4), chunks=(2, 3), dtype="<U3", order="F")
    s.array("order/C_3d", "order C, 3-d", shape=(5, 6, 7), chunks=(2, 4, 3), dtype="<u2", order="C")


def v2_compressors(s: Store) -> None:
    def arr(name, note, compressor, dtype="<i4", write="all", **kw):
        s.array(f"compressors/{name}", note, shape=(20, 30), chunks=(8, 16), dtype=dtype, write=write,
                compressors=[compressor] if compressor else None, **kw)

    arr("none", "compressor null", None)
    for cname in BLOSC_CNAMES:
        for shuffle, code in BLOSC_SHUFFLES.items():
            arr(f"blosc_{cname}_{shuffle}", f"blosc cname {cname} shuffle {code} ({shuffle})",
                numcodecs.Blosc(cname=cname, clevel=5, shuffle=code), dtype="<u2")
    arr("blosc_autoshuffle", "blosc shuffle -1 (AUTOSHUFFLE), blocksize 128", numcodecs.Blosc(
        cname="zstd", clevel=3, shuffle=-1, blocksize=128), dtype=">f8")
    arr("zstd", "zstd level 3", numcodecs.Zstd(level=3))
    arr("zstd_checksum", "zstd with checksum", numcodecs.Zstd(level=1, checksum=True))
    arr("gzip", "gzip level 5", numcodecs.GZip(level=5))
    arr("zlib", "zlib level 1", numcodecs.Zlib(level=1))
    arr("bz2", "bz2 level 9", numcodecs.BZ2(level=9))
    arr("lz4", "lz4", numcodecs.LZ4(acceleration=1))
    arr("lzma", "lzma preset 1", numcodecs.LZMA(preset=1))
    arr("gzip_partial", "gzip, partial write", numcodecs.GZip(level=1), write="partial")


def v2_filters(s: Store) -> None:
    def arr(name, note, filters, dtype="<i4", compressor=None, write="all", data=None, shape=(20, 30)):
        s.array(f"filters/{name}", note, shape=shape, chunks=(8, 16), dtype=dtype, write=write, data=data,
                filters=filters, compressors=[compressor] if compressor else None)

    arr("delta", "delta filter", [numcodecs.Delta(dtype="<i4")])
    arr("delta_astype", "delta with astype <i2", [numcodecs.Delta(dtype="<i4", astype="<i2")],
        data=np.arange(600, dtype="<i4").reshape(20, 30) % 300 - 100)
    arr("shuffle", "shuffle filter elementsize 8", [numcodecs.Shuffle(elementsize=8)], dtype="<f8")
    arr("fixedscaleoffset", "fixedscaleoffset f8 -> u2 (lossy)",
        [numcodecs.FixedScaleOffset(offset=0, scale=100, dtype="<f8", astype="<i4")], dtype="<f8")
    arr("astype", "astype f8 stored as f4", [numcodecs.AsType(encode_dtype="<f4", decode_dtype="<f8")], dtype="<f8")
    arr("quantize", "quantize digits 2", [numcodecs.Quantize(digits=2, dtype="<f8")], dtype="<f8")
    arr("bitround", "bitround keepbits 4", [numcodecs.BitRound(keepbits=4)], dtype="<f4")
    arr("packbits", "packbits on |b1", [numcodecs.PackBits()], dtype="|b1")
    fruit = np.array(["apple", "kiwi", "fig", ""], dtype="<U5")
    arr("categorize", "categorize <U5 -> |u1 (labels apple, kiwi, fig)",
        [numcodecs.Categorize(labels=["apple", "kiwi", "fig"], dtype="<U5", astype="|u1")], dtype="<U5",
        data=fruit[seeded_rng("v2", "categorize").integers(0, 4, 600)].reshape(20, 30), compressor=numcodecs.Zlib())
    arr("delta_shuffle_blosc", "filters [delta, shuffle] then blosc", [numcodecs.Delta(dtype="<i8"),
        numcodecs.Shuffle(elementsize=8)], dtype="<i8", compressor=numcodecs.Blosc(cname="lz4"))
    arr("big_endian_delta", "delta on >i2", [numcodecs.Delta(dtype=">i2")], dtype=">i2", write="partial")


def v2_keys(s: Store) -> None:
    for name, sep in [("dot", "."), ("slash", "/")]:
        s.array(f"keys/{name}", f"dimension_separator '{sep}', 3-d", shape=(5, 6, 7), chunks=(2, 4, 3),
                dtype="<i2", chunk_key_encoding={"name": "v2", "separator": sep})
        s.array(f"keys/{name}_0d", f"0-d with dimension_separator '{sep}' (chunk key '0')", shape=(), chunks=(),
                dtype="<f4", chunk_key_encoding={"name": "v2", "separator": sep})


def v2_fill(s: Store) -> None:
    def arr(name, note, dtype, fill_value, shape=(7, 5), chunks=(3, 2)):
        s.array(f"fill/{name}", note + "; partial write so the fill value shows", shape=shape, chunks=chunks,
                dtype=dtype, fill_value=fill_value)

    arr("nan", "fill NaN", "<f4", np.nan)
    arr("inf", "fill Infinity", ">f8", np.inf)
    arr("neg_inf", "fill -Infinity", "<f2", -np.inf)
    arr("neg_zero", "fill -0.0", "<f8", -0.0)
    arr("u8_max", "fill uint64 max", ">u8", np.iinfo("u8").max)
    arr("i8_min", "fill int64 min", "<i8", np.iinfo("i8").min)
    arr("complex", "complex fill [Infinity, NaN]", "<c8", complex(np.inf, np.nan))
    arr("complex_big", "complex fill [1.5, -2.5]", ">c16", complex(1.5, -2.5))
    arr("nat", "datetime64[ns] fill NaT", "<M8[ns]", np.datetime64("NaT"))
    arr("bool_true", "bool fill true", "|b1", True)
    arr("bytes", "|S3 fill b'ab' (base64)", "|S3", b"ab")
    arr("void", "|V3 fill (base64)", "|V3", np.void(b"\x01\x02\x03"))
    arr("unicode", "<U3 fill 'hé'", "<U3", "hé")
    arr("structured", "structured fill (7, 1.5) (base64 of the mixed-endian record)",
        np.dtype([("a", "<i2"), ("b", ">f8")]), np.array((7, 1.5), dtype=[("a", "<i2"), ("b", ">f8")])[()])
    arr("null_int", "fill_value null on <i4", "<i4", None)
    arr("null_float", "fill_value null on <f8", "<f8", None)
    # A null fill on |O is read as "" by zarr-python 3 but as None by zarr-python 2.18, the
    # format's own writer; v2_zarr2/object_null_fill covers it with the 2.18 read-back.
    arr("string", "fill 'fill' on |O vlen-utf8", VariableLengthUTF8(), "fill")


def v2_shapes(s: Store) -> None:
    s.array("shapes/scalar", "0-d <f8", shape=(), chunks=(), dtype="<f8")
    s.array("shapes/scalar_unwritten", "0-d never written: reads as fill 7", shape=(), chunks=(), dtype=">i4",
            fill_value=7, write="none")
    s.array("shapes/zero_len", "zero-length dimension [0, 5]", shape=(0, 5), chunks=(2, 2), dtype="<i4")
    s.array("shapes/d1", "1-d", shape=(17,), chunks=(5,), dtype="<i8")
    s.array("shapes/d3", "3-d", shape=(4, 5, 6), chunks=(3, 2, 4), dtype=">i2")
    s.array("shapes/d4", "4-d order F", shape=(3, 4, 5, 2), chunks=(2, 3, 2, 1), dtype="<f4", order="F")
    s.array("shapes/d5", "5-d", shape=(3, 2, 4, 2, 3), chunks=(2, 1, 3, 2, 2), dtype="<u4")


def v2_groups(s: Store) -> None:
    s.group("grp", {"level": 1})
    s.group("grp/sub", {"level": 2})
    s.group("grp/empty_group")
    s.array("grp/sub/arr", "array in nested groups, with .zattrs", shape=(4, 6), chunks=(3, 3), dtype="<f4",
            attributes={"kind": "nested", "_ARRAY_DIMENSIONS": ["y", "x"]})
    s.array("implicit/deeper/arr", "array under plain folders with no .zgroup", shape=(5,), chunks=(2,), dtype="|u1")
    for path in ["implicit", "implicit/deeper"]:
        s.drop_group_metadata(path)


def write_v2_consolidated(outdir: str) -> Store:
    s = Store(outdir, "v2_consolidated", "2")
    s.group("", {"consolidated": True})
    s.group("a", {"x": 1})
    s.group("a/b")
    s.array("a/b/data", "array listed in .zmetadata", shape=(6, 4), chunks=(4, 4), dtype="<f8")
    s.array("top", "root-level array in a consolidated v2 store", shape=(5,), chunks=(2,), dtype=">i2",
            fill_value=-1)
    zarr.consolidate_metadata(s.dir, zarr_format=2)
    return s


# --- driver --------------------------------------------------------------------

def run_draft_script(outdir: str) -> dict:
    python = os.path.join(REPO_ROOT, "target", "venv-zarr2", "bin", "python")
    env = dict(os.environ, ZARR_V3_EXPERIMENTAL_API="1", ZARR_V3_SHARDING="1")
    subprocess.run([python, os.path.join(SCRIPT_DIR, "make_fixtures_draft.py"), outdir], check=True, env=env)
    partial = os.path.join(outdir, "manifest-draft.json")
    with open(partial) as f:
        manifest = json.load(f)
    os.remove(partial)
    return manifest


def run_writers_script(outdir: str) -> dict:
    """GDAL and netCDF-C stores, written by Debian's /usr/bin/python3 (python3-gdal)."""
    script = os.path.join(SCRIPT_DIR, "make_fixtures_writers.py")
    subprocess.run(["/usr/bin/python3", script, outdir], check=True)
    partial = os.path.join(outdir, "manifest-writers.json")
    with open(partial) as f:
        manifest = json.load(f)
    os.remove(partial)
    return manifest


def write_manifest(manifest: dict, path: str) -> None:
    """JSON with one store, array or group per line (easy to grep and diff)."""
    sections = []
    for key, items in manifest.items():
        lines = ",\n".join("  " + json.dumps(item, ensure_ascii=False) for item in items)
        sections.append(f' "{key}": [\n{lines}\n ]')
    with open(path, "w") as f:
        f.write("{\n" + ",\n".join(sections) + "\n}\n")


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: make_fixtures.py OUTDIR")
    outdir = os.path.abspath(sys.argv[1])
    shutil.rmtree(outdir, ignore_errors=True)
    os.makedirs(outdir)
    stores = [write_v3(outdir), write_v3_consolidated(outdir), write_root_array(outdir, "v3_root_array", "3"),
              write_v2(outdir), write_v2_consolidated(outdir), write_root_array(outdir, "v2_root_array", "2"),
              write_v3_large(outdir)]
    manifest = {"stores": [], "arrays": [], "groups": []}
    for store in stores:
        info, arrays, groups = store.manifest()
        manifest["stores"].append(info)
        manifest["arrays"] += arrays
        manifest["groups"] += groups
    draft = run_draft_script(outdir)
    writers = run_writers_script(outdir)
    for key in manifest:
        manifest[key] += draft[key] + writers[key]
    write_manifest(manifest, os.path.join(outdir, "manifest.json"))
    counts = {s["name"]: sum(a["store"] == s["name"] for a in manifest["arrays"]) for s in manifest["stores"]}
    print(f"make_fixtures: {len(manifest['arrays'])} arrays in {outdir}: {counts}")


if __name__ == "__main__":
    main()
