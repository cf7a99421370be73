"""Where the commands write: JSON lines on stdout, rich text on a terminal or a pipe."""

from __future__ import annotations

import json
import sys
from typing import Any

from .render import display_path as display_path  # re-exported for the commands

UNLIMITED_WIDTH = 1 << 16  # columns: wider than any line a command prints


def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def stderr_console():
    from rich.console import Console

    return Console(stderr=True, highlight=False)


def stdout_console():
    """Rich output on stdout. Piped or redirected it is as wide as its longest line: rich
    would otherwise fold tables to 80 columns and cut values short with "…"."""
    from rich.console import Console

    console = Console(highlight=False)
    if not console.is_terminal:
        console = Console(highlight=False, width=UNLIMITED_WIDTH)
    return console
