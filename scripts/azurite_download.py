"""Get the blobs under a prefix of an Azurite container into a folder, for tests.

Usage: python azurite_download.py BLOB_ENDPOINT CONTAINER PREFIX DIR

The counterpart of azurite_upload.py (same development account and signing): every blob
named PREFIX/relative/path becomes DIR/relative/path; the folder is emptied first, so
that it holds exactly what the container holds. Standard library only.
"""

from __future__ import annotations

import os
import shutil
import sys
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from azurite_upload import signed  # noqa: E402


def names(endpoint: str, container: str, prefix: str) -> list[str]:
    out, marker = [], ""
    while True:
        query = {"restype": "container", "comp": "list", "prefix": prefix}
        if marker:
            query["marker"] = marker
        url = f"{endpoint}/{container}?" + urllib.parse.urlencode(query)
        with urllib.request.urlopen(signed("GET", url, b"", {})) as r:
            root = ET.fromstring(r.read())
        out.extend(b.findtext("Name") for b in root.iter("Blob"))
        marker = root.findtext("NextMarker") or ""
        if not marker:
            return out


def main() -> None:
    endpoint, container, prefix, top = sys.argv[1].rstrip("/"), sys.argv[2], sys.argv[3], sys.argv[4]
    prefix = prefix.strip("/") + "/" if prefix else ""
    shutil.rmtree(top, ignore_errors=True)
    count = 0
    for name in names(endpoint, container, prefix):
        rel = name[len(prefix):]
        if not rel or rel.startswith("/") or ".." in rel.split("/"):
            sys.exit(f"azurite_download: a blob name outside the prefix: {name!r}")
        url = f"{endpoint}/{container}/{urllib.parse.quote(name)}"
        with urllib.request.urlopen(signed("GET", url, b"", {})) as r:
            body = r.read()
        path = os.path.join(top, *rel.split("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(body)
        count += 1
    print(f"azurite_download: {count} blobs from {container}/{prefix}")


if __name__ == "__main__":
    main()
