"""Write Zarr fixtures with the other writers found in the wild: GDAL and netCDF-C.

Run by make_fixtures.py under Debian's /usr/bin/python3 (python3-gdal and its numpy;
scripts/test.sh installs gdal-bin, python3-gdal and netcdf-bin):

    /usr/bin/python3 scripts/make_fixtures_writers.py OUTDIR

Writes into OUTDIR (which must exist):

    gdal_v2/         Zarr v2 by GDAL: `gdal_translate -of ZARR` of a 3-band GeoTIFF
                     (NaN nodata, blosc with a numeric shuffle, X/Y coordinate arrays),
                     then arrays added with GDAL's multidimensional API: every GDAL
                     data type (uint64 and int64 fill values as decimal strings), 0-4
                     dims, each compressor (blosc with shuffle "NONE"/"BYTE"/"BIT"/"2",
                     blosc snappy, zlib, gzip, lzma, zstd, lz4), the delta filter, F chunk order,
                     "/" separator, partial writes (missing chunks), NaN/Infinity
                     fill values and attributes (bare NaN/Infinity tokens in .zattrs
                     and .zmetadata), a subgroup
    gdal_draft/      the same with `-co FORMAT=ZARR_V3`, which GDAL 3.6 writes in the
                     2020 draft layout (zarr.json, meta/root/..., data/root/...)
    nczarr/          NCZarr (`ncgen` to file://...#mode=nczarr,file): netCDF's integer and
                     float types incl. int64/uint64, NaN/Infinity fill values and
                     attributes, 1-4 dims with edge chunks, unwritten variables (no
                     chunks), a subgroup
    netcdf_zarr/     pure Zarr v2 by netCDF-C (`ncgen` to netCDF-4, then `nccopy` to
                     file://...#mode=zarr,file; nccopy 4.9.0 writes each variable as
                     one chunk whatever -c asks)
    manifest-writers.json  {"stores", "arrays", "groups"} for the above, merged by
                     make_fixtures.py into manifest.json

Expected bytes are the writer's own read-back: GDAL's ReadAsArray of each array after
reopening the store; for netCDF-C, `nccopy` of the Zarr store back to a netCDF-4 file,
read with GDAL's netCDF driver (netCDF-C again underneath), converted to the Zarr data
type (GDAL widens int8 to int16; values are checked to survive the conversion).

Left out: netCDF scalar variables (netCDF-C 4.9.0 crashes reading them back from
NCZarr), netCDF char variables (written as "<U1" with 1-byte elements), netCDF
compression (Debian ships no NCZarr filter plugins, so ncgen ignores it), GDAL arrays
with a zero-length dimension (GDAL 3.6 writes them but cannot open them again), GDAL
0-d arrays in the draft layout (GDAL 3.6 crashes reading them back).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixture_common import array_entry, list_groups, sample_data, seeded_rng  # noqa: E402

try:
    from osgeo import gdal
except ImportError:
    sys.exit("make_fixtures_writers.py: python3-gdal is missing (apt-get install python3-gdal gdal-bin)")

gdal.UseExceptions()
# sample_data's complex values multiply infinities by 1j on purpose.
warnings.simplefilter("ignore", RuntimeWarning)
for tool in ("gdal_translate", "ncgen", "nccopy"):
    if shutil.which(tool) is None:
        sys.exit(f"make_fixtures_writers.py: {tool} is missing (apt-get install gdal-bin netcdf-bin)")

GDAL_WRITER = f"GDAL {gdal.__version__}"


def netcdf_version() -> str:
    out = subprocess.run(["ncdump"], capture_output=True, text=True).stderr
    for line in out.splitlines():
        if "netcdf library version" in line:
            return "netCDF-C " + line.split("version", 1)[1].split()[0]
    raise RuntimeError("cannot find the netCDF-C version in ncdump's usage text")


NETCDF_WRITER = netcdf_version()


def jsonable_fill(value):
    """A fill value as zarrfs reports it: bare NaN/Infinity tokens read as strings."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, list):
        return [jsonable_fill(v) for v in value]
    return value


