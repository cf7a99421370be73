"""`python -m benchmarks rerank SET INDEX`: answers and first tokens with the model's
re-ranking (answer/rerank.py) and without, side by side.

Two askers are open at once, one with `rerank` on; each question goes to both, in turns
(ABBA), so that the machine's drift falls on both alike. Per question: the answer, whether
it is right, the first token, the ranking's share of it, and whether an answer alias is in
the passages read and in the sentences shown. The answer cache is off; the prefix cache is
on, as a user has it.

The caches start empty (a folder of their own, the models linked into it). `--reading-cache`:
both read sentences apart (llm/reading_cache.py). `--warm` asks every question once before
the measured turns, unmeasured but for its first tokens (reported as `cold`), so that the
measured turns are new questions over sentences read before: an answer's own prompt is never
kept whole with the reading cache on, so asking again reads the question anew. The ranking
reads its candidates whole every time.
"""

from __future__ import annotations

import json
import statistics
import tempfile
from pathlib import Path
from typing import Annotated

import typer

from ragcli.config import Settings, load_settings


def _shown(prompt: str) -> str:
    """The context line the model read last: the question's own sentences."""
    from ragcli.answer.prompt import LABEL

    return prompt.rsplit(LABEL, 1)[-1].split("\nQuestion:", 1)[0]


def summary(rows: list[dict], mode: str) -> dict:
    pos = [r for r in rows if r["answerable"]]
    neg = [r for r in rows if not r["answerable"]]

    def share(xs: list[bool]) -> float | None:
        return round(sum(xs) / len(xs), 3) if xs else None

    return {
        "accuracy": share([r[mode]["right"] for r in pos]),
        "abstention": share([not r[mode]["answered"] for r in neg]),
        "false_abstention": share([not r[mode]["answered"] for r in pos]),
        "passages": share([r[mode]["passages"] for r in pos]),
        "shown": share([r[mode]["shown"] for r in pos]),
        "ttft_ms_median": round(statistics.median(r[mode]["ttft_ms"] for r in rows), 1),
        "rerank_ms_median": round(statistics.median(r[mode]["rerank_ms"] for r in rows), 1),
    }


def rerank_command(
    questions: Annotated[Path, typer.Argument(help="A question set (`rag eval` format).")],
    index: Annotated[Path, typer.Argument(help="The index the questions are asked of.")],
    limit: Annotated[int, typer.Option(min=1, help="The first N questions only.")] = 1000,
    out: Annotated[Path | None, typer.Option(help="Write each question's pair here.")] = None,
    reading_cache: Annotated[bool, typer.Option(help="Both read sentences apart.")] = False,
    warm: Annotated[bool, typer.Option(help="Ask each question once first.")] = False,
) -> None:
    """Answers, passages shown and first tokens with re-ranking and without."""
    from ragcli.answer.asker import Asker
    from ragcli.answer.evaluation import is_correct, load_questions, names_an_alias
    from ragcli.answer.prompt import one_line

    items = load_questions(questions)[:limit]
    caches = tempfile.TemporaryDirectory(prefix="rerank-bench-")
    cache = Path(caches.name)
    (cache / "models").symlink_to(Settings().cache_dir / "models", target_is_directory=True)
    base = {
        "index_dir": index,
        "answer_cache": False,
        "reading_cache": reading_cache,
        "cache_dir": cache,
    }
    askers = {
        "plain": Asker(load_settings({**base, "rerank": False})),
        "reranked": Asker(load_settings({**base, "rerank": True})),
    }
    rows: list[dict] = []
    cold: dict[str, list[float]] = {"plain": [], "reranked": []}
    try:
        for item in items if warm else []:
            for mode, asker in askers.items():
                cold[mode].append(asker.ask(item.question).timings.ttft_ms)
        for n, item in enumerate(items):
            row: dict = {"id": item.id, "answerable": item.answerable}
            turn = ("plain", "reranked") if n % 2 == 0 else ("reranked", "plain")
            for mode in turn:
                a = askers[mode].ask(item.question)
                passages = one_line(" ".join(h.chunk.text for h in a.sources[:4]))
                row[mode] = {
                    "answer": a.answer,
                    "answered": a.answered,
                    "right": is_correct(item, a),
                    "passages": names_an_alias(item, passages),
                    "shown": names_an_alias(item, one_line(_shown(a.prompt))),
                    "ttft_ms": a.timings.ttft_ms,
                    "rerank_ms": a.timings.rerank_ms,
                }
            rows.append(row)
            p, r = row["plain"], row["reranked"]
            typer.echo(
                f"{n + 1}/{len(items)} {item.id}: {p['answer']!r} -> {r['answer']!r}; "
                f"first token {p['ttft_ms']:.0f} -> {r['ttft_ms']:.0f} ms",
                err=True,
            )
    finally:
        for asker in askers.values():
            asker.close()
        caches.cleanup()
    ratios = [
        r["reranked"]["ttft_ms"] / r["plain"]["ttft_ms"] for r in rows if r["plain"]["ttft_ms"]
    ]
    report = {
        "questions": len(rows),
        "plain": summary(rows, "plain"),
        "reranked": summary(rows, "reranked"),
        "ttft_ratio_median": round(statistics.median(ratios), 3) if ratios else None,
        "answers_changed": sum(r["plain"]["answer"] != r["reranked"]["answer"] for r in rows),
    }
    if warm:
        report["cold_ttft_ms_median"] = {m: round(statistics.median(v), 1) for m, v in cold.items()}
    typer.echo(json.dumps(report, indent=2))
    if out is not None:
        out.write_text(json.dumps({"report": report, "rows": rows}, indent=1) + "\n")
