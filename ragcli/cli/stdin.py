"""Questions from stdin, a line at a time, without blocking signals."""

from __future__ import annotations

import os
import select
from collections.abc import Iterator


def stdin_lines(fd: int = 0, poll_s: float = 0.25) -> Iterator[bytes]:
    """Lines of stdin as bytes, without their newline.

    Waits in short polls rather than one blocking read: a signal that another thread
    receives does not interrupt the main thread's read, so Ctrl-C or SIGTERM on an idle
    batch would otherwise wait for the next line.
    """
    pending = bytearray()
    while True:
        if not select.select([fd], [], [], poll_s)[0]:
            continue
        block = os.read(fd, 1 << 16)
        if not block:
            break
        start = len(pending)
        pending += block
        cut = pending.rfind(b"\n", start)
        if cut >= 0:
            head = bytes(pending[:cut])
            del pending[: cut + 1]
            yield from head.split(b"\n")
    if pending:
        yield bytes(pending)