class Store:
    """One output store and its manifest entries."""

    def __init__(self, outdir: str, name: str, fmt: str, writer: str):
        self.name, self.fmt, self.writer = name, fmt, writer
        self.dir = os.path.join(outdir, name)
        shutil.rmtree(self.dir, ignore_errors=True)
        self.entries: list[dict] = []

    def meta_path(self, path: str) -> str:
        if self.fmt == "2":
            return os.path.join(self.dir, path, ".zarray")
        if path == "":
            return os.path.join(self.dir, "meta", "root.array.json")
        return os.path.join(self.dir, "meta", "root", path + ".array.json")

    def metadata(self, path: str) -> dict:
        # Python's json reads the bare NaN / Infinity tokens these writers produce.
        with open(self.meta_path(path)) as f:
            return json.load(f)

    def record(self, path: str, expected: np.ndarray, note: str) -> None:
        meta = self.metadata(path)
        if self.fmt == "2":
            chunks, zarr_dtype = meta["chunks"], meta["dtype"]
        else:
            chunks, zarr_dtype = meta["chunk_grid"]["chunk_shape"], meta["data_type"]
        declared = np.dtype(zarr_dtype)
        if expected.dtype != declared:
            converted = expected.astype(declared)
            if not np.array_equal(converted.astype(expected.dtype), expected, equal_nan=expected.dtype.kind in "fc"):
                raise RuntimeError(f"{self.name}:{path}: read-back {expected.dtype} does not fit {declared}")
            expected = converted
        if list(expected.shape) != list(meta["shape"]):
            raise RuntimeError(f"{self.name}:{path}: read-back shape {expected.shape} != {meta['shape']}")
        self.entries.append(array_entry(self.name, path, expected, chunks=chunks, zarr_dtype=zarr_dtype,
                                        fill_value=jsonable_fill(meta["fill_value"]), note=note))

    def manifest(self) -> tuple[dict, list, list]:
        groups, arrays_on_disk = list_groups(self.name, self.dir, self.fmt)
        recorded = sorted(e["path"] for e in self.entries)
        if sorted(arrays_on_disk) != recorded:
            raise RuntimeError(f"{self.name}: arrays on disk {sorted(arrays_on_disk)} != recorded {recorded}")
        store = {"name": self.name, "dir": self.name, "format": self.fmt, "writer": self.writer}
        return store, self.entries, groups


def run(*args: str) -> None:
    subprocess.run(list(args), check=True)


# --- GDAL ----------------------------------------------------------------------

GDAL_TYPES = {
    "u1": gdal.GDT_Byte, "i2": gdal.GDT_Int16, "u2": gdal.GDT_UInt16, "i4": gdal.GDT_Int32,
    "u4": gdal.GDT_UInt32, "i8": gdal.GDT_Int64, "u8": gdal.GDT_UInt64, "f4": gdal.GDT_Float32,
    "f8": gdal.GDT_Float64, "c8": gdal.GDT_CFloat32, "c16": gdal.GDT_CFloat64,
}


def write_geotiff(path: str) -> None:
    """A 3-band float32 GeoTIFF with NaN nodata and a few NaN / Infinity pixels."""
    ds = gdal.GetDriverByName("GTiff").Create(path, 9, 6, 3, gdal.GDT_Float32)
    ds.SetGeoTransform([10.0, 0.5, 0.0, 50.0, 0.0, -0.5])
    rng = seeded_rng("gdal", "geotiff")
    for band in range(1, 4):
        data = sample_data("<f4", (6, 9), rng)
        data[band, 2] = np.nan
        data[0, band] = np.inf
        ds.GetRasterBand(band).WriteArray(data)
        ds.GetRasterBand(band).SetNoDataValue(float("nan"))
    ds = None


