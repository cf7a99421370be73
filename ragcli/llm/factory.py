"""The one way to get an engine: the model the settings name, here or on a server."""

from __future__ import annotations

from ..config import Settings
from ..models import GenerationModel, generation_model
from .base import Engine
from .cpu_claims import FOLDER as CLAIMS


def open_engine(settings: Settings, model: GenerationModel | None = None) -> Engine:
    """A loaded engine: llama.cpp on this machine, or the server at ``llm_url``.

    ``model`` is the local model file when the caller resolved it already (the answer
    cache keys on its digest). Copying answers needs the vocabulary; it is read on a
    thread so that it overlaps the first prompt.
    """
    s = settings
    if s.llm_url:  # a server has the model: nothing of llama.cpp is loaded here
        from .remote import RemoteEngine

        return RemoteEngine(s.llm_url)
    from .llama import LlamaEngine

    cache = reading = None
    if s.use_cache:
        from .kv_cache import PrefixCache

        cache = PrefixCache(s.cache_dir / "prefix", s.cache_max_bytes)
        if s.reading_cache:
            from .reading_cache import ReadingCache

            reading = ReadingCache(s.cache_dir / "reading", s.reading_cache_max_bytes)
    engine = LlamaEngine(
        model or generation_model(s.model, s.cache_dir),
        s.n_ctx,
        s.n_batch,
        s.threads,
        cache=cache,
        repack=s.repack_weights,
        adaptive_threads=s.adaptive_threads,
        reading=reading,
        kv_type=s.kv_type,
        claims=s.cache_dir / CLAIMS,
    )
    if s.copy_answers:
        engine.start_vocabulary()
    return engine
