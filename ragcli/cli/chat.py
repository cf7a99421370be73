"""`rag chat`: ask one question after another with the model kept loaded."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import typer

from .ask import print_answer, show_answer
from .common import (
    IndexOpt,
    LlmUrlOpt,
    ModelOpt,
    NoAnswerCacheOpt,
    NoCacheOpt,
    NoServerOpt,
    RetrieverOpt,
    StoreOpt,
    TopKOpt,
    answer_settings,
    handle_errors,
    served,
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
    no_server: NoServerOpt = False,
) -> None:
    """Interactive questions; the KV cache of the shared prompt prefix stays warm.

    A running `rag serve` of the same index and settings answers them, unless --no-server.
    An empty line or end of input (Ctrl-D) ends the session.
    """
    s = answer_settings(index, store, model, top_k, retriever, no_cache, llm_url, no_answer_cache)
    client = served(s, no_server)
    if client is not None:
        with client:
            for question in _questions():
                print_answer(client.ask(question))
        raise typer.Exit(0)
    from ..answer.asker import Asker

    asker = Asker(s)
    try:
        for question in _questions():
            show_answer(asker, question)
    finally:
        asker.close()
    raise typer.Exit(0)


def _questions() -> Iterator[str]:
    """Lines from the user until an empty one or end of input."""
    while True:
        try:
            question = input("? " if sys.stdin.isatty() else "").strip()
        except EOFError:
            return
        if not question:
            return
        yield question
