"""`rag mcp`: the index's `search` and `ask` as tools of a stdio MCP server.

A tool returns what the command prints with ``--json`` (``SearchResult.as_dict``,
``Answer.as_dict``): every passage with its file, line range (or PDF page), section,
scores, citation and text, so the agent that called can cite or open the source. One
:class:`~ragcli.rag.Rag` serves every call: the index stays open and follows each
commit of `rag index`, the model loads on the first `ask` and stays loaded, and
answers go through the answer cache like `rag ask`'s. Calls run one at a time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import __version__
from ..config import Settings
from ..errors import RagError, UsageError
from ..rag import Rag

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

MAX_TOP_K = 50

INSTRUCTIONS = (
    "Searches and answers questions from the user's own indexed documents. `search` returns "
    "the passages nearest a query with their file, line range and text; `ask` answers from "
    "those passages only, or says I don't know, and names the sentences it used."
)


class RagTools:
    """The tools' logic over one open index, safe to call from the server's worker threads."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        # Opening the index here makes a missing or broken one fail at start, not at a call.
        self.rag = Rag(settings, preload=False)

    def search(self, query: str, top_k: int | None = None) -> dict[str, Any]:
        return self.rag.search(query, _top_k(top_k, self.settings.top_k)).as_dict()

    def ask(self, question: str) -> dict[str, Any]:
        return self.rag.ask(question).as_dict()

    def close(self) -> None:
        self.rag.close()


def _top_k(value: int | None, default: int) -> int:
    if value is None:
        return default
    if not 1 <= value <= MAX_TOP_K:
        raise UsageError(f"top_k must lie between 1 and {MAX_TOP_K}, not {value}")
    return value


def build_server(tools: RagTools) -> MCPServer:
    """An MCP server whose `search` and `ask` tools call ``tools``."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    server = MCPServer(name="ragcli", version=__version__, instructions=INSTRUCTIONS)

    @server.tool(
        name="search",
        description="The passages of the user's documents nearest to a query, best first, "
        "each with its file path, start and end line (or PDF page), section heading, "
        "retrieval score, cosine similarity and text. No language model runs.",
    )
    def search(query: str, top_k: int | None = None) -> dict[str, Any]:
        try:
            return tools.search(query, top_k)
        except RagError as exc:
            raise ToolError(str(exc)) from None

    @server.tool(
        name="ask",
        description="Answer a question from the user's documents only. The answer is "
        '"I don\'t know" (answered: false) when the documents do not hold it; `cited` '
        "lists the ranks of the passages the answer was taken from, `evidence` the "
        "sentences themselves with their line, `sources` every passage the model was "
        "shown, each with file path, line range and citation.",
    )
    def ask(question: str) -> dict[str, Any]:
        try:
            return tools.ask(question)
        except RagError as exc:
            raise ToolError(str(exc)) from None

    return server
