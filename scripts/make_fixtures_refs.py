"""Write kerchunk reference sets over NetCDF-4/HDF5 files, and their expected bytes.

Usage (from the repository root, after `bash scripts/setup_python.sh`):

    target/venv-refs/bin/python scripts/make_fixtures_refs.py OUTDIR

OUTDIR/refs is deleted and rewritten:

    refs/data/single.nc        netCDF4-python: an unlimited dimension, coordinate
                               variables, zlib with and without shuffle, contiguous
                               variables, big-endian variables, partially written
                               variables (chunks never written) with _FillValue
                               -999 and NaN, f4/f8/i2/u1/i8, 1-4 dims, nested groups
    refs/data/single.h5        h5py: chunked zlib + shuffle (little- and big-endian),
                               contiguous, compact (small: kerchunk inlines them),
                               fill values with chunks never written (one dataset
                               with no chunk at all), a resized unlimited dataset,
                               a 0-d dataset, f4/f8/i2/u1/i8, 0-4 dims, groups
    refs/data/series_{0,1,2}.nc  netCDF4-python: a time series (4 steps a file along
                               an unlimited time) for MultiZarrToZarr

    refs/single_nc.json        kerchunk.hdf.SingleHdf5ToZarr(...).translate() as it
    refs/single_h5.json        returns it (version 1, no templates), ujson.dump'ed as
    refs/series_{0,1,2}.json   kerchunk does ("\\/" in paths); targets are the
                               absolute paths of the files under refs/data/
    refs/combined.json         kerchunk.combine.MultiZarrToZarr over series_*.json
                               along time (lat, lon, mask identical), written by
                               its translate(filename=...)
    refs/single_h5_v0.json     single_h5's references in version 0 form (the bare
                               key -> value object), json.dump'ed with indent and
                               raw UTF-8 (ensure_ascii=False)
    refs/single_nc_templates.json  single_nc in version 1 form with templates:
                               {"u": <single.nc's path>}, each target "{{u}}"
    refs/combined_templates.json   combined with {"u": <refs/data/>}, each target
                               "{{u}}series_<k>.nc"
    refs/combined.json.gz      combined.json, gzip-compressed (mtime 0)
    refs/vz_combined.json      VirtualiZarr's to_kerchunk of xarray.concat of the
                               three series files along time (time, lat and lon
                               loaded, so inlined; other chunks never inlined;
                               netCDF's default fills as fill_value; an extra
                               "attributes" key in each .zarray)
    refs/combined.parq/        combined in Parquet form (kerchunk.df.refs_to_dataframe)
    refs/manifest-refs.json    the manifest below

Manifest (one store, and one array, per line):
    {"writer", "stores": [store...], "parquet": [store...]} where a store is
    {"name", "file" (relative to OUTDIR), "format": "json"|"json.gz"|"parquet",
     "version": 0|1, "templates": bool, "source" (the data files, relative to OUTDIR),
     "groups" (paths of the .zgroup keys, "" = root),
     "arrays": [entry...]}
    and an entry is fixture_common.array_entry's: {"store", "path" (inside the
    reference set), "shape", "chunks", "dtype" (numpy dtype.str of the elements,
    little-endian, as in manifest.json), "itemsize", "vlen", "sha256" ({C,F}_{little,
    big}), "nbytes", "zarr_dtype" (the .zarray dtype, e.g. ">i8"), "fill_value" (as in
    the .zarray), "note"}. Parquet stores are listed apart, under "parquet".

Expected bytes come from the SOURCE files, never from the references: netCDF4-python
(auto mask and scale off) for the .nc files, h5py for the .h5 file, and for the
combined sets xarray.concat along time of the three series files (netcdf4 engine,
mask_and_scale=False, decode_times=False; variables without time from the first
file). Then every store is read back with fsspec's ReferenceFileSystem and
zarr-python and its digests compared with the manifest: the script fails on any
difference.

Left out of the sources: strings and other variable-length types (kerchunk would
embed them as VLenUTF8 object arrays), and what kerchunk 0.2.10 mistranslates:
compact datasets of inline_threshold bytes or more (it writes no chunk for them, so
they read as the fill value); netCDF variables with chunks never written but no
explicit _FillValue (it writes fill_value null while netCDF reads its default fill);
netCDF variables along the unlimited dimension written shorter than it (the .zarray
takes the HDF5 dataset's shorter extent, netCDF pads with fill); time chunks that do
not divide a series file's time steps (MultiZarrToZarr computes each chunk's key
from the file's first time index, so such chunks would collide).

Deterministic: fixed seeds; the data files and references are the same on every run
(given the same library versions and OUTDIR).
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import sys
import warnings

import fsspec
import h5py
import kerchunk
import kerchunk.combine
import kerchunk.df
import kerchunk.hdf
import netCDF4
import numpy as np
import ujson
import xarray as xr
import zarr

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixture_common import array_entry, fixed_digests, sample_data, seeded_rng  # noqa: E402

# sample_data multiplies infinities on purpose; zarr-python warns about numcodecs
# codecs in v2 metadata and xarray about netCDF details: all expected.
warnings.simplefilter("ignore")

WRITER = (f"kerchunk {kerchunk.__version__}, zarr-python {zarr.__version__}, netCDF4 {netCDF4.__version__} "
          f"(netCDF-C {netCDF4.__netcdf4libversion__}), h5py {h5py.__version__} "
          f"(HDF5 {h5py.version.hdf5_version}), xarray {xr.__version__}")
INLINE = 100           # SingleHdf5ToZarr inline_threshold: chunks under 100 bytes go inline
COMBINED_INLINE = 200  # MultiZarrToZarr inline_threshold
SERIES_FILES = 3
REMOTE_DATA = "s3://fixtures/refs/data/"  # where the tests serve the data folder on S3
SERIES_STEPS = 4       # time steps per series file


# --- source files: netCDF4 ------------------------------------------------------

# (group/name, dtype, dims, options, write, note): options go to createVariable;
# write is "all" or a list of index tuples written with data (others stay unwritten).
NC_DIMS = {"time": None, "level": 3, "lat": 5, "lon": 7}
NC_TIME_STEPS = 6
NC_SUB_DIMS = {"obs": {"station": 4}}
NC_VARS = [
    ("temp", "f4", ("time", "level", "lat", "lon"), dict(zlib=True, shuffle=True, chunksizes=(2, 2, 3, 4)),
     "all", "4-d float along the unlimited time, zlib + shuffle, edge chunks"),
    ("precip", "f8", ("time", "lat", "lon"), dict(zlib=True, shuffle=False, complevel=6, chunksizes=(3, 5, 7)),
     "all", "3-d double, zlib without shuffle"),
    ("sparse_t", "f8", ("time", "lat"), dict(chunksizes=(1, 5), fill_value=-1e30),
     [(slice(0, 2), slice(None)), (5, slice(1, 3))],
     "double along time: rows 2-4 never written (fill -1e30), the last row partly"),
    ("count", "i8", ("lat", "lon"), dict(contiguous=True), "all", "int64, contiguous"),
    ("flags", "u1", ("lon",), dict(contiguous=True), "all", "ubyte, contiguous, 7 bytes: inline"),
    ("height_be", "i2", ("lat", "lon"), dict(zlib=True, shuffle=True, endian="big", chunksizes=(2, 4)),
     "all", "big-endian short, zlib + shuffle"),
    ("depth_be", "f8", ("level", "lat"), dict(contiguous=True, endian="big"), "all", "big-endian double, contiguous"),
    ("partial", "i2", ("lat", "lon"), dict(zlib=True, shuffle=True, chunksizes=(2, 3), fill_value=-999),
     [(slice(0, 2), slice(0, 3)), (4, 6)], "short, _FillValue -999, most chunks never written"),
    ("sparse_nan", "f4", ("lat", "lon"), dict(chunksizes=(2, 2), fill_value=np.nan),
     [(slice(1, 3), slice(2, 5))], "float, _FillValue NaN, chunks never written"),
    ("forecast/temp2m", "f4", ("time", "lat", "lon"), dict(zlib=True, shuffle=True, chunksizes=(2, 3, 3)),
     "all", "float in a group, dims of the root group"),
    ("forecast/ensemble/member", "i2", ("level",), {}, "all", "short in a nested group"),
    ("forecast/ensemble/spread", "f8", ("lat", "lon"), dict(zlib=True, shuffle=True, chunksizes=(5, 7)),
     "all", "double in a nested group, one chunk"),
    ("obs/station_id", "i8", ("station",), {}, "all", "int64 along a dimension of its own group"),
    ("obs/value", "f4", ("station", "time"), dict(zlib=True, chunksizes=(2, 3), fill_value=-9.5),
     "all", "float (station, time), zlib + shuffle (netCDF4's default), _FillValue -9.5"),
    ("obs/quality", "u1", ("station", "lat", "lon"), dict(zlib=True, shuffle=True, chunksizes=(1, 5, 7)),
     "all", "ubyte 3-d, zlib + shuffle"),
]


def nc_coordinates(ds: netCDF4.Dataset) -> dict:
    """Coordinate variables of single.nc: (path -> note)."""
    notes = {}
    t = ds.createVariable("time", "f8", ("time",))
    t.units, t.calendar = "hours since 2000-01-01 00:00:00", "standard"
    t[:] = np.arange(NC_TIME_STEPS) * 6.0
    notes["time"] = "coordinate along the unlimited dimension (1-d chunks of 512 > its length)"
    lev = ds.createVariable("level", "i2", ("level",))
    lev[:] = [1000, 850, 500]
    notes["level"] = "short coordinate, contiguous"
    lat = ds.createVariable("lat", "f4", ("lat",))
    lat.units = "degrees_north"
    lat[:] = np.linspace(-40, 40, NC_DIMS["lat"])
    notes["lat"] = "float coordinate"
    lon = ds.createVariable("lon", "f8", ("lon",))
    lon.units = "degrees_east"
    lon[:] = np.linspace(0, 300, NC_DIMS["lon"])
    notes["lon"] = "double coordinate"
    return notes


def nc_group(ds: netCDF4.Dataset, path: str):
    """The group at `path` (created on first use)."""
    group = ds
    for part in [p for p in path.split("/") if p]:
        group = group.groups[part] if part in group.groups else group.createGroup(part)
    return group


def nc_variable(ds: netCDF4.Dataset, path: str, dtype: str, dims, options: dict, write, prefix: str,
                sizes: dict) -> None:
    """Create and write one variable; `sizes` gives every dimension's length (time's as written)."""
    parent, _, name = path.rpartition("/")
    group = nc_group(ds, parent)
    options = dict(options)
    endian = options.get("endian", "native")
    datatype = np.dtype(dtype).newbyteorder(">" if endian == "big" else "<")
    var = group.createVariable(name, datatype, dims, **options)
    var.set_auto_maskandscale(False)
    var.long_name = f"{name} ({dtype})"
    data = sample_data("<" + dtype, tuple(sizes[d] for d in dims), seeded_rng(prefix, path))
    if write == "all":
        var[...] = data
    else:
        for box in write:
            var[box] = data[box]


def write_single_nc(path: str) -> dict:
    """single.nc; returns each variable's note by path."""
    with netCDF4.Dataset(path, "w", format="NETCDF4") as ds:
        ds.title = "zarrfs kerchunk fixture"
        ds.history = "scripts/make_fixtures_refs.py"
        for dim, size in NC_DIMS.items():
            ds.createDimension(dim, size)
        for group_path, dims in NC_SUB_DIMS.items():
            group = nc_group(ds, group_path)
            group.purpose = f"group {group_path}"
            for dim, size in dims.items():
                group.createDimension(dim, size)
        notes = nc_coordinates(ds)
        sizes = dict(NC_DIMS, time=NC_TIME_STEPS)
        for dims in NC_SUB_DIMS.values():
            sizes.update(dims)
        for var_path, dtype, dims, options, write, note in NC_VARS:
            nc_variable(ds, var_path, dtype, dims, options, write, "single_nc", sizes)
            notes[var_path] = note
    return notes


