"""What the lab's commands share: their common options, settings, and how they report.

The lab's commands report as `rag` does: a table on stdout (JSON with ``--json``),
what they are at on one stderr line while on a terminal, a ragcli error as one line and
its exit code.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from ragcli import RagError, Settings, load_settings
from ragcli.errors import ExitCode

F = TypeVar("F", bound=Callable[..., Any])

QuestionSetArg = Annotated[Path, typer.Argument(help="Question set (JSONL, as for rag eval).")]
IndexOpt = Annotated[
    Path | None, typer.Option("--index", help="Index folder (default: the settings').")
]
ModelOpt = Annotated[
    str | None, typer.Option("--model", help="Model name or GGUF path (default: the settings').")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="One JSON object on stdout.")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress line.")]


def settings(**values: Any) -> Settings:
    """Settings from file and environment, with the given (non-None) values on top."""
    return load_settings({k: v for k, v in values.items() if v is not None})


def reports_errors(fn: F) -> F:
    """A ragcli error as one stderr line and its documented exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except RagError as exc:
            sys.stderr.write(f"benchmarks: error: {exc}\n")
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            sys.stderr.write("benchmarks: error: interrupted\n")
            raise typer.Exit(ExitCode.INTERRUPTED) from None

    return wrapper  # type: ignore[return-value]


def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")


def console():
    """Rich output on stdout, as wide as its widest line when piped."""
    from rich.console import Console

    out = Console(highlight=False)
    return out if out.is_terminal else Console(highlight=False, width=1 << 16)


@contextmanager
def status_line(json_out: bool, quiet: bool) -> Iterator[Callable[[str], None] | None]:
    """What the benchmark is at, redrawn on one stderr line: on a terminal only."""
    if json_out or quiet or not sys.stderr.isatty():
        yield None
        return

    def say(msg: str) -> None:
        sys.stderr.write("\r\x1b[K" + msg[:150])
        sys.stderr.flush()

    try:
        yield say
    finally:
        sys.stderr.write("\r\x1b[K")


def exit_on_mismatch(differ: int) -> None:
    """A cache must never change an answer: a difference is a bug (exit 4)."""
    if differ:
        raise typer.Exit(ExitCode.FAILURE)
