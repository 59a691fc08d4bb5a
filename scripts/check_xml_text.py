"""XML views of user text that XML 1.0 cannot hold as it is (tests/it/views.rs).

Usage:

    check_xml_text.py make OUTDIR        (target/venv-zarr3/bin/python: zarr-python 3)
    check_xml_text.py check MOUNTPOINT EXPECTED_JSON
                                         (target/venv-views/bin/python: GDAL, tifffile)

`make` writes OUTDIR/text.zarr (Zarr v2) with user text carrying C0 control characters:
`t`, a lat/lon grid whose GDAL `_CRS` WKT names its CRS "WGS 84<BEL>bell"; `a<SOH>b`, an
array whose name holds a control character; `img`, an OME-NGFF 0.4 image named
"ctl<ESC>image" whose `omero` channel labels hold a control character, a tab, a newline
and the characters XML escapes. It prints JSON: the store and what each text must read as
in XML (every control character but tab, newline and carriage return replaced by U+FFFD).

`check` parses `t.vrt` and `img.ome.tif`'s OME-XML with Python's expat (which refuses
what XML 1.0 does not allow), compares the channel names with the
expectation (the image is named by its file), opens `t.vrt` with GDAL (the CRS must be there) and checks that `a<SOH>b`
has its raw file but no `.vrt` (a VRT cannot name it). Prints JSON {"failures": [...]}
and exits 1 on any failure.
"""

from __future__ import annotations

import json
import os
import sys
import xml.etree.ElementTree as ET

WKT = ('GEOGCS["WGS 84\x07bell",DATUM["WGS_1984",SPHEROID["WGS 84",6378137,298.257223563]],'
       'PRIMEM["Greenwich",0],UNIT["degree",0.0174532925199433]]')
IMAGE = "ctl\x1bimage"
LABELS = ["red\x01", "tab\there", "new\nline & <x> \"q\"", "cr\r\x7f\x1f"]
BAD_NAME = "a\x01b"


def as_xml(text: str) -> str:
    """What XML 1.0 can hold of `text`: C0 controls but tab, newline and CR become U+FFFD."""
    return "".join("\ufffd" if ord(c) < 0x20 and c not in "\t\n\r" else c for c in text)


def make(outdir: str) -> None:
    import numpy as np
    import zarr

    store = os.path.join(outdir, "text.zarr")
    root = zarr.open_group(store, mode="w", zarr_format=2)
    for name, values in (("lat", [40.5, 39.5, 38.5, 37.5]), ("lon", [1.5, 2.5, 3.5, 4.5, 5.5])):
        coord = root.create_array(name, shape=(len(values),), dtype="f8")
        coord[:] = values
        coord.attrs["_ARRAY_DIMENSIONS"] = [name]
    t = root.create_array("t", shape=(4, 5), dtype="f4", fill_value=-1.0)
    t[:] = np.arange(20, dtype="f4").reshape(4, 5)
    t.attrs.update({"_ARRAY_DIMENSIONS": ["lat", "lon"], "_CRS": {"wkt": WKT}})
    bad = root.create_array(BAD_NAME, shape=(2, 3), dtype="u1")
    bad[:] = 7
    img = root.create_group("img")
    img.attrs["multiscales"] = [{
        "version": "0.4", "name": IMAGE,
        "axes": [{"name": "c", "type": "channel"}, {"name": "y", "type": "space"},
                 {"name": "x", "type": "space"}],
        "datasets": [{"path": "0", "coordinateTransformations": [
            {"type": "scale", "scale": [1.0, 1.0, 1.0]}]}],
    }]
    img.attrs["omero"] = {"channels": [{"label": label, "color": "FF0000"} for label in LABELS]}
    level = img.create_array("0", shape=(len(LABELS), 8, 8), dtype="u1", chunks=(1, 8, 8))
    level[:] = np.arange(len(LABELS) * 64, dtype="u1").reshape(len(LABELS), 8, 8)
    print(json.dumps({"store": store, "crs_name": as_xml("WGS 84\x07bell"),
                      "channels": [as_xml(label) for label in LABELS], "bad_name": BAD_NAME}))


def check(mountpoint: str, expected_path: str) -> int:
    from osgeo import gdal
    import tifffile

    gdal.UseExceptions()
    want = json.load(open(expected_path))
    failures = []
    vrt = os.path.join(mountpoint, "t.vrt")
    try:
        srs = ET.parse(vrt).getroot().findtext("SRS") or ""
        if want["crs_name"] not in srs:
            failures.append(f"t.vrt: SRS {srs!r} does not name {want['crs_name']!r}")
        ds = gdal.Open(vrt)
        if not ds.GetProjection():
            failures.append("t.vrt: GDAL finds no CRS")
        if ds.GetRasterBand(1).ReadAsArray().tolist()[1][2] != 7.0:
            failures.append("t.vrt: GDAL reads a wrong value at (1, 2)")
    except Exception as e:  # noqa: BLE001  (any reader failure is a test failure)
        failures.append(f"t.vrt: {e!r}")
    try:
        with tifffile.TiffFile(os.path.join(mountpoint, "img.ome.tif")) as tif:
            ome = ET.fromstring(tif.ome_metadata)
        ns = {"o": "http://www.openmicroscopy.org/Schemas/OME/2016-06"}
        names = [c.get("Name") for c in ome.findall(".//o:Channel", ns)]
        if names != want["channels"]:
            failures.append(f"img.ome.tif: channel names {names!r}, want {want['channels']!r}")
    except Exception as e:  # noqa: BLE001
        failures.append(f"img.ome.tif: {e!r}")
    names = os.listdir(mountpoint)
    if want["bad_name"] not in names:
        failures.append(f"{want['bad_name']!r}: no raw file")
    if want["bad_name"] + ".vrt" in names:
        failures.append(f"{want['bad_name']!r}.vrt is listed: a VRT cannot name its data file")
    print(json.dumps({"failures": failures}))
    return 1 if failures else 0


def main() -> None:
    if sys.argv[1:2] == ["make"] and len(sys.argv) == 3:
        make(sys.argv[2])
    elif sys.argv[1:2] == ["check"] and len(sys.argv) == 4:
        sys.exit(check(sys.argv[2], sys.argv[3]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