# (name, dtype, dims, options, write, note) of each series file; time chunks divide
# SERIES_STEPS so that MultiZarrToZarr can place every chunk.
SERIES_DIMS = {"time": None, "lat": 8, "lon": 10}
SERIES_VARS = [
    ("temp", "f4", ("time", "lat", "lon"), dict(zlib=True, shuffle=True, chunksizes=(2, 4, 10), fill_value=np.nan),
     "all", "float, zlib + shuffle, 2 time steps a chunk"),
    ("precip", "i2", ("time", "lat", "lon"), dict(chunksizes=(1, 8, 10), fill_value=-1),
     "partial", "short, no compression, one time step a chunk; some never written (fill -1)"),
    ("pressure_be", "f8", ("time", "lat"), dict(zlib=True, endian="big", chunksizes=(4, 8)),
     "all", "big-endian double, zlib + shuffle (netCDF4's default), one chunk a file"),
    ("count", "i8", ("time",), dict(chunksizes=(2,)), "all", "int64 along time only"),
]


def write_series(path: str, index: int) -> dict:
    """series_<index>.nc; returns each variable's note by name."""
    with netCDF4.Dataset(path, "w", format="NETCDF4") as ds:
        ds.title = "zarrfs kerchunk time series"
        for dim, size in SERIES_DIMS.items():
            ds.createDimension(dim, size)
        t = ds.createVariable("time", "f8", ("time",), chunksizes=(SERIES_STEPS,))
        t.units = "days since 2000-01-01"
        t[:] = index * SERIES_STEPS + np.arange(SERIES_STEPS) + 0.5
        lat = ds.createVariable("lat", "f4", ("lat",))
        lat[:] = np.linspace(10, 40, SERIES_DIMS["lat"])
        lon = ds.createVariable("lon", "f4", ("lon",))
        lon[:] = np.linspace(-20, 20, SERIES_DIMS["lon"])
        mask = ds.createVariable("mask", "u1", ("lat", "lon"))
        mask[:] = np.arange(80).reshape(8, 10) % 3
        notes = {"time": "time coordinate: rewritten (inline) by MultiZarrToZarr",
                 "lat": "float coordinate, identical in every file", "lon": "float coordinate, identical",
                 "mask": "ubyte without time, identical in every file (copied from the first)"}
        rng_prefix = f"series_{index}"
        for name, dtype, dims, options, write, note in SERIES_VARS:
            if write == "partial":
                # Time steps 1 and 2 never written in file 1; the last one always is, so
                # the variable spans all of time.
                rows = [0, 3] if index == 1 else list(range(SERIES_STEPS))
                write = [(r, slice(None), slice(None)) for r in rows]
            nc_variable(ds, name, dtype, dims, options, write, rng_prefix, dict(SERIES_DIMS, time=SERIES_STEPS))
            notes[name] = note
    return notes


