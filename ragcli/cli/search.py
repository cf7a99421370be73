"""`rag search QUERY`: the nearest passages, without the language model."""

from __future__ import annotations

import sys
import time
from typing import Annotated

import typer

from ..errors import ExitCode
from .common import (
    IndexOpt,
    JsonOpt,
    NoServerOpt,
    ProfileOpt,
    RetrieverOpt,
    StoreOpt,
    TopKOpt,
    handle_errors,
    print_json,
    print_profile,
    process_age_ms,
    served,
    settings,
)
from .render import search_text


@handle_errors
def search_command(
    query: Annotated[str, typer.Argument(help="What to look for.", show_default=False)],
    top_k: TopKOpt = None,
    retriever: RetrieverOpt = None,
    index: IndexOpt = None,
    store: StoreOpt = None,
    json_out: JsonOpt = False,
    profile: ProfileOpt = False,
    no_server: NoServerOpt = False,
) -> None:
    """Print the top-k passages for QUERY with their sources and scores.

    A running `rag serve` of the same index searches, unless --no-server.
    """
    started_ms = process_age_ms() if profile else None
    s = settings(index_dir=index, store=store, top_k=top_k, retriever=retriever)
    client = served(s, no_server or profile, purpose="search")
    if client is not None:
        with client:
            out = client.search(query, s.top_k, s.retriever)
        _print(out, json_out)
        return
    from ..answer.retrieval import Retriever

    t0 = time.perf_counter()
    retriever = Retriever(s)
    open_ms = (time.perf_counter() - t0) * 1000
    try:
        result = retriever.search(query, s.top_k)
    finally:
        retriever.close()
    out = {
        "query": query,
        "results": [h.as_dict() for h in result.hits],
        "timings": {
            "embed_ms": round(result.embed_ms, 2),
            "search_ms": round(result.search_ms, 2),
        },
    }
    _print(out, json_out, exit_when_empty=not profile)
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
        sys.stdout.write(search_text(out))
        sys.stdout.flush()
    if exit_when_empty and not out["results"]:
        raise typer.Exit(ExitCode.NOT_FOUND)
