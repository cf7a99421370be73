"""The reading cache: a sentence's keys and values, moved to another place, read as if
encoded there; cached or not, the same answer; corrupt files, the disk bound and two
writers at once."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from ragcli.answer.prompt import engine_prompt
from ragcli.llm.llama import FRESH, LlamaEngine, _reusable
from ragcli.llm.reading_cache import ReadingCache, piece_key
from ragcli.models import generation_model

CONTEXT = [
    "The Danube rises in the Black Forest of Germany.",
    "It flows east for about 2,850 kilometres.",
    "It empties into the Black Sea through a wide delta.",
]
QUESTION = "Into which sea does the Danube flow?"
# Measured on the 1.5B model and gemma-3-270m (f16 keys rotated again): KL 0.0003, max
# logit difference 0.4; sentences read apart instead of together differ by KL 0.01.
KL_MOVED = 0.005


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return generation_model("gemma-3-270m", tmp_path_factory.mktemp("models"))


@pytest.fixture
def engine(model, tmp_path):
    eng = LlamaEngine(model, n_ctx=2048, n_batch=256, reading=ReadingCache(tmp_path / "reading"))
    yield eng
    eng.close()


def _kl(p_logits: np.ndarray, q_logits: np.ndarray) -> float:
    p = np.exp(p_logits - p_logits.max())
    q = np.exp(q_logits - q_logits.max())
    p, q = p / p.sum(), q / q.sum()
    return float((p * np.log(p / np.maximum(q, 1e-30))).sum())


def test_a_sentence_moved_reads_as_if_encoded_in_place(engine):
    segments, parts, _ = engine._tokens(engine_prompt(QUESTION, CONTEXT[:1], engine), apart=True)
    head, (piece,), question = segments[0], parts, segments[2]
    engine.trim(0)
    engine.evaluate(head + piece + question, 0)
    in_place = engine._logits().copy()

    # The same sentence after the same head, 37 positions further on, kept as its state.
    lib, mem, far = engine._lib, engine._mem, 37
    engine.trim(0)
    engine._decode(head, far, 0)
    engine._decode(piece, far + len(head), 0)
    lib.llama_memory_seq_rm(mem, 0, far, far + len(head))
    engine.reading.write(engine, piece_key(head, [], piece), engine._seq_state(0))
    lib.llama_memory_clear(mem, True)  # what the engine's record (empty) says

    engine.evaluate(head, 0)
    data = engine.reading.read(engine, piece_key(head, [], piece))
    assert engine._sentences.place(
        data, len(piece), len(head)
    )  # loaded, and moved back 37 positions
    engine.evaluate(question, len(head) + len(piece))
    moved = engine._logits().copy()
    assert moved.argmax() == in_place.argmax()
    assert _kl(in_place, moved) < KL_MOVED


def test_sentences_read_after_all_before_them_read_as_one_text(engine):
    """With the whole context before each sentence as its lead, reading apart is reading
    together: what moving and joining pieces does adds nothing of its own."""
    together = engine.generate(engine_prompt(QUESTION, CONTEXT, engine), 12, use_cache=False)
    leads = [CONTEXT[:k] for k in range(len(CONTEXT))]
    apart = engine.generate(engine_prompt(QUESTION, CONTEXT, engine, leads), 12)
    assert engine.reading.stats().files == len(CONTEXT)  # read apart indeed
    assert apart.text == together.text


def test_sentences_read_in_place_read_as_one_text(engine):
    """A sentence read in place (``fresh``) is read after the sentences placed before it.
    The first sentence read apart after no lead is where it would be read whole, so with
    the others in place the prompt reads as one text."""
    engine.generate(engine_prompt(QUESTION, CONTEXT, engine), 1, use_cache=False)
    together = engine._logits().copy()
    engine.trim(0)
    fresh = engine.generate(engine_prompt(QUESTION, CONTEXT, engine, fresh=(1, 2)), 1)
    assert engine.reading.stats().files == 1  # the first sentence, read apart and kept
    assert fresh.timings.lead_tokens == 0
    assert _kl(together, engine._logits()) < KL_MOVED
    # The last sentence in place, the others apart after their leads: it now reads the
    # second as read apart, not as read whole.
    leads = [CONTEXT[:k] for k in range(len(CONTEXT))]
    engine.trim(0)
    engine.generate(engine_prompt(QUESTION, CONTEXT, engine, leads, fresh=(2,)), 1)
    last_fresh = engine._logits().copy()
    assert engine.reading.stats().files == 2
    engine.trim(0)
    engine.generate(engine_prompt(QUESTION, CONTEXT, engine, leads), 1)
    assert engine.reading.stats().files == 3
    assert _kl(engine._logits(), last_fresh) > 0


def test_every_sentence_in_place_is_reading_whole(engine):
    prompt = engine_prompt(QUESTION, CONTEXT, engine, fresh=(0, 1, 2))
    assert (prompt.pieces, prompt.fresh) == ((), ())
    assert prompt.text == engine_prompt(QUESTION, CONTEXT, engine).text
    out = engine.generate(prompt, 1)
    assert engine.reading.stats().files == 0
    assert out.timings.reading_tokens == 0


def test_cached_or_not_the_same_answer(engine):
    prompt = engine_prompt(QUESTION, CONTEXT, engine)
    cold = engine.generate(prompt, 12)
    assert cold.timings.reading_tokens == 0
    engine.trim(0)  # the sentences must come from the disk now
    warm = engine.generate(engine_prompt(QUESTION, CONTEXT[::-1], engine), 12)
    again = engine.generate(prompt, 12)
    engine.trim(0)
    from_disk = engine.generate(prompt, 12)
    assert warm.timings.reading_tokens > 0
    assert from_disk.text == cold.text
    assert again.text == cold.text
    t = from_disk.timings
    assert t.reading_tokens == t.prompt_tokens - t.prefill_tokens - t.cached_tokens
    # Only the head and the question are read: every sentence was in the cache.
    head, _, question = engine._tokens(prompt, apart=True)[0]
    assert t.prefill_tokens == len(head) + len(question)


def test_a_corrupt_sentence_is_ignored_and_written_again(engine):
    prompt = engine_prompt(QUESTION, CONTEXT, engine)
    cold = engine.generate(prompt, 12)
    files = sorted(engine.reading.root.glob("*.kv"))
    assert len(files) == len(CONTEXT)
    for f in files:
        data = bytearray(f.read_bytes())
        data[-100:] = bytes(100)  # the payload's end: its checksum no longer holds
        f.write_bytes(bytes(data))
    engine.trim(0)
    again = engine.generate(prompt, 12)
    assert again.text == cold.text
    assert again.timings.reading_tokens == 0
    segments, parts, leads = engine._tokens(prompt, apart=True)
    keys = [piece_key(segments[0], lead, p) for lead, p in zip(leads, parts, strict=True)]
    assert all(engine.reading.read(engine, key) is not None for key in keys)


def test_the_disk_bound_is_kept(engine, model, tmp_path):
    engine.generate(engine_prompt(QUESTION, CONTEXT, engine), 4)
    sizes = sorted(f.stat().st_size for f in engine.reading.root.glob("*.kv"))
    bound = 2 * sizes[-1]  # room for any two of the three
    assert sum(sizes) > bound
    small = LlamaEngine(model, n_ctx=2048, n_batch=256, reading=ReadingCache(tmp_path / "b", bound))
    try:
        small.generate(engine_prompt(QUESTION, CONTEXT, small), 4)
        stats = small.reading.stats()
    finally:
        small.close()
    assert stats.bytes <= bound
    assert stats.files == 2  # the least recently used went


_WARM = """
import sys
from pathlib import Path
from ragcli.answer.prompt import engine_prompt
from ragcli.llm.llama import LlamaEngine
from ragcli.llm.reading_cache import ReadingCache, piece_key
from ragcli.models import generation_model
model = generation_model("gemma-3-270m", Path(sys.argv[1]))
engine = LlamaEngine(model, n_ctx=2048, n_batch=256, reading=ReadingCache(Path(sys.argv[2])))
for n in range(int(sys.argv[3])):
    engine.warm(engine_prompt("", [f"Sentence {n} of {sys.argv[4]} names the number {n}."], engine))
