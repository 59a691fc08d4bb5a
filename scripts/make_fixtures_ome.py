"""Write the OME-Zarr fixture images of tests/it/ome.rs with ome-zarr-py.

Usage: target/venv-ome/bin/python scripts/make_fixtures_ome.py OUTDIR

Writes OUTDIR/ome/ and OUTDIR/ome/manifest.json:

- `ngff04.zarr` (OME-NGFF 0.4, Zarr v2) and `ngff05.zarr` (OME-NGFF 0.5, Zarr v3), each
  holding the same images made from scikit-image's bundled samples, every one with a
  pyramid written by ome-zarr-py (`write_image` with its scale factors):
  `camera` (y x, uint8, micrometer pixels), `coins` (y x with odd sizes and chunks that
  are no multiple of 16, so tiles run past the edges), `astronaut` (c y x, three named
  and coloured channels in `omero`), `cells` (z y x, uint16, z spacing in
  micrometers), `movie` (t c z y x, float32, seconds between time points);
- `large.zarr` (OME-NGFF 0.4): a 20000 x 20000 uint8 image tiled from `camera`, in
  256 x 256 chunks, with five levels (`write_multiscale` of the image strided by 2, 4,
  8 and 16), for the test that reading a tile of the top level touches only that
  level's chunks.

Idempotent: a manifest naming this script's version of the fixtures is left alone.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import warnings

import numpy as np
import skimage.data
import zarr
from ome_zarr.format import FormatV04, FormatV05
from ome_zarr.writer import write_image, write_multiscale

warnings.filterwarnings("ignore")

VERSION = 1
LARGE = 20000


def images() -> list[dict]:
    camera = skimage.data.camera()
    moon = skimage.data.moon()
    astronaut = np.moveaxis(skimage.data.astronaut(), -1, 0).copy()
    cells = np.stack([camera, moon, skimage.data.brick(), skimage.data.grass()]).astype("uint16") * 257
    small = camera[::2, ::2].astype("float32")
    movie = np.stack(
        [
            np.stack([np.stack([small * (t + 1) + z for z in range(3)]), np.stack([small[::-1] - z for z in range(3)])])
            for t in range(2)
        ]
    ).astype("float32")
    um = "micrometer"
    return [
        dict(name="camera", data=camera, axes="yx", units={"y": um, "x": um},
             scale=[0.5, 0.5], chunks=(128, 128), factors=(2, 4)),
        dict(name="coins", data=skimage.data.coins(), axes="yx", units={"y": um, "x": um},
             scale=[0.25, 0.25], chunks=(100, 100), factors=(2,)),
        dict(name="astronaut", data=astronaut, axes="cyx", units={"y": um, "x": um},
             scale=[1.0, 0.325, 0.325], chunks=(1, 256, 256), factors=(2, 4),
             omero={"channels": [
                 {"label": "red", "color": "FF0000", "active": True, "window": {"start": 0, "end": 255, "min": 0, "max": 255}},
                 {"label": "green", "color": "00FF00", "active": True, "window": {"start": 0, "end": 255, "min": 0, "max": 255}},
                 {"label": "blue", "color": "0000FF", "active": True, "window": {"start": 0, "end": 255, "min": 0, "max": 255}},
             ]}),
        dict(name="cells", data=cells, axes="zyx", units={"z": um, "y": um, "x": um},
             scale=[2.0, 0.5, 0.5], chunks=(1, 256, 256), factors=(2,)),
        dict(name="movie", data=movie, axes="tczyx", units={"t": "second", "z": um, "y": um, "x": um},
             scale=[1.5, 1.0, 3.0, 0.75, 0.75], chunks=(1, 1, 1, 128, 128), factors=(2,)),
    ]


def write_store(path: str, fmt, zarr_format: int, manifest: list) -> None:
    root = zarr.open_group(path, mode="w", zarr_format=zarr_format)
    for im in images():
        group = root.create_group(im["name"])
        n = len(im["factors"]) + 1
        extra = {"omero": im["omero"]} if "omero" in im else {}
        write_image(
            im["data"],
            group,
            scale_factors=im["factors"],
            fmt=fmt,
            axes=im["axes"],
            axes_units=im["units"],
            scale=dict(zip(im["axes"], im["scale"])),
            storage_options={"chunks": im["chunks"]},
            **extra,
        )
        manifest.append({"store": os.path.basename(path), "group": im["name"], "levels": n})


def write_large(path: str, manifest: list) -> None:
    camera = skimage.data.camera()
    reps = -(-LARGE // camera.shape[0])
    base = np.tile(camera, (reps, reps))[:LARGE, :LARGE]
    pyramid = [base[:: 2**k, :: 2**k] for k in range(5)]
    root = zarr.open_group(path, mode="w", zarr_format=2)
    group = root.create_group("slide")
    write_multiscale(
        pyramid,
        group,
        fmt=FormatV04(),
        axes="yx",
        axes_units={"y": "micrometer", "x": "micrometer"},
        scale={"y": 0.25, "x": 0.25},
        storage_options={"chunks": (256, 256)},
    )
    manifest.append({"store": os.path.basename(path), "group": "slide", "levels": 5, "large": True})


def main() -> None:
    out = os.path.join(sys.argv[1], "ome")
    manifest_path = os.path.join(out, "manifest.json")
    try:
        with open(manifest_path) as f:
            if json.load(f).get("version") == VERSION:
                print(f"make_fixtures_ome: {out} up to date")
                return
    except (OSError, ValueError):
        pass
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    images_list: list = []
    write_store(os.path.join(out, "ngff04.zarr"), FormatV04(), 2, images_list)
    write_store(os.path.join(out, "ngff05.zarr"), FormatV05(), 3, images_list)
    write_large(os.path.join(out, "large.zarr"), images_list)
    with open(manifest_path, "w") as f:
        json.dump({"version": VERSION, "images": images_list}, f, indent=1)
    print(f"make_fixtures_ome: wrote {len(images_list)} images to {out}")


if __name__ == "__main__":
    main()
