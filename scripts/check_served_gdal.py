"""GDAL reads the `.tif` and `.vrt` views of a `zarrfs serve` by URL (`/vsicurl/`) as it
reads them through a FUSE mount of the same store: the same size, bands, data type,
georeferencing (geotransform and CRS) and pixels, and a 256 x 256 window (or the whole
raster when smaller) equal.

    check_served_gdal.py URL MOUNTPOINT

Prints one JSON line of counts; exits 1 listing every failure. Runs with GDAL's Python
bindings (target/venv-views: Debian's python3-gdal).
"""

import json
import os
import sys
import urllib.parse

from osgeo import gdal

gdal.UseExceptions()
# Nothing but the file asked for is fetched: no listing of its folder for sidecars.
gdal.SetConfigOption("GDAL_DISABLE_READDIR_ON_OPEN", "EMPTY_DIR")


def describe(ds):
    bands = [ds.GetRasterBand(i + 1) for i in range(ds.RasterCount)]
    w, h = min(256, ds.RasterXSize), min(256, ds.RasterYSize)
    x, y = (ds.RasterXSize - w) // 2, (ds.RasterYSize - h) // 2
    return {
        "size": [ds.RasterXSize, ds.RasterYSize, ds.RasterCount],
        "types": [gdal.GetDataTypeName(b.DataType) for b in bands],
        "geotransform": list(ds.GetGeoTransform(can_return_null=True) or []),
        "crs": ds.GetProjection(),
        "window": [b.ReadRaster(x, y, w, h) for b in bands],
    }


def main():
    url, mountpoint = sys.argv[1], sys.argv[2]
    failures, counts = [], {"tif": 0, "vrt": 0, "georeferenced": 0}
    for root, _, files in os.walk(mountpoint):
        rel = os.path.relpath(root, mountpoint)
        for n in sorted(files):
            kind = n.rsplit(".", 1)[-1]
            if kind not in ("tif", "vrt"):
                continue
            local = os.path.join(root, n)
            parts = [p for p in [rel, n] if p and p != "."]
            remote = "/vsicurl/" + url.rstrip("/") + "/" + "/".join(
                urllib.parse.quote(q, safe="") for p in parts for q in p.split("/"))
            try:
                want = describe(gdal.Open(local))
            except RuntimeError:
                continue  # GDAL cannot open the view through the mount either
            try:
                got = describe(gdal.Open(remote))
            except RuntimeError as e:
                failures.append(f"{remote}: {e}")
                continue
            counts[kind] += 1
            if want["geotransform"] and want["crs"]:
                counts["georeferenced"] += 1
            for k in want:
                if got[k] != want[k]:
                    failures.append(f"{remote}: {k} differs from the mount's")
    print(json.dumps(counts))
    if failures:
        print(f"{len(failures)} failures:", file=sys.stderr)
        for f in failures[:40]:
            print("  " + f, file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
