"""The batch loop of `rag ask -`: one object out per non-blank line in, whatever the line."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragcli.answer.question_batch import (
    MAX_QUESTION_CHARS,
    answer_lines,
    check_question,
    clean_question,
)
from ragcli.errors import ExitCode, IndexCorruptError, UsageError

# Lines as a file or a pipe gives them: any bytes, blank ones, huge ones, text with odd characters.
LINES = st.lists(
    st.one_of(
        st.binary(max_size=60),
        st.text(max_size=60),
        st.sampled_from([b"", b"   ", b"\t\r", b"\xff\xfe bad bytes", b"\x00", "\u2028"]),
        st.integers(MAX_QUESTION_CHARS - 2, MAX_QUESTION_CHARS + 5).map(lambda n: "x" * n),
    ),
    max_size=12,
)


def _fake_ask(question: str) -> dict:
    """An asker whose outcome depends on the question: answers, abstains or fails."""
    if "!" in question:
        raise IndexCorruptError("broken")
    if "?" in question:
        raise RuntimeError("a bug")
    return {"question": question, "answered": len(question) % 2 == 0}


def _expected_code(question: str) -> ExitCode:
    """What ``_fake_ask`` and the length limit make of one question."""
    if len(question) > MAX_QUESTION_CHARS:
        return ExitCode.USAGE
    if "!" in question:
        return ExitCode.INDEX_OR_MODEL
    if "?" in question:
        return ExitCode.FAILURE
    return ExitCode.ANSWERED if len(question) % 2 == 0 else ExitCode.NOT_FOUND


def _is_blank(line: bytes | str) -> bool:
    text = line.decode("utf-8", "replace") if isinstance(line, bytes) else line
    return not text.rstrip("\r\n").strip()


@given(LINES)
def test_one_output_per_line_in_order_and_the_worst_code(lines):
    out: list[dict] = []
    result = answer_lines(lines, _fake_ask, out.append)
    kept = [line for line in lines if not _is_blank(line)]
    assert len(out) == result.outputs == len(kept)
    assert result.skipped == len(lines) - len(kept)
    expected = ExitCode.ANSWERED
    for line, obj in zip(kept, out, strict=True):
        question = clean_question(
            line.decode("utf-8", "replace") if isinstance(line, bytes) else line
        )
        assert obj["question"] == question
        obj["question"].encode("utf-8")  # always valid text, printable as JSON
        assert isinstance(obj["answered"], bool)
        assert ("error" in obj) == (
            len(question) > MAX_QUESTION_CHARS or bool({"!", "?"} & set(question))
        )
        expected = max(expected, _expected_code(question))
    assert result.code == expected


def test_an_unexpected_error_is_raised_in_debug_mode():
    with pytest.raises(RuntimeError):
        answer_lines([b"why?"], _fake_ask, lambda _: None, reraise=True)


@given(st.text())
def test_check_question_accepts_or_refuses_with_a_usage_error(text):
    try:
        question = check_question(text)
    except UsageError:
        return
    assert question and question == question.strip() and len(question) <= MAX_QUESTION_CHARS


def test_undecodable_argv_bytes_become_replacement_characters():
    # How Python hands `rag ask $'\xff bad'` over: a lone surrogate for the bad byte.
    assert clean_question(b"\xff bad".decode("utf-8", "surrogateescape")) == "\ufffd bad"
