"""Finding the ``zarrfs`` command of this installation and turning options into its flags."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any, Dict, Iterable, Mapping


class ZarrfsError(RuntimeError):
    """The ``zarrfs`` command failed; the message is its own."""


def _scripts_dirs() -> Iterable[Path]:
    # The wheel installs the command beside this package's interpreter scripts: in the
    # environment's bin/ (a venv, a conda env) or, after `pip install --user`, the
    # user scheme's.
    yield Path(sysconfig.get_path("scripts"))
    yield Path(sys.executable).parent
    for scheme in ("posix_user", "nt_user", "osx_framework_user"):
        try:
            yield Path(sysconfig.get_path("scripts", scheme))
        except KeyError:
            continue


def binary() -> str:
    """The path of the ``zarrfs`` command: ``$ZARRFS_BINARY`` when set, else the one the
    wheel installed, else the first on ``PATH``."""
    explicit = os.environ.get("ZARRFS_BINARY")
    if explicit:
        return explicit
    for folder in _scripts_dirs():
        candidate = folder / "zarrfs"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which("zarrfs")
    if found:
        return found
    raise ZarrfsError("the zarrfs command is not installed (set ZARRFS_BINARY to its path)")


def environment() -> Dict[str, str]:
    """The environment the command runs in: this one without forced colours (a Jupyter
    kernel sets ``CLICOLOR_FORCE`` and ``FORCE_COLOR``), so that its help and messages
    are plain text."""
    env = dict(os.environ)
    for name in ("CLICOLOR_FORCE", "FORCE_COLOR"):
        env.pop(name, None)
    env["NO_COLOR"] = "1"
    return env


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_FLAG = re.compile(r"^\s+(?:-\w, )?--([a-z][a-z0-9-]*)(\s+<[^>]+>)?")


@functools.lru_cache(maxsize=None)
def flags(exe: str, command: str) -> Mapping[str, bool]:
    """The long flags of ``zarrfs COMMAND`` by name, each with whether it takes a value,
    as its ``--help`` lists them."""
    out = subprocess.run(
        [exe, command, "--help"],
        capture_output=True,
        text=True,
        check=False,
        env=environment(),
    )
    if out.returncode != 0:
        raise ZarrfsError(out.stderr.strip() or f"zarrfs {command} --help failed")
    found: dict[str, bool] = {}
    for line in _ANSI.sub("", out.stdout).splitlines():
        match = _FLAG.match(line)
        if match and match.group(1) != "help":
            found[match.group(1)] = match.group(2) is not None
    return found


def _text(value: Any) -> str:
    if isinstance(value, (list, tuple, set, frozenset)):
        return ",".join(_text(v) for v in value)
    if isinstance(value, os.PathLike):
        return str(os.fspath(value))
    return str(value)


def arguments(exe: str, command: str, options: Mapping[str, Any]) -> list[str]:
    """``options`` as arguments of ``zarrfs COMMAND``: a keyword naming one of its flags
    (``cache_size`` for ``--cache-size``) becomes that flag, ``True`` alone, ``False`` or
    ``None`` nothing; any other keyword an ``-o key=value`` store or FUSE option (``True``:
    ``-o key``)."""
    known = flags(exe, command)
    args: list[str] = []
    for key, value in options.items():
        if value is None or value is False:
            continue
        name = key.replace("_", "-")
        if name in known:
            if known[name]:
                if value is True:
                    raise TypeError(f"{key} takes a value")
                args += [f"--{name}", _text(value)]
            elif value is True:
                args.append(f"--{name}")
            else:
                raise TypeError(f"{key} is a switch: pass True or False")
        elif value is True:
            args += ["-o", key]
        else:
            text = _text(value)
            if "," in text:
                raise ValueError(f"{key}: a store option's value cannot hold a comma")
            args += ["-o", f"{key}={text}"]
    return args
