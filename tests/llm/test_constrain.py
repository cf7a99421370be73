"""The copy constraint on its own: whatever the logits say, the text is a span or a reply.

The vocabulary here is small and made up (every byte, plus some words with and without a
leading space, as BPE vocabularies have them); the real model's runs are in
tests/answer/test_copying.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragcli.llm.constrain import SpanDecoder, Vocabulary

WORDS = [b"Australia", b" Australia", b" won", b" the", b" final", b"-O", b"O", b" -OO", b"I"]
WORDS += [b" don't", b" know", b"Yes", b"No", b",", b" India", b" and", b"India", b" I"]
END = 0
PIECES = [b""] + [bytes([i]) for i in range(1, 256)] + WORDS
VOCAB = Vocabulary.build(PIECES, [END])
CONTEXT = "Australia won the final against India and Pakistan. Run python -OO to strip docstrings."


def tok(piece: bytes) -> int:
    return PIECES.index(piece, 1)


def run(dec: SpanDecoder, prefer: list[bytes], max_tokens: int = 40) -> str:
    """Decode with logits that put ``prefer`` first, in order, then the end token."""
    for _ in range(max_tokens):
        logits = np.zeros(len(PIECES), dtype=np.float32)
        for rank, piece in enumerate(reversed(prefer)):
            logits[tok(piece) if piece else END] = 10.0 + rank
        t = dec.choose(logits)
        if t == END:
            break
        dec.advance(t)
        piece = PIECES[t]
        if prefer and piece == prefer[0]:
            prefer = prefer[1:]
    dec.finish()
    return dec.text.decode()


def test_a_free_answer_from_memory_is_turned_into_a_copy():
    dec = SpanDecoder(lambda: VOCAB, CONTEXT, ("I don't know",))
    # The model "wants" -O (a mis-copy) and then to stop; the context only holds -OO.
    out = run(dec, [b" -OO", b""])
    assert out.strip() == "-OO"
    assert dec.items() == ["-OO"]


def test_an_answer_cannot_stop_inside_a_word():
    dec = SpanDecoder(lambda: VOCAB, CONTEXT, ("I don't know",))
    # Wants "Austr" then to stop: only a word boundary may end the span.
    out = run(dec, [b"A", b"u", b"s", b"t", b"r", b""])
    assert out == "Australia"


def test_i_dont_know_is_a_fixed_reply_only_from_the_start():
    dec = SpanDecoder(lambda: VOCAB, CONTEXT, ("I don't know",))
    assert run(dec, [b"I", b" don't", b" know", b""]) == "I don't know"
    assert dec.fixed_reply == 1
    assert dec.first_fixed_prob[0] > 0.1
    late = SpanDecoder(lambda: VOCAB, CONTEXT, ("I don't know",))
    assert run(late, [b"Australia", b" I", b""]) == "Australia"
    assert late.fixed_reply is None


def test_list_mode_joins_items_from_different_places():
    dec = SpanDecoder(lambda: VOCAB, CONTEXT, ("I don't know",), lists=True)
    out = run(dec, [b"Australia", b",", b" India", b""])
    assert out == "Australia, India"
    assert [s.start for s in dec.spans] == [0, CONTEXT.index(" India")]
    assert dec.items() == ["Australia", "India"]


def test_overruled_steps_are_counted():
    dec = SpanDecoder(lambda: VOCAB, CONTEXT, ("I don't know",))
    run(dec, [b"Yes", b""])  # "Yes" is not a reply for this decoder, nor in the context
    assert dec.overruled >= 1


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(-5, 5, allow_nan=False, width=32), min_size=20, max_size=20),
    st.integers(0, 2**32 - 1),
    st.booleans(),
)
def test_any_logits_give_a_span_of_the_context_or_a_fixed_reply(head, seed, lists):
    rng = np.random.default_rng(seed)
    dec = SpanDecoder(lambda: VOCAB, CONTEXT, ("I don't know", "Yes"), lists=lists)
    for step in range(30):
        logits = rng.normal(size=len(PIECES)).astype(np.float32)
        logits[: len(head)] += np.array(head, dtype=np.float32)
        logits[END] = -3.0 + step * 0.2  # ending grows likelier
        t = dec.choose(logits)
        if t == END:
            break
        dec.advance(t)
    dec.finish()
    text = dec.text.decode("utf-8", "replace")
    if dec.fixed_reply is not None:
        assert text == ("I don't know", "Yes")[dec.fixed_reply - 1]
    elif lists:
        for item in dec.items():
            assert item in CONTEXT
    else:
        assert not text or text.strip() in CONTEXT


def test_a_choice_reads_the_probability_of_each_reply_and_takes_the_likelier():
    from ragcli.llm.constrain import Choice

    logits = np.full(len(PIECES), -10.0, dtype=np.float32)
    logits[tok(b"Yes")] = 2.0
    logits[tok(b"No")] = 1.0
    logits[tok(b"Australia")] = 5.0  # the likeliest token overall is neither reply
    choice = Choice(lambda: VOCAB, ("Yes", "No"))
    assert choice.choose(logits) == tok(b"Yes")
    yes, no = choice.probs
    assert yes / (yes + no) == pytest.approx(1 / (1 + np.exp(-1.0)), rel=1e-5)
    logits[tok(b"No")] = 3.0
    assert choice.choose(logits) == tok(b"No")


def test_the_margin_is_the_lead_over_another_copy_not_over_the_same_text_cut_otherwise():
    dec = SpanDecoder(lambda: VOCAB, CONTEXT, ("I don't know",))
    logits = np.zeros(len(PIECES), dtype=np.float32)
    logits[tok(b"Australia")] = 9.0
    logits[tok(b"A")] = 8.9  # the same word cut into other tokens: no other answer
    logits[tok(b"India")] = 8.25  # another span: the decision was won by 0.75
    assert dec.choose(logits) == tok(b"Australia")
    assert dec.margin == pytest.approx(0.75)
    dec.advance(tok(b"Australia"))
    logits[:] = 0.0
    logits[END] = 5.0  # stopping after "Australia", against going on with " won"
    logits[tok(b" won")] = 4.5
    assert dec.choose(logits) == END
    assert dec.margin == pytest.approx(0.5)  # the narrowest step
