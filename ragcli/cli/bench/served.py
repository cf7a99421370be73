"""`rag bench serve`: a resident `rag serve` against fresh processes, and under load."""

from __future__ import annotations

from typing import Annotated

import typer

from ...errors import ExitCode
from ..failures import handle_errors
from ..options import IndexOpt, JsonOpt, ModelOpt, QuietOpt, settings
from ..output import print_json, stdout_console
from .common import QuestionSetArg, status_line


@handle_errors
def serve_command(
    questions: QuestionSetArg,
    index: IndexOpt = None,
    model: ModelOpt = None,
    runs: Annotated[int, typer.Option("--runs", min=1, help="Repetitions (medians).")] = 3,
    clients: Annotated[int, typer.Option("--clients", min=1, help="Clients at once.")] = 4,
    per_client: Annotated[
        int, typer.Option("--per-client", min=1, help="Questions each client asks.")
    ] = 25,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """A resident `rag serve` against fresh `rag ask` processes, and under concurrent clients."""
    from dataclasses import asdict

    from ...bench.served_vs_fresh import serve_bench

    with status_line(json_out, quiet) as say:
        report = serve_bench(
            settings(index_dir=index, model=model), questions, runs, clients, per_client, say
        )
    if json_out:
        print_json(asdict(report))
        return
    from rich.table import Table

    r, load = report, report.load
    table = Table("measure", "value", title=f"rag serve, {r.model} (medians of {r.runs})")
    rows = [
        ("TTFT cold fresh process (ms)", f"{r.cold_process_ttft_ms:.0f}"),
        ("TTFT repeated question, server (ms)", f"{r.served_repeat_ttft_ms:.0f}"),
        ("  ratio (target <= 0.05)", f"{r.repeat_ratio:.3f}"),
        ("TTFT outside prefill, new question, fresh process (ms)",
         f"{r.fresh_new_ttft_outside_prefill_ms:.0f}"),
        ("TTFT outside prefill, new question, server (ms)",
         f"{r.served_new_ttft_outside_prefill_ms:.0f}"),
        ("  start-up saved (ms)", f"{r.startup_saved_ms:.0f}"),
        ("client process wall (ms)", f"{r.client_wall_ms:.0f}"),
        ("  of which the server's answer (ms)", f"{r.client_server_total_ms:.0f}"),
        ("client process peak RSS (MB)", f"{r.client_peak_rss_mb:.0f}"),
    ]  # fmt: skip
    if load:
        rows += [
            (f"load: {load.clients} x {load.per_client} requests", f"{load.requests}"),
            ("  lost / wrong", f"{load.lost} / {load.wrong}"),
            ("  another wording's answer, from the answer cache", f"{load.from_answer_cache}"),
            ("  p50 / p99 latency (ms)", f"{load.p50_ms:.0f} / {load.p99_ms:.0f}"),
            ("  throughput (answers/s)", f"{load.throughput_qps:.2f}"),
        ]
    for row in rows:
        table.add_row(*row)
    stdout_console().print(table)
    stdout_console().print(f"load average {r.loadavg_start} at start, {r.loadavg_end} at end")
    if load and (load.lost or load.wrong):
        raise typer.Exit(ExitCode.FAILURE)
