"""``zarrfs.mount``: a mount of a store that lives as long as its ``Mount`` object."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import weakref
from pathlib import Path
from typing import Any, Dict, Optional, Union

from ._command import ZarrfsError, arguments, binary, environment
from ._memmap import memmap as _memmap

PathLike = Union[str, "os.PathLike[str]"]


class MountError(ZarrfsError):
    """The store could not be mounted; the message is the daemon's own."""

    def __init__(self, message: str, returncode: Optional[int] = None):
        super().__init__(message)
        self.returncode = returncode


def np_memmap() -> type:
    import numpy as np

    return np.memmap


def _unmount(exe: str, path: str, made: bool) -> None:
    # `zarrfs umount` detaches a busy mount lazily (files open on it, a memmap, keep
    # reading); nothing is left mounted at exit.
    if os.path.ismount(path):
        subprocess.run(
            [exe, "umount", path],
            stdin=subprocess.DEVNULL,
            env=environment(),
            capture_output=True,
            check=False,
        )
    if made:
        try:
            os.rmdir(path)
        except OSError:
            pass


class Mount:
    """A mounted store. ``path`` is the mountpoint. The mount ends with ``unmount()``, at
    the end of a ``with`` block, when the object is collected, or when the interpreter
    exits, whichever comes first."""

    def __init__(self, store: str, path: Path, exe: str, made: bool):
        self.store = store
        self.path = path
        self._finalizer = weakref.finalize(self, _unmount, exe, str(path), made)

    @property
    def mounted(self) -> bool:
        """Whether the mount is still up."""
        return self._finalizer.alive and os.path.ismount(self.path)

    def unmount(self) -> None:
        """Unmount (lazily if files are open on it) and remove a mountpoint made for it."""
        self._finalizer()

    def __enter__(self) -> "Mount":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.unmount()

    def __repr__(self) -> str:
        state = "mounted" if self.mounted else "unmounted"
        return f"<zarrfs.Mount {self.store!r} at {str(self.path)!r} ({state})>"

    def memmap(self, name: PathLike) -> Any:
        """The array file ``name`` (relative to the mountpoint) as a read-only
        ``numpy.memmap`` of its data type, shape and order (``NAME.npy`` views too)."""
        array = _memmap(self.path / name)
        if isinstance(array, np_memmap()):
            # The memmap (and every view of it, through .base) keeps the mount up.
            setattr(array, "_zarrfs_mount", self)
        return array

    def info(self, name: PathLike = "") -> Dict[str, Any]:
        """The sidecar of the array or group ``name``: its shape, data type, chunks, codecs,
        fill value, attributes and the file's dtype and order, as a dict."""
        node = self.path / name
        sidecar = node / ".group.json" if node.is_dir() else node.parent / f".{node.name}.json"
        try:
            doc: Dict[str, Any] = json.loads(sidecar.read_text())
            return doc
        except FileNotFoundError:
            raise FileNotFoundError(f"{node}: no such array or group in the mount") from None


def mount(
    store: PathLike,
    mountpoint: Optional[PathLike] = None,
    *,
    timeout: Optional[float] = 300,
    **options: Any,
) -> Mount:
    """Mount ``store`` (a folder, ``s3://``, ``gs://``, ``az://``, ``http(s)://`` URL, a
    zip archive, a reference set or an Icechunk repository) and return once the mount is
    up. Without ``mountpoint``, a private temporary folder is made (and removed after).
    ``options`` are ``zarrfs mount``'s flags (``order="F"``, ``views=["npy", "tiff"]``,
    ``cache_size="2GiB"``, ``writable=True``) and store or FUSE options
    (``endpoint=...``, ``allow_other=True``). Raises ``MountError`` with the daemon's
    message when the store cannot be mounted."""
    exe = binary()
    store_text = os.fspath(store)
    made = mountpoint is None
    path = Path(tempfile.mkdtemp(prefix="zarrfs-")) if mountpoint is None else Path(mountpoint)
    try:
        args = arguments(exe, "mount", options)
        try:
            done = subprocess.run(
                [exe, "mount", store_text, str(path), *args],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
                env=environment(),
            )
        except subprocess.TimeoutExpired:
            _unmount(exe, str(path), False)
            raise MountError(f"mounting {store_text} took more than {timeout} s") from None
        if done.returncode != 0:
            message = done.stderr.strip() or f"zarrfs mount exited with {done.returncode}"
            raise MountError(message, done.returncode)
    except BaseException:
        if made:
            try:
                os.rmdir(path)
            except OSError:
                pass
        raise
    return Mount(store_text, path.absolute(), exe, made)
