"""`rag eval QA.jsonl`: retrieval hit@k, answer accuracy and abstention on a question set."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from . import flags
from .failures import handle_errors
from .options import takes
from .output import print_json, stdout_console
from .progress_line import progress_line, showing

if TYPE_CHECKING:
    from ..config import Settings


@handle_errors
@takes(*flags.ANSWERING, flags.JSON, flags.QUIET)
def eval_command(
    questions: Annotated[
        Path, typer.Argument(help="JSON Lines question file (see README).", show_default=False)
    ],
    settings: Settings,
    limit: Annotated[int | None, typer.Option(min=1, help="Only the first N questions.")] = None,
    retrieval_only: Annotated[
        bool, typer.Option("--retrieval-only", help="Score retrieval only; do not run the model.")
    ] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="A row per question.")] = False,
    json_out: bool = False,
    quiet: bool = False,
) -> None:
    """Score the current index and model on a question set (never from the answer cache)."""
    from ..answer.evaluation import load_questions
    from ..rag import Rag

    items = load_questions(questions)[:limit]
    # An evaluation measures the model: answers are never served from the answer cache.
    rag = Rag(settings.replace(answer_cache=False), preload=not retrieval_only)
    with rag, progress_line(showing(json_out, quiet)) as progress:
        report = rag.evaluate(items, progress, retrieval_only)
    if json_out:
        print_json(report.as_dict())
        return
    from rich.markup import escape
    from rich.table import Table

    console = stdout_console()
    if verbose:
        rows = Table("id", "ok", "hit", "alias shown", "reason", "answer", "question")
        for r in report.rows:
            rows.add_row(
                r.id,
                "yes" if r.correct else "no",
                str(r.hit_rank or "-"),
                {True: "yes", False: "no", None: "-"}[r.context_hit],
                r.reason,
                escape(r.answer),  # documents' text is not markup
                escape(r.question),
            )
        console.print(rows)
    table = Table("metric", "value", title=f"{questions} ({report.summary.questions} questions)")
    for key, value in asdict(report.summary).items():
        table.add_row(key, "-" if value is None else str(value))
    console.print(table)
