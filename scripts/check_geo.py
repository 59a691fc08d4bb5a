"""Check the georeferenced views of a zarrfs mount against GDAL's own Zarr driver.

Usage (tests/it/geo.rs runs it):

    check_geo.py expect MANIFEST OUTDIR
        with target/venv-geo/bin/python (rasterio's GDAL, zarr-python 3): for every
        array of MANIFEST (scripts/make_fixtures_geo.py), the reference geotransform,
        CRS (WKT), nodata, scale and offset from GDAL's Zarr driver on the store (on
        its v2 twin for a v3 array: rasterio's GDAL reads CF grid_mapping in v2 but not
        the final v3 codecs; rioxarray's transform of the v3 array must equal the
        twin's), EPSG:4326 where the manifest says the names imply it, and the
        array's values as zarr-python reads them (OUTDIR/N.npy); OUTDIR/expected.json.
    check_geo.py check OUTDIR --mount STORE=MOUNTPOINT [...] --views tif,vrt,hdr
        with either Python (rasterio's GDAL in venv-geo, Debian's GDAL 3.6 in
        venv-views): opens each array's views with GDAL and compares the geotransform
        (1e-9 relative), the CRS (IsSame), nodata, scale, offset and every band's
        values with the expectation; an array that must not be georeferenced must
        have no geotransform and no CRS.

The `.tif` is read page by page (GDAL's GTIFF_DIR), the `.vrt` and the ENVI header
(GDAL opens the raw file and finds NAME.hdr) band by band. The last line printed is
JSON {"counts": {...}, "failures": N}; the exit status is 1 on any failure.
"""

from __future__ import annotations

import json
import math
import os
import sys

import numpy as np


def close(a: float, b: float) -> bool:
    if a == b:
        return True
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b))


