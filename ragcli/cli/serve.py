"""`rag serve`: keep the models, the index and the KV cache loaded for every client."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from . import flags
from .failures import handle_errors
from .options import takes

if TYPE_CHECKING:
    from ..config import Settings


@handle_errors
@takes(*flags.ANSWERING)
def serve_command(
    settings: Settings,
    socket_path: Annotated[
        Path | None,
        typer.Option(
            "--socket",
            help="Unix socket to listen on (default: serve.sock in the index folder, or one "
            "in $XDG_RUNTIME_DIR; clients find it there, or by RAG_SERVER).",
            show_default=False,
        ),
    ] = None,
    host: Annotated[
        str | None,
        typer.Option(
            "--host",
            help="Also listen on TCP at this address (not loopback: needs --token).",
            show_default=False,
        ),
    ] = None,
    port: Annotated[
        int | None,
        typer.Option("--port", help="TCP port (default 8731; implies --host 127.0.0.1)."),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            help="Bearer token TCP clients must send (env RAG_SERVER_TOKEN).",
            show_default=False,
        ),
    ] = None,
    queue: Annotated[
        int,
        typer.Option("--queue", min=0, help="Requests that may wait for the model; then 503."),
    ] = 16,
    max_body: Annotated[
        int,
        typer.Option("--max-body", min=1024, help="Largest request body in bytes; then 413."),
    ] = 256 * 1024,
) -> None:
    """Answer `rag ask`, `rag search`, `rag chat` and HTTP clients from one loaded process.

    Native API: POST /ask, POST /search (the JSON of `rag ask --json` and `rag search
    --json`), GET /health, GET /stats. OpenAI-compatible: GET /v1/models, POST
    /v1/chat/completions. SIGTERM or Ctrl-C: stop listening, answer what was accepted, exit 0.
    """
    from ..server.lifecycle import ServeOptions, serve
    from ..server.locate import socket_path as default_socket

    s = settings
    if port is not None and host is None:
        host = "127.0.0.1"
    options = ServeOptions(
        socket=(socket_path or default_socket(s)).absolute(),
        host=host,
        port=8731 if port is None else port,
        token=token or s.server_token or None,
        queue_size=queue,
        max_body=max_body,
    )

    def ready(where: str) -> None:
        sys.stderr.write(f"rag: serving {s.where} with {where}\n")
        sys.stderr.flush()

    serve(s, options, ready)
