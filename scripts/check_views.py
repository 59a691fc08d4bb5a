"""Read every file view of a zarrfs mount with each format's own reader; compare with zarr-python.

Usage (tests/it/views.rs runs it; run the `check` and `bigtiff` commands with
target/venv-views/bin/python, which has GDAL's osgeo, numpy, tifffile, SimpleITK and
pynrrd, and `make-bigtiff` with target/venv-zarr3/bin/python, which has zarr-python):

    check_views.py check MANIFEST --mount STORE=MOUNTPOINT [--mount ...] --order C|F
                   --endian little|big --views LIST [--eio STORE:PATH ...]
    check_views.py make-bigtiff OUTDIR
    check_views.py bigtiff FILE

`check` decides, from the manifest alone (each array's numpy dtype and shape) and the
rules of issue 11, which views every array of the mounted stores must show
(NAME.npy, NAME.tif, NAME.hdr, NAME.mhd, NAME.nhdr, NAME.vrt); it fails when one is
listed wrongly, when the raw file's `user.zarrfs.views` attribute disagrees, or when a
header lacks the fields the rules ask for. It then reads every present view with its
reader and compares the reader's array with zarr-python's bytes from the manifest (the
sha256 of the flat elements in C or F order, little- or big-endian). A big-endian
mount's values are converted to little-endian first (numpy's newbyteorder, which
recurses into structured fields); GDAL already returns native values. Arrays named
with --eio are ones zarrfs cannot decode: only their listing and attribute are checked.

How each reader's array is oriented (ORDER is the mount's --order; "the file's order"
means the flat bytes of the raw file, whose hash is the manifest's ORDER_little):

    numpy np.load     the array's own shape; tobytes(order=ORDER) is the file's order;
                      the mmap_mode='r' load must equal the plain load byte for byte
    tifffile          the full shape (from ImageDescription), C order (TIFF is C only)
    tiffinfo -D, tiffdump
                      exit 0 and say nothing on stderr
    GDAL GTiff        page k (GTIFF_DIR) is (rows, cols) = shape[-2:]; pages stacked
                      (k = C-order enumeration of the leading indices) are the C order.
                      float16 pages come back as Float32: compared by value (NaN
                      positions and the sign of zeros included) with the raw file's
                      float16 elements (the raw file having matched zarr-python first)
    GDAL ENVI         (bands, lines, samples), C-order bytes = the file's order; the
                      data of int64/uint64 (codes 14/15, unknown to GDAL 3.6) is not
                      read, only their header's fields are checked
    GDAL VRT          (bands, rows, cols) = the C-order array reshaped (-1, rows, cols),
                      in both orders (the offsets describe the C orientation)
    SimpleITK .mhd    GetArrayFromImage: the file shape slowest first (shape in C order,
                      reversed in F order; 1-d as (1, N), 0-d as (1, 1)), complex as a
                      trailing axis of 2; C-order bytes = the file's order. SimpleITK
                      reads 2 to 5 dimensions: an image of more is counted apart
    SimpleITK .nhdr   the same, for 2 to 5 dimensions (SimpleITK cannot read a 1-d
                      NRRD: 0-d and 1-d arrays are read by pynrrd only, counted apart)
    pynrrd .nhdr      index_order='C': the file shape slowest first (0-d as (1,)),
                      complex as a trailing axis of 2; C-order bytes = the file's order

It prints one line per failure, the fixture coverage, the arrays checked per reader and
a last line of JSON {"counts": {...}, "failures": N}; it exits 1 on any failure.

`make-bigtiff` writes OUTDIR/bigtiff.zarr with zarr-python 3: one uint8 array
"pages" of shape (3, 40000, 40000), fill value 7, no chunk written (4.8e9 bytes of
fill), and prints {"store", "path", "shape", "fill"} as JSON. `bigtiff` opens FILE
with tifffile without reading any image data, checks it is a little-endian BigTIFF of
3 tiled pages of (40000, 40000) uint8 whose series is (3, 40000, 40000), and prints
each page's tile shape and every tile's data offset and byte count, page after page,
as JSON.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import math
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import numpy as np

VIEW_KINDS = ["raw", "npy", "tiff", "envi", "mhd", "nrrd", "vrt"]
SUFFIX = {"raw": "", "npy": ".npy", "tiff": ".tif", "envi": ".hdr", "mhd": ".mhd", "nrrd": ".nhdr", "vrt": ".vrt"}
DETACHED = {"envi", "mhd", "nrrd", "vrt"}
MAX_PLANES = 65536

# Element types by numpy kind + itemsize ("b1" bool, "i4" int32, "c8" complex64, ...).
TIFF_TYPES = {"b1", "u1", "i1", "u2", "i2", "u4", "i4", "u8", "i8", "f2", "f4", "f8", "c8", "c16"}
ENVI_CODES = {"u1": 1, "b1": 1, "i2": 2, "i4": 3, "f4": 4, "f8": 5, "c8": 6, "c16": 9,
              "u2": 12, "u4": 13, "i8": 14, "u8": 15}
ENVI_UNKNOWN_TO_GDAL = {14, 15}
MET_TYPES = {"b1": "MET_UCHAR", "u1": "MET_UCHAR", "i1": "MET_CHAR", "i2": "MET_SHORT",
             "u2": "MET_USHORT", "i4": "MET_INT", "u4": "MET_UINT", "i8": "MET_LONG_LONG",
             "u8": "MET_ULONG_LONG", "f4": "MET_FLOAT", "f8": "MET_DOUBLE",
             "c8": "MET_FLOAT", "c16": "MET_DOUBLE"}
# NRRD type names (the spec's synonyms) of each element type.
NRRD_TYPES = {
    "b1": {"uchar", "unsigned char", "uint8", "uint8_t"},
    "u1": {"uchar", "unsigned char", "uint8", "uint8_t"},
    "i1": {"signed char", "int8", "int8_t"},
    "i2": {"short", "short int", "signed short", "signed short int", "int16", "int16_t"},
    "u2": {"ushort", "unsigned short", "unsigned short int", "uint16", "uint16_t"},
    "i4": {"int", "signed int", "int32", "int32_t"},
    "u4": {"uint", "unsigned int", "uint32", "uint32_t"},
    "i8": {"longlong", "long long", "long long int", "signed long long",
           "signed long long int", "int64", "int64_t"},
    "u8": {"ulonglong", "unsigned long long", "unsigned long long int", "uint64", "uint64_t"},
    "f4": {"float"}, "c8": {"float"},
    "f8": {"double"}, "c16": {"double"},
}
VRT_TYPES = {"b1": "Byte", "u1": "Byte", "u2": "UInt16", "i2": "Int16", "u4": "UInt32",
             "i4": "Int32", "u8": "UInt64", "i8": "Int64", "f4": "Float32", "f8": "Float64",
             "c8": "CFloat32", "c16": "CFloat64"}
SITK_MAX_DIM = 5


class Failures(list):
    """Failure lines, printed as they come."""

    def add(self, where: str, what: str) -> None:
        line = f"FAIL {where}: {what}"
        print(line, flush=True)
        self.append(line)


def type_key(entry: dict) -> str | None:
    """'i4', 'c8', 'b1', ... for plain numeric and bool dtypes; None for anything else."""
    if entry["vlen"]:
        return None
    dt = np.dtype(entry["dtype"])
    if dt.fields is not None or dt.kind not in "biufc":
        return None
    return f"{dt.kind}{dt.itemsize}"


def prod(values) -> int:
    return int(math.prod(values))


def planes(shape: list[int]) -> int:
    """Pages / bands: the product of all axes but the last two."""
    return prod(shape[:-2])


def expected_views(entry: dict, order: str) -> dict[str, str | None]:
    """Each non-raw view kind -> None when it must be shown, else why it must be absent."""
    shape = entry["shape"]
    key = type_key(entry)
    empty = 0 in shape
    out: dict[str, str | None] = {}
    if entry["vlen"]:
        return {k: "variable-length" for k in VIEW_KINDS if k != "raw"}
    out["npy"] = None
    if order != "C":
        out["tiff"] = "F order"
    elif len(shape) < 2:
        out["tiff"] = "rank < 2"
    elif key not in TIFF_TYPES:
        out["tiff"] = f"type {entry['dtype']}"
    elif empty:
        out["tiff"] = "zero-length dimension"
    elif planes(shape) > MAX_PLANES:
        out["tiff"] = "too many pages"
    else:
        out["tiff"] = None
    if key not in ENVI_CODES:
        out["envi"] = f"type {entry['dtype']}"
    elif empty:
        out["envi"] = "zero-length dimension"
    elif ENVI_CODES[key] == 1 and math.prod(shape) < 2:
        out["envi"] = "one-byte file: GDAL's ENVI driver does not open it"
    else:
        out["envi"] = None
    if key not in MET_TYPES:
        out["mhd"] = out["nrrd"] = f"type {entry['dtype']}"
    elif empty:
        out["mhd"] = out["nrrd"] = "zero-length dimension"
    else:
        out["mhd"] = "rank > 10" if len(shape) > 10 else None
        out["nrrd"] = "dimension > 16" if len(shape) + (key[0] == "c") > 16 else None
    if key not in VRT_TYPES:
        out["vrt"] = f"type {entry['dtype']}"
    elif empty:
        out["vrt"] = "zero-length dimension"
    elif len(shape) >= 2 and planes(shape) > MAX_PLANES:
        out["vrt"] = "too many bands"
    else:
        out["vrt"] = None
    return out


def file_dtype(entry: dict, endian: str) -> np.dtype:
    """The numpy dtype of the raw file's elements (structured from the manifest's descr)."""
    if "descr" in entry:
        dt = np.dtype([tuple(f) for f in _descr_tuples(entry["descr"])])
    else:
        dt = np.dtype(entry["dtype"])
    return dt.newbyteorder(">") if endian == "big" else dt.newbyteorder("<")


def _descr_tuples(descr):
    """The manifest's JSON descr (lists) as numpy's list of tuples, nested fields too."""
    out = []
    for field in descr:
        name, sub = field[0], field[1]
        sub = _descr_tuples(sub) if isinstance(sub, list) else sub
        out.append((name, sub, *field[2:]))
    return out


def to_little(arr: np.ndarray) -> np.ndarray:
    """The same values with every (nested) field little-endian."""
    return arr.astype(arr.dtype.newbyteorder("<"), copy=False)


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_shape(shape: list[int], order: str) -> list[int]:
    """The shape slowest axis first as the file lays it out: reversed in F order."""
    return list(shape) if order == "C" else list(reversed(shape))


def plane_dims(shape: list[int]) -> tuple[int, int, int]:
    """(planes, rows, cols) of a C-order shape: 1-d as one row, 0-d as 1 x 1."""
    if len(shape) == 0:
        return 1, 1, 1
    if len(shape) == 1:
        return 1, 1, shape[0]
    return planes(shape), shape[-2], shape[-1]


class Checker:
    """Checks one mount configuration over the arrays of the mounted stores."""

    def __init__(self, manifest: dict, order: str, endian: str, views: list[str], eio: set):
        self.manifest = manifest
        self.order = order
        self.endian = endian
        self.views = views
        self.eio = eio
        self.failures = Failures()
        self.counts: collections.Counter = collections.Counter()
        self.entry: dict = {}  # the array being checked

    @property
    def label(self) -> str:
        return f"{self.order}_{self.endian}"

    # -- one array ------------------------------------------------------------------

    def check_array(self, store: str, mountpoint: str, entry: dict) -> None:
        where = f"{store}:{entry['path']}"
        raw = os.path.join(mountpoint, entry["path"])
        name = os.path.basename(raw)
        listed = set(os.listdir(os.path.dirname(raw)))
        want = expected_views(entry, self.order)
        shown = {k: want[k] is None for k in self.views if k != "raw"}
        raw_shown = "raw" in self.views or any(k in DETACHED for k in self.views)
        self.check_listing(where, name, listed, raw_shown, shown)
        for kind in [k for k, present in shown.items() if not present]:
            if os.path.lexists(raw + SUFFIX[kind]):
                self.failures.add(where, f"{name + SUFFIX[kind]} found by lookup but must be absent")
        if raw_shown and name in listed:
            self.check_xattr(where, raw, name, want)
        if (store, entry["path"]) in self.eio:
            self.counts["eio arrays (listing only)"] += 1
            return
        if entry["vlen"] or not raw_shown or name not in listed:
            return
        data = self.check_raw(where, raw, entry)
        if data is None:
            return
        for kind, present in shown.items():
            if present and name + SUFFIX[kind] in listed:
                try:
                    getattr(self, f"read_{kind}")(where, raw + SUFFIX[kind], entry, data)
                except Exception as e:  # a reader's error is a failure of this view
                    self.failures.add(where, f"{kind}: {type(e).__name__}: {e}")

    def check_listing(self, where, name, listed, raw_shown, shown) -> None:
        if (name in listed) != raw_shown:
            self.failures.add(where, f"raw file {'missing' if raw_shown else 'shown'} with --views {','.join(self.views)}")
        for kind, present in shown.items():
            fname = name + SUFFIX[kind]
            if (fname in listed) != present:
                self.failures.add(where, f"{fname} {'missing' if present else 'listed but must be absent'}")

    def check_xattr(self, where, raw, name, want) -> None:
        try:
            text = os.getxattr(raw, "user.zarrfs.views").decode()
        except OSError as e:
            self.failures.add(where, f"user.zarrfs.views: {e}")
            return
        lines = [line for line in text.splitlines() if line]
        got = {}
        for line in lines:
            kind, _, rest = line.partition(": ")
            got[kind] = rest
        # One line per kind of the mount's list; the raw file shown for a detached header
        # (raw not listed) may have its line too.
        listed = list(self.views)
        if "raw" not in listed and "raw" in got:
            listed.append("raw")
        if sorted(got) != sorted(listed) or len(lines) != len(listed):
            self.failures.add(where, f"user.zarrfs.views lists {sorted(got)}, want {sorted(self.views)}: {text!r}")
        for kind in listed:
            rest = got.get(kind)
            if rest is None:
                continue
            if kind == "raw" or want[kind] is None:
                if rest != name + SUFFIX[kind]:
                    self.failures.add(where, f"user.zarrfs.views {kind}: {rest!r}, want {name + SUFFIX[kind]!r}")
            elif not (rest.startswith("absent (") and rest.endswith(")")):
                self.failures.add(where, f"user.zarrfs.views {kind}: {rest!r}, want absent (...)")
        self.counts["xattr user.zarrfs.views"] += 1

    def check_raw(self, where, raw, entry) -> bytes | None:
        with open(raw, "rb") as f:
            data = f.read()
        if digest(data) != entry["sha256"][self.label]:
            self.failures.add(where, f"raw file differs from zarr-python's {self.label} bytes")
            return None
        self.counts["raw file"] += 1
        return data

    def expect(self, where: str, reader: str, arr: np.ndarray, shapes, hash_label: str) -> None:
        """`arr` (any byte order) has one of `shapes` and, little-endian in C order,
        hashes to the current array's manifest hash `hash_label`."""
        shapes = [tuple(s) for s in shapes]
        if tuple(arr.shape) not in shapes:
            self.failures.add(where, f"{reader}: shape {arr.shape}, want {shapes[0]}")
            return
        got = digest(np.ascontiguousarray(to_little(arr)).tobytes())
        if got != self.entry["sha256"][hash_label]:
            self.failures.add(where, f"{reader}: values differ from zarr-python's ({hash_label}, dtype {arr.dtype})")
            return
        self.counts[reader] += 1

    # -- readers --------------------------------------------------------------------

    def read_npy(self, where, path, entry, data) -> None:
        with open(path, "rb") as f:
            head = f.read(12)
            size = os.fstat(f.fileno()).st_size
        if head[:6] != b"\x93NUMPY":
            self.failures.add(where, f"npy: magic {head[:6]!r}")
            return
        major = head[6]
        hlen = int.from_bytes(head[8:10], "little") if major == 1 else int.from_bytes(head[8:12], "little")
        offset = (10 if major == 1 else 12) + hlen
        if (major, head[7]) != (1, 0) and not (major == 2 and hlen > 65535):
            self.failures.add(where, f"npy: version {major}.{head[7]} for a header of {hlen} bytes")
        if offset % 64 or size != offset + len(data):
            self.failures.add(where, f"npy: data at {offset}, size {size}, want a multiple of 64 and {len(data)} data bytes")
        arr = np.load(path)
        want_dtype = file_dtype(entry, self.endian)
        if arr.dtype != want_dtype:
            self.failures.add(where, f"npy: dtype {arr.dtype.descr}, want {want_dtype.descr}")
        with open(path, "rb") as f:
            version = np.lib.format.read_magic(f)
            read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            _, fortran_order, _ = read_header(f)
        # 0-d and 1-d arrays have the same bytes either way.
        if len(entry["shape"]) > 1 and fortran_order != (self.order == "F"):
            self.failures.add(where, f"npy: fortran_order {fortran_order} with --order {self.order}")
        if tuple(arr.shape) == tuple(entry["shape"]) and arr.tobytes(order=self.order) != data:
            self.failures.add(where, "npy: data bytes differ from the raw file's")
        self.expect_order(where, "numpy np.load", arr, entry)
        mapped = np.load(path, mmap_mode="r")
        if mapped.dtype != arr.dtype or mapped.shape != arr.shape or mapped.tobytes(order="A") != arr.tobytes(order="A"):
            self.failures.add(where, "npy: mmap_mode='r' load differs from the plain load")
        else:
            self.counts["numpy mmap_mode='r'"] += 1

    def expect_order(self, where, reader, arr, entry) -> None:
        """`arr` has the array's shape and, little-endian in the mount's order, is zarr-python's."""
        if tuple(arr.shape) != tuple(entry["shape"]):
            self.failures.add(where, f"{reader}: shape {arr.shape}, want {tuple(entry['shape'])}")
            return
        if digest(to_little(arr).tobytes(order=self.order)) != entry["sha256"][f"{self.order}_little"]:
            self.failures.add(where, f"{reader}: values differ from zarr-python's")
            return
        self.counts[reader] += 1

    def read_tiff(self, where, path, entry, data) -> None:
        import tifffile

        shape = entry["shape"]
        npages, rows, cols = plane_dims(shape)
        key = type_key(entry)
        with tifffile.TiffFile(path) as tif:
            problems = []
            if tif.byteorder != ("<" if self.endian == "little" else ">"):
                problems.append(f"byte order {tif.byteorder}")
            if tif.is_bigtiff:
                problems.append("BigTIFF for a small file")
            if len(tif.pages) != npages:
                problems.append(f"{len(tif.pages)} pages, want {npages}")
            for k, page in enumerate(tif.pages):
                # One strip per page, or tiles (a multiple of 16 on each side) when the plane
                # spans several chunks.
                if page.is_tiled:
                    tile = (page.tilelength, page.tilewidth)
                    want = -(-rows // tile[0]) * -(-cols // tile[1])
                    good = tile[0] % 16 == 0 and tile[1] % 16 == 0
                else:
                    tile, want, good = None, 1, True
                if page.shape != (rows, cols) or page.compression != 1 or len(page.dataoffsets) != want or not good:
                    problems.append(f"page {k}: shape {page.shape} compression {page.compression} tiles {tile} "
                                    f"segments {len(page.dataoffsets)}")
                    break
            first = tif.pages[0]
            try:
                described = json.loads(first.description)["shape"]
            except (ValueError, KeyError, TypeError):
                described = None
            if described != shape:
                problems.append(f"ImageDescription {first.description!r}, want shape {shape}")
            want_sf = {"b": 1, "u": 1, "i": 2, "f": 3, "c": 6}[key[0]]
            if first.sampleformat != want_sf or first.bitspersample != int(key[1:]) * 8:
                problems.append(f"SampleFormat {first.sampleformat} BitsPerSample {first.bitspersample}")
            arr = tif.asarray()
        for p in problems:
            self.failures.add(where, f"tiff: {p}")
        if key == "b1" and arr.dtype != np.uint8:
            self.failures.add(where, f"tiff: bool read as {arr.dtype}, want uint8")
        self.expect(where, "tifffile", arr, [shape], "C_little")
        for tool in (["tiffinfo", "-D"], ["tiffdump"]):
            run = subprocess.run([*tool, path], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if run.returncode != 0 or run.stderr.strip():
                self.failures.add(where, f"{tool[0]}: exit {run.returncode}: {run.stderr.strip()[:300]}")
            else:
                self.counts[tool[0]] += 1
        self.read_tiff_gdal(where, path, entry, data)

    def read_tiff_gdal(self, where, path, entry, data) -> None:
        from osgeo import gdal

        shape = entry["shape"]
        npages, rows, cols = plane_dims(shape)
        pages = []
        for k in range(npages):
            name = path if k == 0 else f"GTIFF_DIR:{k + 1}:{path}"
            ds = gdal.OpenEx(name, gdal.OF_RASTER, allowed_drivers=["GTiff"])
            if ds is None or (ds.RasterXSize, ds.RasterYSize, ds.RasterCount) != (cols, rows, 1):
                self.failures.add(where, f"GDAL GTiff page {k}: {None if ds is None else (ds.RasterXSize, ds.RasterYSize, ds.RasterCount)}")
                return
            pages.append(ds.GetRasterBand(1).ReadAsArray())
            ds = None
        arr = np.stack(pages)
        if type_key(entry) == "f2":
            want = np.frombuffer(data, file_dtype(entry, self.endian)).astype("<f4").reshape(npages, rows, cols)
            same = np.array_equal(arr, want, equal_nan=True) and np.array_equal(np.signbit(arr), np.signbit(want))
            if arr.dtype != np.float32 or not same:
                self.failures.add(where, f"GDAL GTiff: float16 values differ ({arr.dtype})")
            else:
                self.counts["GDAL GTiff"] += 1
            return
        self.expect(where, "GDAL GTiff", arr, [(npages, rows, cols)], "C_little")

    def gdal_read(self, where, path, driver):
        """The whole raster GDAL's `driver` reads at `path`, or None (a failure noted)."""
        from osgeo import gdal

        ds = gdal.OpenEx(path, gdal.OF_RASTER, allowed_drivers=[driver])
        if ds is None:
            self.failures.add(where, f"GDAL {driver}: cannot open: {gdal.GetLastErrorMsg()}")
            return None
        return ds.ReadAsArray()

    def read_envi(self, where, path, entry, data) -> None:
        fields = parse_envi(path)
        shape = entry["shape"]
        fshape = file_shape(shape, self.order)
        bands, lines, samples = envi_dims(fshape)
        key = type_key(entry)
        want = {"samples": str(samples), "lines": str(lines), "bands": str(bands),
                "interleave": "bsq", "header offset": "0", "data type": str(ENVI_CODES[key]),
                "byte order": "1" if self.endian == "big" else "0"}
        bad = {k: fields.get(k) for k, v in want.items() if fields.get(k) != v}
        if bad or fields.get("_magic") != "ENVI":
            self.failures.add(where, f"envi: header fields {bad} (magic {fields.get('_magic')!r}), want {want}")
            return
        self.counts["ENVI header fields"] += 1
        if ENVI_CODES[key] in ENVI_UNKNOWN_TO_GDAL:
            self.counts["ENVI int64/uint64 (header only)"] += 1
            return
        arr = self.gdal_read(where, path[: -len(".hdr")], "ENVI")
        if arr is None:
            return
        arr = arr.reshape(-1, *arr.shape[-2:]) if arr.ndim >= 2 else arr
        self.expect(where, "GDAL ENVI", arr, [(bands, lines, samples)], f"{self.order}_little")

    def read_vrt(self, where, path, entry, data) -> None:
        shape = entry["shape"]
        npages, rows, cols = plane_dims(shape)
        key = type_key(entry)
        root = ET.parse(path).getroot()
        bands = root.findall("VRTRasterBand")
        problems = []
        if (root.get("rasterXSize"), root.get("rasterYSize")) != (str(cols), str(rows)):
            problems.append(f"raster size {root.get('rasterXSize')}x{root.get('rasterYSize')}, want {cols}x{rows}")
        if len(bands) != npages:
            problems.append(f"{len(bands)} bands, want {npages}")
        name = os.path.basename(path[: -len(".vrt")])
        want_order = "MSB" if self.endian == "big" else "LSB"
        for b in bands[:1] + bands[-1:]:
            src = b.find("SourceFilename")
            if b.get("subClass") != "VRTRawRasterBand" or b.get("dataType") != VRT_TYPES[key]:
                problems.append(f"band {b.get('subClass')} {b.get('dataType')}, want VRTRawRasterBand {VRT_TYPES[key]}")
            if src is None or src.text != name or src.get("relativeToVRT") != "1":
                problems.append(f"SourceFilename {None if src is None else (src.text, src.get('relativeToVRT'))}")
            if (b.findtext("ByteOrder") or want_order) != want_order and key not in ("b1", "u1"):
                problems.append(f"ByteOrder {b.findtext('ByteOrder')}")
            for tag in ("ImageOffset", "PixelOffset", "LineOffset"):
                if b.find(tag) is None:
                    problems.append(f"no {tag}")
        for p in problems:
            self.failures.add(where, f"vrt: {p}")
        if problems:
            return
        arr = self.gdal_read(where, path, "VRT")
        if arr is None:
            return
        self.expect(where, "GDAL VRT", arr.reshape(-1, rows, cols) if arr.size == npages * rows * cols else arr,
                    [(npages, rows, cols)], "C_little")

    def read_mhd(self, where, path, entry, data) -> None:
        import SimpleITK as sitk

        fields, keys = parse_keyvalue(path, " = ")
        shape = entry["shape"]
        fshape = file_shape(shape, self.order)
        key = type_key(entry)
        dims = list(reversed(fshape)) if len(fshape) >= 2 else (fshape + [1] if fshape else [1, 1])
        want = {"ObjectType": "Image", "NDims": str(len(dims)), "DimSize": " ".join(map(str, dims)),
                "ElementType": MET_TYPES[key], "ElementDataFile": os.path.basename(path[: -len(".mhd")])}
        if key[0] == "c":
            want["ElementNumberOfChannels"] = "2"
        bad = {k: fields.get(k) for k, v in want.items() if fields.get(k) != v}
        msb = fields.get("ElementByteOrderMSB", fields.get("BinaryDataByteOrderMSB"))
        if msb not in ({"True"} if self.endian == "big" else {"False"}) and not (key in ("b1", "u1", "i1") and msb is not None):
            bad["ElementByteOrderMSB"] = msb
        if not keys or keys[-1] != "ElementDataFile":
            bad["last key"] = keys[-1] if keys else None
        if bad:
            self.failures.add(where, f"mhd: header fields {bad}, want {want}")
            return
        self.counts["MetaImage header fields"] += 1
        if len(dims) > SITK_MAX_DIM:
            self.counts[f"SimpleITK .mhd beyond {SITK_MAX_DIM}-d (not read)"] += 1
            return
        arr = sitk.GetArrayFromImage(sitk.ReadImage(path))
        spatial = list(reversed(dims))
        self.expect(where, "SimpleITK .mhd", arr, [spatial + [2]] if key[0] == "c" else [spatial],
                    f"{self.order}_little")

    def read_nrrd(self, where, path, entry, data) -> None:
        import nrrd
        import SimpleITK as sitk

        fields, keys = parse_keyvalue(path, ": ")
        shape = entry["shape"]
        fshape = file_shape(shape, self.order) or [1]
        key = type_key(entry)
        sizes = list(reversed(fshape))
        if key[0] == "c":
            sizes = [2] + sizes
        bad = {}
        if fields.get("_magic") != "NRRD0004":
            bad["magic"] = fields.get("_magic")
        if fields.get("type") not in NRRD_TYPES[key]:
            bad["type"] = fields.get("type")
        if fields.get("dimension") != str(len(sizes)) or fields.get("sizes") != " ".join(map(str, sizes)):
            bad["dimension/sizes"] = (fields.get("dimension"), fields.get("sizes"))
        if fields.get("encoding") != "raw":
            bad["encoding"] = fields.get("encoding")
        component = int(key[1:]) // (2 if key[0] == "c" else 1)
        if component > 1 and fields.get("endian") != self.endian:
            bad["endian"] = fields.get("endian")
        datafile = fields.get("data file", fields.get("datafile"))
        if datafile != os.path.basename(path[: -len(".nhdr")]):
            bad["data file"] = datafile
        if key[0] == "c" and (fields.get("kinds") or "").split()[:1] != ["complex"]:
            bad["kinds"] = fields.get("kinds")
        if bad:
            self.failures.add(where, f"nrrd: header fields {bad}")
            return
        self.counts["NRRD header fields"] += 1
        spatial = list(fshape)
        arr, _ = nrrd.read(path, index_order="C")
        self.expect(where, "pynrrd .nhdr", arr, [spatial + [2]] if key[0] == "c" else [spatial],
                    f"{self.order}_little")
        if 2 <= len(shape) <= SITK_MAX_DIM:
            img = sitk.ReadImage(path)
            arr = sitk.GetArrayFromImage(img)
            self.expect(where, "SimpleITK .nhdr", arr, [spatial + [2], spatial] if key[0] == "c" else [spatial],
                        f"{self.order}_little")
        else:
            self.counts["SimpleITK .nhdr 0-d/1-d (pynrrd only)"] += 1


def envi_dims(fshape: list[int]) -> tuple[int, int, int]:
    """ENVI (bands, lines, samples) of the file shape: the last two axes are lines and
    samples, the rest bands; 1-d as one line, 0-d as 1 x 1 x 1."""
    return plane_dims(fshape)


def parse_envi(path: str) -> dict:
    """An ENVI header's `key = value` fields (keys lower-case), its first line as _magic."""
    with open(path, encoding="ascii") as f:
        lines = f.read().splitlines()
    fields = {"_magic": lines[0].strip() if lines else None}
    for line in lines[1:]:
        key, sep, value = line.partition("=")
        if sep:
            fields[key.strip().lower()] = value.strip()
    return fields


def parse_keyvalue(path: str, sep: str) -> tuple[dict, list]:
    """`key SEP value` lines (MetaImage ' = ', NRRD ': '); the first line without SEP as
    _magic; comment lines (#) skipped. Returns (fields, keys in order)."""
    with open(path, encoding="ascii") as f:
        lines = f.read().splitlines()
    fields, keys = {}, []
    for n, line in enumerate(lines):
        if line.startswith("#") or not line.strip():
            continue
        key, found, value = line.partition(sep)
        if not found:
            if n == 0:
                fields["_magic"] = line.strip()
            continue
        fields[key.strip()] = value.strip()
        keys.append(key.strip())
    return fields, keys


def coverage(entries: list[dict]) -> list[str]:
    """What the checked arrays cover, for the test's output."""
    c = collections.Counter()
    for e in entries:
        key = type_key(e)
        c[f"dtype {key or ('vlen' if e['vlen'] else np.dtype(e['dtype']).kind + ' (other)')}"] += 1
        c[f"rank {len(e['shape'])}"] += 1
        note = e.get("note", "")
        if 0 in e["shape"]:
            c["zero-length"] += 1
        if "big" in note or str(e.get("zarr_dtype", "")).startswith(">"):
            c["big-endian stored"] += 1
        if "shard" in note:
            c["sharded"] += 1
        if "order F" in note or "transpose" in note:
            c["F order / transpose stored"] += 1
        if "partial" in note or "missing" in note or "unwritten" in note:
            c["missing chunks"] += 1
    return [f"{k}: {v}" for k, v in sorted(c.items())]


def check(args) -> int:
    with open(args.manifest) as f:
        manifest = json.load(f)
    views = VIEW_KINDS if args.views == "all" else [v for v in VIEW_KINDS if v in args.views.split(",")]
    eio = {tuple(x.split(":", 1)) for x in args.eio}
    checker = Checker(manifest, args.order, args.endian, views, eio)
    checked = []
    for spec in args.mount:
        store, _, mountpoint = spec.partition("=")
        entries = [a for a in manifest["arrays"] if a["store"] == store]
        if not entries:
            checker.failures.add(store, "no arrays in the manifest")
        for entry in entries:
            if not entry["path"]:
                checker.failures.add(store, "root arrays are not handled by this script")
                continue
            checker.entry = entry
            try:
                checker.check_array(store, mountpoint, entry)
            except Exception as e:
                checker.failures.add(f"{store}:{entry['path']}", f"{type(e).__name__}: {e}")
            checked.append(entry)
    print(f"views {','.join(views)}, --order {args.order}, --endian {args.endian}: {len(checked)} arrays")
    print("coverage: " + "; ".join(coverage(checked)))
    for reader, n in sorted(checker.counts.items()):
        print(f"  {reader}: {n}")
    print(f"{len(checker.failures)} failures")
    print(json.dumps({"counts": dict(checker.counts), "failures": len(checker.failures)}))
    return 1 if checker.failures else 0


def make_bigtiff(args) -> int:
    import zarr

    store = os.path.join(os.path.abspath(args.outdir), "bigtiff.zarr")
    os.makedirs(args.outdir, exist_ok=True)
    root = zarr.open_group(store, mode="w", zarr_format=3)
    shape = (3, 40000, 40000)
    root.create_array("pages", shape=shape, chunks=(1, 8192, 8192), dtype="uint8", fill_value=7, compressors=None)
    arr = zarr.open_array(store, path="pages", mode="r")
    corner = np.asarray(arr[2, -3:, -3:])
    if not (corner == 7).all():
        sys.exit(f"zarr-python reads {corner!r}, want the fill value 7")
    chunks = [f for _, _, files in os.walk(store) for f in files if f != "zarr.json"]
    if chunks:
        sys.exit(f"expected metadata only, found {chunks[:5]}")
    print(json.dumps({"store": store, "path": "pages", "shape": list(shape), "fill": 7}))
    return 0


def bigtiff(args) -> int:
    import tifffile

    with tifffile.TiffFile(args.file) as tif:
        pages = list(tif.pages)
        problems = []
        if not tif.is_bigtiff or tif.byteorder != "<":
            problems.append(f"bigtiff {tif.is_bigtiff}, byte order {tif.byteorder}")
        if len(pages) != 3:
            problems.append(f"{len(pages)} pages")
        for k, page in enumerate(pages):
            if page.shape != (40000, 40000) or page.dtype != np.uint8 or not page.is_tiled:
                problems.append(f"page {k}: {page.shape} {page.dtype} tiled {page.is_tiled}")
        series = tif.series[0]
        if series.shape != (3, 40000, 40000):
            problems.append(f"series shape {series.shape}")
        out = {"tiles": [[int(p.tilelength), int(p.tilewidth)] for p in pages],
               "offsets": [int(o) for p in pages for o in p.dataoffsets],
               "bytecounts": [int(c) for p in pages for c in p.databytecounts], "problems": problems}
    print(json.dumps(out))
    return 1 if problems else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("check")
    p.add_argument("manifest")
    p.add_argument("--mount", action="append", required=True, help="STORE=MOUNTPOINT")
    p.add_argument("--order", choices=["C", "F"], required=True)
    p.add_argument("--endian", choices=["little", "big"], required=True)
    p.add_argument("--views", required=True)
    p.add_argument("--eio", action="append", default=[], help="STORE:PATH of an undecodable array")
    p = sub.add_parser("make-bigtiff")
    p.add_argument("outdir")
    p = sub.add_parser("bigtiff")
    p.add_argument("file")
    args = parser.parse_args()
    if args.command == "check":
        from osgeo import gdal

        gdal.UseExceptions()
        gdal.SetConfigOption("GDAL_PAM_ENABLED", "NO")
        sys.exit(check(args))
    sys.exit(make_bigtiff(args) if args.command == "make-bigtiff" else bigtiff(args))


if __name__ == "__main__":
    main()
