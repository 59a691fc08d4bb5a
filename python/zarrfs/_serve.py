"""``zarrfs.serve``: the HTTP and WebDAV front of a store, run in the background."""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import threading
import weakref
from typing import Any, Optional, Union

from ._command import ZarrfsError, arguments, binary, environment

_SERVING = re.compile(r"^serving .* at (http://\S+)$")


class ServeError(ZarrfsError):
    """The server did not start; the message is its own."""


def _stop(process: "subprocess.Popen[str]", log: Any) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    log.close()


class Server:
    """A running ``zarrfs serve``. ``url`` is where it listens. It stops with ``stop()``,
    at the end of a ``with`` block, when the object is collected, or when the interpreter
    exits."""

    def __init__(self, store: str, url: str, process: "subprocess.Popen[str]", log: Any):
        self.store = store
        self.url = url
        self.process = process
        self._finalizer = weakref.finalize(self, _stop, process, log)

    def stop(self) -> None:
        """Stop the server (SIGTERM) and wait for it to end."""
        self._finalizer()

    def __enter__(self) -> "Server":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.process.poll() is None else "stopped"
        return f"<zarrfs.Server {self.store!r} at {self.url} ({state})>"


def _drain(stream: Any) -> None:
    # After its first line the server writes nothing that matters to stdout; reading on
    # keeps a full pipe from ever stopping it.
    for _ in stream:
        pass


def serve(
    store: Union[str, "os.PathLike[str]"],
    *,
    http: str = "127.0.0.1:0",
    timeout: Optional[float] = 300,
    **options: Any,
) -> Server:
    """Serve ``store`` over HTTP and WebDAV on ``http`` (by default any free port of the
    loopback) and return once it listens; ``Server.url`` says where. ``options`` are
    ``zarrfs serve``'s flags (``views="all"``, ``order="F"``, ``token_file=...``) and
    store options. Raises ``ServeError`` with the server's message when it cannot
    start."""
    exe = binary()
    store_text = os.fspath(store)
    args = arguments(exe, "serve", options)
    log = tempfile.TemporaryFile(mode="w+", prefix="zarrfs-serve-")
    process = subprocess.Popen(
        [exe, "serve", store_text, "--http", http, *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
        env=environment(),
    )
    stdout = process.stdout
    assert stdout is not None
    first: list[str] = []
    reader = threading.Thread(target=lambda: first.append(stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    line = first[0].strip() if first else ""
    match = _SERVING.match(line)
    if not match:
        if process.poll() is None:
            process.terminate()
        process.wait()
        log.seek(0)
        message = log.read().strip() or line or f"zarrfs serve exited with {process.returncode}"
        log.close()
        raise ServeError(message)
    threading.Thread(target=_drain, args=(stdout,), daemon=True).start()
    return Server(store_text, match.group(1), process, log)