engine.close()
"""


def test_two_processes_writing_at_once_lose_nothing(model, tmp_path):
    folder = tmp_path / "shared"
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", _WARM, str(model.path.parent.parent), str(folder), "12", who]
        )
        for who in ("one", "two")
    ]
    assert [r.wait(timeout=300) for r in runs] == [0, 0]
    engine = LlamaEngine(model, n_ctx=2048, n_batch=256, reading=ReadingCache(folder))
    try:
        head = engine._tokens(engine_prompt("", ["x"], engine), apart=True)[0][0]
        for who in ("one", "two"):
            for n in range(12):
                text = f"Sentence {n} of {who} names the number {n}."
                piece = engine._tokens(engine_prompt("", [text], engine), apart=True)[1][0]
                data = engine.reading.read(engine, piece_key(head, [], piece))
                assert data is not None, text
                assert engine._sentences.place(data, len(piece), len(head))
                engine._lib.llama_memory_clear(engine._mem, True)
    finally:
        engine.close()
    assert not list(folder.glob("*.tmp"))


def test_reuse_stops_where_sentences_were_read_otherwise():
    kv = list(range(20))
    apart = [(5, ()), (10, (7,))]
    # Same tokens, same sentences read after the same leads: all but the last token.
    assert _reusable(kv, apart, [*kv, 99], apart, 15) == 20
    # Read together before, apart now: only the head is kept.
    assert _reusable(kv, [], [*kv, 99], apart, 15) == 5
    # A sentence that differs from its 3rd token: back to its start.
    assert _reusable(kv, apart, [*kv[:12], 0, 0, 0, 99], apart, 15) == 10
    # The same sentence read after another lead: back to its start.
    assert _reusable(kv, apart, [*kv, 99], [(5, ()), (10, (8,))], 15) == 10
    # Apart before, together now: back to the first sentence read apart.
    assert _reusable(kv, apart, [*kv, 99], [], 0) == 5
    # Read in place before, apart now (or the other way): back to its start.
    fresh = [(5, ()), (10, FRESH)]
    assert _reusable(kv, fresh, [*kv, 99], apart, 15) == 10
    assert _reusable(kv, apart, [*kv, 99], fresh, 15) == 10
    assert _reusable(kv, fresh, [*kv, 99], fresh, 15) == 20


def test_unread_counts_what_reading_apart_would_still_encode(engine):
    leads = [CONTEXT[:k] for k in range(len(CONTEXT))]
    prompt = engine_prompt(QUESTION, CONTEXT, engine, leads)
    need, whole = engine.unread(prompt)
    # One passage in a row: one pass over it, so exactly the context's tokens.
    assert need == whole > 0
    assert engine.warm(prompt) == whole
    assert engine.unread(prompt) == (0, whole)
    # A new sentence of another passage before them: only it is left to read.
    other = engine_prompt(QUESTION, ["The Rhine rises in the Alps.", *CONTEXT], engine,
                          [[], *leads])  # fmt: skip
    need, whole_other = engine.unread(other)
    assert need == whole_other - whole > 0
