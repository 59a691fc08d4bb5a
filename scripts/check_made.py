"""Make arrays through a writable mount with numpy.save and sidecars, and check them.

    check_made.py write GROUP_DIR EXPECT_DIR FORMAT LAYOUT
    check_made.py check STORE GROUP EXPECT_DIR
    check_made.py tensorstore STORE GROUP EXPECT_DIR

`write` runs in the mounted group's folder GROUP_DIR (a Zarr FORMAT 2 or 3 group of a
mount whose files are laid out as LAYOUT, "C-little", "F-big", ...): for each case it
draws an array, saves it with numpy.save as NAME.npy (the mount makes array NAME), or
writes a sidecar .NAME.json (an array of fill values) and then some rows of its file
NAME; it keeps each expected array in EXPECT_DIR/NAME.npy (outside the mount) and the
list of cases in EXPECT_DIR/cases.json (with the SHA-256 of each array's C-order
little-endian bytes, for readers outside Python). It also checks what is refused: a
name that is already an array (EEXIST), a file that is neither .npy nor a sidecar
(EROFS), a .npy whose data is longer than its header says, one whose shape overflows and
a file named .npy that is not one (each EINVAL at close, after which the mount still
makes arrays).

`check` reads every case with this Python's zarr-python (3, or 2.18 for a v2 store)
after the mount is gone and compares it with the expectation: values, shape, data type,
attributes and dimension names; zarr-python 3 also checks the codecs the case expects.
`tensorstore` reads the cases that tensorstore reads (fixed-size numeric types).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import sys

import numpy as np


def cases(fmt: int) -> list[dict]:
    """The arrays to make: name, how, dtype, shape, order (of the .npy)."""
    out = [
        {"name": "f4", "how": "npy", "dtype": "<f4", "shape": [500, 300], "order": "C"},
        {"name": "i2_be_f", "how": "npy", "dtype": ">i2", "shape": [64, 33, 7], "order": "F"},
        {"name": "u1", "how": "npy", "dtype": "|u1", "shape": [10000], "order": "C"},
        {"name": "b1", "how": "npy", "dtype": "|b1", "shape": [37, 5], "order": "C"},
        {"name": "c8", "how": "npy", "dtype": "<c8", "shape": [20, 20], "order": "F"},
        {"name": "f8_many", "how": "npy", "dtype": ">f8", "shape": [1100, 600], "order": "C"},
        {"name": "u8_0d", "how": "npy", "dtype": "<u8", "shape": [4, 0], "order": "C"},
        {"name": "side", "how": "sidecar", "dtype": "<i4", "shape": [30, 40], "fill": -1,
         "chunks": [10, 40], "attributes": {"units": "K", "n": 3}, "dims": ["y", "x"]},
    ]
    if fmt == 2:
        out.append({"name": "rec", "how": "npy", "dtype": [["a", "<i4"], ["b", "<f8"]],
                    "shape": [50], "order": "C"})
    else:
        out.append({"name": "dt", "how": "npy", "dtype": "<M8[s]", "shape": [12], "order": "C"})
    return out


def draw(case: dict, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    dtype = np.dtype([tuple(f) for f in case["dtype"]]) if isinstance(case["dtype"], list) \
        else np.dtype(case["dtype"])
    shape = tuple(case["shape"])
    if dtype.kind == "b":
        return rng.integers(0, 2, size=shape).astype(dtype)
    if dtype.kind == "V":
        a = np.zeros(shape, dtype=dtype)
        a["a"] = rng.integers(-1000, 1000, size=shape)
        a["b"] = rng.standard_normal(size=shape)
        return a
    if dtype.kind == "M":
        return rng.integers(0, 2_000_000_000, size=shape).astype(dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, size=shape, endpoint=True).astype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(size=shape) + 1j * rng.standard_normal(size=shape)).astype(dtype)
    return rng.standard_normal(size=shape).astype(dtype)


def c_little_sha(a: np.ndarray) -> str:
    le = a.astype(a.dtype.newbyteorder("<")) if a.dtype.byteorder == ">" else a
    return hashlib.sha256(np.ascontiguousarray(le).tobytes()).hexdigest()


def expect_errno(code: int, what: str, f) -> None:
    try:
        f()
    except OSError as e:
        if e.errno != code:
            sys.exit(f"{what}: errno {e.errno} ({e}), not {errno.errorcode[code]}")
        return
    sys.exit(f"{what}: no error, expected {errno.errorcode[code]}")


def write(group_dir: str, expect_dir: str, fmt: int, layout: str) -> None:
    order, endian = layout.split("-")
    made = []
    for i, case in enumerate(cases(fmt)):
        name = case["name"]
        if case["how"] == "npy":
            a = draw(case, 100 + i)
            if case["order"] == "F":
                a = np.asfortranarray(a)
            np.save(os.path.join(group_dir, name + ".npy"), a)
        else:
            side = {"shape": case["shape"], "dtype": case["dtype"], "fill_value": case["fill"],
                    "chunks": case["chunks"], "attributes": case["attributes"],
                    "dimension_names": case["dims"]}
            with open(os.path.join(group_dir, f".{name}.json"), "w") as f:
                json.dump(side, f)
            a = np.full(case["shape"], case["fill"], dtype=case["dtype"])
            # Rows 3 and 7 (C order) through the array's file, as the mount lays it out.
            a[3, :] = np.arange(40)
            a[7, :] = -np.arange(40)
            e = "<" if endian == "little" else ">"
            flat = np.ascontiguousarray(a.astype(a.dtype.newbyteorder(e))).tobytes(order=order)
            item = a.dtype.itemsize
            with open(os.path.join(group_dir, name), "r+b") as f:
                if order == "C":
                    for r in (3, 7):
                        at = r * 40 * item
                        f.seek(at)
                        f.write(flat[at:at + 40 * item])
                else:
                    # In F order a row is every 30th element: write the whole file.
                    f.write(flat)
        np.save(os.path.join(expect_dir, name + ".npy"), a)
        made.append({**case, "sha256": c_little_sha(a)})
    # What is refused.
    expect_errno(errno.EEXIST, "an array's name again", lambda: np.save(os.path.join(group_dir, "u1.npy"), np.zeros(3)))
    expect_errno(errno.EROFS, "a file that makes no array",
                 lambda: open(os.path.join(group_dir, "notes.txt"), "w").close())

    def too_long():
        # One descriptor, written whole before its close (numpy.save to a path closes a
        # duplicate of its descriptor once the data is written: a close that finds the
        # file whole makes the array).
        import io
        buf = io.BytesIO()
        np.save(buf, np.zeros(4, dtype="<f4"))
        fd = os.open(os.path.join(group_dir, "long.npy"), os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        try:
            os.write(fd, buf.getvalue() + b"1234")
        finally:
            os.close(fd)
    expect_errno(errno.EINVAL, "a .npy longer than its header says", too_long)

    def raw(name: str, data: bytes):
        def write_raw():
            fd = os.open(os.path.join(group_dir, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
        return write_raw

    # Hostile headers fail their close; the mount goes on (the arrays after them are made).
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296), }"
    header = header + " " * (63 - (10 + len(header)) % 64) + "\n"
    overflow = b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode()
    expect_errno(errno.EINVAL, "a .npy whose shape overflows", raw("huge.npy", overflow))
    expect_errno(errno.EINVAL, "a file named .npy that is not one", raw("text.npy", b"just some text, " * 8))
    # The mount still makes arrays after them.
    after = np.arange(6, dtype="<u2")
    np.save(os.path.join(group_dir, "after.npy"), after)
    np.save(os.path.join(expect_dir, "after.npy"), after)
    made.append({"name": "after", "how": "npy", "dtype": "<u2", "shape": [6], "order": "C",
                 "sha256": c_little_sha(after)})
    listed = set(os.listdir(group_dir))
    for case in made:
        if case["name"] not in listed:
            sys.exit(f"{case['name']} is not listed in {group_dir}: {sorted(listed)}")
    for bad in ("long", "huge", "text"):
        if bad in listed or bad + ".npy" in listed:
            sys.exit(f"{bad}.npy made an array: {sorted(listed)}")
    with open(os.path.join(expect_dir, "cases.json"), "w") as f:
        json.dump({"format": fmt, "cases": made}, f)
    print(f"check_made: made {len(made)} arrays in {group_dir}")


def load(expect_dir: str):
    with open(os.path.join(expect_dir, "cases.json")) as f:
        spec = json.load(f)
    for case in spec["cases"]:
        yield spec["format"], case, np.load(os.path.join(expect_dir, case["name"] + ".npy"))


def codec_names(arr) -> list[str]:
    meta = arr.metadata
    names = []
    for c in getattr(meta, "codecs", None) or []:
        names.append(type(c).__name__)
        for inner in getattr(c, "codecs", None) or []:
            names.append(type(inner).__name__)
    if getattr(meta, "compressor", None) is not None:
        names.append(type(meta.compressor).__name__)
    return names


def check(store: str, group: str, expect_dir: str, codecs: str) -> None:
    import zarr

    failures = []
    n = 0
    for fmt, case, want in load(expect_dir):
        path = f"{group}/{case['name']}".strip("/")
        arr = zarr.open_array(store=store, path=path, mode="r")
        got = arr[...]
        if got.shape != want.shape or got.dtype.newbyteorder("=") != want.dtype.newbyteorder("=") \
                and got.dtype.names is None:
            failures.append(f"{path}: {got.dtype}{got.shape}, not {want.dtype}{want.shape}")
            continue
        if not np.array_equal(got, want, equal_nan=want.dtype.kind in "fc"):
            failures.append(f"{path}: values differ")
        if case["how"] == "sidecar":
            attrs = dict(arr.attrs)
            dims = attrs.pop("_ARRAY_DIMENSIONS", None)
            if attrs != case["attributes"]:
                failures.append(f"{path}: attributes {attrs}")
            if zarr.__version__.startswith("3") and fmt == 3:
                dims = list(arr.metadata.dimension_names)
            if dims != case["dims"]:
                failures.append(f"{path}: dimension names {dims}")
            if list(arr.chunks) != case["chunks"]:
                failures.append(f"{path}: chunks {arr.chunks}")
        if zarr.__version__.startswith("3") and codecs and case["how"] == "npy":
            names = " ".join(codec_names(arr)).lower()
            for want_codec in codecs.split(","):
                if want_codec not in names:
                    failures.append(f"{path}: codecs {names}, no {want_codec}")
        n += 1
    if failures:
        sys.exit("check_made: " + "\n".join(failures))
    print(f"check_made: zarr {zarr.__version__} reads {n} arrays as made")


def check_tensorstore(store: str, group: str, expect_dir: str) -> None:
    import tensorstore as ts

    n = 0
    failures = []
    for fmt, case, want in load(expect_dir):
        if want.dtype.kind not in "biufc":
            continue
        path = f"{group}/{case['name']}".strip("/")
        driver = "zarr3" if fmt == 3 else "zarr"
        t = ts.open({"driver": driver, "kvstore": {"driver": "file", "path": os.path.join(store, path)}},
                    open=True).result()
        got = t.read().result()
        if got.shape != want.shape or not np.array_equal(got, want.astype(want.dtype.newbyteorder("="))):
            failures.append(f"{path}: tensorstore reads other values")
        n += 1
    if failures:
        sys.exit("check_made: " + "\n".join(failures))
    print(f"check_made: tensorstore reads {n} arrays as made")


def main() -> None:
    mode = sys.argv[1]
    if mode == "write":
        write(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
    elif mode == "check":
        check(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5] if len(sys.argv) > 5 else "")
    elif mode == "tensorstore":
        check_tensorstore(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
