"""Plan writes into arrays through a writable mount, and check them with zarr-python.

The expectation comes from zarr-python alone: `plan` reads each array as zarr-python
reads it, lays it out as the mount's file does (C or F order, little- or big-endian,
as numpy's tobytes and newbyteorder do), draws the writes a test then makes through the
mount, applies them to those bytes and keeps the digest; `check` reads each array again
after the mount is gone and compares. It also keeps the digest of every file of the
stores, and `check` fails on any changed file that is not a chunk the writes touched.

    check_written.py plan SPEC.json PLAN.json
    check_written.py agree PLAN.json OUT.json   (the arrays this zarr-python reads alike)
    check_written.py check PLAN.json [--data-only]
    check_written.py torn PLAN.json    (after a daemon was killed in a commit)
    check_written.py others-agree PLAN.json OUT.json ZARRS_READ
    check_written.py others OUT.json ZARRS_READ

`others-agree` (before the writes) keeps, for each array, the other readers that read it
as this zarr-python does: tensorstore (its zarr3 or zarr driver) and zarrs (the
benches/zarrs-read binary ZARRS_READ, which prints the SHA-256 of the array's C-order
bytes); a reader that cannot open an array (a codec or data type it does not know) is
left out for it. `others` (after the writes, once `check` passed) reads each kept array
with each kept reader again and fails where it differs from this zarr-python's read or
fails to read.

SPEC.json: {"stores": [DIR, ...], "arrays": [{"store": DIR, "path": P, "order": "C"|"F",
            "endian": "little"|"big", "seed": N, "fill_rows": bool}, ...]}
PLAN.json: the spec's arrays, each with "size", "writes" ([[offset, hex], ...], in the
           order they are to be made), "written" (the file's bytes with them laid
           over), "sha256" (the file once zarr-python has written those bytes into a
           copy of the array and read it back: a lossy codec keeps what it keeps; a
           read back may equal either) and
           "touched" (the keys of the chunks they touch), and "files" (store -> file
           -> sha256).

Works with zarr-python 3 (numpy 2) and 2.18 (numpy 1); `--data-only` skips the file
check (zarr-python 2 does not name chunk keys the same way).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import sys
import tempfile

import numpy as np
import zarr


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_bytes(a: np.ndarray, order: str, endian: str) -> bytes:
    e = "<" if endian == "little" else ">"
    return np.ascontiguousarray(a.astype(a.dtype.newbyteorder(e))).tobytes(order=order)


def open_array(store: str, path: str):
    return zarr.open_array(store=store, path=path, mode="r")


def store_files(store: str) -> dict:
    out = {}
    for root, _dirs, names in os.walk(store):
        for name in names:
            full = os.path.join(root, name)
            with open(full, "rb") as f:
                out[os.path.relpath(full, store)] = sha256(f.read())
    return out


def read_digest(spec: dict) -> str:
    """The digest of the array of `spec` as this zarr-python reads it, laid out as the
    mount's file."""
    a = np.asarray(open_array(spec["store"], spec["path"])[...])
    return sha256(file_bytes(a, spec["order"], spec["endian"]))


def chunk_shape(z) -> tuple:
    """The shape of the stored chunk objects (the shard of a sharded array)."""
    meta = z.metadata
    grid = getattr(meta, "chunk_grid", None)
    if grid is not None and hasattr(grid, "chunk_shape"):
        return tuple(grid.chunk_shape)
    return tuple(meta.chunks)


def chunk_key(z, path: str, idx: tuple) -> str:
    key = z.metadata.encode_chunk_key(idx)
    return f"{path}/{key}" if path else key


def element_index(e: int, shape: tuple, order: str) -> tuple:
    axes = list(range(len(shape)))
    if order == "F":
        axes.reverse()
    idx = [0] * len(shape)
    for a in reversed(axes):
        idx[a] = e % shape[a]
        e //= shape[a]
    return tuple(idx)


