"""`rag mcp`: the index's `search` and `ask` as tools of a stdio MCP server."""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING

from ..errors import UsageError
from . import flags
from .failures import handle_errors
from .options import takes

if TYPE_CHECKING:
    from ..config import Settings


@handle_errors
@takes(*flags.ANSWERING)
def mcp_command(settings: Settings) -> None:
    """Serve `search` and `ask` over the index to an MCP client on stdin and stdout.

    For a client's configuration: command `rag`, arguments `mcp --index /path/to/.rag`.
    The server runs until the client closes stdin; every call reads the index's newest
    commit.
    """
    if importlib.util.find_spec("mcp") is None:
        raise UsageError("rag mcp needs the MCP SDK: pip install 'ragcli[server]'")
    from ..server.mcp_tools import RagTools, build_server

    tools = RagTools(settings)  # a missing or broken index fails here, before any client waits
    try:
        build_server(tools).run("stdio")
    finally:
        tools.close()