# --- source files: h5py ---------------------------------------------------------

def h5_compact(group, name: str, data: np.ndarray):
    """A dataset with the compact layout (data in the object header)."""
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_layout(h5py.h5d.COMPACT)
    dcpl.set_obj_track_times(False)  # as h5py's own datasets: no timestamps, reproducible files
    space = h5py.h5s.create_simple(data.shape)
    dsid = h5py.h5d.create(group.id, name.encode(), h5py.h5t.py_create(data.dtype), space, dcpl)
    dset = h5py.Dataset(dsid)
    dset[...] = data
    return dset


def write_single_h5(path: str) -> dict:
    """single.h5; returns each dataset's note by path."""
    notes = {}

    def data(name, dtype, shape):
        return sample_data(dtype, shape, seeded_rng("single_h5", name))

    with h5py.File(path, "w", libver="earliest") as f:
        f.attrs["title"] = "zarrfs kerchunk fixture (h5py)"
        chunked = f.create_group("chunked")
        chunked.attrs["kind"] = "chunked layouts"
        chunked.create_dataset("zlib_shuffle", data=data("zlib_shuffle", "<f4", (20, 30)), chunks=(8, 16),
                               compression="gzip", compression_opts=4, shuffle=True)
        notes["chunked/zlib_shuffle"] = "float, zlib + shuffle, edge chunks"
        chunked.create_dataset("zlib_be", data=data("zlib_be", ">f8", (10, 12)), chunks=(4, 5),
                               compression="gzip", compression_opts=1, shuffle=True)
        notes["chunked/zlib_be"] = "big-endian double, zlib + shuffle"
        chunked.create_dataset("i8_4d_be", data=data("i8_4d_be", ">i8", (2, 3, 4, 5)), chunks=(1, 2, 3, 5),
                               compression="gzip")
        notes["chunked/i8_4d_be"] = "big-endian int64 4-d, zlib"
        chunked.create_dataset("u1_raw", data=data("u1_raw", "u1", (50, 40)), chunks=(16, 16))
        notes["chunked/u1_raw"] = "ubyte, chunked without filters"
        partial = chunked.create_dataset("partial", shape=(12, 10), dtype="<i2", chunks=(4, 4), fillvalue=-7,
                                         compression="gzip", shuffle=True)
        partial[1:6, 2:7] = data("partial", "<i2", (5, 5))
        notes["chunked/partial"] = "short, fill -7, zlib + shuffle, chunks never written"
        nanfill = chunked.create_dataset("f4_nanfill", shape=(9, 9), dtype="<f4", chunks=(4, 4), fillvalue=np.nan)
        nanfill[4:9, 0:3] = data("f4_nanfill", "<f4", (5, 3))
        notes["chunked/f4_nanfill"] = "float, fill NaN, chunks never written, edge chunks"
        chunked.create_dataset("unwritten", shape=(4, 6), dtype="<f8", chunks=(2, 3), fillvalue=2.5)
        notes["chunked/unwritten"] = "double, fill 2.5, never written: no chunk at all"
        grow = chunked.create_dataset("unlimited", data=data("unlimited", "<i8", (4, 3)), maxshape=(None, 3),
                                      chunks=(2, 3), fillvalue=-1)
        grow.resize((7, 3))
        grow[6] = [10, 20, 30]
        notes["chunked/unlimited"] = "int64 with an unlimited dimension, resized: rows 4-5 never written"

        contiguous = f.create_group("contiguous")
        contiguous.create_dataset("u1_1d", data=data("u1_1d", "u1", (300,)))
        notes["contiguous/u1_1d"] = "ubyte 1-d, contiguous"
        contiguous.create_dataset("i2_3d_be", data=data("i2_3d_be", ">i2", (6, 7, 8)))
        notes["contiguous/i2_3d_be"] = "big-endian short 3-d, contiguous"
        contiguous.create_dataset("f8_4d", data=data("f8_4d", "<f8", (2, 3, 4, 5)))
        notes["contiguous/f8_4d"] = "double 4-d, contiguous"
        contiguous.create_dataset("f4_small", data=data("f4_small", "<f4", (3, 5)))
        notes["contiguous/f4_small"] = "float, contiguous, 60 bytes: inline"

        compact = f.create_group("compact")
        h5_compact(compact, "u1", data("compact_u1", "u1", (16,)))
        notes["compact/u1"] = "ubyte, compact layout (inline)"
        h5_compact(compact, "utf8_text", np.frombuffer("zarr é 漢字 😀".encode(), dtype="u1").copy())
        notes["compact/utf8_text"] = "ubyte holding UTF-8 text, compact: inline as a JSON string, not base64"
        h5_compact(compact, "f4_be", data("compact_f4_be", ">f4", (3, 4)))
        notes["compact/f4_be"] = "big-endian float 2-d, compact (inline)"
        h5_compact(compact, "i2_3d", data("compact_i2_3d", "<i2", (2, 3, 4)))
        notes["compact/i2_3d"] = "short 3-d, compact (inline)"

        f.create_dataset("scalar", data=np.float64(-273.15))
        notes["scalar"] = "0-d double (chunk key \"0\"), inline"
        f.create_dataset("i8_1d", data=data("i8_1d", "<i8", (40,)), chunks=(16,), compression="gzip", shuffle=True)
        notes["i8_1d"] = "int64 1-d at the root, zlib + shuffle"
    return notes


