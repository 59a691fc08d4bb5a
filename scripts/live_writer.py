"""Change a Zarr store while a zarrfs mount reads it (tests/it/refresh.rs).

    live_writer.py STORE FORMAT STEPS PAUSE LOG GO

Creates, in STORE (a folder, or s3://bucket/prefix with the endpoint in the environment
variable ZARRFS_S3_ENDPOINT: then through obstore), a group of Zarr FORMAT (2 or 3) written by zarr-python 3:

  grow   int32, shape (1, 4), chunks (1, 4), fill -1; row r holds r*10 + [0, 1, 2, 3].
         Time steps are appended one row at a time.
  over   int32, shape (4, 4), chunks (1, 4), fill -1; row r starts at -2 and is
         overwritten with the step number k (every element) when k % 4 == r.
  extra_k  uint8, shape (8,), chunks (4,), every element k; made at step k (k % 3 == 2)
         and deleted three steps later.

Once made, it waits for the file GO to exist (the reader mounts the store meanwhile).
Then makes STEPS changes, PAUSE seconds apart, cycling through append, overwrite, add
and delete. Each change is idempotent; one the store refuses is printed to stderr and made again. After each change is complete it appends one JSON line to LOG: the time
(time.time()), the step, what changed, and the state it left (grow's rows, over's row
values, the extra arrays there). The first line is the state after creation.
"""

import faulthandler
import json
import os
import sys
import time
import traceback

import numpy as np
import zarr


def open_root(spec: str, fmt: int):
    if spec.startswith("s3://"):
        # Through obstore (zarr-python's ObjectStore), unsigned, to a local test server.
        from obstore.store import S3Store
        from zarr.storage import ObjectStore

        bucket, _, prefix = spec[len("s3://"):].partition("/")
        store = S3Store(bucket, prefix=prefix, endpoint=os.environ["ZARRFS_S3_ENDPOINT"], skip_signature=True,
                        region="us-east-1", client_options={"allow_http": True})
        return zarr.open_group(ObjectStore(store), mode="w", zarr_format=fmt)
    return zarr.open_group(spec, mode="w", zarr_format=fmt)


def main() -> None:
    spec, fmt, steps, pause, log_path, go = (sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]),
                                             sys.argv[5], sys.argv[6])
    root = open_root(spec, fmt)
    grow = root.create_array("grow", shape=(1, 4), chunks=(1, 4), dtype="int32", fill_value=-1)
    grow[:] = np.arange(4, dtype="int32")[None, :]
    over = root.create_array("over", shape=(4, 4), chunks=(1, 4), dtype="int32", fill_value=-1)
    over[:] = -2
    rows, values, extras = 1, [-2] * 4, []
    with open(log_path, "w") as log:
        def record(step, change):
            log.write(json.dumps({"time": time.time(), "step": step, "change": change, "grow_rows": rows,
                                  "over": values, "extras": extras}) + "\n")
            log.flush()

        record(0, "created")
        deadline = time.time() + 120
        while not os.path.exists(go):
            if time.time() > deadline:
                sys.exit("live_writer: no go after 120 s")
            time.sleep(0.02)
        for k in range(1, steps + 1):
            time.sleep(pause)
            kind = k % 3 if k % 6 != 5 else 3
            if kind == 0:
                row = (rows * 10 + np.arange(4, dtype="int32"))[None, :]

                def change_grow(n=rows, row=row):
                    grow.resize((n + 1, 4))
                    grow[n:n + 1, :] = row

                step(k, change_grow)
                rows += 1
                change = f"grow: row {rows - 1}"
            elif kind == 1:
                r = k % 4

                def change_over(r=r, k=k):
                    over[r, :] = k

                step(k, change_over)
                values[r] = k
                change = f"over: row {r} = {k}"
            elif kind == 2:
                def make_extra(k=k):
                    a = root.create_array(f"extra_{k}", shape=(8,), chunks=(4,), dtype="uint8", fill_value=0,
                                          overwrite=True)
                    a[:] = k % 256

                step(k, make_extra)
                extras.append(k)
                change = f"extra_{k}: made"
            else:
                gone = [e for e in extras if e <= k - 3]

                def delete_extras(gone=gone):
                    for e in gone:
                        if f"extra_{e}" in root:
                            del root[f"extra_{e}"]

                step(k, delete_extras)
                for e in gone:
                    extras.remove(e)
                change = f"deleted {gone}"
            record(k, change)


def step(k: int, change) -> None:
    """Make one change; each change is idempotent, so one the store failed is made again.

    A store error (the test server refusing a request under load) is printed to stderr and the change
    is tried again, up to five times: the readers' checks are of zarrfs, not of the test server.
    """
    for attempt in range(1, 6):
        try:
            change()
            return
        except Exception:  # noqa: BLE001 - any store error; printed, then retried or raised
            print(f"live_writer: step {k}, attempt {attempt} failed:", file=sys.stderr)
            traceback.print_exc()
            if attempt == 5:
                raise
            time.sleep(1.0)

if __name__ == "__main__":
    # A crash prints where it happened; once every change is logged the process ends
    # without the interpreter's teardown (the store client's native threads have been
    # seen to crash it there, after the work was done).
    faulthandler.enable()
    main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
