"""Check the Python API of the wheel (`import zarrfs`) against the fixtures.

Runs in a fresh venv holding only the zarrfs wheel and numpy (tests/it/python_api.rs makes
it), as root or as a normal user (then mounts go through fusermount3). The expectations
are the fixture manifest's: shapes, chunks and the sha256 of every array's elements as
zarr-python read them back (scripts/make_fixtures.py).

Usage: python check_python_api.py FIXTURES ZARRFS_BINARY
  FIXTURES       a folder holding manifest.json and the stores v3/ and v2/
  ZARRFS_BINARY  the binary under test, run directly to compare its own messages

Prints one line per check and `checked N arrays`; exits non-zero on the first failure.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request

import numpy as np

import zarrfs

FIXTURES = pathlib.Path(sys.argv[1])
BINARY = sys.argv[2]
MANIFEST = json.loads((FIXTURES / "manifest.json").read_text())
STORES = ("v3", "v2")
# Arrays written with a codec zarrfs does not implement (as in tests/it/library.rs): the
# memmap of each fails with the reason.
UNSUPPORTED = {("v3", "codecs/numcodecs_jenkins_lookup3")}


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def arrays(store: str) -> list[dict]:
    return [a for a in MANIFEST["arrays"] if a["store"] == store and not a["vlen"] and a["path"]]


def mounted(path: pathlib.Path) -> bool:
    target = str(path)
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == target for line in f)


def logical_digest(a: np.ndarray) -> str:
    """sha256 of the elements in C order, little-endian: the manifest's C_little."""
    little = a.dtype.newbyteorder("<")
    return sha256(np.ascontiguousarray(np.asarray(a).astype(little)).tobytes(order="C"))


def check_arrays(store: str, order: str, endian: str) -> int:
    """Every fixed-size array of `store` through Mount.memmap in one order and byte order:
    its shape, data type, memory order and elements, and its sidecar's shape and chunks."""
    count = 0
    with zarrfs.mount(FIXTURES / store, order=order, endian=endian, cache_size="256MiB") as m:
        assert isinstance(m.path, pathlib.Path), type(m.path)
        assert m.mounted and mounted(m.path), f"{m.path} is not a mount"
        for entry in arrays(store):
            name = entry["path"]
            where = f"{store}/{name} ({order}, {endian})"
            if (store, name) in UNSUPPORTED:
                try:
                    m.memmap(name)
                except ValueError as e:
                    assert "unsupported codec" in str(e), f"{where}: {e}"
                    continue
                raise AssertionError(f"{where}: an array of an unsupported codec mapped")
            a = m.memmap(name)
            assert isinstance(a, np.memmap) or 0 in entry["shape"], f"{where}: {type(a)}"
            assert list(a.shape) == entry["shape"], f"{where}: shape {a.shape}"
            want_dtype = np.dtype(entry["dtype"]).newbyteorder("<" if endian == "little" else ">")
            if a.dtype.fields is None:
                assert a.dtype == want_dtype, f"{where}: dtype {a.dtype} != {want_dtype}"
            else:
                assert a.dtype.itemsize == entry["itemsize"], f"{where}: {a.dtype}"
            if a.ndim > 1 and a.size > 1:
                contiguous = a.flags.f_contiguous if order == "F" else a.flags.c_contiguous
                assert contiguous, f"{where}: not {order}-contiguous"
            assert not a.flags.writeable, f"{where}: writable"
            assert logical_digest(a) == entry["sha256"]["C_little"], f"{where}: elements differ from zarr-python's"
            info = m.info(name)
            assert info["shape"] == entry["shape"], f"{where}: info shape {info['shape']}"
            assert info["chunks"] == entry["chunks"], f"{where}: info chunks {info['chunks']}"
            assert info["file"]["order"] == order, f"{where}: info order {info['file']}"
            del a
            count += 1
        assert m.info()["kind"] == "group", m.info()
    assert not mounted(m.path) and not m.path.exists(), f"{m.path} left behind"
    print(f"ok: {count} arrays of {store} in {order} order, {endian}-endian")
    return count


def check_views_and_module_memmap() -> None:
    """`views` as a list; zarrfs.memmap of a .npy view and of a file of a mount made by
    `python -m zarrfs mount` equal to Mount.memmap."""
    entry = next(e for e in arrays("v3") if e["shape"] and 0 not in e["shape"] and e["dtype"][1] == "f")
    name = entry["path"]
    with zarrfs.mount(FIXTURES / "v3", views=["raw", "npy"]) as m:
        raw = m.memmap(name)
        npy = m.memmap(f"{name}.npy")
        assert np.array_equal(raw, npy, equal_nan=True), f"{name}.npy differs from {name}"
        assert logical_digest(npy) == entry["sha256"]["C_little"], f"{name}.npy elements"
        del raw, npy
    with tempfile.TemporaryDirectory() as tmp:
        mnt = pathlib.Path(tmp) / "mnt"
        mnt.mkdir()
        cli = [sys.executable, "-m", "zarrfs"]
        subprocess.run([*cli, "mount", str(FIXTURES / "v3"), str(mnt), "--order", "F"], check=True)
        try:
            assert mounted(mnt), "python -m zarrfs mount did not mount"
            a = zarrfs.memmap(mnt / name)
            assert a.flags.f_contiguous or a.ndim < 2, "zarrfs.memmap ignored the order"
            assert logical_digest(a) == entry["sha256"]["C_little"], f"zarrfs.memmap({name})"
            del a
        finally:
            subprocess.run([*cli, "umount", str(mnt)], check=True)
        assert not mounted(mnt), "python -m zarrfs umount did not unmount"
    version = subprocess.run([sys.executable, "-m", "zarrfs", "--version"], capture_output=True, text=True, check=True)
    own = subprocess.run([BINARY, "--version"], capture_output=True, text=True, check=True)
    assert version.stdout == own.stdout, f"python -m zarrfs --version: {version.stdout!r} != {own.stdout!r}"
    print(f"ok: views, zarrfs.memmap and python -m zarrfs ({version.stdout.strip()})")


