"""`rag cache stats|clear`: the persistent prompt (KV) cache."""

from __future__ import annotations

from dataclasses import asdict

import typer

from .common import JsonOpt, handle_errors, print_json, settings

app = typer.Typer(help="Inspect or clear the prompt (KV) cache.", no_args_is_help=True)


def _cache():
    from ..llm.kv_cache import PrefixCache

    s = settings()
    return PrefixCache(s.cache_dir / "prefix", s.cache_max_bytes)


@app.command("stats")
@handle_errors
def stats_command(json_out: JsonOpt = False) -> None:
    """Show how many prefix states are cached and their size."""
    st = _cache().stats()
    if json_out:
        print_json(asdict(st))
    else:
        typer.echo(
            f"{st.files} states, {st.bytes / 1e6:.1f} MB of {st.max_bytes / 1e6:.0f} MB in {st.path}"
        )


@app.command("clear")
@handle_errors
def clear_command() -> None:
    """Delete every cached prefix state."""
    typer.echo(f"removed {_cache().clear()} files")