# --- reference sets -------------------------------------------------------------

def translate(path: str) -> dict:
    """kerchunk's references of one HDF5/netCDF-4 file, as translate() returns them."""
    h5chunks = kerchunk.hdf.SingleHdf5ToZarr(path, inline_threshold=INLINE, error="raise")
    try:
        return h5chunks.translate()
    finally:
        h5chunks.close()


def combine(json_paths: list, out: str) -> dict:
    """MultiZarrToZarr of the series references along time, written to `out`."""
    mzz = kerchunk.combine.MultiZarrToZarr(json_paths, concat_dims=["time"], identical_dims=["lat", "lon", "mask"],
                                           inline_threshold=COMBINED_INLINE)
    return mzz.translate(filename=out)


def with_templates(refs: dict, name: str, prefix: str) -> dict:
    """Version 1 references whose targets starting with `prefix` use the template {{name}}."""
    out, templated = {}, 0
    for key, value in refs["refs"].items():
        if isinstance(value, list) and value[0].startswith(prefix):
            value = ["{{%s}}%s" % (name, value[0][len(prefix):])] + value[1:]
            templated += 1
        out[key] = value
    if not templated:
        raise RuntimeError(f"no reference to template with {prefix}")
    return {"version": 1, "templates": {name: prefix}, "refs": out}