def set_fill(arr, dtype: str, fill) -> None:
    if fill is None:
        return
    if dtype == "u8":
        arr.SetNoDataValueUInt64(fill)
    elif dtype == "i8":
        arr.SetNoDataValueInt64(fill)
    else:
        arr.SetNoDataValueDouble(fill)


def float_attribute(owner, name: str, values) -> None:
    """A float64 attribute: one value, or a list (GDAL writes NaN / Infinity bare)."""
    dims = [] if np.isscalar(values) else [len(values)]
    attr = owner.CreateAttribute(name, dims, gdal.ExtendedDataType.Create(gdal.GDT_Float64))
    attr.Write(values)


# (path, dtype, shape, chunks, fill, options, write, note): write is "all", "none" or a
# tuple of slices; options are GDAL creation options of the array.
GDAL_ARRAYS = [
    ("types/u1", "u1", (7, 6), (3, 4), 255, [], "all", "Byte, nodata 255"),
    ("types/i2", "i2", (7, 6), (3, 4), -32768, [], "all", "Int16"),
    ("types/u2", "u2", (7, 6), (3, 4), None, [], "all", "UInt16, no nodata (fill null)"),
    ("types/i4", "i4", (7, 6), (3, 4), -7, [], "all", "Int32, nodata -7"),
    ("types/u4", "u4", (7, 6), (3, 4), 4294967295, [], "all", "UInt32"),
    ("types/i8", "i8", (7, 6), (3, 4), -9223372036854775808, [], (slice(0, 3), slice(0, 4)),
     "Int64, fill the int64 minimum, most chunks missing"),
    ("types/u8", "u8", (7, 6), (3, 4), 18446744073709551615, [], (slice(3, 7), slice(0, 6)),
     "UInt64, fill the uint64 maximum (a decimal string in v2), top chunks missing"),
    ("types/u8_small_fill", "u8", (5,), (2,), 42, [], (slice(0, 2),), "UInt64, fill 42"),
    ("types/f4", "f4", (7, 6), (3, 4), float("nan"), [], (slice(0, 4), slice(0, 4)), "Float32, fill NaN"),
    ("types/f8", "f8", (7, 6), (3, 4), float("-inf"), [], (slice(2, 7), slice(3, 6)), "Float64, fill -Infinity"),
    ("types/f8_inf", "f8", (4,), (3,), float("inf"), [], "none", "Float64, fill Infinity, no chunks"),
    ("dims/d1", "i4", (11,), (4,), 0, [], "all", "1-d, edge chunk"),
    ("dims/d3", "u2", (3, 5, 7), (2, 2, 3), 65535, [], (slice(0, 2), slice(1, 5), slice(0, 7)), "3-d, partial"),
    ("dims/d4", "f4", (2, 3, 4, 5), (1, 2, 3, 2), float("nan"), [], "all", "4-d"),
    ("layout/order_f", "i2", (5, 7), (2, 3), -999, ["CHUNK_MEMORY_LAYOUT=F"], "all", "F chunk order"),
    ("layout/order_f_3d", "f8", (3, 4, 5), (2, 3, 2), float("nan"), ["CHUNK_MEMORY_LAYOUT=F"],
     (slice(0, 2), slice(0, 3), slice(0, 4)), "F chunk order, partial"),
    ("layout/slash_separator", "u4", (5, 7), (2, 3), 0, ["DIM_SEPARATOR=/"], "all", "'/' separator"),
    ("compressors/blosc_noshuffle", "f4", (9, 8), (4, 4), float("nan"),
     ["COMPRESS=BLOSC", "BLOSC_SHUFFLE=NONE", "BLOSC_CNAME=lz4"], "all", "blosc, shuffle \"NONE\""),
    ("compressors/blosc_byte", "i4", (9, 8), (4, 4), -1,
     ["COMPRESS=BLOSC", "BLOSC_SHUFFLE=BYTE", "BLOSC_CNAME=zstd"], "all", "blosc zstd, shuffle \"BYTE\""),
    ("compressors/blosc_bit", "u2", (9, 8), (4, 4), 0,
     ["COMPRESS=BLOSC", "BLOSC_SHUFFLE=BIT", "BLOSC_CNAME=zlib"], "all", "blosc zlib, shuffle \"BIT\""),
    ("compressors/blosc_blosclz", "f8", (9, 8), (4, 4), float("-inf"),
     ["COMPRESS=BLOSC", "BLOSC_SHUFFLE=BIT", "BLOSC_CNAME=blosclz"], (slice(0, 4), slice(0, 8)),
     "blosc blosclz, shuffle \"BIT\", partial"),
    ("compressors/blosc_lz4hc", "u1", (9, 8), (4, 4), 7,
     ["COMPRESS=BLOSC", "BLOSC_SHUFFLE=BYTE", "BLOSC_CNAME=lz4hc"], "all", "blosc lz4hc"),
    # Blosc snappy (Debian's libblosc has it; zarrfs decodes its streams in Rust). Chunks
    # of 128 bytes or more, which c-blosc compresses (smaller ones it stores as they are):
    # 1024-byte float32 chunks split in 4 streams, 256-byte int16 ones in 2.
    ("compressors/blosc_snappy_bit", "f4", (20, 24), (16, 16), float("nan"),
     ["COMPRESS=BLOSC", "BLOSC_SHUFFLE=2", "BLOSC_CNAME=snappy"], "all",
     "blosc snappy, shuffle \"2\" (bit)"),
    ("compressors/blosc_snappy_byte", "i2", (20, 24), (8, 16), -1,
     ["COMPRESS=BLOSC", "BLOSC_SHUFFLE=BYTE", "BLOSC_CNAME=snappy"], (slice(0, 16), slice(0, 24)),
     "blosc snappy, shuffle \"BYTE\", partial"),
    ("compressors/zlib", "i2", (9, 8), (4, 4), None, ["COMPRESS=ZLIB"], "all", "zlib"),
    ("compressors/gzip", "f4", (9, 8), (4, 4), float("nan"), ["COMPRESS=GZIP"], "all", "gzip"),
    ("compressors/lzma", "f8", (9, 8), (4, 4), None, ["COMPRESS=LZMA"], "all", "lzma"),
    ("compressors/zstd", "u8", (9, 8), (4, 4), 18446744073709551615, ["COMPRESS=ZSTD"], "all", "zstd"),
    ("compressors/lz4", "i8", (9, 8), (4, 4), -1, ["COMPRESS=LZ4"], "all", "lz4"),
]
# Complex types and the delta filter are v2 only in GDAL 3.6, and it crashes reading
# back its own 0-d draft arrays.
GDAL_V2_ONLY = [
    ("dims/d0", "f8", (), (), float("nan"), [], "all", "0-d"),
    ("dims/d0_missing", "f4", (), (), float("inf"), [], "none", "0-d, chunk missing: fill Infinity"),
    ("types/c8", "c8", (7, 6), (3, 4), None, [], "all", "CFloat32"),
    ("types/c16", "c16", (5,), (2,), None, [], "all", "CFloat64"),
    ("compressors/lzma_complex", "c16", (9, 8), (4, 4), None, ["COMPRESS=LZMA"], "all", "lzma, CFloat64"),
    ("filters/delta", "i4", (9, 8), (4, 4), 0, ["FILTER=DELTA", "DELTA_DTYPE=<i4"], "all", "delta filter"),
    ("filters/delta_zstd", "i2", (9, 8), (4, 4), -5, ["FILTER=DELTA", "DELTA_DTYPE=<i2", "COMPRESS=ZSTD"],
     (slice(4, 9), slice(0, 8)), "delta filter then zstd, partial"),
]


