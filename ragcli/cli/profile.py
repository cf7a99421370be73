"""`--profile`: where a command's time went, interpreter start-up included."""

from __future__ import annotations

import os
import sys


def process_age_ms() -> float | None:
    """Milliseconds since this process started (Linux /proc; 10 ms resolution), else None.

    Lets `--profile` show what interpreter start-up and imports cost before any
    of our code ran.
    """
    try:
        with open("/proc/self/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        with open("/proc/uptime", "rb") as fh:
            uptime = float(fh.read().split()[0])
        start = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22 of the full line
        return max(0.0, (uptime - start) * 1000)
    except (OSError, ValueError, IndexError):
        return None


def print_profile(profile: dict[str, float]) -> None:
    """The profile dict as aligned lines on stderr, with the process's total wall time."""
    total = process_age_ms()
    rows = [(k.removesuffix("_ms").replace("_", " "), v) for k, v in profile.items()]
    if total is not None:
        rows.append(("total wall time so far", total))
    width = max(len(name) for name, _ in rows)
    lines = [f"  {name:<{width}}  {ms:8.0f} ms" for name, ms in rows]
    sys.stderr.write("profile:\n" + "\n".join(lines) + "\n")