def retargeted(refs: dict, base: str) -> dict:
    """Version 1 references whose targets are `base` + the target's file name."""
    out = {}
    for key, value in refs["refs"].items():
        if isinstance(value, list) and value and isinstance(value[0], str):
            value = [base + value[0].rsplit("/", 1)[-1]] + value[1:]
        out[key] = value
    return {"version": 1, "refs": out}


def write_ujson(refs: dict, path: str) -> None:
    """As kerchunk writes them (ujson: escaped '/', ASCII only)."""
    with open(path, "w") as f:
        ujson.dump(refs, f)


def write_gzip(src: str, dst: str) -> None:
    with open(src, "rb") as f:
        raw = f.read()
    with open(dst, "wb") as f:
        f.write(gzip.compress(raw, mtime=0))


def virtualizarr_combined(paths: list, out: str, out_parquet: str) -> str | None:
    """VirtualiZarr's kerchunk JSON and Parquet folder of the series concatenated along time;
    the reason on failure."""
    try:
        from obspec_utils.registry import ObjectStoreRegistry
        from obstore.store import LocalStore
        from virtualizarr import open_virtual_dataset
        from virtualizarr.parsers import HDFParser

        registry = ObjectStoreRegistry({"file://": LocalStore()})
        vdss = [open_virtual_dataset(url="file://" + p, parser=HDFParser(), registry=registry,
                                     loadable_variables=["time", "lat", "lon"]) for p in paths]
        combined = xr.concat(vdss, dim="time", data_vars="minimal", coords="minimal", compat="override",
                             combine_attrs="override")
        combined.vz.to_kerchunk(out, format="json")
        combined.vz.to_kerchunk(out_parquet, format="parquet")
        return None
    except Exception as e:  # noqa: BLE001 (optional writer: report and go on)
        return f"{type(e).__name__}: {e}"


