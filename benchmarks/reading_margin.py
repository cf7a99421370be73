"""`python -m benchmarks reading-margin SET INDEX`: how many answers read apart equal reading
whole, for each `reading_margin`, and how many questions each margin reads again.

Each question is asked twice through `Asker`: with the reading cache off, then on with
margin 0, keeping the answer and its margin (`signals.margin`); read whole there for want of
cached sentences, it is asked once more, now read apart. An answer read again is the
whole reading's, so one pair of runs gives every margin: at M, a question whose margin is
below M is read again (its answer the whole one), the others keep their answer read apart.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from ragcli.config import load_settings

MARGINS = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0)


def curve(rows: list[dict], margin: float) -> tuple[int, int, int]:
    """Answers equal to reading whole, questions read again, right answers at ``margin``."""
    same = again = right = 0
    for row in rows:
        m = row["apart"]["margin"]
        reread = m is not None and m < margin
        kept = row["whole"] if reread else row["apart"]
        same += kept["answer"] == row["whole"]["answer"]
        again += reread
        right += kept["right"]
    return same, again, right


def reading_margin_command(
    questions: Annotated[Path, typer.Argument(help="A question set (`rag eval` format).")],
    index: Annotated[Path, typer.Argument(help="The index the questions are asked of.")],
    limit: Annotated[int, typer.Option(min=1, help="The first N questions only.")] = 1000,
    out: Annotated[
        Path | None, typer.Option(help="Write each question's pair here (JSON).")
    ] = None,
) -> None:
    """Answers read apart against read whole, for each margin."""
    from ragcli.answer.asker import Asker
    from ragcli.answer.evaluation import is_correct, load_questions

    items = load_questions(questions)[:limit]
    base = {"index_dir": index, "answer_cache": False}
    rows: list[dict] = [{"question": it.question} for it in items]
    for mode, over in (
        ("whole", {"reading_cache": False}),
        ("apart", {"reading_cache": True, "reading_margin": 0.0}),
    ):
        with Asker(load_settings({**base, **over}), preload=False) as asker:
            for n, (it, row) in enumerate(zip(items, rows, strict=True)):
                typer.echo(f"{mode} {n + 1}/{len(items)}", err=True)
                a = asker.ask(it.question)
                if mode == "apart" and a.timings.keep_tokens:
                    asker.engine.cache.clear()  # no whole state to restore: read apart
                    a = asker.ask(it.question)
                row[mode] = {
                    "answer": a.answer,
                    "right": is_correct(it, a),
                    "margin": a.signals.get("margin"),
                    "ttft_ms": a.timings.ttft_ms,
                }
    if out:
        out.write_text(json.dumps(rows, indent=1))
    n = len(rows)
    for margin in MARGINS:
        same, again, right = curve(rows, margin)
        typer.echo(
            f"M={margin}: identical {same}/{n} ({same / n:.2f}), read again {again / n:.2f}, "
            f"accuracy {right / n:.3f}"
        )
