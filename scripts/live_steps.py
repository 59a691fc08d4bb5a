"""Change a Zarr store one step at a time, as a test says (tests/it/refresh.rs).

    live_steps.py STORE FORMAT [consolidated]

Creates, in STORE (a folder, or s3://bucket/prefix with the endpoint in the environment
variable ZARRFS_S3_ENDPOINT, as scripts/live_writer.py does), a group of Zarr FORMAT (2 or 3)
written by zarr-python 3, with the arrays of scripts/live_writer.py:

  grow   int32, shape (1, 4), chunks (1, 4), fill -1; row r holds r*10 + [0, 1, 2, 3].
  over   int32, shape (4, 4), chunks (1, 4), fill -1; every row -2.

With `consolidated`, the group's metadata is consolidated after every change. Prints
`ready` once made, then reads commands, one a line, from stdin:

  make NAME V    a new array NAME: uint8, shape (8,), chunks (4,), every element V
  over R V       row R of `over` rewritten in place, every element V (one chunk)
  grow           a row appended to `grow`

and prints `done` once the change is complete (zarr-python's writes have returned, and
the consolidation after them). Ends at the end of stdin.

Each change is idempotent: one the store refuses (the test server under load) is printed
to stderr and made again, up to five times, as scripts/live_writer.py does.
"""

import faulthandler
import os
import sys
import time
import traceback

import numpy as np
import zarr

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from live_writer import open_root  # noqa: E402

TRIES = 5


def step(what: str, change) -> None:
    """Make one change, `change(again)` (`again` once an attempt failed); each change is idempotent, so one the
    store failed is made again.

    A store error (the test server refusing a request under load) is printed to stderr and the change
    is tried again, up to five times: the test's checks are of zarrfs, not of the test server.
    """
    for attempt in range(1, TRIES + 1):
        try:
            change(attempt > 1)
            return
        except Exception:  # noqa: BLE001 - any store error; printed, then retried or raised
            print(f"live_steps: {what}, attempt {attempt} failed:", file=sys.stderr)
            traceback.print_exc()
            sys.stderr.flush()
            if attempt == TRIES:
                raise
            time.sleep(1.0)


def main() -> None:
    spec, fmt = sys.argv[1], int(sys.argv[2])
    consolidated = sys.argv[3:] == ["consolidated"]
    made = {}

    def create(again):
        root = open_root(spec, fmt)
        grow = root.create_array("grow", shape=(1, 4), chunks=(1, 4), dtype="int32", fill_value=-1,
                                 overwrite=again)
        grow[:] = np.arange(4, dtype="int32")[None, :]
        over = root.create_array("over", shape=(4, 4), chunks=(1, 4), dtype="int32", fill_value=-1,
                                 overwrite=again)
        over[:] = -2
        made.update(root=root, grow=grow, over=over)

    step("create", create)
    root, grow, over = made["root"], made["grow"], made["over"]
    rows = 1

    def consolidate():
        if consolidated:
            step("consolidate", lambda _again: zarr.consolidate_metadata(root.store))

    consolidate()
    print("ready", flush=True)
    for line in sys.stdin:
        words = line.split()
        if words[:1] == ["make"]:
            name, value = words[1], int(words[2]) % 256

            def make(again, name=name, value=value):
                a = root.create_array(name, shape=(8,), chunks=(4,), dtype="uint8", fill_value=0,
                                      overwrite=again)
                a[:] = value

            step(line.strip(), make)
        elif words[:1] == ["over"]:
            r, value = int(words[1]), int(words[2])

            def rewrite(_again, r=r, value=value):
                over[r, :] = value

            step(line.strip(), rewrite)
        elif words == ["grow"]:
            # grow.append, made idempotent: the shape of rows + 1, then row `rows` written.
            row = (rows * 10 + np.arange(4, dtype="int32"))[None, :]

            def append(_again, n=rows, row=row):
                grow.resize((n + 1, 4))
                grow[n:n + 1, :] = row

            step("grow", append)
            rows += 1
        else:
            sys.exit(f"live_steps: unknown command {line!r}")
        consolidate()
        print("done", flush=True)


if __name__ == "__main__":
    # A crash prints where it happened (to stderr, which the test shows when it fails).
    faulthandler.enable()
    main()
