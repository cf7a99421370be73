"""`python -m benchmarks rerank-layers SET INDEX --out F`: where the model's attention goes
among the candidates, layer by layer, for each answerable question; and
`python -m benchmarks rerank-fit F [F ...]`: which layers and which calibration rank best.

The first reads, for every question, its `rerank_candidates` passages and the question and
"N/A" after them (answer/rerank.py's layout, through the engine's `passage_attention`), and
keeps the attention per layer and passage with whether each passage holds an answer alias.
The second ranks the candidates offline under each choice (the first layer summed and the
last; the content-free query's attention subtracted as it is, as that of its mean token, or
not at all) and reports, per file, answers in the top 1 and top 4 and the mean reciprocal
rank of the first passage with one, beside the retriever's own order.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, cast

import typer

CALIBRATIONS = ("per-query", "per-token", "none")


def rerank_layers_command(
    questions: Annotated[Path, typer.Argument(help="A question set (`rag eval` format).")],
    index: Annotated[Path, typer.Argument(help="The index the questions are asked of.")],
    out: Annotated[Path, typer.Option(help="Where the attention goes (JSON).")],
    limit: Annotated[int, typer.Option(min=1, help="The first N questions only.")] = 1000,
) -> None:
    """Record the attention the question and "N/A" pay each candidate, per layer."""
    from ragcli.answer.evaluation import load_questions, names_an_alias
    from ragcli.answer.prompt import one_line
    from ragcli.answer.rerank import CONTENT_FREE, layout
    from ragcli.config import load_settings
    from ragcli.llm.base import Ranker
    from ragcli.llm.factory import open_engine
    from ragcli.rag import Rag

    items = [i for i in load_questions(questions) if i.answerable][:limit]
    settings = load_settings({"index_dir": index, "answer_cache": False})
    rows = []
    engine = cast(Ranker, open_engine(settings))
    try:
        with Rag(settings, preload=False) as rag:
            for n, item in enumerate(items):
                hits = rag.search(item.question, settings.rerank_candidates).hits
                read = {h.chunk.id for h in rag.search(item.question).hits}
                head, body, between = layout(engine, [h.chunk.text for h in hits])
                queries = [one_line(item.question), CONTENT_FREE]
                attention, _ = engine.passage_attention(head, body, between, queries)
                tokens = [len(engine.llm.tokenize(q.encode(), add_bos=False)) for q in queries]  # type: ignore[attr-defined]
                rows.append(
                    {
                        "id": item.id,
                        "alias": [names_an_alias(item, one_line(h.chunk.text)) for h in hits],
                        "read": [h.chunk.id in read for h in hits],  # retrieval's top k
                        "query_tokens": tokens,
                        "attention": attention.round(5).tolist(),  # [query, layer, passage]
                    }
                )
                typer.echo(f"{n + 1}/{len(items)} {item.id}", err=True)
                out.write_text(json.dumps(rows) + "\n")
    finally:
        engine.close()  # type: ignore[attr-defined]


def order(row: dict, first: int, calibration: str, end: int | None = None) -> list[int]:
    """The candidates best first under one choice (layers ``first`` to before ``end``);
    ties keep the retriever's order."""
    import numpy as np

    a = np.asarray(row["attention"])[:, first:end, :].sum(axis=1)  # over the layers
    if calibration == "per-token":  # each query's mean token subtracted
        a = a / np.asarray(row["query_tokens"])[:, None]
    score = a[0] if calibration == "none" else a[0] - a[1]
    return sorted(range(len(score)), key=lambda i: (-score[i], i))


def quality(rows: list[dict], orders: list[list[int]], top: int = 4) -> tuple[int, int, float]:
    """Questions with an alias first, in the top ``top``, and the mean reciprocal rank."""
    first = anywhere = 0
    mrr = 0.0
    for row, o in zip(rows, orders, strict=True):
        has = [row["alias"][i] for i in o]
        first += has[0]
        anywhere += any(has[:top])
        mrr += next((1 / (r + 1) for r, x in enumerate(has) if x), 0.0)
    return first, anywhere, round(mrr / max(len(rows), 1), 3)


def rerank_fit_command(
    files: Annotated[list[Path], typer.Argument(help="Files of `rerank-layers`.")],
) -> None:
    """hit@1, hit@4 and MRR per calibration and first layer, beside retrieval's order."""
    data = {f.stem: json.loads(f.read_text()) for f in files}
    layers = len(next(iter(data.values()))[0]["attention"][0])
    for name, rows in data.items():
        read = sum(any(a for a, r in zip(x["alias"], x["read"], strict=True) if r) for x in rows)
        ceiling = sum(any(x["alias"]) for x in rows)
        plain = quality(rows, [list(range(len(x["alias"]))) for x in rows])
        typer.echo(
            f"{name}: {len(rows)} questions; alias in retrieval's top k {read}, among the "
            f"candidates {ceiling}; candidates in retrieval's order: hit@1 {plain[0]} "
            f"hit@4 {plain[1]} MRR {plain[2]}"
        )
    firsts = sorted({0, layers // 6, layers // 4, layers // 3, layers // 2, 2 * layers // 3})
    for calibration in CALIBRATIONS:
        for first in firsts:
            for end in sorted({layers, *range(first + 2, layers, 2)}):
                cells = []
                for name, rows in data.items():
                    o = [order(r, first, calibration, end) for r in rows]
                    h1, h4, mrr = quality(rows, o)
                    cells.append(f"{name} {h1}/{h4}/{mrr}")
                typer.echo(f"{calibration:9} layers {first:2}-{end - 1:2}: " + "  ".join(cells))
