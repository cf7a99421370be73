"""The library's notes (log records) as ``rag: note:`` lines on stderr, and debug mode."""

from __future__ import annotations

import logging
import sys

from ..log import LOGGER, debugging


def debug_enabled() -> bool:
    return debugging()


class _NoteHandler(logging.Handler):
    """The library's log records as ``rag: note: ...`` lines on the current stderr."""

    def emit(self, record: logging.LogRecord) -> None:
        sys.stderr.write(f"rag: note: {record.getMessage()}\n")


_notes = _NoteHandler()


def show_notes(debug: bool = False) -> None:
    """Show the library's notes on stderr; ``debug`` also keeps native libraries' logs."""
    logger = logging.getLogger(LOGGER)
    logger.setLevel(logging.DEBUG if debug else logging.INFO)
    if _notes not in logger.handlers:
        logger.addHandler(_notes)