def check_failures() -> None:
    """A failed mount raises MountError with the message the command prints itself, and
    leaves no mountpoint behind."""
    before = set(pathlib.Path(tempfile.gettempdir()).glob("zarrfs-*"))
    with tempfile.TemporaryDirectory() as tmp:
        cases = [
            ({}, pathlib.Path(tmp) / "no-such-store"),
            ({}, pathlib.Path(tmp)),  # a folder that is no Zarr store
            ({"order": "X"}, FIXTURES / "v3"),  # a value the command refuses
        ]
        for options, store in cases:
            try:
                m = zarrfs.mount(store, **options)
            except zarrfs.MountError as e:
                message = str(e)
            else:
                m.unmount()
                raise AssertionError(f"mounting {store} with {options} did not fail")
            mnt = pathlib.Path(tmp) / "mnt"
            mnt.mkdir(exist_ok=True)
            args = [f"--{k}={v}" for k, v in options.items()]
            own = subprocess.run([BINARY, "mount", str(store), str(mnt), *args], capture_output=True, text=True)
            assert own.returncode != 0, f"zarrfs mount {store} succeeded"
            assert message == own.stderr.strip(), f"MountError {message!r} is not the command's {own.stderr!r}"
            assert message, "an empty message"
            print(f"ok: MountError: {message.splitlines()[0]}")
    after = set(pathlib.Path(tempfile.gettempdir()).glob("zarrfs-*"))
    assert after <= before, f"failed mounts left {after - before}"
    try:
        zarrfs.mount(FIXTURES / "v3", no_such_flag=True)
    except zarrfs.MountError as e:
        assert "no_such_flag" in str(e), e
    else:
        raise AssertionError("an unknown option was accepted")


def check_unmount_on_exception_and_exit() -> None:
    try:
        with zarrfs.mount(FIXTURES / "v2") as m:
            path = m.path
            assert mounted(path)
            raise KeyError("inside")
    except KeyError:
        pass
    assert not mounted(path), "an exception left the mount up"
    # An interpreter that exits with a mount up unmounts it.
    child = subprocess.run(
        [sys.executable, "-c",
         "import sys, zarrfs; m = zarrfs.mount(sys.argv[1]); print(m.path); assert m.mounted",
         str(FIXTURES / "v2")],
        capture_output=True, text=True,
    )
    assert child.returncode == 0, child.stderr
    left = pathlib.Path(child.stdout.strip())
    assert not mounted(left) and not left.exists(), f"{left} still mounted after the interpreter exited"
    print("ok: unmounted on an exception and at interpreter exit")


def check_serve() -> None:
    entry = next(e for e in arrays("v3") if e["nbytes"] > 0)
    name = entry["path"]
    with zarrfs.serve(FIXTURES / "v3", order="F") as s:
        assert s.url.startswith("http://127.0.0.1:"), s.url
        body = urllib.request.urlopen(s.url + name).read()
        with zarrfs.mount(FIXTURES / "v3", order="F") as m:
            assert body == (m.path / name).read_bytes(), f"GET {name} differs from the mount's file"
        assert sha256(body) == entry["sha256"]["F_little"], f"GET {name}"
        listing = json.loads(urllib.request.urlopen(s.url + "?format=json").read())
        assert any(e["name"] == name.split("/")[0] for e in listing["entries"]), listing
        url = s.url
    try:
        urllib.request.urlopen(url, timeout=5)
    except (urllib.error.URLError, ConnectionError):
        pass
    else:
        raise AssertionError("the server still answers after stop")
    try:
        zarrfs.serve(FIXTURES / "no-such-store")
    except zarrfs.ServeError as e:
        assert "no-such-store" in str(e), e
    else:
        raise AssertionError("serving a missing store did not fail")
    print(f"ok: serve at {url}")


def main() -> None:
    assert zarrfs.binary(), "no binary"
    total = 0
    for store in STORES:
        total += check_arrays(store, "C", "little")
        total += check_arrays(store, "F", "little")
    total += check_arrays("v3", "C", "big")
    check_views_and_module_memmap()
    check_failures()
    check_unmount_on_exception_and_exit()
    check_serve()
    assert total > 20, f"only {total} arrays"
    print(f"checked {total} arrays")


if __name__ == "__main__":
    main()
