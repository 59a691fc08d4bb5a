"""Helpers shared by the fixture writers.

Imported by make_fixtures.py (zarr-python 3.x, numpy 2) and by
make_fixtures_draft.py (zarr-python 2.18.7, numpy 1.x), so it uses numpy and
the standard library only.

- sample_data / sample_vlen: deterministic element values for a numpy dtype.
- array_entry: one manifest entry (shape, dtype, expected digests) for an
  array as its writer reads it back.
- list_groups: the groups of a store as found on disk (explicit and implicit).
- pin_gzip_mtime: byte-reproducible gzip chunks.

Expected bytes (see manifest.json):
  fixed-size dtypes: sha256 of the flat element bytes in C/F order, little- and
  big-endian (numpy's newbyteorder, which recurses into structured fields,
  U code units and complex halves);
  variable-length strings/bytes: sha256 of one JSON value per element and line
  (str as JSON text, bytes as a JSON string of padded standard base64,
  missing as null), in C resp. F order.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import os
import zlib

import numpy as np

# Strings with multi-byte UTF-8, astral code points, quotes and newlines.
TEXT_SAMPLES = ["", "a", "zarr", "é", "naïve", "漢字", "😀🐍", 'q"uote', "line\nbreak", "tab\t", "x" * 40]
BYTES_SAMPLES = [b"", b"a", b"\x00", b"\xff\xfe", b"zarr\x00fs", bytes(range(20)), b"\x00" * 3]


def pin_gzip_mtime() -> None:
    """Make gzip output reproducible: numcodecs' GZip writes the current time into
    each chunk's gzip header unless GzipFile gets an mtime."""

    class FixedMtimeGzipFile(gzip.GzipFile):
        def __init__(self, *args, **kwargs):
            kwargs.setdefault("mtime", 0)
            super().__init__(*args, **kwargs)

    gzip.GzipFile = FixedMtimeGzipFile


def seeded_rng(*parts: str) -> np.random.Generator:
    """A generator whose seed depends only on the given names."""
    return np.random.default_rng(zlib.crc32("/".join(parts).encode()))


def sample_data(dtype, shape, rng: np.random.Generator) -> np.ndarray:
    """Deterministic values of any fixed-size numpy dtype, with edge values mixed in."""
    dtype = np.dtype(dtype)
    shape = tuple(shape)
    if dtype.fields is not None:
        out = np.zeros(shape, dtype)
        for name in dtype.names:
            field_dtype = dtype.fields[name][0]
            if field_dtype.subdtype is not None:
                base, sub_shape = field_dtype.subdtype
                out[name] = sample_data(base, shape + sub_shape, rng)
            else:
                out[name] = sample_data(field_dtype, shape, rng)
        return out
    native = dtype.newbyteorder("=")
    size = int(np.prod(shape, dtype=np.int64))
    kind = dtype.kind
    if kind == "b":
        flat = rng.random(size) < 0.5
    elif kind in "iu":
        info = np.iinfo(native)
        flat = rng.integers(info.min, info.max, size=size, endpoint=True, dtype=native)
        _put_edges(flat, [info.min, info.max, 0])
    elif kind == "f":
        flat = (rng.standard_normal(size) * 1000).astype(native)
        tiny = np.finfo(native).smallest_subnormal
        _put_edges(flat, [np.nan, np.inf, -np.inf, -0.0, tiny, np.finfo(native).max])
    elif kind == "c":
        part = np.dtype(f"f{native.itemsize // 2}")
        flat = sample_data(part, (size,), rng) + 1j * sample_data(part, (size,), rng)[::-1]
        flat = flat.astype(native)
    elif kind in "mM":
        flat = rng.integers(-(10**5), 10**5, size=size).astype("i8").view(native.newbyteorder("<"))
        _put_edges(flat, [np.array("NaT", native)])
    elif kind == "U":
        nchars = dtype.itemsize // 4
        flat = np.array([_random_text(rng, nchars) for _ in range(size)], dtype=native)
    elif kind == "S":
        letters = np.frombuffer(b"abcdefghijXYZ\x01\x7f\xff", dtype="u1")
        flat = np.array([bytes(rng.choice(letters, rng.integers(0, dtype.itemsize + 1))) for _ in range(size)], dtype=dtype)
    elif kind == "V":
        flat = np.frombuffer(rng.bytes(size * dtype.itemsize), dtype=dtype).copy()
    else:
        raise ValueError(f"no sample data for dtype {dtype}")
    return flat.reshape(shape).astype(dtype)


def _put_edges(flat: np.ndarray, values) -> None:
    """Overwrite a few evenly spread elements with edge values."""
    n = len(flat)
    for k, value in enumerate(values):
        if n > len(values) + 1:
            flat[(k * 7 + 1) % n] = value


def _random_text(rng: np.random.Generator, nchars: int) -> str:
    alphabet = "abcXYZ09 éß漢字😀"
    return "".join(alphabet[i] for i in rng.integers(0, len(alphabet), rng.integers(0, nchars + 1)))


