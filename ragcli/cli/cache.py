"""`rag cache stats|clear`: the prompt (KV) cache, the reading cache and the answer cache."""

from __future__ import annotations

from dataclasses import asdict

import typer

from .failures import handle_errors
from .options import JsonOpt, settings
from .output import print_json

app = typer.Typer(
    help="Inspect or clear the prompt (KV) cache, the reading cache and the answer cache.",
    no_args_is_help=True,
)


def _caches():
    from ..answer.answer_cache import FILE, AnswerCache
    from ..llm.kv_cache import PrefixCache
    from ..llm.reading_cache import ReadingCache

    s = settings()
    prefix = PrefixCache(s.cache_dir / "prefix", s.cache_max_bytes)
    reading = ReadingCache(s.cache_dir / "reading", s.reading_cache_max_bytes)
    answers = AnswerCache(s.cache_dir / FILE, s.answer_cache_max_bytes, s.answer_cache_threshold)
    return prefix, reading, answers


@app.command("stats")
@handle_errors
def stats_command(json_out: JsonOpt = False) -> None:
    """Show how many prefix states, sentences and answers are cached, and their size."""
    prefix, reading, answers = _caches()
    st, rd, an = prefix.stats(), reading.stats(), answers.stats()
    answers.close()
    if json_out:
        print_json({**asdict(st), "reading": asdict(rd), "answers": asdict(an)})
        return
    for count, what, size, bound, path in (
        (st.files, "states", st.bytes, st.max_bytes, st.path),
        (rd.files, "sentences", rd.bytes, rd.max_bytes, rd.path),
        (an.entries, "answers", an.bytes, an.max_bytes, an.path),
    ):
        typer.echo(f"{count} {what}, {size / 1e6:.1f} MB of {bound / 1e6:.0f} MB in {path}")


@app.command("clear")
@handle_errors
def clear_command() -> None:
    """Delete every cached prefix state, sentence and answer."""
    prefix, reading, answers = _caches()
    typer.echo(
        f"removed {prefix.clear()} states, {reading.clear()} sentences and "
        f"{answers.clear()} answers"
    )