def same_number(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return close(a, b)


def expect(manifest_path: str, outdir: str) -> None:
    import rasterio
    import rioxarray  # noqa: F401  (registers .rio)
    import xarray as xr
    import zarr
    from rasterio.crs import CRS

    root = os.path.dirname(manifest_path)
    entries = json.load(open(manifest_path))["arrays"]
    os.makedirs(outdir, exist_ok=True)
    out = []
    failures = 0
    for i, e in enumerate(entries):
        store = os.path.join(root, e["store"])
        # zarr-python 3 does not read the 2020 draft layout: its values are its twin's.
        draft = e["zarr_format"] == "draft"
        values_store = os.path.join(root, e["twin"]) if draft else store
        values = zarr.open_array(values_store, path=e["path"], mode="r")[...]
        np.save(os.path.join(outdir, f"{i}.npy"), values)
        ref_store = os.path.join(root, e["twin"] or e["store"])
        with rasterio.open(f'ZARR:"{ref_store}":/{e["path"]}') as d:
            gt = list(d.transform.to_gdal())
            wkt = d.crs.to_wkt() if d.crs else None
            nodata, scale, offset = d.nodata, d.scales[0], d.offsets[0]
        if e["twin"] and e["georef"] and not draft:
            ds = xr.open_zarr(store, consolidated=False, decode_cf=False)
            da = ds[e["path"]]
            da = da.rio.set_spatial_dims(x_dim=da.dims[-1], y_dim=da.dims[-2])
            rio = list(da.rio.transform().to_gdal())
            if not all(close(a, b) for a, b in zip(rio, gt)):
                print(f"{e['store']}:{e['path']}: rioxarray's transform {rio} is not "
                      f"GDAL's on {e['twin']} {gt}")
                failures += 1
        if e["implied"]:
            wkt = CRS.from_epsg(e["implied"]).to_wkt()
        if e["georef"] and not wkt:
            print(f"{e['store']}:{e['path']}: the reference has no CRS")
            failures += 1
        out.append(dict(e, index=i, gt=gt, wkt=wkt, nodata=nodata, scale=scale,
                        offset=offset, shape=list(values.shape)))
    json.dump(out, open(os.path.join(outdir, "expected.json"), "w"), indent=1)
    print(json.dumps({"counts": {"arrays": len(out)}, "failures": failures}))
    sys.exit(1 if failures else 0)


class Rasterio:
    name = "rasterio GDAL"

    def __init__(self):
        import rasterio
        from rasterio.crs import CRS

        self.rasterio, self.CRS = rasterio, CRS
        self.version = rasterio.__gdal_version__

    def read(self, path: str):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with self.rasterio.open(path) as d:
                identity = d.transform.is_identity
                gt = None if identity else list(d.transform.to_gdal())
                return dict(gt=gt, crs=d.crs, nodata=d.nodata, scale=d.scales[0],
                            offset=d.offsets[0], data=d.read())

    def same_crs(self, crs, wkt: str) -> bool:
        return crs is not None and crs == self.CRS.from_wkt(wkt)


class Osgeo:
    name = "Debian GDAL"

    def __init__(self):
        from osgeo import gdal, osr

        gdal.UseExceptions()
        self.gdal, self.osr = gdal, osr
        self.version = gdal.__version__

    def read(self, path: str):
        d = self.gdal.Open(path)
        gt = d.GetGeoTransform(can_return_null=True)
        b = d.GetRasterBand(1)
        data = d.ReadAsArray()
        if data.ndim == 2:
            data = data[None]
        # GDAL's Python bindings say None where rasterio says 1 and 0.
        scale, offset = b.GetScale(), b.GetOffset()
        out = dict(gt=list(gt) if gt else None, crs=d.GetSpatialRef(),
                   nodata=b.GetNoDataValue(),
                   scale=1.0 if scale is None else scale,
                   offset=0.0 if offset is None else offset,
                   data=data)
        d = None
        return out

    def same_crs(self, crs, wkt: str) -> bool:
        if crs is None:
            return False
        want = self.osr.SpatialReference()
        want.ImportFromWkt(wkt)
        want.SetAxisMappingStrategy(self.osr.OAMS_TRADITIONAL_GIS_ORDER)
        return bool(crs.IsSame(want))


def check(outdir: str, mounts: dict, views: list, lib) -> None:
    expected = json.load(open(os.path.join(outdir, "expected.json")))
    failures = []
    counts = {}

    def fail(msg):
        failures.append(msg)
        print(msg)

    for e in expected:
        if e["store"] not in mounts:
            continue
        want = np.load(os.path.join(outdir, f"{e['index']}.npy"))
        planes = want.reshape((-1,) + tuple(want.shape[-2:]))
        base = os.path.join(mounts[e["store"]], e["path"])
        for view in views:
            label = f"{lib.name} {e['store']}:{e['path']}.{view}"
            if view == "tif":
                paths = [base + ".tif"] + [
                    f"GTIFF_DIR:{k + 1}:{base}.tif" for k in range(1, planes.shape[0])
                ]
            elif view == "hdr":
                paths = [base]
            else:
                paths = [base + "." + view]
            try:
                reads = [lib.read(p) for p in paths]
            except Exception as err:  # noqa: BLE001 (any reader error is a failure)
                fail(f"{label}: {err}")
                continue
            got = reads[0]
            data = np.concatenate([r["data"] for r in reads])
            if data.shape != planes.shape or not np.array_equal(
                data, planes.astype(data.dtype), equal_nan=True
            ):
                fail(f"{label}: values differ ({data.shape} vs {planes.shape})")
            if e["georef"]:
                for r, p in zip(reads, paths):
                    if r["gt"] is None or not all(close(a, b) for a, b in zip(r["gt"], e["gt"])):
                        fail(f"{label}: geotransform {r['gt']} (want {e['gt']}) in {p}")
                    if not lib.same_crs(r["crs"], e["wkt"]):
                        fail(f"{label}: CRS {r['crs']} is not the reference's in {p}")
                for key in ("nodata", "scale", "offset"):
                    if not same_number(got[key], e[key]):
                        fail(f"{label}: {key} {got[key]} (want {e[key]})")
                counts["georeferenced " + view] = counts.get("georeferenced " + view, 0) + 1
            else:
                if got["gt"] is not None or got["crs"] is not None:
                    fail(f"{label}: georeferenced ({got['gt']}, {got['crs']}) but must not be")
                counts["plain " + view] = counts.get("plain " + view, 0) + 1
    print(f"{lib.name} {lib.version}")
    print(json.dumps({"counts": counts, "failures": len(failures)}))
    sys.exit(1 if failures else 0)


def main() -> None:
    if sys.argv[1] == "expect":
        expect(sys.argv[2], sys.argv[3])
        return
    if sys.argv[1] != "check":
        raise SystemExit(__doc__)
    outdir = sys.argv[2]
    mounts, views = {}, ["tif", "vrt", "hdr"]
    args = sys.argv[3:]
    while args:
        flag, value, args = args[0], args[1], args[2:]
        if flag == "--mount":
            store, mountpoint = value.split("=", 1)
            mounts[store] = mountpoint
        elif flag == "--views":
            views = value.split(",")
        else:
            raise SystemExit(f"unknown flag {flag}")
    try:
        lib = Rasterio()
    except ImportError:
        lib = Osgeo()
    check(outdir, mounts, views, lib)


if __name__ == "__main__":
    main()
