"""`python -m benchmarks COMMAND`: the lab's measurements that take a question set or
an index (the set generators and the fit are modules run with ``python -m``)."""

from __future__ import annotations

import typer

from . import (
    answer_cache_threshold,
    faiss_index_types,
    models_side_by_side,
    prefix_cache_workload,
    quiet_rate,
    reading_margin,
    rerank_layers,
    rerank_side_by_side,
)

app = typer.Typer(
    help="The team's measurements (not installed with ragcli).",
    no_args_is_help=True,
    add_completion=False,
)
app.command("models")(models_side_by_side.models_command)
app.command("workload")(prefix_cache_workload.workload_command)
app.command("semcache")(answer_cache_threshold.semcache_command)
app.command("index-types")(faiss_index_types.index_types_command)
app.command("quiet-rate")(quiet_rate.quiet_rate_command)
app.command("reading-margin")(reading_margin.reading_margin_command)
app.command("rerank")(rerank_side_by_side.rerank_command)
app.command("rerank-layers")(rerank_layers.rerank_layers_command)
app.command("rerank-fit")(rerank_layers.rerank_fit_command)

if __name__ == "__main__":
    app(prog_name="python -m benchmarks")
