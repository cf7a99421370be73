"""`rag ask QUESTION` (or `-` for one question per line on stdin)."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Annotated

import typer

from ..config import default
from ..errors import ExitCode
from ..progress import Step
from .common import (
    IndexOpt,
    JsonOpt,
    LlmUrlOpt,
    ModelOpt,
    NoAnswerCacheOpt,
    NoCacheOpt,
    ProfileOpt,
    QuietOpt,
    RetrieverOpt,
    StoreOpt,
    TopKOpt,
    answer_settings,
    debug_enabled,
    display_path,
    handle_errors,
    on_sigterm,
    print_json,
    print_profile,
    process_age_ms,
    stdin_lines,
)
from .progress import progress_line, showing

if TYPE_CHECKING:
    from ..answer.asker import AnswerTimings


@handle_errors
def ask_command(
    question: Annotated[
        str,
        typer.Argument(
            help='The question, or "-" to read one per line from stdin.', show_default=False
        ),
    ],
    top_k: TopKOpt = None,
    retriever: RetrieverOpt = None,
    index: IndexOpt = None,
    store: StoreOpt = None,
    model: ModelOpt = None,
    llm_url: LlmUrlOpt = None,
    max_tokens: Annotated[
        int | None,
        typer.Option(
            min=1,
            help=f"Answer length limit (default: {default('max_tokens')}).",
            show_default=False,
        ),
    ] = None,
    no_cache: NoCacheOpt = False,
    no_answer_cache: NoAnswerCacheOpt = False,
    json_out: JsonOpt = False,
    profile: ProfileOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Answer QUESTION from the indexed documents, or say "I don't know" (exit 1)."""
    started_ms = process_age_ms() if profile else None
    from ..answer.asker import Asker
    from ..answer.batch import check_question

    if question != "-":
        question = check_question(question)  # before any model loads: a usage error is quick
    s = answer_settings(
        index,
        store,
        model,
        top_k,
        retriever,
        no_cache,
        llm_url,
        no_answer_cache,
        max_tokens=max_tokens,
    )
    t0 = time.perf_counter()
    asker = Asker(s)
    open_ms = (time.perf_counter() - t0) * 1000
    try:
        if question == "-":
            raise typer.Exit(_batch(asker, quiet))
        ask_started_ms = process_age_ms() if profile else None
        answer = asker.ask(question) if json_out else show_answer(asker, question)
    finally:
        asker.close()
    report = _profile(answer.timings, started_ms, open_ms, ask_started_ms) if profile else None
    if json_out:
        print_json({**answer.as_dict(), **({"profile": report} if report else {})})
    if report:
        print_profile(report)
    raise typer.Exit(ExitCode.ANSWERED if answer.answered else ExitCode.NOT_FOUND)


def _counted(lines: Iterable[bytes], quiet: bool) -> Iterator[bytes]:
    """Lines of a batch, with the questions answered so far on the progress line."""
    with progress_line(showing(quiet=quiet)) as progress:
        for n, line in enumerate(lines):
            if progress:
                progress(Step("answering", n, unit="questions"))
            yield line


def _batch(asker, quiet: bool) -> ExitCode:
    """Answer stdin line by line; SIGTERM stops it like Ctrl-C, with the answers out."""
    from ..answer.batch import answer_lines

    with on_sigterm():
        result = answer_lines(
            _counted(stdin_lines(), quiet),
            lambda q: asker.ask(q).as_dict(),
            print_json,
            debug_enabled(),
        )
    return result.code


def _profile(t: AnswerTimings, started_ms, open_ms: float, ask_started_ms) -> dict[str, float]:
    """Where a fresh `rag ask` spent its time, in ms, start-up included."""
    out = {
        "interpreter_and_imports_ms": started_ms,
        "open_index_ms": open_ms,
        "query_embedding_ms": t.embed_ms,
        "search_ms": t.search_ms,
        "choosing_sentences_ms": t.focus_ms,
        "model_load_wait_ms": t.model_load_ms,
        "state_load_ms": t.state_load_ms,
        "prefill_ms": t.prefill_ms,
        "state_save_ms": t.state_save_ms,
        "decode_ms": t.decode_ms,
    }
    if ask_started_ms is not None and t.prompt_tokens:
        # First token as seen from process start, and the part of it the model's
        # own prompt reading does not explain.
        out["process_ttft_ms"] = ask_started_ms + t.ttft_ms
        out["ttft_outside_prefill_ms"] = out["process_ttft_ms"] - t.prefill_ms
    return {k: round(v, 1) for k, v in out.items() if v is not None}


def show_answer(asker, question: str):
    """Stream the answer on a terminal, then sources and the timing line."""
    stream = sys.stdout.isatty()

    def on_text(piece: str) -> None:
        sys.stdout.write(piece)
        sys.stdout.flush()

    answer = asker.ask(question, on_text=on_text if stream else None)
    marks = "".join(f" [{rank}]" for rank in answer.cited)  # sources that hold the answer
    if stream and answer.raw_answer:
        sys.stdout.write(marks + "\n")
        if not answer.answered:
            sys.stdout.write(
                f"-> {answer.answer} (the answer above is not supported by the passages)\n"
            )
    else:
        sys.stdout.write(answer.answer + marks + "\n")
    for h in answer.sources:
        sys.stdout.write(f"[{h.rank}] {display_path(h.citation)}  similarity {h.similarity:.2f}\n")
    sys.stdout.flush()
    sys.stderr.write(timing_line(answer.timings, answer.reason, answer.cache_similarity) + "\n")
    return answer


def timing_line(t: AnswerTimings, reason: str, cache_similarity: float | None = None) -> str:
    retrieval = t.embed_ms + t.search_ms
    if t.cache_source == "answer":
        return (
            f"no model call (answer cache, question similarity {cache_similarity or 0:.3f}); "
            f"retrieval {retrieval:.0f} ms · total {t.total_ms:.0f} ms"
        )
    if not t.prompt_tokens:
        return f"no model call ({reason.replace('_', ' ')}); retrieval {retrieval:.0f} ms"
    head = (
        f"prompt {t.prompt_tokens} tok ({t.cached_tokens} cached, {t.cache_source}) · "
        f"prefill {t.prefill_tokens} tok in {t.prefill_ms:.0f} ms ({t.prefill_tok_s:.0f} tok/s)"
    )
    if t.cache_source == "unknown":  # an LLM server that reports neither
        head = f"prompt {t.prompt_tokens} tok (server reports no cache or prefill figures)"
    return head + (
        f" · first token {t.ttft_ms:.0f} ms · {t.completion_tokens} tok at {t.decode_tok_s:.1f} tok/s · "
        f"total {t.total_ms / 1000:.1f} s"
    )
