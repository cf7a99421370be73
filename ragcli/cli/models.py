"""`rag models` (the catalogue) and `rag models pull NAME` (assemble and verify)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from ..models import CATALOG, DEFAULT_MODEL, GenerationModel, model_installed, pull_model
from .common import JsonOpt, handle_errors, print_json, settings, stderr_console

app = typer.Typer(
    help="The models ragcli knows by name: list them, or pull one into the model cache.",
    invoke_without_command=True,
)


@app.callback()
@handle_errors
def list_command(ctx: typer.Context, json_out: JsonOpt = False) -> None:
    """List the known models: file, size, sha256, licence, prompt style, installed or not."""
    if ctx.invoked_subcommand is not None:
        return
    cache_dir = settings().cache_dir
    rows = [
        {
            "name": m.name,
            "default": m.name == DEFAULT_MODEL,
            "file": m.file,
            "size": m.size or None,
            "sha256": m.sha256 or None,
            "licence": m.licence,
            "prompt": m.prompt,
            "carrier": m.carrier,
            "installed": model_installed(m, cache_dir),
            "about": m.about,
        }
        for m in CATALOG.values()
    ]
    if json_out:
        for row in rows:
            print_json(row)
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(box=None, pad_edge=False, highlight=False)
    for col in ("name", "size", "licence", "prompt", "installed", "about"):
        table.add_column(col)
    for r in rows:
        size = f"{r['size'] / 1e6:,.0f} MB" if r["size"] else "-"
        name = r["name"] + (" (default)" if r["default"] else "")
        table.add_row(
            name, size, r["licence"], r["prompt"], "yes" if r["installed"] else "no", r["about"]
        )
    Console(highlight=False).print(table)


@app.command("pull")
@handle_errors
def pull_command(
    names: Annotated[list[str], typer.Argument(help="Model names (see `rag models`).")],
) -> None:
    """Assemble each model into the model cache and check its size and sha256."""
    cache_dir = settings().cache_dir
    for name in names:
        model = (
            _pull_with_bar(name, cache_dir) if sys.stderr.isatty() else pull_model(name, cache_dir)
        )
        typer.echo(f"{name}: {model.path} (sha256 {model.digest[:12]}..., verified)")


def _pull_with_bar(name: str, cache_dir: Path) -> GenerationModel:
    """Bytes assembled and hashed, on the terminal only."""
    from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn

    with Progress(
        f"[bold]{name}",
        BarColumn(),
        DownloadColumn(),
        TimeRemainingColumn(),
        console=stderr_console(),
        transient=True,
    ) as bar:
        task = bar.add_task(name, total=CATALOG[name].size if name in CATALOG else None)
        return pull_model(name, cache_dir, lambda done, _total: bar.update(task, completed=done))
