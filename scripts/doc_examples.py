"""Run the documentation's runnable examples against a copy of a fixture store.

Usage (from anywhere; as root, with /dev/fuse):

    python3 scripts/doc_examples.py --zarrfs target/release/zarrfs \
        --fixtures target/fixtures [--python PY] [FILES...]

FILES default to README.md and docs/*.md of the repository. A runnable example is a
fenced block whose info string is exactly `sh runnable` (GitHub renders it as sh). Each
one runs on its own, as `bash -euo pipefail -c BLOCK` (at most 120 s), in a fresh
temporary folder that holds `ds.zarr`, a copy of the fixture store `v3` (written by
zarr-python 3, see scripts/make_fixtures.py; examples may change the copy), and an
empty folder `mnt/`. The PATH starts with a folder holding `zarrfs` (the binary under
test) and `python` (PY, a Python with numpy; by default the one running this script);
`import zarrfs` finds the repository's package (python/), and `ZARRFS_BINARY` names the
binary under test.
Afterwards whatever is still mounted under the temporary folder is unmounted
(`zarrfs umount`, then `umount -l`), the example's leftover processes are killed and
the folder is removed.

Prints `FILE:LINE ok` or `FILE:LINE FAILED` (with the example's output) per example,
then the count; exits 1 when an example failed or none was found.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
# The folder holding the Python package `zarrfs` (python/zarrfs).
PYTHON_PACKAGE = REPO_ROOT / "python"
# The fixture store the examples read: small Zarr v3 arrays of every kind, in explicit
# and implicit groups, not consolidated (so writable mounts may add and remove nodes).
FIXTURE_STORE = "v3"
INFO_STRING = "sh runnable"
TIMEOUT_SECONDS = 120


@dataclass
class Example:
    path: Path
    line: int  # 1-based line of the opening fence
    code: str

    def name(self) -> str:
        try:
            shown = self.path.resolve().relative_to(REPO_ROOT)
        except ValueError:
            shown = self.path
        return f"{shown}:{self.line}"


def examples_in(path: Path) -> list[Example]:
    """The runnable fenced blocks of a Markdown file (a fence in a list item may be
    indented), dedented by their fence's indent."""
    found = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.lstrip(" ")
        indent = len(line) - len(stripped)
        fence_char = stripped[:1]
        if fence_char not in ("`", "~"):
            i += 1
            continue
        run = len(stripped) - len(stripped.lstrip(fence_char))
        if run < 3:
            i += 1
            continue
        info = stripped[run:].strip()
        start = i
        body = []
        i += 1
        while i < len(lines):
            close = lines[i].lstrip(" ")
            if close.startswith(fence_char * run) and not close.strip().lstrip(fence_char):
                break
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i].lstrip(" "))
            i += 1
        i += 1  # past the closing fence
        if info == INFO_STRING:
            found.append(Example(path, start + 1, "\n".join(body) + "\n"))
    return found


