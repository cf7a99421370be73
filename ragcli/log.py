"""The library's one reporting channel: the ``ragcli`` logger.

Library code never writes to the terminal. It logs notes under ``ragcli.*``
(the `rag` command shows them as ``rag: note: ...``) and raises
:class:`ragcli.errors.RagError` for failures. An application that sets the
``ragcli`` logger to DEBUG also keeps what native libraries (llama.cpp, Ray)
would print, which ragcli silences otherwise.
"""

from __future__ import annotations

import logging

LOGGER = "ragcli"


def debugging() -> bool:
    """Whether the application asked for debug output from ragcli."""
    return logging.getLogger(LOGGER).isEnabledFor(logging.DEBUG)
