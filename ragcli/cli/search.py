"""`rag search QUERY`: the nearest passages, without the language model."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Annotated

import typer

from ..errors import ExitCode
from . import flags
from .failures import handle_errors
from .options import takes
from .output import print_json, print_search
from .profile import print_profile, process_age_ms
from .via_server import served

if TYPE_CHECKING:
    from ..config import Settings


@handle_errors
@takes(*flags.COMMANDS["search"])
def search_command(
    query: Annotated[str, typer.Argument(help="What to look for.", show_default=False)],
    settings: Settings,
    json_out: bool = False,
    profile: bool = False,
    no_server: bool = False,
) -> None:
    """Print the top-k passages for QUERY with their sources and scores.

    A running `rag serve` of the same index searches, unless --no-server.
    """
    started_ms = process_age_ms() if profile else None
    s = settings
    client = served(s, no_server or profile, purpose="search")
    if client is not None:
        with client:
            out = client.search(query, s.top_k, s.retriever)
        _print(out, json_out)
        return
    from ..rag import Rag

    t0 = time.perf_counter()
    rag = Rag(s, preload=False)
    open_ms = (time.perf_counter() - t0) * 1000
    try:
        result = rag.search(query)
    finally:
        rag.close()
    _print(result.as_dict(), json_out, exit_when_empty=not profile)
    if profile:
        print_profile(
            {
                "interpreter_and_imports_ms": started_ms or 0.0,
                "open_index_ms": open_ms,
                "query_embedding_ms": result.embed_ms,
                "search_ms": result.search_ms,
            }
        )
        if not result.hits:
            raise typer.Exit(ExitCode.NOT_FOUND)


def _print(out: dict, json_out: bool, exit_when_empty: bool = True) -> None:
    """The results as JSON or text; no result is exit code 1."""
    if json_out:
        print_json(out)
    else:
        print_search(out)
    if exit_when_empty and not out["results"]:
        raise typer.Exit(ExitCode.NOT_FOUND)
