"""ragcli's exceptions as one stderr line and the documented exit code; SIGTERM as Ctrl-C."""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import sys
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import typer
from typer._click import exceptions as click  # the click typer runs on (vendored)

from ..errors import ExitCode, RagError, Terminated
from .notes import debug_enabled
from .output import error_line, warning_line

F = TypeVar("F", bound=Callable[..., Any])


def fail(message: str, code: int) -> typer.Exit:
    """Print one line on stderr and return the Exit to raise."""
    error_line(message)
    return typer.Exit(code)


warn = warning_line


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
