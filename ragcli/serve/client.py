"""The client side of `rag serve`: HTTP over a Unix socket or TCP, standard library only.

A `rag ask` that a server answers must finish in about a tenth of a second, Python's
start included, so nothing here imports more than ``http.client`` and ``json``.
"""

from __future__ import annotations

import http.client
import json
import socket
from typing import Any

from ..config import Settings
from ..errors import ExitCode, ServerError
from .locate import Endpoint, client_endpoint, identity

CONNECT_TIMEOUT_S = 5.0
ANSWER_TIMEOUT_S = 3600.0  # a queued answer on a busy CPU can take minutes


class UnixConnection(http.client.HTTPConnection):
    """An HTTP connection whose transport is a Unix socket."""

    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self._path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


class NoServer(Exception):
    """No usable server: the caller answers in its own process. ``note`` says why when the
    user would want to know (a server of other settings, or RAG_SERVER unreachable)."""

    def __init__(self, note: str | None = None) -> None:
        super().__init__(note or "no server")
        self.note = note


class Client:
    """Requests to one server over one kept-alive connection."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self._conn: http.client.HTTPConnection | None = None

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            e = self.endpoint
            if e.unix is not None:
                self._conn = UnixConnection(str(e.unix), CONNECT_TIMEOUT_S)
            else:
                self._conn = http.client.HTTPConnection(e.host, e.port, timeout=CONNECT_TIMEOUT_S)
            self._conn.connect()
        return self._conn

    def call(
        self, method: str, path: str, body: dict | None = None, timeout: float = ANSWER_TIMEOUT_S
    ) -> tuple[int, dict]:
        """One request; returns the status and the decoded JSON body."""
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if data is not None else {}
        if self.endpoint.token:
            headers["Authorization"] = f"Bearer {self.endpoint.token}"
        for attempt in (1, 2):
            try:
                conn = self._connection()
                if conn.sock is not None:
                    conn.sock.settimeout(timeout)
                conn.request(method, path, body=data, headers=headers)
                reply = conn.getresponse()
                raw = reply.read()
                break
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                # A kept-alive connection the server closed while idle: reconnect once.
                self.close()
                if attempt == 2:
                    raise ServerError(
                        f"the server at {self.endpoint} closed the connection"
                    ) from None
            except (OSError, http.client.HTTPException) as exc:
                self.close()
                raise ServerError(f"the server at {self.endpoint} is unreachable ({exc})") from None
        try:
            obj = json.loads(raw) if raw else {}
        except ValueError:
            obj = {}
        if not isinstance(obj, dict):
            obj = {}
        return reply.status, obj

    def checked(self, method: str, path: str, body: dict | None = None) -> dict:
        """The reply of a request that must succeed; a refusal is a ServerError with the
        server's message and exit code."""
        status, obj = self.call(method, path, body)
        if status == 200:
            return obj
        message = obj.get("error")
        if isinstance(message, dict):  # OpenAI-style error bodies
            message = message.get("message")
        code = obj.get("exit_code")
        raise ServerError(
            str(message or f"the server at {self.endpoint} answered HTTP {status}"),
            code if isinstance(code, int) else ExitCode.INDEX_OR_MODEL,
        )

    def ask(self, question: str) -> dict:
        """What `rag ask --json` prints for ``question``."""
        return self.checked("POST", "/ask", {"question": question})

    def search(self, query: str, top_k: int, retriever: str) -> dict:
        """What `rag search --json` prints for ``query``."""
        return self.checked(
            "POST", "/search", {"query": query, "top_k": top_k, "retriever": retriever}
        )

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


SEARCH_SETTINGS = ("index", "store", "embed_model")  # a search sends its own k and retriever


def connect(settings: Settings, endpoint: Endpoint | None = None, purpose: str = "ask") -> Client:
    """A client of the server that serves this index with these answer settings (for
    ``purpose="search"``: this index).

    Raises :class:`NoServer` when none does: nothing listens (silently: the usual case),
    or the server's index or settings differ (with a note naming them).
    """
    explicit = endpoint is not None
    if endpoint is None:
        import os

        from .locate import SERVER_ENV

        explicit = bool(os.environ.get(SERVER_ENV))
        endpoint = client_endpoint(settings)
    if endpoint.unix is not None and not explicit and not endpoint.unix.exists():
        raise NoServer()
    client = Client(endpoint)
    try:
        status, health = client.call("GET", "/health", timeout=CONNECT_TIMEOUT_S)
    except ServerError as exc:  # refused, a stale socket, a timeout
        client.close()
        raise NoServer(f"{exc}; answering here" if explicit else None) from None
    if status == 401:
        client.close()
        raise ServerError(f"the server at {endpoint} wants a token: set RAG_SERVER_TOKEN")
    if status != 200:
        client.close()
        raise NoServer(f"the server at {endpoint} answered HTTP {status}; answering here")
    theirs = health.get("identity") or {}
    mine = identity(settings)
    if purpose == "search":
        mine = {k: mine[k] for k in SEARCH_SETTINGS}
    differ = [k for k, v in mine.items() if theirs.get(k) != v]
    if differ:
        client.close()
        what = "index" if "index" in differ else "settings (" + ", ".join(differ) + ")"
        raise NoServer(f"the server at {endpoint} has another {what}; answering here")
    return client


def fetch(endpoint: Endpoint, path: str) -> dict[str, Any]:
    """GET one JSON document from a server (its /health or /stats)."""
    with Client(endpoint) as client:
        return client.checked("GET", path)
