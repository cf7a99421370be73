"""`rag eval QA.jsonl`: retrieval hit@k, answer accuracy and abstention on a question set."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer

from .common import (
    IndexOpt,
    JsonOpt,
    LlmUrlOpt,
    ModelOpt,
    NoCacheOpt,
    QuietOpt,
    RetrieverOpt,
    StoreOpt,
    TopKOpt,
    answer_settings,
    handle_errors,
    print_json,
    stdout_console,
)
from .progress import progress_line, showing


@handle_errors
def eval_command(
    questions: Annotated[
        Path, typer.Argument(help="JSON Lines question file (see README).", show_default=False)
    ],
    top_k: TopKOpt = None,
    retriever: RetrieverOpt = None,
    index: IndexOpt = None,
    store: StoreOpt = None,
    model: ModelOpt = None,
    llm_url: LlmUrlOpt = None,
    no_cache: NoCacheOpt = False,
    limit: Annotated[int | None, typer.Option(min=1, help="Only the first N questions.")] = None,
    retrieval_only: Annotated[
        bool, typer.Option("--retrieval-only", help="Score retrieval only; do not run the model.")
    ] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="A row per question.")] = False,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Score the current index and model on a question set."""
    from ..answer.asker import Asker
    from ..answer.evaluation import evaluate, load_questions

    items = load_questions(questions)[:limit]
    # An evaluation measures the model: answers are never served from the answer cache.
    s = answer_settings(
        index, store, model, top_k, retriever, no_cache, llm_url, no_answer_cache=True
    )
    asker = Asker(s, preload=not retrieval_only)
    try:
        with progress_line(showing(json_out, quiet)) as progress:
            report = evaluate(asker, items, progress, retrieval_only)
    finally:
        asker.close()
    if json_out:
        print_json(report.as_dict())
        return
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
                r.answer[:60],
                r.question[:60],
            )
        console.print(rows)
    table = Table("metric", "value", title=f"{questions} ({report.summary.questions} questions)")
    for key, value in asdict(report.summary).items():
        table.add_row(key, "-" if value is None else str(value))
    console.print(table)
