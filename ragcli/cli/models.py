"""`rag models` (the catalogue) and `rag models pull NAME` (assemble and verify)."""

from __future__ import annotations

from typing import Annotated

import typer

from ..config import DEFAULT_EMBED_MODEL
from ..models import CATALOG, DEFAULT_MODEL, model_installed, pull_model
from ..progress import Step
from .failures import handle_errors
from .options import JsonOpt, QuietOpt, settings
from .output import print_json, stdout_console
from .progress_line import progress_line, showing

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
    stdout_console().print(table)


@app.command("pull")
@handle_errors
def pull_command(
    names: Annotated[list[str], typer.Argument(help="Model names (see `rag models`).")],
    quiet: QuietOpt = False,
) -> None:
    """Assemble each model into the model cache and check its size and sha256.

    The embedding model's name (all-MiniLM-L6-v2) makes its ONNX files (fp32 and int8).
    """
    cache_dir = settings().cache_dir
    for name in names:
        if name in EMBED_NAMES:
            _pull_embeddings(name, cache_dir)
            continue
        with progress_line(showing(quiet=quiet)) as progress:
            model = pull_model(name, cache_dir, _bytes(name, progress) if progress else None)
        typer.echo(f"{name}: {model.path} (sha256 {model.digest[:12]}..., verified)")


EMBED_NAMES = (DEFAULT_EMBED_MODEL, DEFAULT_EMBED_MODEL.split("/")[-1])


def _pull_embeddings(name: str, cache_dir) -> None:
    """Export the embedding model to ONNX (once; torch) and verify both files' sha256."""
    from ..embed.onnx_export import ensure_onnx
    from ..models import embedding_model

    info = embedding_model(name)
    for quantization in ("fp32", "int8"):
        onnx = ensure_onnx(info, cache_dir, quantization)
        typer.echo(f"{name} ({quantization}): {onnx.path} (sha256 {onnx.sha256[:12]}..., verified)")


def _bytes(name: str, progress):
    """Bytes assembled and hashed, as steps of the progress line."""
    size = CATALOG[name].size if name in CATALOG else None

    def step(done: int, total: int | None) -> None:
        progress(
            Step(
                f"assembling {name}",
                done,
                total or size or None,
                "bytes",
                detail="sha256 as it goes",
            )
        )

    return step
