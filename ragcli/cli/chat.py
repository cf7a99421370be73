"""`rag chat`: ask one question after another with the model kept loaded."""

from __future__ import annotations

import sys

import typer

from .ask import show_answer
from .common import (
    IndexOpt,
    LlmUrlOpt,
    ModelOpt,
    NoAnswerCacheOpt,
    NoCacheOpt,
    RetrieverOpt,
    StoreOpt,
    TopKOpt,
    answer_settings,
    handle_errors,
)


@handle_errors
def chat_command(
    top_k: TopKOpt = None,
    retriever: RetrieverOpt = None,
    index: IndexOpt = None,
    store: StoreOpt = None,
    model: ModelOpt = None,
    llm_url: LlmUrlOpt = None,
    no_cache: NoCacheOpt = False,
    no_answer_cache: NoAnswerCacheOpt = False,
) -> None:
    """Interactive questions; the KV cache of the shared prompt prefix stays warm.

    An empty line or end of input (Ctrl-D) ends the session.
    """
    from ..answer.asker import Asker

    s = answer_settings(
        index,
        store,
        model,
        top_k,
        retriever,
        no_cache,
        llm_url,
        no_answer_cache,
    )
    asker = Asker(s)
    try:
        while True:
            try:
                question = input("? " if sys.stdin.isatty() else "").strip()
            except EOFError:
                break
            if not question:
                break
            show_answer(asker, question)
    finally:
        asker.close()
    raise typer.Exit(0)
