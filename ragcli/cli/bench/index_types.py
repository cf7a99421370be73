"""`rag bench index-types`: FAISS index types on synthetic or indexed vectors."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ...errors import UsageError
from ..errors import handle_errors
from ..options import JsonOpt, QuietOpt
from ..output import print_json, stdout_console
from .common import status_line


@handle_errors
def index_types_command(
    size: Annotated[
        list[int] | None,
        typer.Option("--size", min=1, help="Vectors in the index; repeatable (default: 100000)."),
    ] = None,
    index_type: Annotated[
        list[str] | None,
        typer.Option(
            "--type",
            metavar="TYPE",
            help='"auto" or a FAISS factory string; repeatable (default: Flat and auto).',
        ),
    ] = None,
    queries: Annotated[
        int, typer.Option("--queries", min=10, help="Queries, one at a time.")
    ] = 1000,
    nprobe: Annotated[
        list[int] | None,
        typer.Option("--nprobe", min=1, help="Also search IVF types at this nprobe; repeatable."),
    ] = None,
    centres: Annotated[
        int,
        typer.Option("--centres", min=0, help="Clusters of the vectors (0: uniform, no clusters)."),
    ] = 2000,
    from_index: Annotated[
        Path | None,
        typer.Option(
            "--from-index",
            help="Use this index's vectors (and --questions as queries) instead of synthetic ones.",
            show_default=False,
        ),
    ] = None,
    questions: Annotated[
        Path | None,
        typer.Option("--questions", help="`rag eval` JSONL file: the queries for --from-index."),
    ] = None,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Build time, size, latency and recall@10 of FAISS index types on clustered 384-d vectors."""
    from dataclasses import asdict

    from ...bench.index_types import index_types_bench
    from ...stores.faiss_index import check_index_type

    types = index_type or ["Flat", "auto"]
    for t in types:
        check_index_type(t, 384)
    vectors = qs = None
    if from_index is not None:
        if questions is None:
            raise UsageError("--from-index needs --questions (a `rag eval` JSONL file)")
        from ...bench.index_types import indexed_vectors

        vectors, qs = indexed_vectors(from_index, questions)
        size, queries = [len(vectors)], len(qs)
    with status_line(json_out, quiet) as say:
        rows = index_types_bench(
            size or [100_000],
            types,
            queries,
            tuple(nprobe or ()),
            centres,
            vectors=vectors,
            queries=qs,
            progress=say,
        )
    if json_out:
        print_json([asdict(r) for r in rows])
        return
    from rich.table import Table

    source = f"vectors of {from_index}" if from_index else f"{centres or 'no'} clusters"
    table = Table("vectors", "index type", "search", "build s", "file MB", "reader RSS MB",
                  "load ms", "p50 ms", "p99 ms", "recall@10",
                  title=f"FAISS index types, {source}, {queries} single queries")  # fmt: skip
    for r in rows:
        table.add_row(f"{r.n:,}", r.index_type, r.search_params or "exact",
                      "-" if r.build_s is None else f"{r.build_s:.1f}", f"{r.index_mb:.0f}",
                      f"{r.reader_rss_mb:.0f}", f"{r.load_ms:.0f}", f"{r.p50_ms:.2f}",
                      f"{r.p99_ms:.2f}", f"{r.recall_at_10:.3f}")  # fmt: skip
    stdout_console().print(table)
