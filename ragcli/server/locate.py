"""Where the server of an index listens, and what must match for a client to use it.

Server and clients compute the socket path with the same rule, so `rag ask` finds the
server of its index without being told. Standard library only: clients import this.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..addresses import parse_server
from ..config import ANSWER_SETTINGS, Settings

SOCKET_NAME = "serve.sock"
# A Unix socket path must fit sun_path (108 bytes on Linux, 104 on macOS).
MAX_SOCKET_PATH = 100

# What must match for a client to use a server: the index, the model and how it runs,
# and every setting that shapes an answer.
SERVER_SETTINGS = (
    "store",
    "model",
    "embed_model",
    "llm_url",
    "use_cache",
    "answer_cache",
    *ANSWER_SETTINGS,
)


def identity(settings: Settings) -> dict[str, str | int | float | bool | None]:
    """The index and the answer settings, as JSON values a client compares with its own."""
    out: dict[str, str | int | float | bool | None] = {"index": settings.index_name}
    for name in SERVER_SETTINGS:
        value = getattr(settings, name)
        out[name] = str(value) if isinstance(value, Path) else value
    return out


def runtime_dir() -> Path:
    """A folder only this user can enter: $XDG_RUNTIME_DIR/ragcli, else one in the temp dir."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    if base and os.path.isdir(base):
        return Path(base) / "ragcli"
    import tempfile  # only here: it imports shutil and random, which a client rarely needs

    return Path(tempfile.gettempdir()) / f"ragcli-{os.getuid()}"


def socket_path(settings: Settings) -> Path:
    """``serve.sock`` in the index folder when its path is short enough, else a name in
    the runtime folder derived from the index (Milvus stores have no folder)."""
    if not settings.store:
        path = settings.index_dir.resolve() / SOCKET_NAME
        if len(os.fsencode(path)) <= MAX_SOCKET_PATH:
            return path
    digest = hashlib.sha256(settings.index_name.encode("utf-8", "surrogateescape")).hexdigest()
    return runtime_dir() / f"{digest[:24]}.sock"


@dataclass(frozen=True)
class Endpoint:
    """A server address: a Unix socket, or a TCP host and port (with its bearer token)."""

    unix: Path | None = None
    host: str = ""
    port: int = 0
    token: str | None = field(default=None, repr=False)

    def __str__(self) -> str:
        return f"unix:{self.unix}" if self.unix else f"http://{self.host}:{self.port}"


def client_endpoint(settings: Settings) -> Endpoint:
    """Where a client looks for the server of its index: the ``server`` setting
    (``RAG_SERVER``, checked when the settings were loaded), else the socket path of the index."""
    token = settings.server_token or None
    if settings.server:
        where = parse_server(settings.server)
        return Endpoint(unix=where.unix, host=where.host, port=where.port, token=token)
    return Endpoint(unix=socket_path(settings), token=token)
