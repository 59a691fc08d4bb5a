"""Run a notebook that uses the zarrfs Python API through a Jupyter kernel (nbclient).

The notebook mounts a fixture store, reads an array through Mount.memmap, checks its
elements against the sha256 zarr-python's read-back gave (the fixture manifest), awaits
on the kernel's running event loop while the mount is up, serves the store and fetches
the array by URL from an executor, has a failed mount raise the command's message in
plain text, then unmounts. Runs in a venv holding nbclient,
nbformat, ipykernel, numpy and the zarrfs wheel (tests/it/python_api.rs).

Usage: python check_notebook.py FIXTURES
Prints `notebook ok DIGEST`; exits non-zero when a cell fails or the output is wrong.
"""

from __future__ import annotations

import json
import pathlib
import sys

import nbclient
import nbformat

FIXTURES = pathlib.Path(sys.argv[1])
MANIFEST = json.loads((FIXTURES / "manifest.json").read_text())
ENTRY = next(a for a in MANIFEST["arrays"]
             if a["store"] == "v3" and a["path"] and not a["vlen"] and a["nbytes"] > 0)

CELLS = [
    "import asyncio, hashlib, os, urllib.request\nimport numpy as np\nimport zarrfs",
    f"m = zarrfs.mount({str(FIXTURES / 'v3')!r}, order='F')\nm",
    f"a = m.memmap({ENTRY['path']!r})\n"
    "little = a.dtype.newbyteorder('<')\n"
    "digest = hashlib.sha256(np.ascontiguousarray(a.astype(little)).tobytes()).hexdigest()\n"
    f"assert digest == {ENTRY['sha256']['C_little']!r}, digest\n"
    "a.shape, a.dtype",
    # The kernel's event loop runs on while the mount is up.
    "await asyncio.sleep(0.1)\nassert m.mounted",
    f"s = zarrfs.serve({str(FIXTURES / 'v3')!r}, order='F')\n"
    f"url = s.url + {ENTRY['path']!r}\n"
    "body = await asyncio.get_running_loop().run_in_executor(None, lambda: urllib.request.urlopen(url).read())\n"
    f"assert body == (m.path / {ENTRY['path']!r}).read_bytes()\n"
    "s.stop()",
    # A failed mount raises the command's message, in plain text (a kernel forces colours).
    "try:\n    zarrfs.mount('no-such-store', order='X')\n"
    "except zarrfs.MountError as e:\n    message = str(e)\n"
    "else:\n    raise AssertionError('mounted')\n"
    "assert message.startswith(\"error: invalid value 'X'\") and '\\x1b' not in message, message",
    "path = m.path\ndel a\nm.unmount()\nassert not os.path.ismount(path) and not path.exists()\n"
    "print('notebook ok', digest)",
]

nb = nbformat.v4.new_notebook()
nb.cells = [nbformat.v4.new_code_cell(source) for source in CELLS]
nbclient.NotebookClient(nb, timeout=300, kernel_name="python3").execute()
printed = "".join(
    output.get("text", "")
    for output in nb.cells[-1].outputs
    if output.get("output_type") == "stream"
)
want = f"notebook ok {ENTRY['sha256']['C_little']}"
assert printed.strip() == want, f"last cell printed {printed!r}, want {want!r}"
print(want)
