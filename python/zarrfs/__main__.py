"""``python -m zarrfs ARGS``: the ``zarrfs`` command of this installation."""

import os
import sys

from ._command import binary


def main() -> None:
    exe = binary()
    os.execv(exe, [exe, *sys.argv[1:]])


if __name__ == "__main__":
    main()
