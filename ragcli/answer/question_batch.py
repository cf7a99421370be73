"""The question batch of `rag ask -`: one output object per input line, whatever the line.

A script feeding thousands of questions must not lose the answers after one bad
line, so a line that cannot be answered gets an error object in its place and
the batch goes on; the exit code is the worst outcome of any line. Questions
from a command line go through the same checks (:func:`check_question`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from ..errors import ExitCode, RagError, UsageError

MAX_QUESTION_CHARS = 4000  # far above any real question, far below the model's context


def clean_question(text: str) -> str:
    """The question as valid text: bytes that were not UTF-8 become U+FFFD.

    Python hands undecodable argv and stdin bytes over as lone surrogates,
    which the tokenizers and the JSON output reject; replacing them keeps the
    rest of the question answerable.
    """
    raw = text.encode("utf-8", "surrogateescape")
    return raw.decode("utf-8", "replace").replace("\x00", "\ufffd").strip()


def check_question(text: str) -> str:
    """The cleaned question, or a UsageError saying why it cannot be asked."""
    question = clean_question(text)
    if not question:
        raise UsageError("the question is empty")
    if len(question) > MAX_QUESTION_CHARS:
        raise UsageError(
            f"the question is too long ({len(question)} characters; the limit is "
            f"{MAX_QUESTION_CHARS})"
        )
    return question


def decode_line(line: bytes | str) -> str:
    """One input line as text, undecodable bytes replaced, line ending dropped."""
    if isinstance(line, bytes):
        line = line.decode("utf-8", "replace")
    return line.rstrip("\r\n")


@dataclass
class BatchResult:
    """What a batch did: the lines answered, refused, and the worst exit code."""

    code: ExitCode = ExitCode.ANSWERED
    outputs: int = 0
    skipped: int = 0

    def note(self, code: ExitCode) -> None:
        self.code = max(self.code, code)


def error_object(question: str, exc: BaseException) -> dict:
    """The output line of a question that got no answer because of an error."""
    message = str(exc) if isinstance(exc, RagError) else f"unexpected {type(exc).__name__}: {exc}"
    return {"question": question, "error": message, "answered": False}


def _one(ask: Callable[[str], dict], text: str, reraise: bool) -> tuple[dict, ExitCode]:
    """Answer one line, turning any failure into its error object and exit code."""
    question = clean_question(text)
    try:
        out = ask(check_question(text))
    except RagError as exc:
        return error_object(question, exc), exc.exit_code
    except Exception as exc:
        if reraise:
            raise
        return error_object(question, exc), ExitCode.FAILURE
    return out, ExitCode.ANSWERED if out.get("answered") else ExitCode.NOT_FOUND


def answer_lines(
    lines: Iterable[bytes | str],
    ask: Callable[[str], dict],
    emit: Callable[[dict], None],
    reraise: bool = False,
) -> BatchResult:
    """Answer every non-blank line with ``ask`` and ``emit`` one object for each, in order.

    Blank lines are skipped; a line that cannot be answered is emitted as
    ``{"question", "error", "answered": false}``. ``reraise`` lets unexpected
    errors through (``--debug``). An interrupt stops the loop with what was
    emitted already out.
    """
    result = BatchResult()
    for text in _texts(lines, result):
        out, code = _one(ask, text, reraise)
        emit(out)
        result.outputs += 1
        result.note(code)
    return result


def _texts(lines: Iterable[bytes | str], result: BatchResult) -> Iterator[str]:
    for line in lines:
        text = decode_line(line)
        if text.strip():
            yield text
        else:
            result.skipped += 1