def gdal_group(root, path: str, cache: dict):
    """The group at `path` (created on first use)."""
    if path == "":
        return root
    if path not in cache:
        parent, _, name = path.rpartition("/")
        cache[path] = gdal_group(root, parent, cache).CreateGroup(name)
    return cache[path]


def write_gdal(outdir: str, tmp: str, name: str, fmt: str) -> Store:
    store = Store(outdir, name, "2" if fmt == "ZARR_V2" else "draft", GDAL_WRITER)
    tif = os.path.join(tmp, "bands.tif")
    write_geotiff(tif)
    run("gdal_translate", "-q", "-of", "ZARR", "-co", f"FORMAT={fmt}", "-co", "COMPRESS=BLOSC",
        "-co", "BLOSC_SHUFFLE=BYTE", "-co", "BLOCKSIZE=4,4", tif, store.dir)
    ds = gdal.OpenEx(store.dir, gdal.OF_MULTIDIM_RASTER | gdal.OF_UPDATE)
    root = ds.GetRootGroup()
    float_attribute(root, "nan", float("nan"))
    float_attribute(root, "specials", [float("inf"), float("-inf"), float("nan"), 1.5])
    groups: dict = {}
    specs = GDAL_ARRAYS + (GDAL_V2_ONLY if fmt == "ZARR_V2" else [])
    for path, dtype, shape, chunks, fill, options, write, _note in specs:
        parent_path, _, array_name = path.rpartition("/")
        group = gdal_group(root, parent_path, groups)
        dims = [group.CreateDimension(f"{array_name}_d{k}", None, None, n) for k, n in enumerate(shape)]
        block = [f"BLOCKSIZE={','.join(str(c) for c in chunks)}"] if chunks else []
        arr = group.CreateMDArray(array_name, dims, gdal.ExtendedDataType.Create(GDAL_TYPES[dtype]),
                                  block + options)
        set_fill(arr, dtype, fill)
        if dtype.startswith("f"):
            float_attribute(arr, "valid_max", float("inf"))
        data = sample_data("<" + dtype, shape, seeded_rng(name, path))
        if write == "all" and data.size:
            arr.Write(data.copy(order="C"))
        elif isinstance(write, tuple):
            arr.Write(data[write].copy(order="C"), array_start_idx=[s.start for s in write])
        del arr, dims, group
    del root, groups, ds  # closes the dataset: GDAL writes the metadata now

    ds = gdal.OpenEx(store.dir, gdal.OF_MULTIDIM_RASTER)
    root = ds.GetRootGroup()
    for band in ("Band1", "Band2", "Band3", "X", "Y"):
        store.record(band, root.OpenMDArray(band).ReadAsArray(), f"gdal_translate of a GeoTIFF: {band}")
    for path, dtype, shape, *_rest, note in specs:
        parent_path, _, array_name = path.rpartition("/")
        group = root
        for part in parent_path.split("/"):
            group = group.OpenGroup(part)
        arr = group.OpenMDArray(array_name)
        if [d.GetSize() for d in arr.GetDimensions()] != list(shape):
            raise RuntimeError(f"{name}:{path}: GDAL reads back another shape")
        store.record(path, np.asarray(arr.ReadAsArray()), f"GDAL multidimensional API: {note}")
    return store


