"""`rag serve` reads passages into the reading cache while no request waits: the passages
its questions found first, a passage at a time, and a request never waits for the rest."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ragcli import Rag
from ragcli.config import Settings, load_settings
from ragcli.index.pipeline import build_index
from ragcli.server.worker import IDLE_S, Service

PAGES = {
    "danube.md": "# The Danube\n\nThe Danube rises in the Black Forest of Germany. It flows "
    "east for about 2,850 kilometres. It empties into the Black Sea through a wide delta.\n",
    "rhine.md": "# The Rhine\n\nThe Rhine rises in the Swiss Alps. It forms part of the border "
    "between Germany and France. It reaches the North Sea in the Netherlands.\n",
    "loire.md": "# The Loire\n\nThe Loire is the longest river that flows only in France. It "
    "rises in the Massif Central. It meets the Atlantic Ocean at Saint-Nazaire.\n",
}


@pytest.fixture
def settings(tmp_path: Path, embedder) -> Settings:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in PAGES.items():
        (docs / name).write_text(text)
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "models").symlink_to(Settings().cache_dir / "models", target_is_directory=True)
    # Margin 0: every answer is kept as read apart, so its figures are the cache's.
    s = load_settings(
        {"index_dir": tmp_path / "idx", "cache_dir": cache, "reading_cache": True,
         "answer_cache": False, "reading_margin": 0.0, "warm_idle": True}
    )  # fmt: skip
    build_index([docs], s, embedder=embedder)
    return s


def test_warm_reads_the_passages_named_first_and_stops_when_told(settings: Settings):
    with Rag(settings) as rag:
        ids = [h.chunk.id for h in rag.search("Saint-Nazaire Atlantic", top_k=3).hits]
        seen: set[int] = set()
        report = rag.warm(first=[ids[-1]], seen=seen, stop=lambda: len(seen) >= 1)
        assert seen == {ids[-1]} and not report.complete and report.tokens_encoded > 0
        rest = rag.warm(seen=seen)
        assert rest.complete and rest.passages == len(PAGES) - 1 and seen == set(ids)


def test_an_idle_server_warms_and_the_next_new_question_reads_only_itself(settings: Settings):
    service = Service(settings)
    service.start()
    try:
        first = service.submit(service.ask("Where does the Rhine rise?")).future.result()
        assert first["timings"]["reading_tokens"] == 0  # before any idle time: read cold
        deadline = time.monotonic() + 180
        while not service.snapshot()["reading_cache_warmed"]["complete"]:
            assert time.monotonic() < deadline, service.snapshot()
            time.sleep(IDLE_S / 2)
        warmed = service.snapshot()["reading_cache_warmed"]
        assert warmed["passages"] == len(PAGES) and warmed["tokens"] > 0
        out = service.submit(service.ask("Where does the Loire meet the ocean?")).future.result()
        t = out["timings"]
        assert t["reading_tokens"] > 0 and t["lead_tokens"] == 0
        assert t["prefill_tokens"] < t["reading_tokens"]  # the question, not the passages
    finally:
        service.close()
