"""Write the georeferenced fixture stores of tests/it/geo.rs with the tools people use.

Usage: target/venv-geo/bin/python scripts/make_fixtures_geo.py OUTDIR

Writes OUTDIR/geo/ and OUTDIR/geo/manifest.json. The writers:

- xarray + rioxarray (`rio.write_crs`), to Zarr v2 and v3 (`rio_v2.zarr`,
  `rio_v3.zarr`): a north-up UTM grid (EPSG:32633) with `_FillValue`, an int16
  variable with CF `scale_factor` / `add_offset`, a 3-D stack of pages, a grid in a
  CRS with no EPSG code (WKT 1 only, `custom`); a
  south-to-north latitude grid in EPSG:4326 (`south_up`); a lat/lon grid with no CRS
  (`implied`, EPSG:4326 by its names); and arrays that must not be georeferenced:
  irregular x, no CRS with x/y names, lat/lon names under a projected CRS,
  lon-before-lat axes, a grid_mapping naming a missing variable;
- netCDF4 (CF `grid_mapping` with `crs_wkt`, Lambert azimuthal equal area,
  EPSG:3035) converted to Zarr v2 and v3 by xarray (`cf_v2.zarr`, `cf_v3.zarr`);
- GDAL's own Zarr writer (`gdal_translate -of Zarr`, Debian's GDAL) from GeoTIFFs
  GDAL makes (rasterio's GDAL): EPSG:32631 with nodata 255 (`gdal_v2.zarr`), and
  EPSG:3035 with nodata -9999 in Zarr v2 and in the 2020 draft layout, where the
  nodata is only the fill value (`gdal_laea_v2.zarr`, `gdal_laea_draft.zarr`; the
  draft's reference is its v2 twin, checked to give GDAL 3.6 the same nodata).

The manifest lists every array a view is checked for: its store, path, Zarr format,
whether it must be georeferenced, the v2 twin whose GDAL read is the reference for
a v3 array (the GDAL in rasterio's wheel reads CF grid_mapping in v2 but not the
final v3 codecs), the expected CRS when the conventions imply one GDAL's Zarr driver
does not read (`implied`), and the reason a plain array's log line must give.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import warnings

import numpy as np
import pyproj
import xarray as xr
import rioxarray  # noqa: F401  (registers .rio)

warnings.filterwarnings("ignore")


def utm_dataset() -> xr.Dataset:
    ny, nx = 40, 60
    x = 500000.0 + 30.0 * np.arange(nx) + 15.0
    y = 4000000.0 - 30.0 * np.arange(ny) - 15.0
    elevation = (np.arange(ny * nx, dtype="float32").reshape(ny, nx) * 0.25) - 100.0
    elevation[3, 4] = -9999.0
    scaled = (np.arange(ny * nx) % 3000 - 1000).astype("int16").reshape(ny, nx)
    stack = (np.arange(3 * ny * nx) % 65000).astype("uint16").reshape(3, ny, nx)
    ds = xr.Dataset(
        {
            "elevation": (("y", "x"), elevation),
            "scaled": (("y", "x"), scaled),
            "stack": (("time", "y", "x"), stack),
        },
        coords={"x": x, "y": y, "time": np.arange(3)},
    )
    ds = ds.rio.write_crs("EPSG:32633")
    ds["elevation"].encoding["_FillValue"] = -9999.0
    ds["scaled"].attrs.update(scale_factor=0.5, add_offset=100.0)
    ds["scaled"].encoding["_FillValue"] = -32768
    # Coordinates that step irregularly: no georeference.
    xi = x.copy()
    xi[10:] += 7.0
    ds["irregular"] = xr.DataArray(elevation, dims=("y", "xi"), coords={"xi": xi})
    ds["irregular"].attrs["grid_mapping"] = "spatial_ref"
    # A CRS with no EPSG code: WKT 1 only (GeoTIFF gets it as GDAL's ESRI PE citation).
    custom = pyproj.CRS.from_proj4(
        "+proj=tmerc +lat_0=0 +lon_0=15 +k=0.9996 +x_0=400000 +y_0=0 +datum=WGS84 +units=m"
    )
    ds["custom_crs"] = xr.DataArray(0)
    ds["custom_crs"].attrs["spatial_ref"] = custom.to_wkt("WKT1_GDAL")
    ds["custom"] = xr.DataArray(elevation, dims=("y", "x"))
    ds["custom"].attrs["grid_mapping"] = "custom_crs"
    # Regular x/y but no CRS anywhere.
    ds["no_crs"] = xr.DataArray(elevation, dims=("y", "x"))
    return ds


def south_up_dataset() -> xr.Dataset:
    lat = -10.0 + 0.25 * np.arange(20) + 0.125
    lon = 100.0 + 0.25 * np.arange(30) + 0.125
    temp = np.linspace(250.0, 300.0, 600).reshape(20, 30)
    ds = xr.Dataset({"south_up": (("lat", "lon"), temp)}, coords={"lat": lat, "lon": lon})
    ds = ds.rio.write_crs("EPSG:4326", grid_mapping_name="latlon_crs")
    # Latitude and longitude with no CRS: EPSG:4326 by the names.
    ds["implied"] = xr.DataArray(temp[::-1].astype("float32"), dims=("lat2", "lon"))
    ds = ds.assign_coords(lat2=("lat2", lat[::-1].copy()))
    ds = ds.rename({"lat2": "latitude"})
    # lon before lat: transposed, no georeference.
    ds["transposed"] = xr.DataArray(temp.T.copy(), dims=("lon", "lat"))
    # lat/lon names under a projected CRS: contradictory.
    ds["utm_latlon"] = xr.DataArray(temp, dims=("lat", "lon"))
    ds["utm_crs"] = xr.DataArray(0)
    ds["utm_crs"].attrs["crs_wkt"] = pyproj.CRS.from_epsg(32633).to_wkt()
    ds["utm_latlon"].attrs["grid_mapping"] = "utm_crs"
    # A grid_mapping that names nothing.
    ds["dangling"] = xr.DataArray(temp, dims=("lat", "lon"))
    ds["dangling"].attrs["grid_mapping"] = "missing_crs"
    # rioxarray's encoding of the mapping does not survive the variables added above.
    ds["south_up"].encoding.pop("grid_mapping", None)
    ds["south_up"].attrs["grid_mapping"] = "latlon_crs"
    return ds


def write_xarray(ds: xr.Dataset, path: str, zarr_format: int) -> None:
    ds.to_zarr(path, zarr_format=zarr_format, consolidated=False, mode="w")


def cf_netcdf(path: str) -> None:
    import netCDF4

    crs = pyproj.CRS.from_epsg(3035)
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("y", 25)
        nc.createDimension("x", 35)
        x = nc.createVariable("x", "f8", ("x",))
        y = nc.createVariable("y", "f8", ("y",))
        x[:] = 4000000.0 + 1000.0 * np.arange(35) + 500.0
        y[:] = 3000000.0 - 1000.0 * np.arange(25) - 500.0
        x.standard_name = "projection_x_coordinate"
        y.standard_name = "projection_y_coordinate"
        g = nc.createVariable("crs", "i4")
        for key, value in crs.to_cf().items():
            g.setncattr(key, value)
        v = nc.createVariable("precip", "f4", ("y", "x"), fill_value=-1.0)
        v.grid_mapping = "crs"
        data = np.arange(25 * 35, dtype="float32").reshape(25, 35) / 7.0
        data[0, 0] = -1.0
        v[:] = data


def gdal_stores(outdir: str) -> list[tuple[str, str, int]]:
    """GDAL's own Zarr writer (Debian's `gdal_translate`): a uint8 EPSG:32631 raster with
    nodata 255 to Zarr v2, and a float32 EPSG:3035 (LAEA) raster with nodata -9999 to Zarr
    v2 and to the 2020 draft layout (`-co FORMAT=ZARR_V3` in GDAL 3.6), where GDAL keeps
    the nodata only as the fill value. Each store holds one array named as the store; the
    draft store's nodata, as GDAL 3.6 reads it, must be its v2 twin's (rasterio's GDAL,
    the reference, no longer reads the draft layout). Returns (store, array, Zarr format or "draft")."""
    import rasterio
    from rasterio.transform import from_origin

    utm = (np.arange(30 * 50) % 251).astype("uint8").reshape(30, 50)
    utm[0, :5] = 255
    laea = (np.arange(20 * 30, dtype="float32").reshape(20, 30) * 0.5) - 40.0
    laea[2, 3:9] = -9999.0
    sources = [
        ("gdal_v2", utm, "EPSG:32631", from_origin(440000.0, 5000000.0, 20.0, 20.0), 255,
         ["ZARR_V2"]),
        ("gdal_laea", laea, "EPSG:3035", from_origin(4321000.0, 3210000.0, 1000.0, 1000.0),
         -9999.0, ["ZARR_V2", "ZARR_V3"]),
    ]
    out = []
    os.makedirs(os.path.join(outdir, "tmp"))
    for name, data, crs, transform, nodata, formats in sources:
        tif = os.path.join(outdir, f"{name}_source.tif")
        with rasterio.open(
            tif, "w", driver="GTiff", width=data.shape[1], height=data.shape[0], count=1,
            dtype=data.dtype.name, crs=crs, transform=transform, nodata=nodata,
        ) as dst:
            dst.write(data, 1)
        for fmt in formats:
            # GDAL names the array after the store's folder: write as NAME.zarr, then
            # move it to the store's name (both layouts then hold array NAME).
            store = name if name == "gdal_v2" else (
                f"{name}_v2" if fmt == "ZARR_V2" else f"{name}_draft")
            written = os.path.join(outdir, "tmp", name + ".zarr")
            subprocess.run(["gdal_translate", "-q", "-of", "Zarr", "-co", f"FORMAT={fmt}", tif,
                            written], check=True)
            path = os.path.join(outdir, store + ".zarr")
            shutil.move(written, path)
            if fmt == "ZARR_V3":
                arrays = [a.removesuffix(".array.json")
                          for a in os.listdir(os.path.join(path, "meta", "root"))
                          if a.endswith(".array.json")]
            else:
                arrays = [d for d in os.listdir(path) if os.path.isdir(os.path.join(path, d))]
            if sorted(a for a in arrays if a not in ("X", "Y")) != [name]:
                raise SystemExit(f"gdal_translate wrote {arrays} into {store}, expected {name} "
                                 "with X and Y")
            if fmt == "ZARR_V3":
                info = json.loads(subprocess.run(
                    ["gdalinfo", "-json", f'ZARR:"{path}":/{name}'], check=True,
                    capture_output=True, text=True).stdout)
                got = info["bands"][0].get("noDataValue")
                if got != nodata:
                    raise SystemExit(f"GDAL reads nodata {got} from {store}, expected {nodata}")
            out.append((store + ".zarr", name, 2 if fmt == "ZARR_V2" else "draft"))
        os.remove(tif)
    os.rmdir(os.path.join(outdir, "tmp"))
    return out


def main() -> None:
    outdir = os.path.join(sys.argv[1], "geo")
    shutil.rmtree(outdir, ignore_errors=True)
    os.makedirs(outdir)
    entries = []

    def add(store, path, fmt, georef, twin=None, implied=None, reason=None):
        entries.append(dict(store=store, path=path, zarr_format=fmt, georef=georef,
                            twin=twin, implied=implied, reason=reason))

    utm = utm_dataset()
    south = south_up_dataset()
    for fmt in (2, 3):
        store = f"rio_v{fmt}.zarr"
        write_xarray(utm, os.path.join(outdir, store), fmt)
        south.to_zarr(os.path.join(outdir, store), zarr_format=fmt, consolidated=False, mode="a")
        twin = None if fmt == 2 else "rio_v2.zarr"
        for name in ("elevation", "scaled", "stack", "south_up", "custom"):
            add(store, name, fmt, True, twin=twin)
        add(store, "implied", fmt, True, twin=twin, implied=4326)
        add(store, "irregular", fmt, False, reason="irregular", twin=twin)
        add(store, "no_crs", fmt, False, reason="no CRS", twin=twin)
        add(store, "transposed", fmt, False, reason="transposed", twin=twin)
        add(store, "utm_latlon", fmt, False, reason="projected", twin=twin)
        add(store, "dangling", fmt, False, reason="missing_crs", twin=twin)

    nc = os.path.join(outdir, "cf.nc")
    cf_netcdf(nc)
    with xr.open_dataset(nc) as ds:
        for fmt in (2, 3):
            store = f"cf_v{fmt}.zarr"
            write_xarray(ds.load(), os.path.join(outdir, store), fmt)
            add(store, "precip", fmt, True, twin=None if fmt == 2 else "cf_v2.zarr")
    os.remove(nc)

    for store, name, fmt in gdal_stores(outdir):
        twin = store.replace("_draft", "_v2") if fmt == "draft" else None
        add(store, name, fmt, True, twin=twin)

    with open(os.path.join(outdir, "manifest.json"), "w") as f:
        json.dump({"arrays": entries}, f, indent=1)
    print(f"make_fixtures_geo: {len(entries)} arrays in {outdir}")


if __name__ == "__main__":
    main()
