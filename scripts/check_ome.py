"""Read the OME-TIFF views of the OME-Zarr fixtures with tifffile and compare them with
ome-zarr-py's read of the stores (tests/it/ome.rs).

Usage:
  check_ome.py check MANIFEST --mount STORE=MOUNTPOINT...
      every image of the mounted stores (but the large one): tifffile's `is_ome`, the
      OME-XML sizes, physical sizes, units and channel names against the multiscales
      metadata as ome-zarr-py reads it, every pyramid level (`series[0].levels`) against
      ome-zarr-py's read of that level, and `tiffinfo` accepting the file. Prints the
      counts as JSON on its last line.
  check_ome.py tile MANIFEST MOUNTPOINT
      the large image (mounted with its raw files): reads the first tile of its top
      level straight from the file (the offset and size its IFD gives), compares it
      with ome-zarr-py's read, and prints each level's `user.zarrfs.bytes_fetched`
      as JSON on its last line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings

import numpy as np
import tifffile
from ome_zarr.io import parse_url
from ome_zarr.reader import Reader

warnings.filterwarnings("ignore")

SYMBOLS = {"micrometer": "µm", "nanometer": "nm", "millimeter": "mm", "second": "s", "millisecond": "ms"}


def image_node(store_dir: str, group: str):
    """ome-zarr-py's reading of the image group: its levels and its metadata."""
    nodes = list(Reader(parse_url(os.path.join(store_dir, group)))())
    if not nodes:
        raise SystemExit(f"ome-zarr-py finds no image at {store_dir}/{group}")
    return nodes[0]


def scales(node) -> list[float]:
    for t in node.metadata["coordinateTransformations"][0]:
        if t["type"] == "scale":
            return t["scale"]
    raise SystemExit("no scale")


def check_image(store_dir: str, mount: str, group: str) -> int:
    node = image_node(store_dir, group)
    levels = [np.asarray(level) for level in node.data]
    axes = node.metadata["axes"]
    path = os.path.join(mount, group + ".ome.tif")
    where = f"{path}"
    with tifffile.TiffFile(path) as tif:
        assert tif.is_ome, f"{where}: not OME"
        series = tif.series[0]
        assert len(series.levels) == len(levels), f"{where}: {len(series.levels)} levels, want {len(levels)}"
        for k, (got_level, want) in enumerate(zip(series.levels, levels)):
            got = got_level.asarray()
            assert np.squeeze(got).shape == np.squeeze(want).shape, f"{where} level {k}: shape {got.shape}, want {want.shape}"
            assert got.dtype == want.dtype, f"{where} level {k}: {got.dtype}, want {want.dtype}"
            assert np.array_equal(np.squeeze(got), np.squeeze(want)), f"{where} level {k}: values differ"
        pixels = tifffile.xml2dict(tif.ome_metadata)["OME"]["Image"]["Pixels"]
    shape = levels[0].shape
    names = [a["name"] for a in axes]
    for dim in "xyzct":
        want = shape[names.index(dim)] if dim in names else 1
        got = int(pixels[f"Size{dim.upper()}"])
        assert got == want, f"{where}: Size{dim.upper()} {got}, want {want}"
    for axis, scale in zip(axes, scales(node)):
        attribute = {"x": "PhysicalSizeX", "y": "PhysicalSizeY", "z": "PhysicalSizeZ", "t": "TimeIncrement"}.get(axis["name"])
        if attribute is None:
            continue
        got = float(pixels[attribute])
        assert abs(got - scale) <= 1e-12 * abs(scale), f"{where}: {attribute} {got}, want {scale}"
        if "unit" in axis:
            unit = pixels.get(attribute + "Unit")
            assert unit == SYMBOLS[axis["unit"]], f"{where}: {attribute}Unit {unit!r}, want {axis['unit']}"
    channels = pixels.get("Channel", [])
    channels = channels if isinstance(channels, list) else [channels]
    if "c" in names:
        assert len(channels) == shape[names.index("c")], f"{where}: {len(channels)} channels"
    labels = node.metadata.get("channel_names")
    if labels and all(isinstance(l, str) for l in labels) and "omero" in json.dumps(node.zarr.root_attrs):
        got = [c.get("Name") for c in channels]
        assert got == labels, f"{where}: channel names {got}, want {labels}"
    info = subprocess.run(["tiffinfo", path], capture_output=True, text=True)
    assert info.returncode == 0 and "error" not in info.stderr.lower(), f"{where}: tiffinfo: {info.stderr}"
    print(f"{group}: OME-TIFF {len(levels)} levels {series.axes} {series.shape} as ome-zarr-py reads it")
    return len(levels)


def check(manifest_path: str, mounts: dict[str, str]) -> None:
    with open(manifest_path) as f:
        manifest = json.load(f)
    base = os.path.dirname(manifest_path)
    counts = {"images": 0, "levels": 0}
    for image in manifest["images"]:
        if image.get("large") or image["store"] not in mounts:
            continue
        counts["levels"] += check_image(os.path.join(base, image["store"]), mounts[image["store"]], image["group"])
        counts["images"] += 1
    print(json.dumps({"counts": counts}))


def tile(manifest_path: str, mount: str) -> None:
    with open(manifest_path) as f:
        manifest = json.load(f)
    base = os.path.dirname(manifest_path)
    image = next(i for i in manifest["images"] if i.get("large"))
    group = image["group"]
    node = image_node(os.path.join(base, image["store"]), group)
    paths = [d["path"] for d in node.zarr.root_attrs["multiscales"][0]["datasets"]]
    with tifffile.TiffFile(os.path.join(mount, group + ".ome.tif")) as tif:
        top = tif.series[0].levels[-1]
        page = top.pages[0]
        offset, size = page.dataoffsets[0], page.databytecounts[0]
        rows, cols = page.tilelength, page.tilewidth
    fd = os.open(os.path.join(mount, group + ".ome.tif"), os.O_RDONLY)
    try:
        got = np.frombuffer(os.pread(fd, size, offset), dtype=np.uint8).reshape(rows, cols)
    finally:
        os.close(fd)
    want = np.asarray(node.data[-1][:rows, :cols])
    assert np.array_equal(got[: want.shape[0], : want.shape[1]], want), "the tile differs from ome-zarr-py's read"
    fetched = {p: int(os.getxattr(os.path.join(mount, group, p), "user.zarrfs.bytes_fetched")) for p in paths}
    print(f"tile {rows}x{cols} of level {paths[-1]} equals ome-zarr-py's read")
    print(json.dumps({"tile": [rows, cols], "levels": paths, "fetched": fetched}))


def main() -> None:
    if sys.argv[1] == "tile":
        tile(sys.argv[2], sys.argv[3])
        return
    if sys.argv[1] != "check":
        raise SystemExit(__doc__)
    mounts = {}
    args = sys.argv[3:]
    while args:
        if args[0] != "--mount" or len(args) < 2:
            raise SystemExit(__doc__)
        store, mountpoint = args[1].split("=", 1)
        mounts[store] = mountpoint
        args = args[2:]
    check(sys.argv[2], mounts)


if __name__ == "__main__":
    main()