# --- expected values (from the sources) -----------------------------------------

def read_netcdf(path: str) -> dict:
    """Every variable of a netCDF-4 file by path, raw (no masking or scaling)."""
    out = {}
    with netCDF4.Dataset(path) as ds:
        ds.set_auto_maskandscale(False)

        def walk(group, prefix):
            for name, var in group.variables.items():
                out[prefix + name] = np.asarray(var[...])
            for name, sub in group.groups.items():
                walk(sub, prefix + name + "/")

        walk(ds, "")
    return out


def read_h5(path: str) -> dict:
    """Every dataset of an HDF5 file by path."""
    out = {}
    with h5py.File(path, "r") as f:
        def visit(name, obj):
            if isinstance(obj, h5py.Dataset):
                out[name] = np.asarray(obj[()])
        f.visititems(visit)
    return out


def read_series_concat(paths: list) -> dict:
    """The series files concatenated along time by xarray, raw stored values."""
    datasets = [xr.open_dataset(p, engine="netcdf4", mask_and_scale=False, decode_times=False,
                                decode_timedelta=False, cache=False) for p in paths]
    try:
        combined = xr.concat(datasets, dim="time", data_vars="minimal", coords="minimal", compat="equals")
        return {name: np.asarray(combined[name].values) for name in combined.variables}
    finally:
        for ds in datasets:
            ds.close()


# --- manifest -------------------------------------------------------------------

def load_meta(value):
    """A .zarray/.zgroup value: a JSON string (or an object in some writers)."""
    return json.loads(value) if isinstance(value, (str, bytes)) else value


def reference_keys(refs: dict) -> dict:
    return refs["refs"] if "refs" in refs else refs


def to_zarr_dtype(expected: np.ndarray, zarr_dtype: str, where: str) -> np.ndarray:
    """The source's values in the .zarray's dtype (lossless, or an error)."""
    declared = np.dtype(zarr_dtype)
    if expected.dtype == declared:
        return expected
    converted = expected.astype(declared)
    if not np.array_equal(converted.astype(expected.dtype), expected, equal_nan=expected.dtype.kind in "fc"):
        raise RuntimeError(f"{where}: source dtype {expected.dtype} does not fit {declared}")
    return converted


def store_entry(outdir: str, name: str, file: str, fmt: str, refs: dict, expected: dict, notes: dict,
                sources: list) -> dict:
    """One manifest store: every .zarray of `refs`, expected from `expected` (by path)."""
    keys = reference_keys(refs)
    arrays, groups = [], []
    for key in sorted(keys):
        if key == ".zgroup" or key.endswith("/.zgroup"):
            groups.append(key[: -len(".zgroup")].rstrip("/"))
        if not (key == ".zarray" or key.endswith("/.zarray")):
            continue
        path = key[: -len(".zarray")].rstrip("/")
        meta = load_meta(keys[key])
        where = f"{name}:{path}"
        if path not in expected:
            raise RuntimeError(f"{where}: in the references but not in the source")
        data = to_zarr_dtype(expected[path], meta["dtype"], where)
        if list(data.shape) != list(meta["shape"]):
            raise RuntimeError(f"{where}: source shape {data.shape} != .zarray shape {meta['shape']}")
        arrays.append(array_entry(name, path, data, chunks=meta["chunks"], zarr_dtype=meta["dtype"],
                                  fill_value=meta["fill_value"], note=notes.get(path, "")))
    version = refs.get("version", 0) if "refs" in refs else 0
    return {"name": name, "file": file, "format": fmt, "version": version, "templates": "templates" in refs,
            "source": [os.path.relpath(s, outdir) for s in sources], "groups": groups, "arrays": arrays}


