"""zarrfs from Python: mount a Zarr store, read its arrays as numpy memmaps, serve it by URL.

The wheel carries the ``zarrfs`` command; this package runs it. A mount is a separate
daemon process, so nothing here blocks an event loop beyond the moment a mount comes up,
and a notebook kernel that mounts keeps running as usual::

    import zarrfs

    with zarrfs.mount("data/ds.zarr", order="F", views=["npy"]) as m:
        temperature = m.memmap("temperature")     # a read-only numpy.memmap
        print(temperature.shape, m.info("temperature")["chunks"])

    with zarrfs.serve("data/ds.zarr") as s:
        print(s.url)                              # http://127.0.0.1:PORT/

Options are the command's flags as keyword arguments (``cache_size="2GiB"`` is
``--cache-size 2GiB``; ``True`` sets a flag; a list is a comma list); any other keyword
is passed as a store or FUSE option (``endpoint="http://..."`` is ``-o endpoint=...``).
"""

from ._command import ZarrfsError, binary
from ._memmap import memmap
from ._mount import Mount, MountError, mount
from ._serve import Server, ServeError, serve

__all__ = [
    "Mount",
    "MountError",
    "Server",
    "ServeError",
    "ZarrfsError",
    "binary",
    "memmap",
    "mount",
    "serve",
]
