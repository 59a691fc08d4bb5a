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
"""

import os
import sys

import numpy as np
import zarr

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from live_writer import open_root  # noqa: E402


def main() -> None:
    spec, fmt = sys.argv[1], int(sys.argv[2])
    consolidated = sys.argv[3:] == ["consolidated"]
    root = open_root(spec, fmt)
    grow = root.create_array("grow", shape=(1, 4), chunks=(1, 4), dtype="int32", fill_value=-1)
    grow[:] = np.arange(4, dtype="int32")[None, :]
    over = root.create_array("over", shape=(4, 4), chunks=(1, 4), dtype="int32", fill_value=-1)
    over[:] = -2
    rows = 1

    def settle():
        if consolidated:
            zarr.consolidate_metadata(root.store)
        print("done", flush=True)

    if consolidated:
        zarr.consolidate_metadata(root.store)
    print("ready", flush=True)
    for line in sys.stdin:
        words = line.split()
        if words[:1] == ["make"]:
            a = root.create_array(words[1], shape=(8,), chunks=(4,), dtype="uint8", fill_value=0)
            a[:] = int(words[2]) % 256
        elif words[:1] == ["over"]:
            over[int(words[1]), :] = int(words[2])
        elif words == ["grow"]:
            grow.append((rows * 10 + np.arange(4, dtype="int32"))[None, :], axis=0)
            rows += 1
        else:
            sys.exit(f"live_steps: unknown command {line!r}")
        settle()


if __name__ == "__main__":
    main()
