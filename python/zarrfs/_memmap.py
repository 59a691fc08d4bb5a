"""``zarrfs.memmap``: an array file of a mount as a read-only ``numpy.memmap``."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Union


def _dtype_spec(descr: Any) -> Any:
    # The sidecar's descr is JSON: numpy wants each field of a structured type as a
    # tuple (name, type[, shape]), its shape a tuple too.
    if not isinstance(descr, list):
        return descr
    fields = []
    for field in descr:
        name, kind, *shape = field
        fields.append((name, _dtype_spec(kind), *(tuple(s) for s in shape)))
    return fields


def memmap(path: Union[str, "os.PathLike[str]"]) -> Any:
    """The array file at ``path`` in a zarrfs mount as a read-only ``numpy.memmap`` with the
    data type, shape and order its sidecar gives (``NAME.npy`` views through
    ``numpy.load``). Needs numpy (``pip install numpy``)."""
    try:
        import numpy as np
    except ImportError:
        raise ImportError("zarrfs.memmap needs numpy: pip install numpy") from None
    file = Path(path)
    if file.name.endswith(".npy"):
        return np.load(file, mmap_mode="r")
    sidecar = file.parent / f".{file.name}.json"
    try:
        doc = json.loads(sidecar.read_text())
    except FileNotFoundError:
        raise ValueError(f"{file}: not an array file of a zarrfs mount (no {sidecar.name})") from None
    if doc.get("kind") != "array" or "error" in doc:
        raise ValueError(f"{file}: {doc.get('error', 'not an array')}")
    view = doc.get("file", {})
    if "dtype" not in view:
        raise ValueError(
            f"{file}: a {view.get('format', 'text')} file of variable-length elements, "
            "not a fixed-size array"
        )
    dtype = np.dtype(_dtype_spec(view.get("descr", view["dtype"])))
    shape = tuple(int(n) for n in doc["shape"])
    order = view.get("order", "C")
    if 0 in shape:
        # mmap cannot map an empty file; an empty array is all there is.
        empty = np.empty(shape, dtype=dtype, order=order)
        empty.flags.writeable = False
        return empty
    return np.memmap(file, dtype=dtype, mode="r", shape=shape, order=order)
