"""`rag bench reading`: three engines side by side, then a server; cold answers are whole
answers."""

from __future__ import annotations

from ragcli.answer.evaluation import load_questions
from ragcli.bench.first_token import MODES, SERVED, measure
from ragcli.config import load_settings
from tests.conftest import CORPORA


def test_warm_reads_only_the_question_and_cold_reads_whole(corpus_index):
    items = load_questions(CORPORA / "questions.jsonl")[:2]
    # Margin 0: answers kept as read apart, so that "warm" is the reading cache's figure.
    settings = load_settings({"index_dir": corpus_index, "reading_margin": 0.0})
    report = measure(settings, items, served=True)
    assert report.rereads("warm") == report.rereads(SERVED) == 0
    assert len(report.rows) == 1  # the first question only starts the engines
    assert report.cold_differs == 0
    for row in report.rows:
        assert set(row.ttft_ms) == {*MODES, SERVED} and row.answers[SERVED] == row.answers["warm"]
        # Served over the warm folder: only the question is read there too.
        assert row.read_tokens[SERVED] == row.read_tokens["warm"]
        # Warm: the head is live and every sentence comes from the cache.
        assert row.read_tokens["warm"] < row.read_tokens["whole"] / 3
        # Cold: read whole (each engine's live prefix from the question before may reach a
        # few tokens into the context), then every sentence read apart and kept.
        assert abs(row.read_tokens["cold"] - row.read_tokens["whole"]) <= 8
        assert row.keep_ms > 0
    assert report.reading_files > 0 and report.reading_bytes > 0