# --- netCDF-C ------------------------------------------------------------------

NC_TYPES = {"i1": "byte", "u1": "ubyte", "i2": "short", "u2": "ushort", "i4": "int", "u4": "uint",
            "i8": "int64", "u8": "uint64", "f4": "float", "f8": "double"}
NC_SUFFIX = {"i1": "b", "u1": "ub", "i2": "s", "u2": "us", "i4": "", "u4": "u", "i8": "ll", "u8": "ull",
             "f4": "f", "f8": ""}


def cdl_value(v, dtype: str, *, attribute: bool = False) -> str:
    """One CDL literal; attributes carry a type suffix, data values take the variable's type."""
    suffix = NC_SUFFIX[dtype] if attribute else ""
    if dtype[0] == "f":
        f = float(v)
        if math.isnan(f):
            text = "NaN"
        elif math.isinf(f):
            text = "Infinity" if f > 0 else "-Infinity"
        else:
            text = repr(f)
            if "e" not in text and "." not in text:
                text += ".0"
        return text + suffix
    return str(int(v)) + suffix


# (name, dtype, dims, chunks or None, fill or None, write, note); dims name the CDL
# dimensions below; write "all" (some values "_", the fill), or "none" (no chunks).
NC_DIMS = {"t": 2, "z": 3, "y": 5, "x": 7}
NC_VARS = [
    ("i1", "i1", ["x"], None, None, "all", "byte, default fill"),
    ("u1", "u1", ["y", "x"], [2, 3], 255, "all", "ubyte"),
    ("i2", "i2", ["y", "x"], [4, 4], -32768, "all", "short"),
    ("u2", "u2", ["y", "x"], [3, 5], None, "all", "ushort, default fill"),
    ("i4", "i4", ["z", "y", "x"], [2, 2, 3], -7, "all", "int"),
    ("u4", "u4", ["z", "y", "x"], [3, 5, 7], None, "none", "uint, never written: no chunks"),
    ("i8", "i8", ["y", "x"], [2, 4], -9223372036854775807, "all", "int64"),
    ("u8", "u8", ["y", "x"], [2, 4], 18446744073709551615, "all", "uint64, fill the uint64 maximum"),
    ("u8_default", "u8", ["x"], None, None, "none", "uint64, default fill, no chunks"),
    ("f4_nan", "f4", ["y", "x"], [2, 3], float("nan"), "all", "float, fill NaN"),
    ("f4_inf", "f4", ["z", "y"], [2, 2], float("inf"), "none", "float, fill Infinity, no chunks"),
    ("f8_ninf", "f8", ["t", "z", "y", "x"], [1, 2, 3, 4], float("-inf"), "all", "double 4-d, fill -Infinity"),
    ("f8_default", "f8", ["y"], None, None, "all", "double, default fill"),
]
NC_SUB_VARS = [
    ("g", "f4", ["y"], [2], float("-inf"), "all", "float in a subgroup, fill -Infinity"),
    ("h", "f8", ["z", "x"], [2, 2], float("nan"), "none", "double in a subgroup, no chunks"),
]


