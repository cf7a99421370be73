"""What every command shares: options, settings, errors and output."""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import select
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from typer._click import exceptions as click  # the click typer runs on (vendored)

from ..config import RETRIEVERS, Settings, default, load_settings, one_of
from ..errors import ExitCode, RagError, Terminated
from ..log import LOGGER, debugging
from ..models import DEFAULT_MODEL
from .render import display_path as display_path  # re-exported for the commands

# Help texts are rich markup (typer's default): a "[" before a letter, as in ragcli[milvus],
# is written "\\[" here, or rich reads a style tag and drops it from the help.
IndexOpt = Annotated[
    Path | None,
    typer.Option(
        "--index",
        help=f"Index folder (default: {default('index_dir')}; env RAG_INDEX).",
        show_default=False,
    ),
]
StoreOpt = Annotated[
    str | None,
    typer.Option(
        "--store",
        metavar="URL",
        help="Keep the index in Milvus instead of the --index folder: milvus-lite://PATH.db or "
        "milvus://HOST:PORT/COLLECTION (needs ragcli\\[milvus]; env RAG_STORE).",
        show_default=False,
    ),
]
ModelOpt = Annotated[
    str | None,
    typer.Option(
        "--model",
        metavar="NAME|PATH",
        help=f"A model of `rag models` or a GGUF file (default: {DEFAULT_MODEL}; env RAG_MODEL).",
        show_default=False,
    ),
]
EmbedModelOpt = Annotated[
    str | None,
    typer.Option(
        "--embed-model",
        help="sentence-transformers model folder (default: the index's).",
        show_default=False,
    ),
]
TopKOpt = Annotated[
    int | None,
    typer.Option(
        "-k",
        "--top-k",
        min=1,
        help=f"Passages to retrieve (default: {default('top_k')}).",
        show_default=False,
    ),
]
RetrieverOpt = Annotated[
    str | None,
    typer.Option(
        "--retriever",
        help=f"{one_of(RETRIEVERS)} (default: {default('retriever')}).",
        show_default=False,
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]
QuietOpt = Annotated[
    bool, typer.Option("--quiet", "-q", help="Draw no progress line on the terminal.")
]
MaxTokensOpt = Annotated[
    int | None,
    typer.Option(
        "--max-tokens",
        min=1,
        help=f"Answer length limit (default: {default('max_tokens')}).",
        show_default=False,
    ),
]
NoCacheOpt = Annotated[
    bool,
    typer.Option("--no-cache", help="Do not reuse or save answers or KV states (no cache at all)."),
]
NoAnswerCacheOpt = Annotated[
    bool,
    typer.Option(
        "--no-answer-cache",
        help="Run the model even for a question answered before (the KV cache stays on).",
    ),
]
LlmUrlOpt = Annotated[
    str | None,
    typer.Option(
        "--llm-url",
        help="Generate on an OpenAI-compatible server, e.g. http://HOST:PORT/v1, instead of "
        "loading the model here (env RAG_LLM_URL).",
        show_default=False,
    ),
]

NoServerOpt = Annotated[
    bool,
    typer.Option(
        "--no-server",
        help="Work in this process even when `rag serve` serves this index.",
    ),
]

F = TypeVar("F", bound=Callable[..., Any])


def settings(**flags: Any) -> Settings:
    """Settings from file and environment, with the flags the user gave on top; the
    ``debug`` setting (``RAG_DEBUG``) does what ``rag --debug`` does."""
    s = load_settings({k: v for k, v in flags.items() if v is not None})
    if s.debug:
        show_notes(debug=True)
    return s


def answer_settings(
    index: Path | None,
    store: str | None,
    model: Path | None,
    top_k: int | None,
    retriever: str | None,
    no_cache: bool,
    llm_url: str | None,
    no_answer_cache: bool = False,
    **more: Any,
) -> Settings:
    """The settings of the commands that answer (ask, chat, eval), from their shared flags.

    ``--no-cache`` turns off every cache; ``--no-answer-cache`` only the answer cache."""
    return settings(
        index_dir=index,
        store=store,
        model=model,
        top_k=top_k,
        retriever=retriever,
        use_cache=False if no_cache else None,
        answer_cache=False if no_cache or no_answer_cache else None,
        llm_url=llm_url,
        **more,
    )


def served(s: Settings, no_server: bool, purpose: str = "ask"):
    """A client of the `rag serve` that serves this index with these settings, or None
    (none runs, ``--no-server``, or it has other settings: then a note says so)."""
    if no_server:
        return None
    from ..serve.client import NoServer, connect

    try:
        return connect(s, purpose=purpose)
    except NoServer as exc:
        if exc.note:
            logging.getLogger(LOGGER).info(exc.note)
        return None


def debug_enabled() -> bool:
    return debugging()


class _NoteHandler(logging.Handler):
    """The library's log records as ``rag: note: ...`` lines on the current stderr."""

    def emit(self, record: logging.LogRecord) -> None:
        sys.stderr.write(f"rag: note: {record.getMessage()}\n")


_notes = _NoteHandler()


def show_notes(debug: bool = False) -> None:
    """Show the library's notes on stderr; ``debug`` also keeps native libraries' logs."""
    logger = logging.getLogger(LOGGER)
    logger.setLevel(logging.DEBUG if debug else logging.INFO)
    if _notes not in logger.handlers:
        logger.addHandler(_notes)


def fail(message: str, code: int) -> typer.Exit:
    """Print one line on stderr and return the Exit to raise."""
    sys.stderr.write(f"rag: error: {message}\n")
    sys.stderr.flush()
    return typer.Exit(code)


def warn(message: str) -> None:
    sys.stderr.write(f"rag: warning: {message}\n")


def handle_errors(fn: F) -> F:
    """Turn ragcli's exceptions into one stderr line and the documented exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except RagError as exc:
            if debug_enabled():
                raise
            raise fail(str(exc), exc.exit_code) from None
        except KeyboardInterrupt:
            raise fail("interrupted", ExitCode.INTERRUPTED) from None
        except Terminated:
            raise fail("terminated", ExitCode.TERMINATED) from None
        except BrokenPipeError:  # `rag ... | head`: nobody reads on, nothing to report
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise typer.Exit(ExitCode.BROKEN_PIPE) from None
        except (typer.Exit, typer.Abort):
            raise
        except click.ClickException as exc:  # a bad value found by a command itself
            raise fail(exc.format_message(), ExitCode.USAGE) from None
        except Exception as exc:
            if debug_enabled():
                raise
            message = f"unexpected {type(exc).__name__}: {exc} (rerun with --debug for details)"
            raise fail(message, ExitCode.FAILURE) from None

    return wrapper  # type: ignore[return-value]


@contextlib.contextmanager
def on_sigterm() -> Iterator[None]:
    """Turn SIGTERM into :class:`Terminated` for the block, so it ends like Ctrl-C:
    the output written so far stays, and the exit code says what stopped it."""

    def handler(signum: int, frame: object) -> None:
        raise Terminated

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def stdin_lines(fd: int = 0, poll_s: float = 0.25) -> Iterator[bytes]:
    """Lines of stdin as bytes, without their newline.

    Waits in short polls rather than one blocking read: a signal that another thread
    receives does not interrupt the main thread's read, so Ctrl-C or SIGTERM on an idle
    batch would otherwise wait for the next line.
    """
    pending = bytearray()
    while True:
        if not select.select([fd], [], [], poll_s)[0]:
            continue
        block = os.read(fd, 1 << 16)
        if not block:
            break
        start = len(pending)
        pending += block
        cut = pending.rfind(b"\n", start)
        if cut >= 0:
            head = bytes(pending[:cut])
            del pending[: cut + 1]
            yield from head.split(b"\n")
    if pending:
        yield bytes(pending)


def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def stderr_console():
    from rich.console import Console

    return Console(stderr=True, highlight=False)


def stdout_console():
    """Rich output on stdout. Piped or redirected it is as wide as its longest line: rich
    would otherwise fold tables to 80 columns and cut values short with "…"."""
    from rich.console import Console

    console = Console(highlight=False)
    if not console.is_terminal:
        console = Console(highlight=False, width=UNLIMITED_WIDTH)
    return console


UNLIMITED_WIDTH = 1 << 16  # columns: wider than any line a command prints


def process_age_ms() -> float | None:
    """Milliseconds since this process started (Linux /proc; 10 ms resolution), else None.

    Lets `--profile` show what interpreter start-up and imports cost before any
    of our code ran.
    """
    try:
        with open("/proc/self/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        with open("/proc/uptime", "rb") as fh:
            uptime = float(fh.read().split()[0])
        start = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22 of the full line
        return max(0.0, (uptime - start) * 1000)
    except (OSError, ValueError, IndexError):
        return None


ProfileOpt = Annotated[
    bool, typer.Option("--profile", help="Print where the time went, start-up included, on stderr.")
]


def print_profile(profile: dict[str, float]) -> None:
    """The profile dict as aligned lines on stderr, with the process's total wall time."""
    total = process_age_ms()
    rows = [(k.removesuffix("_ms").replace("_", " "), v) for k, v in profile.items()]
    if total is not None:
        rows.append(("total wall time so far", total))
    width = max(len(name) for name, _ in rows)
    lines = [f"  {name:<{width}}  {ms:8.0f} ms" for name, ms in rows]
    sys.stderr.write("profile:\n" + "\n".join(lines) + "\n")
