#!/usr/bin/env python3
"""Zip archives of the fixture stores for the zip-store tests.

    make_zips.py FIXTURES OUT

For every store of FIXTURES/manifest.json, OUT/<dir>.zip holds the store's files at the
archive's top level, stored (zarr-python's ZipStore writes ZIP_STORED entries with
Python's zipfile). Two variants: OUT/deflated/<dir>.zip with deflated entries, and
OUT/nested/<dir>.zip with the files under one top folder <dir>/ (what `zip -r` makes).
The arrays' expected bytes are those of the manifest: the archives hold the same files.

Broken archives go to OUT/hostile/: `bzip2.zip` (the v3 store with its metadata stored
but every other entry bzip2-compressed, a method zarrfs does not read), `truncated.zip`
(the first half of the v3 archive), `names.zip` (the v3 store plus entries named
`../escape`, `/absolute`, `a//b` and `./dot`).
"""
import json
import os
import sys
import zipfile


def write(src, dest, compression, top):
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    tmp = dest + ".tmp"
    with zipfile.ZipFile(tmp, "w", compression=compression) as z:
        for folder, dirs, files in os.walk(src):
            dirs.sort()
            for name in sorted(files):
                path = os.path.join(folder, name)
                rel = os.path.relpath(path, src).replace(os.sep, "/")
                z.write(path, f"{top}/{rel}" if top else rel)
    os.replace(tmp, dest)


def hostile(fixtures, out):
    d = os.path.join(out, "hostile")
    os.makedirs(d, exist_ok=True)
    src = os.path.join(fixtures, "v3")
    with zipfile.ZipFile(os.path.join(d, "bzip2.zip"), "w") as z:
        for folder, dirs, files in os.walk(src):
            dirs.sort()
            for name in sorted(files):
                path = os.path.join(folder, name)
                rel = os.path.relpath(path, src).replace(os.sep, "/")
                method = zipfile.ZIP_STORED if name == "zarr.json" else zipfile.ZIP_BZIP2
                z.write(path, rel, compress_type=method)
    whole = open(os.path.join(out, "v3.zip"), "rb").read()
    with open(os.path.join(d, "truncated.zip"), "wb") as f:
        f.write(whole[: len(whole) // 2])
    with zipfile.ZipFile(os.path.join(d, "names.zip"), "w") as z:
        for folder, dirs, files in os.walk(src):
            dirs.sort()
            for name in sorted(files):
                path = os.path.join(folder, name)
                z.write(path, os.path.relpath(path, src).replace(os.sep, "/"))
        for bad in ("../escape", "/absolute", "a//b", "./dot"):
            z.writestr(zipfile.ZipInfo(bad), b"not zarr")


def main():
    fixtures, out = sys.argv[1], sys.argv[2]
    with open(os.path.join(fixtures, "manifest.json")) as f:
        manifest = json.load(f)
    stamp = os.path.join(out, "stamp")
    want = str(os.path.getmtime(os.path.join(fixtures, "manifest.json")))
    if os.path.exists(stamp) and open(stamp).read() == want:
        return
    for store in manifest["stores"]:
        d = store["dir"]
        src = os.path.join(fixtures, d)
        write(src, os.path.join(out, d + ".zip"), zipfile.ZIP_STORED, None)
        write(src, os.path.join(out, "deflated", d + ".zip"), zipfile.ZIP_DEFLATED, None)
        write(src, os.path.join(out, "nested", d + ".zip"), zipfile.ZIP_STORED, d)
    hostile(fixtures, out)
    with open(stamp, "w") as f:
        f.write(want)
    print(f"make_zips: {len(manifest['stores'])} stores zipped into {out}")


if __name__ == "__main__":
    main()
