"""Running `rag serve`: bind the sockets, load the service, serve until a signal, drain.

The Unix socket is bound by us rather than by uvicorn, under a umask that makes it
owner-only from its first moment (uvicorn would make it world-writable). A socket file
left by a server that died is recognised (nothing answers on it) and replaced.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..config import Settings
from ..errors import UsageError
from .http_api import DEFAULT_MAX_BODY, create_app
from .worker import Service

BACKLOG = 128


@dataclass(frozen=True)
class ServeOptions:
    """Where and how `rag serve` listens; checked by :func:`check_options`."""

    socket: Path
    host: str | None = None  # TCP as well, only when asked
    port: int = 8731
    token: str | None = None
    queue_size: int = 16
    max_body: int = DEFAULT_MAX_BODY


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_options(o: ServeOptions) -> None:
    """Refuse what would be unsafe or cannot work, before any model loads."""
    if o.host is not None and not is_loopback(o.host) and not o.token:
        raise UsageError(
            f"listening on {o.host} (not loopback) needs a bearer token: --token or "
            "RAG_SERVER_TOKEN"
        )
    if not 0 <= o.port <= 65535:
        raise UsageError(f"--port must be 0-65535, not {o.port}")
    if o.queue_size < 0:
        raise UsageError("--queue must be >= 0")
    if o.max_body < 1024:
        raise UsageError("--max-body must be at least 1024 bytes")
    if len(os.fsencode(o.socket)) > 107:
        raise UsageError(f"socket path {o.socket} is too long for a Unix socket (107 bytes)")


def _listening(path: Path) -> bool:
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(str(path))
        return True
    except OSError:
        return False
    finally:
        probe.close()


def bind_unix(path: Path) -> socket.socket:
    """An owner-only listening Unix socket at ``path``; refuses one that a live server holds."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if path.exists() or path.is_symlink():
        if not path.is_socket():
            raise UsageError(f"{path} exists and is not a socket; remove it or pass --socket")
        if _listening(path):
            raise UsageError(f"a server already listens on {path}")
        path.unlink()  # left by a server that died
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    previous = os.umask(0o177)  # no other thread runs yet: the umask is process-wide
    try:
        sock.bind(str(path))
    except OSError as exc:
        sock.close()
        raise UsageError(f"cannot listen on {path}: {exc.strerror}") from None
    finally:
        os.umask(previous)
    os.chmod(path, 0o600)
    sock.listen(BACKLOG)
    return sock


def bind_tcp(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family, backlog=BACKLOG)
    except OSError as exc:
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror}") from None


def _uvicorn_server(app, sockets: list[socket.socket]):
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server, but a signal ends it with a drain and exit code 0 instead of
        being raised again once the server has stopped."""

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            handled = (signal.SIGINT, signal.SIGTERM)
            previous = {sig: signal.signal(sig, self.handle_exit) for sig in handled}
            try:
                yield
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)

    config = uvicorn.Config(
        app,
        lifespan="off",
        log_config=None,
        access_log=False,
        timeout_keep_alive=30,
        timeout_graceful_shutdown=None,  # drain: every accepted request is answered
    )
    return Server(config)


def serve(settings: Settings, options: ServeOptions, ready: Callable[[str], None]) -> None:
    """Serve until SIGTERM or SIGINT, then answer what was accepted and return."""
    check_options(options)
    sockets = [bind_unix(options.socket)]
    identity = os.stat(options.socket).st_ino
    service: Service | None = None
    try:
        if options.host is not None:
            sockets.append(bind_tcp(options.host, options.port))
        service = Service(settings, options.queue_size)
        service.start()
        app = create_app(service, options.token, options.max_body)
        where = [f"unix:{options.socket}"]
        if options.host is not None:
            host, port = sockets[1].getsockname()[:2]
            where.append(f"http://{host}:{port}")
        ready(f"{service.model} on {' and '.join(where)}")
        _uvicorn_server(app, sockets).run(sockets=sockets)
    finally:
        if service is not None:
            service.close()
        for sock in sockets:
            sock.close()
        with contextlib.suppress(OSError):  # remove our socket, not a successor's
            if os.stat(options.socket).st_ino == identity:
                options.socket.unlink()
