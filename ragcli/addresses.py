"""The grammar of the addresses a setting may hold: the store URL, the address of a
`rag serve`, an LLM server's URL. Settings check them at load, before any work."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from .errors import ConfigError


def check_llm_url(url: str) -> None:
    """An LLM server URL must be http(s)://host[:port][/path], checked at load, not at first use."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (raises ValueError for a bad port)
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(
            f"setting llm_url must be an http(s) URL such as http://HOST:PORT/v1, not {url!r}"
        )
    if parts.query or parts.fragment:
        raise ConfigError(f"setting llm_url must not have a query or fragment: {url!r}")


# -- the store setting: its grammar is checked at load, before any work ----------

LITE_SCHEME = "milvus-lite://"
SERVER_SCHEME = "milvus://"
DEFAULT_COLLECTION = "ragcli"
DEFAULT_PORT = 19530
_COLLECTION_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,200}")


@dataclass(frozen=True)
class StoreURL:
    """A parsed ``--store`` value."""

    url: str
    collection: str
    lite_path: Path | None = None  # Milvus Lite: the .db path (a folder it creates)
    host: str = ""
    port: int = DEFAULT_PORT

    @property
    def meta(self) -> str:
        return f"{self.collection}_meta"


def parse_store(url: str) -> StoreURL:
    """Check a ``--store`` value at settings load, so a typo fails before any work."""
    if url.startswith(LITE_SCHEME):
        raw = url[len(LITE_SCHEME) :]
        if not raw.endswith(".db") or raw in (".db", "/.db"):
            raise ConfigError(
                f"store {url!r}: Milvus Lite needs a path ending in .db, "
                "e.g. milvus-lite://.rag-milvus.db"
            )
        return StoreURL(url, DEFAULT_COLLECTION, lite_path=Path(os.path.expanduser(raw)))
    if url.startswith(SERVER_SCHEME):
        try:
            parts = urlsplit("http://" + url[len(SERVER_SCHEME) :])
            port = parts.port or DEFAULT_PORT
        except ValueError:
            parts, port = None, 0
        name = parts.path.strip("/") if parts else ""
        if parts is None or not parts.hostname or parts.query or parts.fragment:
            raise ConfigError(f"store {url!r} must look like milvus://HOST:PORT/COLLECTION")
        if name and not _COLLECTION_NAME.fullmatch(name):
            raise ConfigError(
                f"store {url!r}: a Milvus collection name is letters, digits and _, "
                "not starting with a digit"
            )
        return StoreURL(url, name or DEFAULT_COLLECTION, host=parts.hostname, port=port)
    raise ConfigError(
        f"setting store must be empty (the FAISS index folder), milvus-lite://PATH.db or "
        f"milvus://HOST:PORT/COLLECTION, not {url!r}"
    )


# -- the server setting: a socket path or http://HOST:PORT, checked at load -------


@dataclass(frozen=True)
class ServerURL:
    """A parsed ``server`` value: a Unix socket, or a TCP host and port."""

    unix: Path | None = None
    host: str = ""
    port: int = 0


def parse_server(value: str) -> ServerURL:
    """Check a ``server`` value (``RAG_SERVER``) at settings load, before any client uses it."""
    if value.startswith(("http://", "https://")):
        try:
            parts = urlsplit(value)
            port = parts.port
        except ValueError:
            parts, port = None, None
        if parts is None or parts.scheme != "http" or not parts.hostname or not port:
            raise ConfigError(
                f"setting server (RAG_SERVER) must be a socket path or http://HOST:PORT, "
                f"not {value!r}"
            )
        return ServerURL(host=parts.hostname, port=port)
    return ServerURL(unix=Path(os.path.expanduser(value)))
