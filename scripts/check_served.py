"""Check a `zarrfs serve` against a FUSE mount of the same store and flags, with real
HTTP and WebDAV clients (Python requests, fsspec's HTTP filesystem, and XML parsing of
PROPFIND answers).

    check_served.py tree URL MOUNTPOINT [--manifest FILE --store NAME --layout C_little]
                         [--token TOKEN] [--ranges N] [--skip-files-over BYTES]

For every directory under MOUNTPOINT: the names of the HTML listing's links, of the JSON
listing (`?format=json` and `Accept: application/json`) and of a depth-1 PROPFIND are the
names the mount lists, with the sizes the mount gives. For every file: HEAD's
Content-Length is the mount's size, a whole GET has the mount file's SHA-256, N random
ranges equal the mount's bytes there, and a range past the end answers 416. With a
manifest (scripts/make_fixtures.py: zarr-python's read-back of every array), each array's
raw file must also have the SHA-256 zarr-python gives in that layout. fsspec's HTTP
filesystem lists the root and reads a range of files by URL.

Prints one JSON line of counts; exits 1 listing every failure.
"""

import argparse
import hashlib
import html.parser
import json
import os
import random
import sys
import urllib.parse
import xml.etree.ElementTree as ET

import fsspec
import requests


class Links(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.hrefs = []

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            for k, v in attrs:
                if k == "href":
                    self.hrefs.append(v)


def name_of(href):
    """The last name of an href path, decoded once."""
    path = urllib.parse.urlsplit(href).path
    return urllib.parse.unquote(path.rstrip("/").rsplit("/", 1)[-1])


def url_of(base, rel, is_dir):
    quoted = "/".join(urllib.parse.quote(p, safe="") for p in rel.split("/") if p)
    return base.rstrip("/") + "/" + quoted + ("/" if is_dir and quoted else "")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["tree"])
    p.add_argument("url")
    p.add_argument("mountpoint")
    p.add_argument("--manifest")
    p.add_argument("--store")
    p.add_argument("--layout", default="C_little")
    p.add_argument("--token")
    p.add_argument("--ranges", type=int, default=4)
    p.add_argument("--skip-files-over", type=int, default=1 << 62)
    a = p.parse_args()

    s = requests.Session()
    if a.token:
        s.auth = ("anyone", a.token)
    failures = []
    counts = {"dirs": 0, "files": 0, "ranges": 0, "manifest_arrays": 0, "fsspec_reads": 0, "unreadable": 0}
    rng = random.Random(42)
    shas = {}
    unreadable = set()

    for root, dirs, files in os.walk(a.mountpoint):
        rel = os.path.relpath(root, a.mountpoint)
        rel = "" if rel == "." else rel
        counts["dirs"] += 1
        want = {n: (None if n in dirs else os.path.getsize(os.path.join(root, n))) for n in dirs + files}
        durl = url_of(a.url, rel, True)
        # HTML
        r = s.get(durl, headers={"Accept": "text/html"})
        if r.status_code != 200 or not r.headers.get("Content-Type", "").startswith("text/html"):
            failures.append(f"{durl}: HTML listing {r.status_code} {r.headers.get('Content-Type')}")
        else:
            links = Links()
            links.feed(r.text)
            dir_path = urllib.parse.urlsplit(durl).path
            parent_path = dir_path.rstrip("/").rsplit("/", 1)[0] + "/"
            got = {name_of(h) for h in links.hrefs
                   if not rel or urllib.parse.urlsplit(h).path != parent_path}
            if set(want) - got:
                failures.append(f"{durl}: HTML lacks {sorted(set(want) - got)[:5]}")
        # JSON, both ways of asking.
        for how, kw in (("query", {"params": {"format": "json"}}), ("accept", {"headers": {"Accept": "application/json"}})):
            r = s.get(durl, **kw)
            try:
                doc = r.json()
            except ValueError:
                failures.append(f"{durl}: JSON listing ({how}) is not JSON: {r.status_code}")
                continue
            got = {e["name"]: e.get("size") if e["type"] == "file" else None for e in doc["entries"]}
            if got != want:
                failures.append(f"{durl}: JSON listing ({how}) differs: {sorted(set(got) ^ set(want))[:5]} "
                                f"sizes {[(k, got.get(k), want.get(k)) for k in want if got.get(k) != want.get(k)][:3]}")
            for e in doc["entries"]:
                if "array" in e and not (isinstance(e["array"]["shape"], list) and e["array"]["data_type"] is not None):
                    failures.append(f"{durl}: {e['name']}: array row without shape or data type")
        # PROPFIND depth 1
        r = s.request("PROPFIND", durl, headers={"Depth": "1", "Content-Type": "application/xml"},
                      data='<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:allprop/></D:propfind>')
        if r.status_code != 207:
            failures.append(f"{durl}: PROPFIND {r.status_code}")
        else:
            tree = ET.fromstring(r.content)
            ns = {"D": "DAV:"}
            got = {}
            for resp in tree.findall("D:response", ns):
                href = resp.find("D:href", ns).text
                if urllib.parse.unquote(urllib.parse.urlsplit(href).path).rstrip("/") == urllib.parse.unquote(urllib.parse.urlsplit(durl).path).rstrip("/"):
                    continue
                length = resp.find(".//D:getcontentlength", ns)
                is_dir = resp.find(".//D:resourcetype/D:collection", ns) is not None
                if resp.find(".//D:getetag", ns) is None or resp.find(".//D:getlastmodified", ns) is None:
                    failures.append(f"{durl}: PROPFIND {href} lacks getetag or getlastmodified")
                got[name_of(href)] = None if is_dir else (int(length.text) if length is not None else -1)
            if got != want:
                failures.append(f"{durl}: PROPFIND differs: {sorted(set(got) ^ set(want))[:5]} "
                                f"{[(k, got.get(k), want.get(k)) for k in want if got.get(k) != want.get(k)][:3]}")

        for n in files:
            path = os.path.join(root, n)
            size = os.path.getsize(path)
            furl = url_of(a.url, os.path.join(rel, n), False)
            counts["files"] += 1
            local = None
            if size <= a.skip_files_over:
                try:
                    with open(path, "rb") as f:
                        local = f.read()
                except OSError:
                    # What the mount cannot read (a codec zarrfs does not decode) the
                    # server cannot either: HEAD and GET answer an error status.
                    counts["unreadable"] += 1
                    unreadable.add(os.path.join(rel, n))
                    codes = [s.head(furl).status_code, s.get(furl).status_code]
                    if min(codes) < 500:
                        failures.append(f"{furl}: the mount cannot read it, the server said {codes}")
                    continue
            h = s.head(furl)
            if h.status_code != 200 or int(h.headers.get("Content-Length", -1)) != size:
                failures.append(f"{furl}: HEAD {h.status_code} length {h.headers.get('Content-Length')} != {size}")
                continue
            if h.headers.get("Accept-Ranges") != "bytes" or not h.headers.get("ETag") or not h.headers.get("Last-Modified"):
                failures.append(f"{furl}: HEAD lacks Accept-Ranges, ETag or Last-Modified")
            if local is None:
                continue
            r = s.get(furl)
            if r.status_code != 200 or hashlib.sha256(r.content).hexdigest() != hashlib.sha256(local).hexdigest():
                failures.append(f"{furl}: GET {r.status_code}, {len(r.content)} bytes, not the mount's {size}")
                continue
            shas[os.path.join(rel, n)] = hashlib.sha256(r.content).hexdigest()
            etag = h.headers["ETag"]
            if s.get(furl, headers={"If-None-Match": etag}).status_code != 304:
                failures.append(f"{furl}: If-None-Match of its ETag is not 304")
            for _ in range(a.ranges if size else 0):
                start = rng.randrange(size)
                end = min(size, start + rng.randrange(1, 1 << 16))
                r = s.get(furl, headers={"Range": f"bytes={start}-{end - 1}"})
                counts["ranges"] += 1
                if r.status_code != 206 or r.content != local[start:end] or \
                        r.headers.get("Content-Range") != f"bytes {start}-{end - 1}/{size}":
                    failures.append(f"{furl}: range {start}-{end - 1}: {r.status_code} {r.headers.get('Content-Range')}")
            if size:
                r = s.get(furl, headers={"Range": "bytes=-7"})
                if r.content != local[-7:]:
                    failures.append(f"{furl}: suffix range differs")
                r = s.get(furl, headers={"Range": f"bytes={size}-"})
                if r.status_code != 416 or r.headers.get("Content-Range") != f"bytes */{size}":
                    failures.append(f"{furl}: range past the end: {r.status_code}")
                r = s.get(furl, headers={"Range": "bytes=0-0", "If-Range": '"not-the-tag"'})
                if r.status_code != 200 or len(r.content) != size:
                    failures.append(f"{furl}: If-Range with another tag did not give the whole file")

    if a.manifest:
        with open(a.manifest) as f:
            manifest = json.load(f)
        for e in manifest["arrays"]:
            if e["store"] != a.store or e.get("vlen"):
                continue
            want = e["sha256"].get(a.layout)
            got = shas.get(e["path"])
            if e["path"] in unreadable:
                continue
            if got is None:
                if os.path.exists(os.path.join(a.mountpoint, e["path"])) and \
                        os.path.getsize(os.path.join(a.mountpoint, e["path"])) <= a.skip_files_over:
                    failures.append(f"{e['path']}: served nothing")
                continue
            counts["manifest_arrays"] += 1
            if got != want:
                failures.append(f"{e['path']}: served bytes are not zarr-python's ({a.layout})")

    # fsspec's HTTP filesystem: a listing and ranged reads by URL.
    fs = fsspec.filesystem("http", client_kwargs={"auth": None} if not a.token else {},
                           headers={"Authorization": f"Bearer {a.token}"} if a.token else {})
    listed = fs.ls(a.url.rstrip("/") + "/", detail=False)
    top = set(os.listdir(a.mountpoint))
    got = {name_of(u) for u in listed}
    if not top <= got:
        failures.append(f"fsspec ls of the root lacks {sorted(top - got)[:5]}")
    for rel in sorted(shas)[:40]:
        local_path = os.path.join(a.mountpoint, rel)
        size = os.path.getsize(local_path)
        if size < 2:
            continue
        with fs.open(url_of(a.url, rel, False), "rb", block_size=4096) as f:
            f.seek(size // 2)
            piece = f.read(64)
        with open(local_path, "rb") as f:
            f.seek(size // 2)
            if piece != f.read(64):
                failures.append(f"{rel}: fsspec read differs")
        counts["fsspec_reads"] += 1

    print(json.dumps(counts))
    if failures:
        print(f"{len(failures)} failures:", file=sys.stderr)
        for f in failures[:60]:
            print("  " + f, file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