def write_manifest(manifest: dict, path: str) -> None:
    """JSON with one store header and one array per line."""
    lines = ["{", f' "writer": {json.dumps(manifest["writer"])},']
    sections = []
    for section in ("stores", "parquet", "large", "remote_parquet"):
        items = []
        for store in manifest[section]:
            head = {k: v for k, v in store.items() if k != "arrays"}
            head_text = json.dumps(head, ensure_ascii=False)[:-1]
            rows = ",\n".join("    " + json.dumps(a, ensure_ascii=False, allow_nan=False) for a in store["arrays"])
            items.append(f"  {head_text}, \"arrays\": [\n{rows}\n  ]}}")
        sections.append(f' "{section}": [\n' + ",\n".join(items) + "\n ]")
    lines.append(",\n".join(sections))
    lines.append("}")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


# --- read-back check (fsspec ReferenceFileSystem + zarr-python) ------------------

def open_references(outdir: str, store: dict):
    """The zarr group of a reference set, through fsspec's ReferenceFileSystem."""
    fo = os.path.join(outdir, store["file"])
    kwargs = {}
    if store["format"] == "json.gz":
        kwargs["target_options"] = {"compression": "gzip"}
    fs = fsspec.filesystem("reference", fo=fo, remote_protocol="file", **kwargs)
    return zarr.open_group(fs.get_mapper(""), mode="r", zarr_format=2)


def check_store(outdir: str, store: dict) -> list:
    """Mismatches between zarr-python's read of the references and the manifest."""
    group = open_references(outdir, store)
    problems = []
    for entry in store["arrays"]:
        data = np.asarray(group[entry["path"]][...])
        if list(data.shape) != entry["shape"]:
            problems.append(f"{store['name']}:{entry['path']}: shape {list(data.shape)} != {entry['shape']}")
            continue
        digests = fixed_digests(data)
        for label in ("C_little", "F_little"):
            if digests[label] != entry["sha256"][label]:
                problems.append(f"{store['name']}:{entry['path']}: {label} differs")
    return problems


# --- driver ---------------------------------------------------------------------

