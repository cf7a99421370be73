"""Run one command; write its wall time and peak RSS as JSON to the file descriptor given.

Linux counts a child's peak RSS from the address space of the process that started it
(the memory it had before ``exec``), so a command started by a large benchmark process
reports at least the benchmark's own size. Started from this small interpreter instead,
the figure is the command's own. Run as a script, not imported: it must stay small.

    python peak_rss.py FD COMMAND [ARG ...]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time


def main() -> int:
    fd, args = int(sys.argv[1]), sys.argv[2:]
    t0 = time.perf_counter()
    proc = subprocess.Popen(args)
    _, status, usage = os.wait4(proc.pid, 0)
    wall_ms = (time.perf_counter() - t0) * 1000
    code = os.waitstatus_to_exitcode(status)
    with os.fdopen(fd, "w") as out:
        json.dump({"wall_ms": wall_ms, "peak_mb": usage.ru_maxrss / 1024, "code": code}, out)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main())
