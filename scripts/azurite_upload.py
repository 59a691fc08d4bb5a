"""Put a folder tree into a container of Azurite (the Azure Storage emulator), for tests.

Usage: python azurite_upload.py BLOB_ENDPOINT CONTAINER DIR [PREFIX]

BLOB_ENDPOINT is Azurite's blob service for its well-known development account
(`http://127.0.0.1:PORT/devstoreaccount1`). The container is created unless it is there,
then every regular
file under DIR (symlinks followed) is put as a block blob named PREFIX/relative/path.
Requests are signed with the emulator's published development key (Shared Key), with
the standard library only.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from email.utils import formatdate

ACCOUNT = "devstoreaccount1"
# Azurite's well-known development key (public; it only opens the local emulator).
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
VERSION = "2021-08-06"


def signed(method: str, url: str, body: bytes, headers: dict) -> urllib.request.Request:
    parts = urllib.parse.urlsplit(url)
    # urllib would add a form Content-Type to a PUT without one; name it, and sign it.
    headers = {"Content-Type": "application/octet-stream", **headers}
    headers["x-ms-date"] = formatdate(usegmt=True)
    headers["x-ms-version"] = VERSION
    length = str(len(body)) if body else ""
    canonical_headers = "".join(f"{k}:{headers[k]}\n" for k in sorted(h for h in headers if h.startswith("x-ms-")))
    query = urllib.parse.parse_qs(parts.query)
    canonical_resource = f"/{ACCOUNT}{parts.path}" + "".join(
        f"\n{k.lower()}:{','.join(sorted(v))}" for k, v in sorted(query.items()))
    to_sign = "\n".join([method, "", "", length, "", headers.get("Content-Type", ""), "", "", "", "", "", ""])
    to_sign += "\n" + canonical_headers + canonical_resource
    digest = hmac.new(base64.b64decode(KEY), to_sign.encode(), hashlib.sha256).digest()
    headers["Authorization"] = f"SharedKey {ACCOUNT}:{base64.b64encode(digest).decode()}"
    return urllib.request.Request(url, data=body if method == "PUT" else None, method=method, headers=headers)


def main() -> None:
    endpoint, container, top = sys.argv[1].rstrip("/"), sys.argv[2], sys.argv[3]
    prefix = sys.argv[4].strip("/") + "/" if len(sys.argv) > 4 and sys.argv[4] else ""
    try:
        urllib.request.urlopen(signed("PUT", f"{endpoint}/{container}?restype=container", b"", {})).close()
    except urllib.error.HTTPError as e:
        if e.code != 409:  # 409: the container is there already
            raise
    count = 0
    for root, _dirs, files in os.walk(top, followlinks=True):
        for name in sorted(files):
            path = os.path.join(root, name)
            if not os.path.isfile(path):
                continue
            rel = os.path.relpath(path, top).replace(os.sep, "/")
            with open(path, "rb") as f:
                body = f.read()
            blob = urllib.parse.quote(prefix + rel)
            request = signed("PUT", f"{endpoint}/{container}/{blob}", body, {"x-ms-blob-type": "BlockBlob"})
            urllib.request.urlopen(request).close()
            count += 1
    print(f"azurite_upload: {count} blobs into {container}/{prefix}")


if __name__ == "__main__":
    main()