def nan_payload_fill(store: str, path: str) -> bool:
    """Whether the array's fill value is a NaN written in hex (with a payload, which
    zarr-python drops when it reads chunks never written)."""
    doc = os.path.join(store, path, "zarr.json")
    if not os.path.exists(doc):
        return False
    with open(doc) as f:
        fill = json.load(f).get("fill_value")
    parts = fill if isinstance(fill, list) else [fill]
    return any(isinstance(p, str) and p.startswith("0x") for p in parts)


def plan_array(spec: dict) -> dict:
    if nan_payload_fill(spec["store"], spec["path"]):
        raise ValueError("its fill value is a hex NaN, whose payload zarr-python drops")
    z = open_array(spec["store"], spec["path"])
    a = np.asarray(z[...])
    order, endian = spec["order"], spec["endian"]
    data = bytearray(file_bytes(a, order, endian))
    size, item = len(data), a.dtype.itemsize
    rng = random.Random(spec["seed"])
    writes = []
    if spec.get("fill_rows") and a.ndim > 0 and size > 0:
        # The slowest axis's first chunk of rows, all fill value: those chunks go.
        shape, chunks = a.shape, chunk_shape(z)
        slow = 0 if order == "C" else a.ndim - 1
        rows = min(chunks[slow], shape[slow])
        row_bytes = size // shape[slow]
        fill = np.full((), z.fill_value if z.fill_value is not None else 0, dtype=a.dtype)
        one = file_bytes(fill.reshape(1), order, endian)
        writes.append([0, (one * (rows * row_bytes // item)).hex()])
    # Each write lays the array's own elements, from elsewhere in the file, over a range
    # (its ends may cut elements): values the data type holds, not random bit patterns.
    source = bytes(data)
    if spec.get("whole") and size:
        shift = rng.randrange(1, max(2, size // item)) * item % size
        writes.append([0, (source[shift:] + source[:shift]).hex()])
    for _ in range(0 if spec.get("whole") else 3 if size else 0):
        offset = rng.randrange(size)
        length = rng.randint(1, min(size - offset, max(4 * item, size // 3)))
        shift = rng.randrange(size // item) * item
        start = (offset + shift) % size
        content = (source[start:] + source[:start])[:length]
        writes.append([offset, content.hex()])
    touched = set()
    for offset, hexdata in writes:
        new = bytes.fromhex(hexdata)
        data[offset : offset + len(new)] = new
        cs = chunk_shape(z)
        for e in range(offset // item, (offset + len(new) + item - 1) // item):
            idx = element_index(e, a.shape, order)
            touched.add(chunk_key(z, spec["path"], tuple(i // c for i, c in zip(idx, cs))))
    extra = {}
    if spec.get("append_rows") or spec.get("shrink_rows"):
        extra = resize_plan(spec, z, a, bytes(data), touched)
    if spec.get("save"):
        # The array before and after the writes, for `torn`.
        e = "<" if endian == "little" else ">"
        new = np.frombuffer(bytes(data), dtype=a.dtype.newbyteorder(e)).reshape(a.shape, order=order)
        np.save(spec["save"] + ".old.npy", a)
        np.save(spec["save"] + ".new.npy", new.astype(a.dtype))
    return dict(
        spec,
        **extra,
        size=size,
        original=sha256(source),
        writes=writes,
        written=sha256(bytes(data)),
        sha256=round_trip(spec, a.dtype, a.shape, bytes(data)),
        touched=sorted(touched),
    )


def resize_plan(spec: dict, z, a: np.ndarray, data: bytes, touched: set) -> dict:
    """After the writes: `append_rows` rows (of the file's slowest axis) appended to the
    file, or `shrink_rows` cut off its end. The expectation is zarr-python's own resize
    and assignment on a copy of the array, with the writes made first."""
    order, endian = spec["order"], spec["endian"]
    e = "<" if endian == "little" else ">"
    slow = 0 if order == "C" else a.ndim - 1
    now = np.frombuffer(data, dtype=a.dtype.newbyteorder(e)).reshape(a.shape, order=order)
    n = spec.get("append_rows", 0)
    if n:
        # The new rows: the array's first rows again, so each value is one it holds.
        take = [slice(None)] * a.ndim
        take[slow] = np.arange(n) % a.shape[slow]
        step = np.ascontiguousarray(now[tuple(take)])
        step_bytes = file_bytes(step, order, endian)
        new_shape = list(a.shape)
        new_shape[slow] += n
    else:
        step_bytes = b""
        new_shape = list(a.shape)
        new_shape[slow] -= spec["shrink_rows"]
    with tempfile.TemporaryDirectory() as tmp:
        copy = os.path.join(tmp, "a")
        shutil.copytree(os.path.join(spec["store"], spec["path"]), copy)
        c = zarr.open_array(store=copy, mode="r+")
        c[...] = now
        c.resize(tuple(new_shape))
        if n:
            region = [slice(None)] * a.ndim
            region[slow] = slice(a.shape[slow], new_shape[slow])
            c[tuple(region)] = step
        back = np.asarray(zarr.open_array(store=copy, mode="r")[...])
    # The metadata document changes, and the chunks of the new rows (or past the end).
    meta = "zarr.json" if os.path.exists(os.path.join(spec["store"], spec["path"], "zarr.json")) else ".zarray"
    touched.add(f"{spec['path']}/{meta}")
    cs = chunk_shape(z)
    grid = [-(-max(s, t) // c) for s, t, c in zip(a.shape, new_shape, cs)]
    first = min(a.shape[slow], new_shape[slow]) // cs[slow]
    for idx in np.ndindex(*grid):
        if idx[slow] >= first:
            touched.add(chunk_key(z, spec["path"], tuple(int(i) for i in idx)))
    return {
        "append": step_bytes.hex(),
        "new_size": len(data) // a.shape[slow] * new_shape[slow] if a.shape[slow] else 0,
        "resized": sha256(file_bytes(back, order, endian)),
    }


def round_trip(spec: dict, dtype, shape, data: bytes) -> str:
    """The digest of the file bytes `data` once zarr-python has written them into a copy
    of the array and read them back: what a lossy codec (quantize, bitround, astype,
    packbits of non-0/1 bytes) keeps of them is what zarr-python keeps."""
    e = "<" if spec["endian"] == "little" else ">"
    new = np.frombuffer(data, dtype=dtype.newbyteorder(e)).reshape(shape, order=spec["order"])
    with tempfile.TemporaryDirectory() as tmp:
        copy = os.path.join(tmp, "a")
        shutil.copytree(os.path.join(spec["store"], spec["path"]), copy)
        z = zarr.open_array(store=copy, mode="r+")
        z[...] = new
        back = np.asarray(zarr.open_array(store=copy, mode="r")[...])
    return sha256(file_bytes(back, spec["order"], spec["endian"]))


def plan(spec_path: str, out_path: str) -> None:
    with open(spec_path) as f:
        spec = json.load(f)
    arrays = []
    for s in spec["arrays"]:
        try:
            arrays.append(plan_array(s))
        except Exception as e:  # noqa: BLE001 - arrays zarr-python cannot read are left out, named
            print(f"check_written: left out {s['store']} {s['path']}: zarr-python cannot read it ({e})")
    files = {store: store_files(store) for store in spec["stores"]}
    with open(out_path, "w") as f:
        json.dump({"arrays": arrays, "files": files}, f)
    print(f"check_written: planned {sum(len(a['writes']) for a in arrays)} writes into {len(arrays)} arrays")


def check(plan_path: str, data_only: bool) -> int:
    with open(plan_path) as f:
        plan = json.load(f)
    failures = []
    for spec in plan["arrays"]:
        try:
            got = read_digest(spec)
        except Exception as e:  # noqa: BLE001 - every failure is reported
            failures.append(f"{spec['store']} {spec['path']}: {type(e).__name__}: {e}")
            continue
        # zarr-python's own write of the bytes, or the bytes themselves (zarr-python's
        # write of some filter chains is not what it reads back; zarrfs's is).
        want = (spec["resized"],) if "resized" in spec else (spec["sha256"], spec["written"])
        if got not in want:
            failures.append(f"{spec['store']} {spec['path']} ({spec['order']}, {spec['endian']}): read back differs")
    if not data_only:
        touched = {}
        for spec in plan["arrays"]:
            touched.setdefault(spec["store"], set()).update(spec["touched"])
        for store, before in plan["files"].items():
            after = store_files(store)
            for name in sorted(set(before) | set(after)):
                if before.get(name) != after.get(name) and name not in touched.get(store, ()):
                    failures.append(f"{store}: {name} changed, and no write touched it")
    for line in failures:
        print("check_written: FAIL", line)
    print(f"check_written: zarr {zarr.__version__}: {len(plan['arrays'])} arrays, {len(failures)} failures")
    return 1 if failures else 0


def agree(plan_path: str, out_path: str) -> None:
    """Keep the arrays of the plan that this zarr-python reads as the planning one did
    (before the writes): zarr-python 2 and 3 differ on the chunks never written of some
    fill values (`null`, complex), so only those it agrees on are checked with it."""
    with open(plan_path) as f:
        plan = json.load(f)
    kept = []
    for spec in plan["arrays"]:
        try:
            same = read_digest(spec) == spec["original"]
        except Exception as e:  # noqa: BLE001 - named and left out
            print(f"check_written: left out {spec['path']}: zarr {zarr.__version__} cannot read it ({e})")
            continue
        if same:
            kept.append(spec)
        else:
            print(f"check_written: left out {spec['path']}: zarr {zarr.__version__} reads it otherwise")
    with open(out_path, "w") as f:
        json.dump({"arrays": kept, "files": {}}, f)
    print(f"check_written: zarr {zarr.__version__} agrees on {len(kept)} of {len(plan['arrays'])} arrays")


def c_digest(a: np.ndarray) -> str:
    """The SHA-256 of an array's C-order bytes, little-endian (zarrs' and numpy's view)."""
    a = np.ascontiguousarray(a)
    if a.dtype.byteorder == ">" or (a.dtype.names is None and a.dtype.byteorder == "=" and sys.byteorder == "big"):
        a = a.astype(a.dtype.newbyteorder("<"))
    return sha256(a.tobytes())


def other_reads(spec: dict, zarrs_read: str) -> dict:
    """Each other reader's read of the array: the digest of its C-order little-endian
    bytes, `None` where the reader cannot open the array, or the error of a failed read."""
    import subprocess

    import tensorstore as ts

    out = {}
    folder = os.path.join(spec["store"], spec["path"])
    driver = "zarr3" if os.path.exists(os.path.join(folder, "zarr.json")) else "zarr"
    try:
        t = ts.open({"driver": driver, "kvstore": {"driver": "file", "path": folder}}, open=True).result()
    except Exception:  # noqa: BLE001 - an array tensorstore does not open is not its to check
        out["tensorstore"] = None
    else:
        try:
            out["tensorstore"] = c_digest(np.asarray(t.read().result()))
        except Exception as e:  # noqa: BLE001 - a failed read is reported
            out["tensorstore"] = f"error: {e}"
    r = subprocess.run([zarrs_read, spec["store"], "/" + spec["path"], "--sha256"], capture_output=True, text=True)
    if r.returncode == 0:
        out["zarrs"] = r.stdout.split()[2]
    elif r.returncode == 3:
        out["zarrs"] = None
    else:
        out["zarrs"] = f"error: {r.stderr.strip()}"
    return out


def others_agree(plan_path: str, out_path: str, zarrs_read: str) -> None:
    with open(plan_path) as f:
        plan = json.load(f)
    kept = []
    counts = {"tensorstore": 0, "zarrs": 0}
    for spec in plan["arrays"]:
        mine = c_digest(np.asarray(open_array(spec["store"], spec["path"])[...]))
        readers = [r for r, got in other_reads(spec, zarrs_read).items() if got == mine]
        for r in readers:
            counts[r] += 1
        if readers:
            kept.append(dict(spec, readers=readers))
    with open(out_path, "w") as f:
        json.dump({"arrays": kept}, f)
    print(f"check_written: before the writes, tensorstore reads {counts['tensorstore']} and zarrs "
          f"{counts['zarrs']} of {len(plan['arrays'])} arrays as zarr {zarr.__version__} does")


def others(path: str, zarrs_read: str) -> int:
    with open(path) as f:
        kept = json.load(f)["arrays"]
    failures = []
    counts = {"tensorstore": 0, "zarrs": 0}
    for spec in kept:
        mine = c_digest(np.asarray(open_array(spec["store"], spec["path"])[...]))
        reads = other_reads(spec, zarrs_read)
        for r in spec["readers"]:
            counts[r] += 1
            if reads[r] != mine:
                failures.append(f"{spec['store']} {spec['path']}: {r} reads it otherwise ({reads[r]})")
    for line in failures:
        print("check_written: FAIL", line)
    print(f"check_written: tensorstore read {counts['tensorstore']} arrays, zarrs {counts['zarrs']}: "
          f"{len(failures)} failures")
    return 1 if failures else 0


def torn(plan_path: str) -> int:
    """After a daemon was killed in a commit: every array of the plan with `save` reads
    (zarr-python), at the shape of its old or of its new metadata, and each of its
    chunks holds wholly the old or wholly the new values."""
    with open(plan_path) as f:
        plan = json.load(f)
    failures = []
    for spec in plan["arrays"]:
        if not spec.get("save"):
            continue
        old = np.load(spec["save"] + ".old.npy")
        new = np.load(spec["save"] + ".new.npy")
        try:
            z = open_array(spec["store"], spec["path"])
            got = np.asarray(z[...])
        except Exception as e:  # noqa: BLE001 - every failure is reported
            failures.append(f"{spec['path']}: unreadable: {type(e).__name__}: {e}")
            continue
        if got.shape not in (old.shape, new.shape):
            failures.append(f"{spec['path']}: shape {got.shape}, neither {old.shape} nor {new.shape}")
            continue
        cs = chunk_shape(z)
        counts = {"old": 0, "new": 0}
        for idx in np.ndindex(*[-(-s // c) for s, c in zip(got.shape, cs)]):
            region = tuple(slice(i * c, min((i + 1) * c, s)) for i, c, s in zip(idx, cs, got.shape))
            part = got[region]
            in_old = all(r.stop <= s for r, s in zip(region, old.shape))
            in_new = all(r.stop <= s for r, s in zip(region, new.shape))
            if in_old and np.array_equal(part, old[region], equal_nan=True):
                counts["old"] += 1
            elif in_new and np.array_equal(part, new[region], equal_nan=True):
                counts["new"] += 1
            else:
                failures.append(f"{spec['path']}: chunk {idx} is neither wholly old nor wholly new")
        print(f"check_written: {spec['path']}: shape {got.shape}, {counts['old']} chunks old, {counts['new']} new")
    for line in failures:
        print("check_written: FAIL", line)
    print(f"check_written: zarr {zarr.__version__}: {len(failures)} failures")
    return 1 if failures else 0


def main() -> int:
    if len(sys.argv) >= 4 and sys.argv[1] == "plan":
        plan(sys.argv[2], sys.argv[3])
        return 0
    if len(sys.argv) >= 4 and sys.argv[1] == "agree":
        agree(sys.argv[2], sys.argv[3])
        return 0
    if len(sys.argv) >= 5 and sys.argv[1] == "others-agree":
        others_agree(sys.argv[2], sys.argv[3], sys.argv[4])
        return 0
    if len(sys.argv) >= 4 and sys.argv[1] == "others":
        return others(sys.argv[2], sys.argv[3])
    if len(sys.argv) >= 3 and sys.argv[1] == "torn":
        return torn(sys.argv[2])
    if len(sys.argv) >= 3 and sys.argv[1] == "check":
        return check(sys.argv[2], "--data-only" in sys.argv[3:])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
