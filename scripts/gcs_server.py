"""A Google Cloud Storage server for tests, speaking the XML API that object_store's GCS
client uses (object GET/HEAD with ranges, PUT with `x-goog-if-generation-match`, DELETE,
and `list-type=2` listings), over a folder whose first-level folders are the buckets.

    gcs_server.py PORT ROOT

It listens on 127.0.0.1 only. An object's generation and ETag come from its bytes (a
file another writer rewrites gets a new generation, as on GCS), so a conditional put
over a changed object is refused with 412. Paths never leave ROOT.
"""

import datetime
import email.utils
import hashlib
import os
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from xml.sax.saxutils import escape

ROOT = ""
# One conditional put (its check and its write) at a time.
PUTS = threading.Lock()


def resolve(bucket, key):
    """The file of `key` in `bucket`, or None when the name would leave the bucket."""
    parts = [bucket] + (key.split("/") if key else [])
    if any(p in ("", ".", "..") or "\0" in p for p in parts):
        return None
    return os.path.join(ROOT, *parts)


def identity(path):
    """(generation, quoted ETag, size, modification time) of the file at `path`."""
    with open(path, "rb") as f:
        data = f.read()
    digest = hashlib.md5(data).hexdigest()
    generation = str(int(digest[:15], 16) + 1)
    return generation, '"%s"' % digest, len(data), os.stat(path).st_mtime


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        sys.stderr.write("%s\n" % (fmt % args))

    def answer(self, status, body=b"", headers=()):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def error(self, status, code):
        body = ("<?xml version='1.0' encoding='UTF-8'?><Error><Code>%s</Code></Error>" % code).encode()
        self.answer(status, body, [("Content-Type", "application/xml")])

    def target(self):
        url = urllib.parse.urlsplit(self.path)
        bucket, _, key = url.path.lstrip("/").partition("/")
        return urllib.parse.unquote(bucket), urllib.parse.unquote(key), urllib.parse.parse_qs(url.query)

    def object_headers(self, generation, etag, mtime):
        return [
            ("ETag", etag),
            ("x-goog-generation", generation),
            ("Last-Modified", email.utils.formatdate(mtime, usegmt=True)),
        ]

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        bucket, key, query = self.target()
        if not key:
            return self.listing(bucket, query)
        path = resolve(bucket, key)
        if path is None or not os.path.isfile(path):
            return self.error(404, "NoSuchKey")
        generation, etag, size, mtime = identity(path)
        if self.headers.get("If-Match") not in (None, etag, "*"):
            return self.error(412, "PreconditionFailed")
        if self.headers.get("If-None-Match") in (etag, "*"):
            return self.answer(304, headers=self.object_headers(generation, etag, mtime))
        start, end, status = 0, size, 200
        ranged = self.headers.get("Range", "")
        if ranged.startswith("bytes="):
            first, _, last = ranged[len("bytes="):].partition("-")
            if first:
                start = int(first)
                end = min(size, int(last) + 1) if last else size
            else:
                start = max(0, size - int(last))
            if start >= size and size > 0:
                return self.error(416, "InvalidRange")
            status = 206
        with open(path, "rb") as f:
            f.seek(start)
            body = f.read(max(0, end - start))
        headers = self.object_headers(generation, etag, mtime) + [("Content-Type", "application/octet-stream")]
        if status == 206:
            headers.append(("Content-Range", "bytes %d-%d/%d" % (start, start + len(body) - 1, size)))
        self.answer(status, body, headers)

    def listing(self, bucket, query):
        one = lambda name, default="": query.get(name, [default])[0]
        prefix, delimiter = one("prefix"), one("delimiter")
        after = one("continuation-token") or one("start-after")
        limit = min(int(one("max-keys", "1000") or 1000), 1000)
        top = resolve(bucket, "")
        if top is None or not os.path.isdir(top):
            return self.error(404, "NoSuchBucket")
        keys = []
        for folder, _, files in os.walk(top):
            for name in files:
                keys.append(os.path.relpath(os.path.join(folder, name), top).replace(os.sep, "/"))
        entries = {}
        for k in sorted(keys):
            if not k.startswith(prefix):
                continue
            rest = k[len(prefix):]
            if delimiter and delimiter in rest:
                p = prefix + rest.split(delimiter, 1)[0] + delimiter
                entries.setdefault(p, None)
            else:
                entries[k] = k
        names = [n for n in sorted(entries) if n > after]
        page, more = names[:limit], len(names) > limit
        out = ["<?xml version='1.0' encoding='UTF-8'?><ListBucketResult>",
               "<Name>%s</Name><Prefix>%s</Prefix>" % (escape(bucket), escape(prefix))]
        for n in page:
            if entries[n] is None:
                out.append("<CommonPrefixes><Prefix>%s</Prefix></CommonPrefixes>" % escape(n))
                continue
            generation, etag, size, mtime = identity(os.path.join(top, *n.split("/")))
            stamp = datetime.datetime.fromtimestamp(mtime, datetime.timezone.utc)
            out.append("<Contents><Key>%s</Key><Generation>%s</Generation><LastModified>%s</LastModified>"
                       "<ETag>%s</ETag><Size>%d</Size></Contents>"
                       % (escape(n), generation, stamp.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z",
                          escape(etag), size))
        out.append("<KeyCount>%d</KeyCount><MaxKeys>%d</MaxKeys><IsTruncated>%s</IsTruncated>"
                   % (len(page), limit, "true" if more else "false"))
        if more:
            out.append("<NextContinuationToken>%s</NextContinuationToken>" % escape(page[-1]))
        out.append("</ListBucketResult>")
        self.answer(200, "".join(out).encode(), [("Content-Type", "application/xml")])

    def do_PUT(self):
        bucket, key, _ = self.target()
        path = resolve(bucket, key)
        length = int(self.headers.get("Content-Length", "0"))
        data = self.rfile.read(length)
        if path is None or not key:
            return self.error(400, "InvalidArgument")
        match = self.headers.get("x-goog-if-generation-match")
        with PUTS:
            exists = os.path.isfile(path)
            if match is not None:
                now = identity(path)[0] if exists else "0"
                if match != now:
                    return self.error(412, "PreconditionFailed")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = "%s.put-%d" % (path, threading.get_ident())
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
            generation, etag, _, mtime = identity(path)
        self.answer(200, headers=self.object_headers(generation, etag, mtime))

    def do_DELETE(self):
        bucket, key, _ = self.target()
        path = resolve(bucket, key)
        if path is None or not os.path.isfile(path):
            return self.error(404, "NoSuchKey")
        os.remove(path)
        self.answer(204)


def main():
    global ROOT
    port, ROOT = int(sys.argv[1]), os.path.abspath(sys.argv[2])
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()