# Pure Zarr (#mode=zarr) keeps no attribute types: netCDF-C 4.9.0 then infers a
# _FillValue of -7 or of a float variable as another type and refuses to read the
# variable back ("_FillValue type mismatch"), so those fills are left out there.
ZARR_MODE_NO_FILL = ("i4", "f4")


def cdl_variables(variables, prefix: str, mode: str) -> tuple[list, list]:
    """(declarations, data lines) of `variables`; values from sample_data, a few `_`."""
    decls, data = [], []
    for name, dtype, dims, chunks, fill, write, _note in variables:
        if mode == "zarr" and dtype in ZARR_MODE_NO_FILL:
            fill = None
        decls.append(f"  {NC_TYPES[dtype]} {name}({', '.join(dims)}) ;")
        if chunks:
            decls.append(f'    {name}:_Storage = "chunked" ;')
            decls.append(f"    {name}:_ChunkSizes = {', '.join(str(c) for c in chunks)} ;")
        if fill is not None:
            decls.append(f"    {name}:_FillValue = {cdl_value(fill, dtype, attribute=True)} ;")
        if dtype[0] == "f":
            decls.append(f"    {name}:specials = NaN, Infinity, -Infinity, 0.5 ;")
            decls.append(f"    {name}:valid_max = Infinity{NC_SUFFIX[dtype]} ;")
        if write == "all":
            shape = [NC_DIMS[d] for d in dims]
            values = sample_data("<" + dtype, shape, seeded_rng(prefix, name)).ravel()
            items = ["_" if k % 5 == 3 else cdl_value(v, dtype) for k, v in enumerate(values)]
            data.append(f"  {name} = {', '.join(items)} ;")
    return decls, data


