"""`rag mcp`: the index's `search` and `ask` as tools of a stdio MCP server."""

from __future__ import annotations

import importlib.util

from ..errors import UsageError
from .common import (
    IndexOpt,
    LlmUrlOpt,
    ModelOpt,
    NoCacheOpt,
    RetrieverOpt,
    StoreOpt,
    TopKOpt,
    answer_settings,
    handle_errors,
)


@handle_errors
def mcp_command(
    top_k: TopKOpt = None,
    retriever: RetrieverOpt = None,
    index: IndexOpt = None,
    store: StoreOpt = None,
    model: ModelOpt = None,
    llm_url: LlmUrlOpt = None,
    no_cache: NoCacheOpt = False,
) -> None:
    """Serve `search` and `ask` over the index to an MCP client on stdin and stdout.

    For a client's configuration: command `rag`, arguments `mcp --index /path/to/.rag`.
    The server runs until the client closes stdin.
    """
    if importlib.util.find_spec("mcp") is None:
        raise UsageError("rag mcp needs the MCP SDK: pip install 'ragcli[server]'")
    from ..tools.mcp_server import RagTools, build_server

    s = answer_settings(index, store, model, top_k, retriever, no_cache, llm_url)
    tools = RagTools(s)  # a missing or broken index fails here, before any client waits
    try:
        build_server(tools).run("stdio")
    finally:
        tools.close()
