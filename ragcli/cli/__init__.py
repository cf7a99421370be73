"""The `rag` command: a thin layer over the library, one module per command.

:func:`main` first offers the command line to :mod:`.via_server`, which answers `rag ask` and
`rag search` through a running `rag serve` with the standard library alone; only when it
declines is the Typer application (:mod:`.commands`) imported, which costs about 200 ms.
"""

from __future__ import annotations

import sys
from typing import Any


def main() -> None:
    """The `rag` entry point."""
    from .via_server import through_server

    code = through_server(sys.argv[1:])
    if code is not None:
        sys.exit(code)
    from .commands import run

    run()


def __getattr__(name: str) -> Any:
    """``ragcli.cli.app`` (the Typer application), imported on first use."""
    if name == "app":
        from .commands import app

        return app
    raise AttributeError(f"module 'ragcli.cli' has no attribute {name!r}")
