"""`rag bench semcache`: the answer cache's threshold, from paraphrases and near-misses."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..errors import handle_errors
from ..options import IndexOpt, JsonOpt, ModelOpt, QuietOpt, settings
from ..output import print_json, stdout_console
from .common import QuestionSetArg, exit_on_mismatch, status_line


@handle_errors
def semcache_command(
    questions: QuestionSetArg,
    variants: Annotated[
        Path,
        typer.Argument(
            help="Paraphrases and near-misses of those questions (JSONL: ref, kind, question); "
            "ragcli ships ragcli/bench/data/pydocs-paraphrases.jsonl and demo-paraphrases.jsonl."
        ),
    ],
    index: IndexOpt = None,
    model: ModelOpt = None,
    with_model: Annotated[
        bool,
        typer.Option(
            "--with-model",
            help="Also ask everything with the model, without and with the answer cache.",
        ),
    ] = False,
    threshold: Annotated[
        float | None,
        typer.Option(
            "--threshold",
            min=0.0,
            max=1.0,
            help="Threshold of the model run (default: the setting answer_cache_threshold).",
            show_default=False,
        ),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit",
            min=1,
            help="Only the first N questions (and their variants).",
            show_default=False,
        ),
    ] = None,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Hit rate on paraphrases and wrong-hit rate on near-misses by threshold; picks one."""
    from ...answer.evaluation import load_questions
    from ...bench.semcache import (
        MAX_WRONG_HIT_RATE,
        as_dict,
        load_variants,
        measure_pairs,
        run_workload,
        summarize_pairs,
    )

    items = load_questions(questions)
    vs = load_variants(variants, {i.id for i in items})
    if limit is not None:
        items = items[:limit]
        vs = [v for v in vs if v.ref in {i.id for i in items}]
    s = settings(index_dir=index, model=model)
    with status_line(json_out, quiet) as say:
        pairs = summarize_pairs(measure_pairs(s, items, vs, progress=say), len(items))
        work = None
        if with_model:
            t = threshold if threshold is not None else s.answer_cache_threshold
            work = run_workload(s, items, vs, t, progress=say)
    bad = work is not None and not work.consistent  # the cache changed an answer: a bug
    if json_out:
        print_json(as_dict(pairs, work))
        exit_on_mismatch(int(bad))
        return
    from rich.table import Table

    console = stdout_console()
    table = Table(
        "threshold",
        "paraphrase hits",
        "hit rate",
        "near-miss hits",
        "wrong-hit rate",
        title=f"{len(items)} questions, {pairs.paraphrases} paraphrases, "
        f"{pairs.near_misses} near-misses (hit: same passages and numbers, cosine >= threshold)",
    )
    for r in pairs.rows:
        mark = " <-" if r.threshold == pairs.threshold else ""
        table.add_row(
            f"{r.threshold:.2f}{mark}",
            f"{r.paraphrase_hits}/{r.paraphrases}",
            f"{r.hit_rate:.3f}",
            f"{r.wrong_hits}/{r.near_misses}",
            f"{r.wrong_hit_rate:.3f}",
        )
    console.print(table)
    console.print(
        f"same passages: {pairs.paraphrases_same_passages:.0%} of paraphrases, "
        f"{pairs.near_misses_same_passages:.0%} of near-misses; median cosine "
        f"{pairs.paraphrase_similarity_median:.3f} / {pairs.near_miss_similarity_median:.3f}; "
        f"closest near-miss with the same passages and numbers: {pairs.near_miss_eligible_max}"
    )
    console.print(
        f"picked threshold (lowest with wrong-hit rate < {MAX_WRONG_HIT_RATE}): {pairs.threshold}"
    )
    if work is not None:
        console.print(
            f"with {work.model} at threshold {work.threshold}: {work.asked} questions asked, "
            f"{work.identical} answers identical to the uncached run; model runs identical "
            f"{work.model_runs_identical}; repeats served {work.repeats_served} (identical "
            f"{work.repeats_identical}); paraphrases served {work.paraphrases_served} (identical "
            f"{work.paraphrases_identical}, right {work.paraphrase_correct_served} served vs "
            f"{work.paraphrase_correct_uncached} uncached); wrong hits {work.wrong_hits}"
        )
    exit_on_mismatch(int(bad))
