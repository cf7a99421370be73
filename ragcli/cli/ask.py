"""`rag ask QUESTION` (or `-` for one question per line on stdin)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Annotated

import typer

from ..errors import ExitCode
from ..progress import Step
from . import flags
from .failures import handle_errors, on_sigterm
from .notes import debug_enabled
from .options import takes
from .output import evidence_lines, marks, print_answer, print_json, print_timing, source_lines
from .profile import print_profile, process_age_ms
from .progress_line import progress_line, showing
from .stdin import stdin_lines
from .via_server import served

if TYPE_CHECKING:
    from ..answer.asker import AnswerTimings
    from ..config import Settings
    from ..rag import Rag


@handle_errors
@takes(*flags.COMMANDS["ask"])
def ask_command(
    question: Annotated[
        str,
        typer.Argument(
            help='The question, or "-" to read one per line from stdin.', show_default=False
        ),
    ],
    settings: Settings,
    json_out: bool = False,
    profile: bool = False,
    quiet: bool = False,
    no_server: bool = False,
) -> None:
    """Answer QUESTION from the indexed documents, or say "I don't know" (exit 1).

    A running `rag serve` of the same index and settings answers it, unless --no-server.
    """
    started_ms = process_age_ms() if profile else None
    from ..answer.question_batch import check_question

    if question != "-":
        question = check_question(question)  # before any model loads: a usage error is quick
    s = settings
    client = served(s, no_server or profile)  # --profile measures this process's own work
    if client is not None:
        with client:
            if question == "-":
                raise typer.Exit(_batch(client.ask, quiet))
            result = client.ask(question)
        if json_out:
            print_json(result)
        else:
            print_answer(result)
        raise typer.Exit(ExitCode.ANSWERED if result["answered"] else ExitCode.NOT_FOUND)
    from ..rag import Rag

    t0 = time.perf_counter()
    rag = Rag(s)
    open_ms = (time.perf_counter() - t0) * 1000
    try:
        if question == "-":
            raise typer.Exit(_batch(lambda q: rag.ask(q).as_dict(), quiet))
        ask_started_ms = process_age_ms() if profile else None
        answer = rag.ask(question) if json_out else show_answer(rag, question)
    finally:
        rag.close()
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


def _batch(ask: Callable[[str], dict], quiet: bool) -> ExitCode:
    """Answer stdin line by line (in this process, or by a server); SIGTERM stops it like
    Ctrl-C, with the answers out."""
    from ..answer.question_batch import answer_lines

    with on_sigterm():
        result = answer_lines(_counted(stdin_lines(), quiet), ask, print_json, debug_enabled())
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


def show_answer(rag: Rag, question: str):
    """Stream the answer on a terminal, then sources and the timing line."""
    stream = sys.stdout.isatty()

    def on_text(piece: str) -> None:
        sys.stdout.write(piece)
        sys.stdout.flush()

    answer = rag.ask(question, on_text=on_text if stream else None)
    result = answer.as_dict()
    if stream and answer.raw_answer:
        sys.stdout.write(marks(result) + "\n")
        if answer.answer != answer.raw_answer.strip():  # withheld, or a list counted
            why = " (the answer above is not supported by the passages)"
            sys.stdout.write(f"-> {answer.answer}{why if not answer.answered else ''}\n")
        sys.stdout.write(evidence_lines(result) + source_lines(result))
        sys.stdout.flush()
        print_timing(result)
    else:
        print_answer(result)
    return answer
