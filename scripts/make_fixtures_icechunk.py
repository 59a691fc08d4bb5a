"""Write Icechunk repositories through the icechunk Python package, and their expected bytes.

Usage (from the repository root, after `bash scripts/setup_python.sh`):

    target/venv-icechunk/bin/python scripts/make_fixtures_icechunk.py OUTDIR

OUTDIR/icechunk is deleted and rewritten:

    icechunk/repo/        a native repository (local filesystem storage) written by
                          zarr-python 3 through icechunk sessions:
                          commit 1 on main: groups (root with attributes, `grp`, `grp/sub`),
                            `temperature` f4 (4, 60, 80) chunks (2, 30, 40) (zstd, zarr's
                            default), `counts` i2 (100, 100) chunks (40, 40) with some
                            chunks never written (fill value 7), `grp/flags` u1 (1000,)
                            chunks (300,), `grp/sub/wide` f8 (64, 64) sharded (32, 32) of
                            (16, 16), `grp/tiny` i4 (3,) (small chunks, such as this
                            one's, are kept inline in the manifest), `doomed` u2 (5000,)
                          branch `dev` from commit 1, one commit: `temperature` rewritten,
                            `dev_only` i8 (50, 50) added
                          commit 2 on main: `temperature` grown to (6, 60, 80) with new data,
                            chunks of `counts` overwritten; tag `v1` names it
                          commit 3 on main: `doomed` deleted, `grp/sub/wide` partly
                            overwritten, `grp/flags` resized to (700,)
    icechunk/virtual-data/part_{0,1}.nc  netCDF4-python: `t` f4 (time, y, x) = (3, 40, 50)
                          per file, chunked (1, 20, 25), zlib + shuffle; `h` i2 (y, x),
                          contiguous; coordinates time, y, x
    icechunk/virtual/     a repository written by VirtualiZarr (HDFParser) from the two
                          files concatenated along time: `t` and `h` as virtual chunks
                          into the files (a virtual chunk container for
                          file://<virtual-data>/), the coordinates loaded (native); each
                          chunk records the time it was written (last_updated_at)
    icechunk/virtual-s3/  the same references with the files named s3://ice/virtual-data/
                          (bucket `ice` being the folder icechunk/ on a test server), with
                          a virtual chunk container for that prefix and no checksums
    icechunk/virtual-hostile/  a repository whose virtual chunks (raw f4, 4 KiB chunks, one
                          virtual chunk container for file://<virtual-hostile-data>/data/)
                          point: chunk 0 into the container, chunk 1 at a symlink in it
                          that leads out, chunk 2 outside every container, chunk 3
                          through `..` out of it, chunk 4 past the end of its file,
                          chunk 5 at a missing file, chunk 6 into data/sub/ (written with
                          the icechunk package's set_virtual_ref, validate_container off
                          for the ones outside)
    icechunk/manifest-icechunk.json

Manifest: {"writer", "repos": [repo...]}, a repo being {"name", "path" (relative to OUTDIR),
"versions": [version...]}, a version {"kind": "branch"|"tag"|"snapshot", "name" (the
branch or tag name, or the snapshot id), "snapshot" (its snapshot id), "groups" (paths),
"arrays": [entry...]}; an entry is fixture_common.array_entry's. Every branch, every tag
and every snapshot in the ancestry of every branch is a version.

Expected bytes come from zarr-python's read-back through a read-only icechunk session at
that version, never from the files the repository holds; for the virtual repository, from
netCDF4-python's read of the source files (auto mask and scale off), concatenated.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import shutil
import sys

import icechunk
import numpy as np
import zarr

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixture_common import array_entry  # noqa: E402


def commit_one(repo: icechunk.Repository) -> str:
    session = repo.writable_session("main")
    root = zarr.group(store=session.store, zarr_format=3, attributes={"title": "icechunk fixture"})
    t = root.create_array("temperature", shape=(4, 60, 80), chunks=(2, 30, 40), dtype="f4", fill_value=0.0)
    t[:] = np.arange(4 * 60 * 80, dtype="f4").reshape(4, 60, 80) / 8
    c = root.create_array("counts", shape=(100, 100), chunks=(40, 40), dtype="i2", fill_value=7)
    c[:40, :] = np.arange(4000, dtype="i2").reshape(40, 100) - 2000
    grp = root.create_group("grp", attributes={"about": "nested"})
    f = grp.create_array("flags", shape=(1000,), chunks=(300,), dtype="u1", fill_value=0)
    f[:] = (np.arange(1000) % 251).astype("u1")
    sub = grp.create_group("sub")
    w = sub.create_array("wide", shape=(64, 64), chunks=(16, 16), shards=(32, 32), dtype="f8", fill_value=-1.0)
    w[:] = np.sin(np.arange(4096, dtype="f8")).reshape(64, 64)
    tiny = grp.create_array("tiny", shape=(3,), chunks=(3,), dtype="i4", fill_value=0)
    tiny[:] = [1, -2, 3]
    d = root.create_array("doomed", shape=(5000,), chunks=(1000,), dtype="u2", fill_value=0)
    d[:] = np.arange(5000, dtype="u2") * 3
    return session.commit("first: every array")


def commit_dev(repo: icechunk.Repository, base: str) -> str:
    repo.create_branch("dev", snapshot_id=base)
    session = repo.writable_session("dev")
    root = zarr.open_group(store=session.store, mode="r+")
    root["temperature"][:] = -np.arange(4 * 60 * 80, dtype="f4").reshape(4, 60, 80)
    x = root.create_array("dev_only", shape=(50, 50), chunks=(20, 20), dtype="i8", fill_value=0)
    x[:] = np.arange(2500, dtype="i8").reshape(50, 50) * 1_000_000_007
    return session.commit("dev: other data")


def commit_two(repo: icechunk.Repository) -> str:
    session = repo.writable_session("main")
    root = zarr.open_group(store=session.store, mode="r+")
    t = root["temperature"]
    t.resize((6, 60, 80))
    t[4:] = 100 + np.arange(2 * 60 * 80, dtype="f4").reshape(2, 60, 80)
    root["counts"][20:60, 20:60] = 1234
    return session.commit("second: temperature grown, counts overwritten")


def commit_three(repo: icechunk.Repository) -> str:
    session = repo.writable_session("main")
    root = zarr.open_group(store=session.store, mode="r+")
    del root["doomed"]
    root["grp/sub/wide"][32:, :32] = np.cos(np.arange(1024.0)).reshape(32, 32)
    root["grp/flags"].resize((700,))
    return session.commit("third: doomed deleted, wide overwritten, flags shrunk")


def arrays_of(session, name: str) -> tuple:
    try:
        root = zarr.open_group(store=session.store, mode="r")
    except zarr.errors.GroupNotFoundError:
        # The repository's first snapshot holds nothing, not even a root group.
        return [], []
    arrays, groups = [], [""]
    for path, node in sorted(root.members(max_depth=None)):
        if isinstance(node, zarr.Group):
            groups.append(path)
            continue
        data = node[...]
        fill = node.fill_value
        fill = fill.item() if hasattr(fill, "item") else fill
        arrays.append(array_entry(name, path, data, chunks=node.chunks, zarr_dtype=str(node.dtype),
                                  fill_value=fill, note=""))
    return arrays, groups


def versions_of(repo: icechunk.Repository, name: str) -> list:
    versions = []
    seen = set()
    for branch in sorted(repo.list_branches()):
        snap = repo.lookup_branch(branch)
        arrays, groups = arrays_of(repo.readonly_session(branch=branch), name)
        versions.append({"kind": "branch", "name": branch, "snapshot": snap, "arrays": arrays, "groups": groups})
        for info in repo.ancestry(branch=branch):
            if info.id in seen:
                continue
            seen.add(info.id)
            arrays, groups = arrays_of(repo.readonly_session(snapshot_id=info.id), name)
            versions.append({"kind": "snapshot", "name": info.id, "snapshot": info.id, "arrays": arrays,
                             "groups": groups, "message": info.message})
    for tag in sorted(repo.list_tags()):
        snap = repo.lookup_tag(tag)
        arrays, groups = arrays_of(repo.readonly_session(tag=tag), name)
        versions.append({"kind": "tag", "name": tag, "snapshot": snap, "arrays": arrays, "groups": groups})
    return versions


def write_parts(data: str) -> list:
    import netCDF4

    os.makedirs(data)
    paths = []
    for k in range(2):
        path = os.path.join(data, f"part_{k}.nc")
        with netCDF4.Dataset(path, "w") as ds:
            ds.createDimension("time", 3)
            ds.createDimension("y", 40)
            ds.createDimension("x", 50)
            ds.createVariable("time", "f8", ("time",))[:] = np.arange(3 * k, 3 * k + 3)
            ds.createVariable("y", "f4", ("y",))[:] = np.linspace(-10, 10, 40)
            ds.createVariable("x", "f4", ("x",))[:] = np.linspace(0, 49, 50)
            t = ds.createVariable("t", "f4", ("time", "y", "x"), zlib=True, shuffle=True, chunksizes=(1, 20, 25))
            t[:] = (np.arange(3 * 40 * 50, dtype="f4").reshape(3, 40, 50) + 10000 * k) / 3
            h = ds.createVariable("h", "i2", ("y", "x"), contiguous=True)
            h[:] = (np.arange(40 * 50) % 3000 - 1500).reshape(40, 50)
        paths.append(path)
    return paths


def write_virtual(top: str) -> dict:
    import netCDF4
    import xarray as xr
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import LocalStore
    from virtualizarr import open_virtual_dataset
    from virtualizarr.parsers import HDFParser

    data = os.path.join(top, "virtual-data")
    paths = write_parts(data)
    prefix = "file://" + os.path.abspath(data) + "/"
    registry = ObjectStoreRegistry({"file://": LocalStore()})
    parts = [open_virtual_dataset(url="file://" + os.path.abspath(p), parser=HDFParser(), registry=registry,
                                  loadable_variables=["time", "y", "x"]) for p in paths]
    combined = xr.concat(parts, dim="time", data_vars="minimal", coords="minimal", compat="override",
                         combine_attrs="override")
    config = icechunk.RepositoryConfig.default()
    config.set_virtual_chunk_container(icechunk.VirtualChunkContainer(prefix, icechunk.local_filesystem_store(data)))
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(os.path.join(top, "virtual")), config,
                                      authorize_virtual_chunk_access={prefix: None})
    session = repo.writable_session("main")
    # Each chunk records when its file was last known unchanged (read back as a check).
    combined.vz.to_icechunk(session.store, last_updated_at=datetime.datetime.now(datetime.timezone.utc))
    snap = session.commit("virtual chunks")
    # The same references into the same files served from bucket `ice` (the fixture
    # folder `icechunk/`), with no checksum.
    in_bucket = combined.vz.rename_paths(lambda p: p.replace("file://" + os.path.abspath(data),
                                                              "s3://ice/virtual-data"))
    s3_prefix = "s3://ice/virtual-data/"
    config = icechunk.RepositoryConfig.default()
    config.set_virtual_chunk_container(icechunk.VirtualChunkContainer(
        s3_prefix, icechunk.s3_store(region="us-east-1", allow_http=True, s3_compatible=True, force_path_style=True)))
    s3_repo = icechunk.Repository.create(icechunk.local_filesystem_storage(os.path.join(top, "virtual-s3")), config)
    s3_session = s3_repo.writable_session("main")
    in_bucket.vz.to_icechunk(s3_session.store)
    s3_session.commit("virtual chunks in a bucket")
    # Expected: the source files, read by netCDF4-python.
    arrays = []
    with netCDF4.Dataset(paths[0]) as a, netCDF4.Dataset(paths[1]) as b:
        for ds in (a, b):
            ds.set_auto_maskandscale(False)
        t = np.concatenate([a["t"][:], b["t"][:]])
        for name, values, chunks in (("t", t, (1, 20, 25)), ("h", a["h"][:], (40, 50)),
                                     ("time", np.concatenate([a["time"][:], b["time"][:]]), (6,))):
            arrays.append(array_entry("virtual", name, np.asarray(values), chunks=chunks,
                                      zarr_dtype=str(np.asarray(values).dtype), fill_value=None, note=""))
    return {"name": "virtual", "path": "icechunk/virtual", "virtual_prefix": prefix,
            "in_bucket": {"bucket": "ice", "path": "virtual-s3", "virtual_prefix": s3_prefix},
            "versions": [{"kind": "branch", "name": "main", "snapshot": snap, "arrays": arrays, "groups": [""]}]}


def write_virtual_hostile(top: str) -> dict:
    base = os.path.join(top, "virtual-hostile-data")
    data, sub, outside = (os.path.join(base, d) for d in ("data", "data/sub", "outside"))
    for d in (data, sub, outside):
        os.makedirs(d)
    n = 1024  # elements a chunk: one 4 KiB page each
    values = np.arange(7 * n, dtype="<f4") * 1.5 - 7
    chunk = lambda k: values[n * k: n * k + n].tobytes()  # noqa: E731
    with open(os.path.join(data, "good.bin"), "wb") as f:
        f.write(b"\x00" * 16 + chunk(0))
    with open(os.path.join(sub, "more.bin"), "wb") as f:
        f.write(chunk(6))
    with open(os.path.join(outside, "secret.bin"), "wb") as f:
        f.write(chunk(1) + chunk(2) + chunk(3))
    os.symlink(os.path.join("..", "outside", "secret.bin"), os.path.join(data, "link.bin"))
    prefix = "file://" + os.path.abspath(data) + "/"
    config = icechunk.RepositoryConfig.default()
    config.set_virtual_chunk_container(icechunk.VirtualChunkContainer(prefix, icechunk.local_filesystem_store(data)))
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(os.path.join(top, "virtual-hostile")),
                                      config, authorize_virtual_chunk_access={prefix: None})
    session = repo.writable_session("main")
    root = zarr.group(store=session.store, zarr_format=3)
    root.create_array("v", shape=(7 * n,), chunks=(n,), dtype="f4", fill_value=0, compressors=None)
    url = lambda *parts: "file://" + os.path.join(os.path.abspath(base), *parts)  # noqa: E731
    refs = [
        (0, "inside", url("data", "good.bin"), 16, True),
        (1, "symlink out", url("data", "link.bin"), 0, True),
        (2, "outside every container", url("outside", "secret.bin"), 4 * n, False),
        (3, "dot-dot out", prefix + "../outside/secret.bin", 8 * n, False),
        (4, "past the end", url("data", "good.bin"), 40, True),
        (5, "missing file", url("data", "missing.bin"), 0, True),
        (6, "inside, sub folder", url("data", "sub", "more.bin"), 0, True),
    ]
    for k, case, location, offset, validate in refs:
        session.store.set_virtual_ref(f"v/c/{k}", location, offset=offset, length=4 * n,
                                      validate_container=validate)
    session.commit("hostile virtual chunks")
    # Expected: the chunks inside the container as zarr-python reads them back through
    # icechunk (which reads the virtual chunks itself).
    v = zarr.open_array(store=repo.readonly_session("main").store, path="v", mode="r")
    chunks = []
    for k, case, *_ in refs:
        readable = case.startswith("inside")
        got = np.asarray(v[n * k: n * k + n], dtype="<f4").tobytes() if readable else None
        chunks.append({"index": k, "case": case, "offset": 4 * n * k, "len": 4 * n,
                       "sha256": hashlib.sha256(got).hexdigest() if readable else None})
    return {"name": "virtual-hostile", "path": "icechunk/virtual-hostile", "data": os.path.abspath(data),
            "outside": os.path.abspath(outside), "sub": os.path.abspath(sub), "chunks": chunks}


def main() -> None:
    outdir = sys.argv[1]
    top = os.path.join(outdir, "icechunk")
    shutil.rmtree(top, ignore_errors=True)
    os.makedirs(top)
    path = os.path.join(top, "repo")
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(path))
    first = commit_one(repo)
    commit_dev(repo, first)
    second = commit_two(repo)
    repo.create_tag("v1", snapshot_id=second)
    commit_three(repo)
    manifest = {
        "writer": f"icechunk {icechunk.__version__}, zarr {zarr.__version__}",
        "repos": [{"name": "repo", "path": "icechunk/repo", "versions": versions_of(repo, "repo")}],
        "virtual": write_virtual(top),
        "virtual_hostile": write_virtual_hostile(top),
    }
    with open(os.path.join(top, "manifest-icechunk.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    n = sum(len(v["arrays"]) for r in manifest["repos"] for v in r["versions"])
    print(f"make_fixtures_icechunk: {n} arrays in {sum(len(r['versions']) for r in manifest['repos'])} versions",
          f"({manifest['writer']})")


if __name__ == "__main__":
    main()
