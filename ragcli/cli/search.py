"""`rag search QUERY`: the nearest passages, without the language model."""

from __future__ import annotations

import time
from typing import Annotated

import typer

from ..errors import ExitCode
from .common import (
    IndexOpt,
    JsonOpt,
    ProfileOpt,
    RetrieverOpt,
    StoreOpt,
    TopKOpt,
    display_path,
    handle_errors,
    print_json,
    print_profile,
    process_age_ms,
    settings,
)


@handle_errors
def search_command(
    query: Annotated[str, typer.Argument(help="What to look for.", show_default=False)],
    top_k: TopKOpt = None,
    retriever: RetrieverOpt = None,
    index: IndexOpt = None,
    store: StoreOpt = None,
    json_out: JsonOpt = False,
    profile: ProfileOpt = False,
) -> None:
    """Print the top-k passages for QUERY with their sources and scores."""
    started_ms = process_age_ms() if profile else None
    from ..answer.retrieval import Retriever

    s = settings(index_dir=index, store=store, top_k=top_k, retriever=retriever)
    t0 = time.perf_counter()
    retriever = Retriever(s)
    open_ms = (time.perf_counter() - t0) * 1000
    try:
        result = retriever.search(query, s.top_k)
    finally:
        retriever.close()
    if json_out:
        print_json(
            {
                "query": query,
                "results": [h.as_dict() for h in result.hits],
                "timings": {
                    "embed_ms": round(result.embed_ms, 2),
                    "search_ms": round(result.search_ms, 2),
                },
            }
        )
    else:
        for h in result.hits:
            c = h.chunk
            typer.echo(f"[{h.rank}] {display_path(h.citation)}  similarity {h.similarity:.3f}")
            typer.echo("    " + " ".join(c.text.split())[:300])
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