def sample_vlen(kind: str, shape, rng: np.random.Generator) -> np.ndarray:
    """An object array of str ('text') or bytes ('bytes') values."""
    pool = TEXT_SAMPLES if kind == "text" else BYTES_SAMPLES
    size = int(np.prod(shape, dtype=np.int64))
    out = np.empty(size, dtype=object)
    for k in range(size):
        out[k] = pool[int(rng.integers(0, len(pool)))]
    return out.reshape(tuple(shape))


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def fixed_digests(a: np.ndarray) -> dict:
    """sha256 of the flat element bytes in C/F order and little/big byte order."""
    out = {}
    for endian, tag in (("<", "little"), (">", "big")):
        swapped = np.ascontiguousarray(a.astype(a.dtype.newbyteorder(endian)))
        for order in "CF":
            out[f"{order}_{tag}"] = sha256(swapped.tobytes(order=order))
    return out


def vlen_line(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, (bytes, np.bytes_)):
        return json.dumps(base64.b64encode(bytes(value)).decode("ascii"))
    return json.dumps(str(value), ensure_ascii=False)


def vlen_text(a: np.ndarray, order: str) -> bytes:
    """One JSON value per element and line, in C or F element order."""
    return "".join(vlen_line(v) + "\n" for v in np.asarray(a).ravel(order=order)).encode("utf-8")


def array_entry(store: str, path: str, a: np.ndarray, *, chunks, zarr_dtype, fill_value, note: str,
                vlen: bool = False, **extra) -> dict:
    """The manifest entry of one array, from the array its writer read back."""
    entry = {"store": store, "path": path, "shape": list(a.shape), "chunks": [int(c) for c in chunks]}
    if vlen:
        text = vlen_text(a, "C")
        entry.update(dtype="|O", itemsize=None, vlen=True,
                     sha256={"C": sha256(text), "F": sha256(vlen_text(a, "F"))}, nbytes=len(text))
    else:
        little = a.dtype.newbyteorder("<")
        entry.update(dtype=little.str, itemsize=little.itemsize, vlen=False)
        if little.fields is not None:
            entry["descr"] = _jsonable(little.descr)
        entry.update(sha256=fixed_digests(a), nbytes=int(np.prod(a.shape, dtype=np.int64)) * little.itemsize)
    entry.update(zarr_dtype=zarr_dtype, fill_value=fill_value, note=note)
    entry.update(extra)
    return entry


def _jsonable(descr):
    return json.loads(json.dumps(descr))


# --- hierarchy on disk -------------------------------------------------------

def list_groups(store: str, root: str, fmt: str) -> tuple[list, list]:
    """(groups, arrays) of a store as found on disk; arrays are paths only."""
    if fmt == "draft":
        return _list_draft(store, root)
    groups, arrays = [], []
    _walk_folder(store, root, "", fmt, groups, arrays)
    return groups, arrays


def _folder_kind(folder: str, fmt: str) -> str | None:
    """'array', 'group', 'implicit_group' or None (not a node) for a v2/v3 folder."""
    if fmt == "3":
        meta = os.path.join(folder, "zarr.json")
        if os.path.exists(meta):
            with open(meta) as f:
                return "array" if json.load(f)["node_type"] == "array" else "group"
    else:
        if os.path.exists(os.path.join(folder, ".zarray")):
            return "array"
        if os.path.exists(os.path.join(folder, ".zgroup")):
            return "group"
    has_node_below = any(_folder_kind(os.path.join(folder, d), fmt) for d in _subdirs(folder))
    return "implicit_group" if has_node_below else None


def _subdirs(folder: str) -> list:
    return sorted(d for d in os.listdir(folder) if os.path.isdir(os.path.join(folder, d)))


def _walk_folder(store, folder, path, fmt, groups, arrays):
    kind = _folder_kind(folder, fmt)
    if kind == "array":
        arrays.append(path)
        return
    if kind is None:
        return
    children = []
    for name in _subdirs(folder):
        child_kind = _folder_kind(os.path.join(folder, name), fmt)
        if child_kind is not None:
            children.append({"name": name, "kind": child_kind})
            _walk_folder(store, os.path.join(folder, name), f"{path}/{name}".lstrip("/"), fmt, groups, arrays)
    groups.append({"store": store, "path": path, "kind": kind, "children": children})


def _list_draft(store: str, root: str) -> tuple[list, list]:
    """Draft layout: meta/root.{array,group}.json and meta/root/<path>.{array,group}.json."""
    meta = os.path.join(root, "meta")
    if os.path.exists(os.path.join(meta, "root.array.json")):
        return [], [""]
    groups, arrays = [], []
    root_kind = "group" if os.path.exists(os.path.join(meta, "root.group.json")) else "implicit_group"
    _walk_draft(store, os.path.join(meta, "root"), "", root_kind, groups, arrays)
    return groups, arrays


def _walk_draft(store, folder, path, kind, groups, arrays):
    entries = sorted(os.listdir(folder)) if os.path.isdir(folder) else []
    children = {}
    for name in entries:
        if name.endswith(".array.json"):
            children[name[: -len(".array.json")]] = "array"
        elif name.endswith(".group.json"):
            children[name[: -len(".group.json")]] = "group"
    for name in entries:
        if os.path.isdir(os.path.join(folder, name)):
            children.setdefault(name, "implicit_group")
    listed = []
    for name in sorted(children):
        child_path = f"{path}/{name}".lstrip("/")
        listed.append({"name": name, "kind": children[name]})
        if children[name] == "array":
            arrays.append(child_path)
        else:
            _walk_draft(store, os.path.join(folder, name), child_path, children[name], groups, arrays)
    groups.append({"store": store, "path": path, "kind": kind, "children": listed})
