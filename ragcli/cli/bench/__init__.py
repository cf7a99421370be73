"""`rag bench ...`: prefill cost, what the prompt and answer caches save, models, indexes.

One module per subcommand; the options they share are declared in :mod:`.common`.
This module only assembles the Typer sub-app that :mod:`ragcli.cli.commands` mounts,
in the order `rag bench --help` lists the subcommands.
"""

from __future__ import annotations

import typer

from . import (
    contention,
    index_types,
    ingest,
    models,
    prefill,
    reading,
    semcache,
    serve,
    startup,
    workload,
)

app = typer.Typer(
    help="Benchmark prefill and the prompt (KV) cache on this machine.", no_args_is_help=True
)
app.command("prefill")(prefill.prefill_command)
app.command("reading")(reading.reading_command)
app.command("workload")(workload.workload_command)
app.command("startup")(startup.startup_command)
app.command("models")(models.models_command)
app.command("index-types")(index_types.index_types_command)
app.command("ingest")(ingest.ingest_command)
app.command("semcache")(semcache.semcache_command)
app.command("serve")(serve.serve_command)
app.command("contention")(contention.contention_command)
