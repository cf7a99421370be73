"""`rag chat`: ask one question after another with the model kept loaded."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

import typer

from . import flags
from .ask import show_answer
from .failures import handle_errors
from .options import takes
from .output import print_answer
from .via_server import served

if TYPE_CHECKING:
    from ..config import Settings


@handle_errors
@takes(*flags.ANSWERING, flags.NO_SERVER)
def chat_command(settings: Settings, no_server: bool = False) -> None:
    """Interactive questions; the KV cache of the shared prompt prefix stays warm.

    A running `rag serve` of the same index and settings answers them, unless --no-server.
    An empty line or end of input (Ctrl-D) ends the session. Each question reads the
    index's newest commit.
    """
    client = served(settings, no_server)
    if client is not None:
        with client:
            for question in _questions():
                print_answer(client.ask(question))
        raise typer.Exit(0)
    from ..rag import Rag

    with Rag(settings) as rag:
        for question in _questions():
            show_answer(rag, question)
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
