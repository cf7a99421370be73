"""`rag bench ...`: what reading a prompt costs here, what the caches and a resident server
save, indexing speed, start-up and sharing the CPU.

One module per subcommand; the options they share are declared in :mod:`.common`.
This module only assembles the Typer sub-app that :mod:`ragcli.cli.commands` mounts,
in the order `rag bench --help` lists the subcommands.
"""

from __future__ import annotations

import typer

from . import contention, ingest, prefill, reading, served, startup

app = typer.Typer(
    help="Benchmark prefill and the prompt (KV) cache on this machine.", no_args_is_help=True
)
app.command("prefill")(prefill.prefill_command)
app.command("reading")(reading.reading_command)
app.command("startup")(startup.startup_command)
app.command("ingest")(ingest.ingest_command)
app.command("serve")(served.serve_command)
app.command("contention")(contention.contention_command)
