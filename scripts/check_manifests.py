"""Check the Kubernetes manifests in deploy/kubernetes (tests/it/deploy.rs runs this).

1. Every document of every manifest validates strictly (unknown fields refused) against
   the schemas kubernetes-validate ships, for Kubernetes 1.29 and its latest.
2. The validator has teeth: each manifest with one field misspelt fails.
3. Every zarrfs command line in them (a container's command and args, or what follows
   `--` of a starter) runs: with the store replaced by a local fixture store and the
   mountpoint (a folder or /dev/fd/N) by an empty folder, it mounts in the foreground,
   lists the fixture's root, and unmounts on `zarrfs umount`.

Usage: python check_manifests.py MANIFEST_DIR ZARRFS FIXTURE_STORE
Prints one line per check and `checked N manifests, M command lines`.
"""

from __future__ import annotations

import copy
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import kubernetes_validate
import yaml

VERSIONS = ["1.29.0", kubernetes_validate.latest_version()]


def documents(path: pathlib.Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def validate(doc: dict, version: str) -> None:
    kubernetes_validate.validate(doc, version, strict=True)


def misspelt(doc: dict) -> dict:
    """`doc` with one field of its pod spec misspelt (or, for a kind without one, of
    its metadata)."""
    bad = copy.deepcopy(doc)
    spec = bad.get("spec", {})
    pod = spec.get("template", {}).get("spec", spec)
    if "containers" in pod:
        pod["containers"][0]["volumeMount"] = pod["containers"][0].pop("volumeMounts", [])
    else:
        bad["metadata"]["nmae"] = bad["metadata"].pop("name")
    return bad


def containers(doc: dict) -> list[dict]:
    spec = doc.get("spec", {})
    pod = spec.get("template", {}).get("spec", spec)
    return pod.get("containers", []) + pod.get("initContainers", [])


def zarrfs_argv(container: dict) -> list[str] | None:
    """The zarrfs command line a container runs, without the program name."""
    argv = list(container.get("command", [])) + list(container.get("args", []))
    if "--" in argv:
        argv = argv[argv.index("--") + 1:]
    if not argv or pathlib.PurePath(argv[0]).name != "zarrfs":
        return None
    return argv[1:]


def mounted(path: pathlib.Path) -> bool:
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == str(path) for line in f)


def run_mount(zarrfs: str, argv: list[str], store: str) -> None:
    """Run `zarrfs mount` as the manifest says, on a local store and a temporary folder."""
    assert argv[0] == "mount", f"not a mount: {argv}"
    assert "--foreground" in argv or "-f" in argv, f"a container's zarrfs must stay in front: {argv}"
    with tempfile.TemporaryDirectory() as tmp:
        mnt = pathlib.Path(tmp) / "mnt"
        mnt.mkdir()
        args = [store, str(mnt)] + [
            # Folders of the container (a disk cache) become folders of the test.
            str(pathlib.Path(tmp) / a.strip("/").replace("/", "_")) if a.startswith("/") else a
            for a in argv[3:]
        ]
        log = pathlib.Path(tmp) / "log"
        daemon = subprocess.Popen([zarrfs, "mount", *args], stdout=subprocess.DEVNULL,
                                  stderr=open(log, "w"))
        try:
            began = time.monotonic()
            while not mounted(mnt):
                if daemon.poll() is not None:
                    raise AssertionError(f"zarrfs mount {args} ended ({daemon.returncode}): {log.read_text()}")
                if time.monotonic() - began > 30:
                    raise AssertionError(f"zarrfs mount {args} did not mount within 30 s")
                time.sleep(0.05)
            names = sorted(os.listdir(mnt))
            want = sorted(n for n in os.listdir(store) if not n.startswith(".") and n != "zarr.json")
            assert set(want) <= set(names), f"{names} lacks some of {want}"
            subprocess.run([zarrfs, "umount", str(mnt)], check=True)
            daemon.wait(timeout=30)
            assert daemon.returncode == 0, f"the daemon ended with {daemon.returncode}: {log.read_text()}"
        finally:
            if daemon.poll() is None:
                daemon.kill()
                daemon.wait()
            if mounted(mnt):
                subprocess.run(["umount", "-l", str(mnt)], check=False)


def main() -> None:
    folder, zarrfs, store = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    manifests = sorted(folder.glob("*.yaml"))
    assert manifests, f"no manifests in {folder}"
    lines = 0
    for path in manifests:
        docs = documents(path)
        assert docs, f"{path}: empty"
        for doc in docs:
            for version in VERSIONS:
                validate(doc, version)
            try:
                validate(misspelt(doc), VERSIONS[-1])
            except kubernetes_validate.ValidationError:
                pass
            else:
                raise AssertionError(f"{path}: a misspelt field of {doc['kind']} passed validation")
            for container in containers(doc):
                argv = zarrfs_argv(container)
                if argv is not None:
                    run_mount(zarrfs, argv, store)
                    lines += 1
                    print(f"ok: {path.name}: {doc['kind']} {container['name']}: zarrfs {' '.join(argv)}")
        print(f"ok: {path.name}: {len(docs)} documents valid for {', '.join(VERSIONS)}")
    assert lines >= 2, f"only {lines} zarrfs command lines"
    print(f"checked {len(manifests)} manifests, {lines} command lines")


if __name__ == "__main__":
    main()
