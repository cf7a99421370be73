"""What the `rag bench` commands share: option declarations and how they report.

Benchmarks run for minutes, so each shows what it is at on the progress line, and
those that compare answers with and without a cache exit with a failure when the
cache changed one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

from ...errors import ExitCode
from ...progress import Step
from ..progress_line import progress_line, showing

QuestionSetArg = Annotated[Path, typer.Argument(help="Question set (JSONL, as for rag eval).")]


@contextmanager
def status_line(json_out: bool, quiet: bool) -> Iterator[Callable[[str], None] | None]:
    """What the benchmark is at (which length, which step) as the progress line:
    on a terminal only, so stdout stays a table or one JSON object."""
    with progress_line(showing(json_out, quiet)) as progress:
        yield (lambda msg: progress(Step(msg))) if progress else None


def exit_on_mismatch(differ: int) -> None:
    """The cache must never change an answer: a difference is a bug (exit 4)."""
    if differ:
        raise typer.Exit(ExitCode.FAILURE)
