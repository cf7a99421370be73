"""`rag index PATH...`: add, update and remove documents in the index."""

from __future__ import annotations

import re
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer

from ..config import DEFAULT_EMBED_BACKEND, EMBED_BACKENDS, one_of
from .failures import handle_errors, warn
from .options import EmbedModelOpt, IndexOpt, JsonOpt, QuietOpt, StoreOpt, settings
from .output import display_path, print_json
from .progress_line import progress_line, showing


@handle_errors
def index_command(
    paths: Annotated[
        list[Path], typer.Argument(help="Files and folders to index.", show_default=False)
    ],
    index: IndexOpt = None,
    store: StoreOpt = None,
    embed_model: EmbedModelOpt = None,
    chunk_tokens: Annotated[
        int | None,
        typer.Option(help="Passage size in embedding tokens (default: 200).", show_default=False),
    ] = None,
    chunk_overlap: Annotated[
        int | None,
        typer.Option(help="Overlap between passages in tokens (default: 40).", show_default=False),
    ] = None,
    rebuild: Annotated[bool, typer.Option("--rebuild", help="Start the index over.")] = False,
    index_type: Annotated[
        str | None,
        typer.Option(
            "--index-type",
            metavar="TYPE",
            help='FAISS index: "auto" (exact below 100k passages, IVF above) or a factory '
            'string such as "HNSW32" or "IVF4096,SQ8" (default: the index\'s own; auto when new).',
            show_default=False,
        ),
    ] = None,
    include: Annotated[
        list[str] | None,
        typer.Option(
            "--include",
            metavar="GLOB",
            help="Only index files matching this glob (relative to the folder given; "
            "** crosses folders; without a slash it matches file names). Repeatable.",
            show_default=False,
        ),
    ] = None,
    exclude: Annotated[
        list[str] | None,
        typer.Option(
            "--exclude",
            metavar="GLOB",
            help="Skip files and folders matching this glob (as --include). Repeatable.",
            show_default=False,
        ),
    ] = None,
    embed_backend: Annotated[
        str | None,
        typer.Option(
            "--embed-backend",
            help=f"How to embed: {one_of(EMBED_BACKENDS)} (default: {DEFAULT_EMBED_BACKEND}; "
            "torch for a model folder ONNX export does not cover). Changing it needs --rebuild.",
            show_default=False,
        ),
    ] = None,
    ray: Annotated[
        str | None,
        typer.Option(
            "--ray",
            metavar="ADDRESS",
            help='Parse and embed on Ray: "local" starts Ray on this machine, "auto" joins '
            "the cluster `ray start` runs here, else HOST:PORT or ray://HOST:PORT of a "
            "cluster (needs pip install 'ragcli\\[ray]').",
            show_default=False,
        ),
    ] = None,
    warm: Annotated[
        bool,
        typer.Option(
            "--warm",
            help="Then read every passage into the reading cache (setting reading_cache), "
            "so questions read only themselves; interrupted, the next --warm goes on.",
        ),
    ] = False,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Index .txt, .md, .rst, .html, .pdf and .docx files; unchanged files are skipped.

    In folders, .gitignore and .ragignore files are honoured.
    """
    from ..index.pipeline import build_index

    s = settings(
        index_dir=index,
        store=store,
        embed_model=embed_model,
        chunk_tokens=chunk_tokens,
        chunk_overlap=chunk_overlap,
        index_type=index_type,
        embed_backend=embed_backend,
    )
    _check_index_type(s)
    if warm:
        from ..answer.warming import check_on

        check_on(s)
    if ray is not None:
        from ..index.ray_data import check_ray

        check_ray(ray)
    filters = {"include": include or (), "exclude": exclude or (), "ray_address": ray}
    with progress_line(showing(json_out, quiet)) as progress:
        report = build_index(paths, s, rebuild=rebuild, progress=progress, **filters)
    warmed = None
    if warm:
        from ..rag import Rag

        with progress_line(showing(json_out, quiet)) as progress, Rag(s) as rag:
            warmed = rag.warm(progress)
    if json_out:
        print_json({**asdict(report), **({"warm": asdict(warmed)} if warmed else {})})
        return
    for item in report.skipped:
        warn(f"{display_path(item['path'])}: skipped: {item['reason']}")
    for item in report.warnings:
        warn(f"{display_path(item['path'])}: {item['warning']}")
    typer.echo(
        f"{report.added} added, {report.updated} updated, {report.removed} removed, "
        f"{report.unchanged} unchanged; {report.chunks_embedded} chunks embedded, "
        f"{report.chunks_total} in the index ({report.files_total} files); "
        f"{report.seconds:.1f} s -> {_where(report.index_dir)}"
    )
    if report.embeddings:
        typer.echo(f"encoder: {report.embeddings}")
    if report.chunks_embedded:
        typer.echo(f"{report.chunks_per_s:.1f} chunks/s, {report.files_per_s:.1f} files/s")
    if warmed is not None:
        typer.echo(
            f"reading cache: {warmed.sentences} sentences of {warmed.passages} passages, "
            f"{warmed.tokens_encoded} tokens read in {warmed.seconds:.1f} s"
        )
    if report.index_type:
        params = f" ({report.search_params})" if report.search_params else ""
        why = "auto by size" if report.index_spec == "auto" else f"asked for {report.index_spec}"
        typer.echo(f"vectors: {report.index_type}{params}, {why}")
        if (m := re.search(r"recall@10 ([\d.]+)", report.search_params)) and float(m[1]) < 0.95:
            warn(
                f"approximate search found only {float(m[1]):.0%} of the nearest passages "
                "when measured at build; --index-type Flat searches exactly"
            )


def _check_index_type(s) -> None:
    """A bad --index-type is a usage error before anything is read or written."""
    if s.index_type in (None, "auto"):
        return
    from ..config import DEFAULT_EMBED_MODEL
    from ..models import embedding_model
    from ..stores.faiss_index import check_index_type

    check_index_type(s.index_type, embedding_model(s.embed_model or DEFAULT_EMBED_MODEL).dim)


def _where(index_dir: str) -> str:
    """The index folder relative to here, or a --store URL as given."""
    return index_dir if "://" in index_dir else display_path(index_dir)
