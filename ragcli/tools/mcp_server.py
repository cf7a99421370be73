"""`rag mcp`: the index's `search` and `ask` as tools of a stdio MCP server.

The tool results are plain JSON objects that carry, for every passage, the file, the
line range (or PDF page), the section, the scores and the text, so the agent that
called can cite or open the source. One :class:`Asker` serves every call: the index
stays open, the model loads on the first `ask` and stays loaded, and answers go
through the answer cache like `rag ask`'s. Calls run one at a time.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from .. import __version__
from ..answer.asker import Answer, Asker
from ..answer.batch import check_question
from ..config import Settings
from ..errors import RagError, UsageError
from ..records import Hit

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

MAX_TOP_K = 50

INSTRUCTIONS = (
    "Searches and answers questions from the user's own indexed documents. `search` returns "
    "the passages nearest a query with their file, line range and text; `ask` answers from "
    "those passages only, or says I don't know, and lists the sources it used."
)


def passage(h: Hit) -> dict[str, Any]:
    """One retrieved passage as a tool result: where it is, how well it matched, its text."""
    return {**h.as_dict(), "citation": h.citation}


def search_result(query: str, hits: list[Hit]) -> dict[str, Any]:
    return {"query": query, "results": [passage(h) for h in hits]}


def ask_result(a: Answer) -> dict[str, Any]:
    """The answer, the sources it was taken from (``cited``), and every passage shown."""
    cited = set(a.cited)
    return {
        "question": a.question,
        "answer": a.answer,
        "answered": a.answered,
        "reason": a.reason,
        "cited": [passage(h) for h in a.sources if h.rank in cited],
        "sources": [passage(h) for h in a.sources],
        "model": a.model,
        "cache_source": a.timings.cache_source,
        "cache_similarity": a.cache_similarity,
        "total_ms": a.timings.total_ms,
    }


class RagTools:
    """The tools' logic over one open index, safe to call from the server's worker threads."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        # Opening the index here makes a missing or broken one fail at start, not at a call.
        self.asker = Asker(settings, preload=False)
        self._lock = threading.Lock()

    def search(self, query: str, top_k: int | None = None) -> dict[str, Any]:
        query = check_question(query)
        k = _top_k(top_k, self.settings.top_k)
        with self._lock:
            found = self.asker.retriever.search(query, k)
        return search_result(query, found.hits)

    def ask(self, question: str) -> dict[str, Any]:
        question = check_question(question)
        with self._lock:
            return ask_result(self.asker.ask(question))

    def close(self) -> None:
        self.asker.close()


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
        "lists the passages the answer was taken from, `sources` every passage the model "
        "was shown, each with file path and line range.",
    )
    def ask(question: str) -> dict[str, Any]:
        try:
            return tools.ask(question)
        except RagError as exc:
            raise ToolError(str(exc)) from None

    return server
