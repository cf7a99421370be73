"""Weight repacking is a load-time layout choice: it must be what the settings ask, and
the model must answer the same either way."""

from __future__ import annotations

from ragcli.llm.llama import LlamaEngine
from ragcli.models import generation_model

from .test_kv_cache import PASSAGES, QUESTIONS, _prompt


def test_repack_setting_reaches_llama_cpp_and_answers_hold(tmp_path):
    model = generation_model("gemma-3-270m", tmp_path)
    answers = {}
    for repack in (False, True):
        engine = LlamaEngine(model, n_ctx=2048, n_batch=256, repack=repack)
        try:
            assert engine.llm.model_params.use_extra_bufts is repack
            answers[repack] = [
                engine.generate(_prompt(engine, q, PASSAGES), 24, use_cache=False).text.strip()
                for q in QUESTIONS
            ]
        finally:
            engine.close()
    assert answers[False] == answers[True]
    assert "1969" in answers[False][0]
