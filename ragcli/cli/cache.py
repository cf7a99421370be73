"""`rag cache stats|clear`: the prompt (KV) cache and the answer cache."""

from __future__ import annotations

from dataclasses import asdict

import typer

from .errors import handle_errors
from .options import JsonOpt, settings
from .output import print_json

app = typer.Typer(
    help="Inspect or clear the prompt (KV) cache and the answer cache.", no_args_is_help=True
)


def _caches():
    from ..answer.semcache import FILE, AnswerCache
    from ..llm.kv_cache import PrefixCache

    s = settings()
    prefix = PrefixCache(s.cache_dir / "prefix", s.cache_max_bytes)
    answers = AnswerCache(s.cache_dir / FILE, s.answer_cache_max_bytes, s.answer_cache_threshold)
    return prefix, answers


@app.command("stats")
@handle_errors
def stats_command(json_out: JsonOpt = False) -> None:
    """Show how many prefix states and answers are cached, and their size."""
    prefix, answers = _caches()
    st, an = prefix.stats(), answers.stats()
    answers.close()
    if json_out:
        print_json({**asdict(st), "answers": asdict(an)})
        return
    typer.echo(
        f"{st.files} states, {st.bytes / 1e6:.1f} MB of {st.max_bytes / 1e6:.0f} MB in {st.path}"
    )
    typer.echo(
        f"{an.entries} answers, {an.bytes / 1e6:.1f} MB of {an.max_bytes / 1e6:.0f} MB in {an.path}"
    )


@app.command("clear")
@handle_errors
def clear_command() -> None:
    """Delete every cached prefix state and every cached answer."""
    prefix, answers = _caches()
    typer.echo(f"removed {prefix.clear()} files and {answers.clear()} answers")
