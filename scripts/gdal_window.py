"""One window of a tiled `.tif` view read by GDAL by URL (tests/it/serve.rs): the store is
written by zarr-python 3, the window read by GDAL's `/vsicurl/` and compared with
zarr-python's read-back of it.

    gdal_window.py make OUTDIR        (target/venv-zarr3: zarr-python)
    gdal_window.py read URL OUTDIR    (target/venv-views: GDAL's Python bindings)

`make` writes OUTDIR/window.zarr: a group whose array `img` is float32 of shape
(2, 1024, 768) in chunks of (1, 256, 256), zstd, seeded noise; it saves what zarr-python
reads of page 1, rows 256-511, columns 512-767 (the chunk img/c/1/1/2 exactly) as
OUTDIR/want.npy, and prints {"store", "chunk", "page", "window": [x, y, w, h]} as JSON.
`read` opens page 2 (GTIFF_DIR:2) of URL with GDAL, reads that window of band 1 and
compares it with OUTDIR/want.npy; it prints {"equal": bool, "block": [w, h]} and exits
1 unless equal.
"""

import json
import os
import sys

import numpy as np

PAGE, X, Y, W, H = 1, 512, 256, 256, 256


def make(outdir: str) -> int:
    import zarr
    from zarr.codecs import ZstdCodec

    store = os.path.join(os.path.abspath(outdir), "window.zarr")
    root = zarr.open_group(store, mode="w", zarr_format=3)
    img = root.create_array("img", shape=(2, 1024, 768), chunks=(1, 256, 256), dtype="float32",
                            fill_value=0.0, compressors=ZstdCodec(level=3))
    img[:] = np.random.default_rng(42).standard_normal((2, 1024, 768), dtype=np.float32)
    back = zarr.open_array(store, path="img", mode="r")
    np.save(os.path.join(outdir, "want.npy"), np.asarray(back[PAGE, Y:Y + H, X:X + W]))
    print(json.dumps({"store": store, "chunk": "img/c/1/1/2", "page": PAGE, "window": [X, Y, W, H]}))
    return 0


def read(url: str, outdir: str) -> int:
    from osgeo import gdal

    gdal.UseExceptions()
    # Nothing but the file asked for is fetched: no listing of its folder for sidecars.
    gdal.SetConfigOption("GDAL_DISABLE_READDIR_ON_OPEN", "EMPTY_DIR")
    ds = gdal.Open(f"GTIFF_DIR:{PAGE + 1}:/vsicurl/{url}")
    band = ds.GetRasterBand(1)
    got = band.ReadAsArray(X, Y, W, H)
    want = np.load(os.path.join(outdir, "want.npy"))
    equal = bool(got is not None and got.dtype == want.dtype and np.array_equal(got, want))
    print(json.dumps({"equal": equal, "block": list(band.GetBlockSize())}))
    return 0 if equal else 1


if __name__ == "__main__":
    if sys.argv[1:2] == ["make"]:
        sys.exit(make(sys.argv[2]))
    sys.exit(read(sys.argv[2], sys.argv[3]))