def write_million(data_path: str, out: str) -> tuple:
    """A Parquet reference set of 1,000,010 references (record_size 100,000): `big`,
    1000 x 1000 uint8 in chunks of one element, each a 1-byte range of one data file, and
    `small`, 10 of them. Returns the references and the expected arrays."""
    data = seeded_rng("refs", "million").integers(0, 256, 1_000_000, dtype=np.uint8)
    with open(data_path, "wb") as f:
        f.write(data.tobytes())

    def zarray(shape, chunks):
        return json.dumps({"shape": shape, "chunks": chunks, "dtype": "|u1", "compressor": None,
                           "filters": None, "fill_value": 0, "order": "C", "zarr_format": 2})

    refs = {".zgroup": json.dumps({"zarr_format": 2}), "big/.zarray": zarray([1000, 1000], [1, 1]),
            "small/.zarray": zarray([10], [1])}
    for i in range(1000):
        for j in range(1000):
            refs[f"big/{i}.{j}"] = [data_path, i * 1000 + j, 1]
    for k in range(10):
        refs[f"small/{k}"] = [data_path, k, 1]
    refs = {"version": 1, "refs": refs}
    kerchunk.df.refs_to_dataframe(refs, out, record_size=100_000)
    return refs, {"big": data.reshape(1000, 1000), "small": data[:10].copy()}


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: make_fixtures_refs.py OUTDIR")
    outdir = os.path.abspath(sys.argv[1])
    root = os.path.join(outdir, "refs")
    data_dir = os.path.join(root, "data")
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(data_dir)

    def rel(*parts):
        return os.path.join("refs", *parts)

    def out(*parts):
        return os.path.join(outdir, rel(*parts))

    single_nc, single_h5 = os.path.join(data_dir, "single.nc"), os.path.join(data_dir, "single.h5")
    series = [os.path.join(data_dir, f"series_{k}.nc") for k in range(SERIES_FILES)]
    nc_notes = write_single_nc(single_nc)
    h5_notes = write_single_h5(single_h5)
    series_notes = [write_series(p, k) for k, p in enumerate(series)]

    nc_refs, h5_refs = translate(single_nc), translate(single_h5)
    write_ujson(nc_refs, out("single_nc.json"))
    write_ujson(h5_refs, out("single_h5.json"))
    series_refs = [translate(p) for p in series]
    for k, refs in enumerate(series_refs):
        write_ujson(refs, out(f"series_{k}.json"))
    combined = combine([out(f"series_{k}.json") for k in range(SERIES_FILES)], out("combined.json"))
    with open(out("single_h5_v0.json"), "w", encoding="utf-8") as f:
        json.dump(h5_refs["refs"], f, indent=1, ensure_ascii=False)
    write_ujson(with_templates(nc_refs, "u", single_nc), out("single_nc_templates.json"))
    write_ujson(with_templates(combined, "u", data_dir + os.sep), out("combined_templates.json"))
    write_gzip(out("combined.json"), out("combined.json.gz"))
    kerchunk.df.refs_to_dataframe(combined, out("combined.parq"))
    kerchunk.df.refs_to_dataframe(retargeted(combined, REMOTE_DATA), out("combined_s3.parq"))
    vz_failure = virtualizarr_combined(series, out("vz_combined.json"), out("vz_combined.parq"))

    nc_expected, h5_expected = read_netcdf(single_nc), read_h5(single_h5)
    concat_expected = read_series_concat(series)
    combined_notes = {k: v for notes in series_notes for k, v in notes.items()}
    stores = [
        store_entry(outdir, "single_nc", rel("single_nc.json"), "json", nc_refs, nc_expected, nc_notes, [single_nc]),
        store_entry(outdir, "single_h5", rel("single_h5.json"), "json", h5_refs, h5_expected, h5_notes, [single_h5]),
    ]
    for k, refs in enumerate(series_refs):
        stores.append(store_entry(outdir, f"series_{k}", rel(f"series_{k}.json"), "json", refs,
                                  read_netcdf(series[k]), series_notes[k], [series[k]]))
    stores += [
        store_entry(outdir, "combined", rel("combined.json"), "json", combined, concat_expected, combined_notes,
                    series),
        store_entry(outdir, "single_h5_v0", rel("single_h5_v0.json"), "json", h5_refs["refs"], h5_expected,
                    h5_notes, [single_h5]),
        store_entry(outdir, "single_nc_templates", rel("single_nc_templates.json"), "json",
                    with_templates(nc_refs, "u", single_nc), nc_expected, nc_notes, [single_nc]),
        store_entry(outdir, "combined_templates", rel("combined_templates.json"), "json",
                    with_templates(combined, "u", data_dir + os.sep), concat_expected, combined_notes, series),
        store_entry(outdir, "combined_gz", rel("combined.json.gz"), "json.gz", combined, concat_expected,
                    combined_notes, series),
    ]
    if vz_failure is None:
        with open(out("vz_combined.json")) as f:
            vz_refs = json.load(f)
        stores.append(store_entry(outdir, "vz_combined", rel("vz_combined.json"), "json", vz_refs, concat_expected,
                                  combined_notes, series))
    else:
        print(f"make_fixtures_refs: VirtualiZarr left out: {vz_failure}")
    parquet = [store_entry(outdir, "combined_parquet", rel("combined.parq"), "parquet", combined, concat_expected,
                           combined_notes, series)]
    if vz_failure is None:
        parquet.append(store_entry(outdir, "vz_combined_parquet", rel("vz_combined.parq"), "parquet", vz_refs,
                                   concat_expected, combined_notes, series))
    # Read from s3://fixtures (this folder as a bucket) by the tests; not read back here.
    remote_parquet = [store_entry(outdir, "combined_s3_parquet", rel("combined_s3.parq"), "parquet",
                                  retargeted(combined, REMOTE_DATA), concat_expected, combined_notes, series)]
    million_refs, million_expected = write_million(os.path.join(data_dir, "million.bin"), out("million.parq"))
    # Not read back through fsspec here (a million one-byte reads); the tests compare it.
    large = [store_entry(outdir, "million_parquet", rel("million.parq"), "parquet", million_refs,
                         million_expected, {"big": "1,000,000 one-byte references", "small": "10"},
                         [os.path.join(data_dir, "million.bin")])]
    manifest = {"writer": WRITER, "stores": stores, "parquet": parquet, "large": large,
                "remote_parquet": remote_parquet}
    write_manifest(manifest, out("manifest-refs.json"))

    problems = [p for store in stores + parquet for p in check_store(outdir, store)]
    if problems:
        sys.exit("make_fixtures_refs: zarr-python reads the references otherwise:\n  " + "\n  ".join(problems))
    counts = {s["name"]: len(s["arrays"]) for s in stores + parquet}
    print(f"make_fixtures_refs: {sum(counts.values())} arrays in {len(counts)} reference sets, "
          f"checked with zarr-python: {counts}")


if __name__ == "__main__":
    main()
