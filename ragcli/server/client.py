"""The client side of `rag serve`: HTTP/1.1 over a Unix socket or TCP, standard library only.

A `rag ask` that a server answers must finish in about a tenth of a second, Python's
start included. ``http.client`` alone imports ``email`` and ``ssl`` (tens of milliseconds),
so the few requests a client makes are written and read here: JSON bodies with a
Content-Length, on one kept-alive connection.
"""

from __future__ import annotations

import json
import socket
from typing import Any

from ..config import Settings
from ..errors import ExitCode, ServerError
from .locate import Endpoint, client_endpoint, identity

CONNECT_TIMEOUT_S = 5.0
ANSWER_TIMEOUT_S = 3600.0  # a queued answer on a busy CPU can take minutes
MAX_REPLY = 64 << 20


class Closed(ConnectionError):
    """The server closed the connection before a whole reply."""


def open_socket(endpoint: Endpoint, timeout: float) -> socket.socket:
    """A connected socket to the server (raises OSError when nothing listens)."""
    if endpoint.unix is None:
        return socket.create_connection((endpoint.host, endpoint.port), timeout=timeout)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(str(endpoint.unix))
    except OSError:
        sock.close()
        raise
    return sock


def read_reply(stream) -> tuple[int, dict[str, str], bytes]:
    """Status, headers (lower-case names) and body of one HTTP/1.1 reply."""
    line = stream.readline(65537)
    if not line:
        raise Closed("no reply")
    parts = line.split(None, 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/") or not parts[1].isdigit():
        raise ConnectionError(f"not an HTTP reply: {line[:80]!r}")
    headers: dict[str, str] = {}
    while True:
        h = stream.readline(65537)
        if not h:
            raise Closed("reply headers cut short")
        if h in (b"\r\n", b"\n"):
            break
        name, _, value = h.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = bytearray()
        while True:
            size = int(stream.readline(1024).split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while stream.readline(65537) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                break
            body += stream.read(size)
            stream.readline(3)
            if len(body) > MAX_REPLY:
                raise ConnectionError("reply too large")
        return int(parts[1]), headers, bytes(body)
    length = int(headers.get("content-length", "0"))
    if length > MAX_REPLY:
        raise ConnectionError("reply too large")
    body = stream.read(length)
    if len(body) < length:
        raise Closed("reply body cut short")
    return int(parts[1]), headers, body


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
        self._sock: socket.socket | None = None
        self._stream = None

    def _connect(self) -> None:
        if self._sock is None:
            self._sock = open_socket(self.endpoint, CONNECT_TIMEOUT_S)
            self._stream = self._sock.makefile("rb")

    def call(
        self, method: str, path: str, body: dict | None = None, timeout: float = ANSWER_TIMEOUT_S
    ) -> tuple[int, dict]:
        """One request; returns the status and the decoded JSON body."""
        data = b"" if body is None else json.dumps(body).encode()
        host = "localhost" if self.endpoint.unix else f"{self.endpoint.host}:{self.endpoint.port}"
        head = f"{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: {len(data)}\r\n"
        if data:
            head += "Content-Type: application/json\r\n"
        if self.endpoint.token:
            head += f"Authorization: Bearer {self.endpoint.token}\r\n"
        request = (head + "\r\n").encode("latin-1") + data
        for attempt in (1, 2):
            reused = self._sock is not None
            try:
                self._connect()
                assert self._sock is not None
                self._sock.settimeout(timeout)
                self._sock.sendall(request)
                status, headers, raw = read_reply(self._stream)
                break
            except (Closed, BrokenPipeError, ConnectionResetError) as exc:
                # A kept-alive connection the server closed while idle: reconnect once.
                self.close()
                if attempt == 2 or not reused:
                    raise ServerError(
                        f"the server at {self.endpoint} closed the connection ({exc})"
                    ) from None
            except (OSError, ValueError) as exc:
                self.close()
                raise ServerError(f"the server at {self.endpoint} is unreachable ({exc})") from None
        if headers.get("connection", "").lower() == "close":
            self.close()
        try:
            obj = json.loads(raw) if raw else {}
        except ValueError:
            obj = {}
        if not isinstance(obj, dict):
            obj = {}
        return status, obj

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
        if self._stream is not None:
            self._stream.close()
            self._stream = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# A search sends its own k and retriever; the model's re-ranking is the server's setting.
SEARCH_SETTINGS = ("index", "store", "embed_model", "rerank", "rerank_candidates")


def connect(settings: Settings, endpoint: Endpoint | None = None, purpose: str = "ask") -> Client:
    """A client of the server that serves this index with these answer settings (for
    ``purpose="search"``: this index).

    Raises :class:`NoServer` when none does: nothing listens (silently: the usual case),
    or the server's index or settings differ (with a note naming them).
    """
    explicit = endpoint is not None or bool(settings.server)
    if endpoint is None:
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
