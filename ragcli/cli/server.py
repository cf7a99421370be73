"""A running `rag serve` of the index, for the commands that can hand it their work."""

from __future__ import annotations

import logging

from ..config import Settings
from ..log import LOGGER


def served(s: Settings, no_server: bool, purpose: str = "ask"):
    """A client of the `rag serve` that serves this index with these settings, or None
    (none runs, ``--no-server``, or it has other settings: then a note says so)."""
    if no_server:
        return None
    from ..serve.client import NoServer, connect

    try:
        return connect(s, purpose=purpose)
    except NoServer as exc:
        if exc.note:
            logging.getLogger(LOGGER).info(exc.note)
        return None