def unescape_mountinfo(field: str) -> str:
    """A path of /proc/self/mountinfo, whose spaces, tabs, newlines and backslashes are
    written as octal escapes."""
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and i + 3 < len(field) and field[i + 1:i + 4].isdigit():
            out.append(chr(int(field[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def mounts_under(folder: Path) -> list[Path]:
    """Mount points at or below `folder`, deepest first."""
    prefix = str(folder)
    found = []
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
        for line in f:
            fields = line.split(" ")
            if len(fields) < 5:
                continue
            point = unescape_mountinfo(fields[4])
            if point == prefix or point.startswith(prefix + "/"):
                found.append(Path(point))
    return sorted(set(found), key=lambda p: len(p.parts), reverse=True)


def unmount_all(folder: Path, zarrfs: Path) -> list[str]:
    """Unmount everything under `folder`; what had to be cleaned up, for the report."""
    notes = []
    for point in mounts_under(folder):
        done = subprocess.run([str(zarrfs), "umount", str(point)], stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=60)
        if point in mounts_under(folder):
            subprocess.run(["umount", "-l", str(point)], stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=60)
            notes.append(f"left mounted: {point} (zarrfs umount: {done.stderr.strip()}; umount -l used)")
        else:
            notes.append(f"left mounted: {point} (unmounted afterwards)")
    return notes


def kill_group(pgid: int) -> None:
    """Kill what is left of the example's process group (servers it started in the
    background and never stopped)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_example(example: Example, bin_dir: Path, store: Path, zarrfs: Path) -> tuple[bool, str]:
    """Run one example; whether it passed, and its output."""
    work = Path(tempfile.mkdtemp(prefix="zarrfs-doc-"))
    logs = Path(tempfile.mkdtemp(prefix="zarrfs-doc-out-"))
    env = dict(os.environ)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}"
    # `import zarrfs` finds the repository's Python package, and it runs the binary
    # under test.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PYTHON_PACKAGE), env.get("PYTHONPATH")]))
    env["ZARRFS_BINARY"] = str(zarrfs)
    env.pop("RUST_LOG", None)
    out_path, err_path = logs / "stdout", logs / "stderr"
    status = ""
    ok = False
    try:
        shutil.copytree(store, work / "ds.zarr", symlinks=True)
        (work / "mnt").mkdir()
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            proc = subprocess.Popen(["bash", "-euo", "pipefail", "-c", example.code], cwd=work, env=env,
                                    stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                    start_new_session=True)
            try:
                code = proc.wait(timeout=TIMEOUT_SECONDS)
                ok = code == 0
                status = f"exit {code}"
            except subprocess.TimeoutExpired:
                kill_group(proc.pid)
                proc.wait()
                status = f"timed out after {TIMEOUT_SECONDS} s"
            kill_group(proc.pid)
    finally:
        notes = unmount_all(work, zarrfs)
        # A daemon let go of by its mount may take a moment to end before its folder
        # can be removed.
        for _ in range(50):
            try:
                shutil.rmtree(work)
                break
            except OSError:
                time.sleep(0.1)
        else:
            notes.append(f"could not remove {work}")
    text = [status] + notes
    for label, path in (("stdout", out_path), ("stderr", err_path)):
        if path.exists():
            content = path.read_text(encoding="utf-8", errors="replace").rstrip()
            if content:
                text.append(f"--- {label}\n{content}")
    shutil.rmtree(logs, ignore_errors=True)
    return ok, "\n".join(text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--zarrfs", required=True, type=Path, help="the zarrfs binary")
    parser.add_argument("--fixtures", required=True, type=Path,
                        help="the fixture folder (scripts/make_fixtures.py writes it)")
    parser.add_argument("--python", type=Path, default=Path(sys.executable),
                        help="a Python with numpy, run as `python` (default: this one)")
    parser.add_argument("files", nargs="*", type=Path,
                        help="Markdown files (default: README.md and docs/*.md)")
    args = parser.parse_args()

    zarrfs = args.zarrfs.resolve()
    if not os.access(zarrfs, os.X_OK):
        print(f"doc_examples: {zarrfs}: not an executable", file=sys.stderr)
        return 1
    store = args.fixtures / FIXTURE_STORE
    if not (store / "zarr.json").is_file():
        print(f"doc_examples: no fixture store at {store}: run scripts/make_fixtures.py", file=sys.stderr)
        return 1
    files = args.files or [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
    examples = [e for f in files for e in examples_in(f)]
    if not examples:
        print(f"doc_examples: no `{INFO_STRING}` block in {', '.join(map(str, files))}", file=sys.stderr)
        return 1

    bin_dir = Path(tempfile.mkdtemp(prefix="zarrfs-doc-bin-"))
    try:
        (bin_dir / "zarrfs").symlink_to(zarrfs)
        # A wrapper rather than a symlink: a venv's python found through a symlink
        # elsewhere would not find its venv (pyvenv.cfg is looked for beside the path run).
        wrapper = bin_dir / "python"
        python = args.python if args.python.is_absolute() else Path.cwd() / args.python
        wrapper.write_text(f'#!/bin/sh\nexec "{python}" "$@"\n')
        wrapper.chmod(0o755)
        failed = 0
        for example in examples:
            ok, output = run_example(example, bin_dir, store, zarrfs)
            if ok:
                print(f"{example.name()} ok", flush=True)
            else:
                failed += 1
                print(f"{example.name()} FAILED", flush=True)
                for line in output.splitlines():
                    print(f"    {line}")
                print(flush=True)
    finally:
        shutil.rmtree(bin_dir, ignore_errors=True)
    print(f"doc_examples: {len(examples)} run, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
