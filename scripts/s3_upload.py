"""Put a folder tree into a bucket of an S3 server that takes unsigned requests, for benches.

Usage: python s3_upload.py ENDPOINT BUCKET PATH [PREFIX]

The bucket is created unless it is there, then every regular file under the folder PATH
(symlinks followed) is put as the object named by its path relative to PATH (after
PREFIX/ when given), one request per file, its body streamed from disk. A file PATH is
put as PREFIX (or its own name). Objects written through the API carry the ETag the server
computed as they arrived, as on S3; files dropped into a server's folder have none, and
s3s-fs then hashes the whole file again on every request for it.
"""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.parse
import urllib.request


def put(url: str, body, length: int) -> None:
    request = urllib.request.Request(url, data=body, method="PUT")
    request.add_header("Content-Length", str(length))
    request.add_header("Content-Type", "application/octet-stream")
    with urllib.request.urlopen(request) as response:
        response.read()


def main() -> int:
    if len(sys.argv) not in (4, 5):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    endpoint, bucket, root = sys.argv[1].rstrip("/"), sys.argv[2], sys.argv[3]
    prefix = sys.argv[4].strip("/") + "/" if len(sys.argv) == 5 else ""
    try:
        put(f"{endpoint}/{bucket}", b"", 0)
    except urllib.error.HTTPError as e:
        if e.code != 409:  # BucketAlreadyOwnedByYou / BucketAlreadyExists
            raise
    if os.path.isfile(root):
        files = [(root, prefix.rstrip("/") or os.path.basename(root))]
    else:
        files = []
        for folder, dirs, names in os.walk(root, followlinks=True):
            dirs.sort()
            for name in sorted(names):
                path = os.path.join(folder, name)
                if os.path.isfile(path):
                    files.append((path, prefix + os.path.relpath(path, root).replace(os.sep, "/")))
    count = 0
    for path, key in files:
        url = f"{endpoint}/{bucket}/{urllib.parse.quote(key)}"
        with open(path, "rb") as f:
            put(url, f, os.fstat(f.fileno()).st_size)
        count += 1
    print(f"s3_upload: {count} objects into {bucket}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