def write_cdl(path: str, mode: str) -> None:
    decls, data = cdl_variables(NC_VARS, "root", mode)
    sub_decls, sub_data = cdl_variables(NC_SUB_VARS, "sub", mode)
    lines = ["netcdf fixtures {", "dimensions:"]
    lines += [f"  {d} = {n} ;" for d, n in NC_DIMS.items()]
    lines += ["variables:"] + decls
    lines += ["  :title = \"netCDF-C fixtures\" ;", "  :not_a_number = NaN ;", "  :specials = Infinity, -Infinity, NaN ;",
              "  :big = 18446744073709551615ULL ;"]
    lines += ["data:"] + data
    lines += ["group: sub {", "variables:"] + sub_decls + ["  :inf = -Infinityf ;", "data:"] + sub_data + ["}"]
    lines += ["}"]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def read_netcdf(nc_path: str) -> dict:
    """Every variable of a netCDF file, by path, as GDAL's netCDF driver reads it."""
    ds = gdal.OpenEx(nc_path, gdal.OF_MULTIDIM_RASTER)
    out = {}

    def walk(group, prefix):
        for name in group.GetMDArrayNames() or []:
            out[prefix + name] = np.asarray(group.OpenMDArray(name).ReadAsArray())
        for name in group.GetGroupNames() or []:
            walk(group.OpenGroup(name), prefix + name + "/")

    walk(ds.GetRootGroup(), "")
    return out


def write_netcdf(outdir: str, tmp: str, name: str, mode: str, via_nccopy: bool) -> Store:
    store = Store(outdir, name, "2", f"{NETCDF_WRITER} ({'ncgen, nccopy' if via_nccopy else 'ncgen'})")
    cdl = os.path.join(tmp, f"{name}.cdl")
    write_cdl(cdl, mode)
    url = f"file://{store.dir}#mode={mode},file"
    if via_nccopy:
        nc4 = os.path.join(tmp, f"{name}.nc")
        run("ncgen", "-k", "nc4", "-o", nc4, cdl)
        run("nccopy", nc4, url)
    else:
        run("ncgen", "-4", "-o", url, cdl)
    back = os.path.join(tmp, f"{name}_back.nc")
    run("nccopy", "-k", "nc4", url, back)
    arrays = read_netcdf(back)
    for prefix, variables in (("", NC_VARS), ("sub/", NC_SUB_VARS)):
        for var_name, dtype, *_rest, note in variables:
            if mode == "zarr" and dtype in ZARR_MODE_NO_FILL:
                note += " (but no _FillValue: default fill)"
            store.record(prefix + var_name, arrays[prefix + var_name], f"netCDF-C, mode={mode}: {note}")
    return store


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: make_fixtures_writers.py OUTDIR")
    outdir = os.path.abspath(sys.argv[1])
    stores = []
    with tempfile.TemporaryDirectory() as tmp:
        stores.append(write_gdal(outdir, tmp, "gdal_v2", "ZARR_V2"))
        stores.append(write_gdal(outdir, tmp, "gdal_draft", "ZARR_V3"))
        stores.append(write_netcdf(outdir, tmp, "nczarr", "nczarr", via_nccopy=False))
        stores.append(write_netcdf(outdir, tmp, "netcdf_zarr", "zarr", via_nccopy=True))
    manifest = {"stores": [], "arrays": [], "groups": []}
    for store in stores:
        info, arrays, groups = store.manifest()
        manifest["stores"].append(info)
        manifest["arrays"] += arrays
        manifest["groups"] += groups
    with open(os.path.join(outdir, "manifest-writers.json"), "w") as f:
        json.dump(manifest, f, allow_nan=False)
    counts = {s["name"]: sum(a["store"] == s["name"] for a in manifest["arrays"]) for s in manifest["stores"]}
    print(f"make_fixtures_writers: {len(manifest['arrays'])} arrays: {counts}")


if __name__ == "__main__":
    main()
