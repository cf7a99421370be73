"""A question that names a page is answered from all of that page, and only from it."""

from __future__ import annotations

import dataclasses

import pytest

from ragcli.answer.asker import Asker
from ragcli.answer.question import Question
from ragcli.answer.retrieval import Retriever
from ragcli.config import load_settings
from ragcli.index.pipeline import build_index

RHEA = """# Rhea Sand

Rhea Sand was born in Olmby in 1961. She makes sails in a loft by the harbour and
sings in the town choir on Thursdays.

## Friends

Her closest friends are Oda Lind and Per Holm. They sail together every summer.

## Family

She is married to Karl Ness, a lock keeper. They live above the sail loft.
"""

ODA = """# Oda Lind

Oda Lind keeps the lighthouse at Olmby. She is married to Jon Lind, the harbour master.
"""

PER = """# Per Holm

Per Holm mends nets at Olmby. He is married to Mia Holm, who bakes for the whole quay.
"""


@pytest.fixture(scope="module")
def settings(tmp_path_factory, embedder):
    docs = tmp_path_factory.mktemp("people")
    for name, text in (("rhea-sand.md", RHEA), ("oda-lind.md", ODA), ("per-holm.md", PER)):
        (docs / name).write_text(text)
    index = tmp_path_factory.mktemp("index") / "index"
    settings = load_settings(
        {
            "index_dir": index,
            "model": "qwen2.5-coder-1.5b",
            "answer_cache": False,
            "chunk_tokens": 40,
            "chunk_overlap": 0,
        }
    )
    build_index([docs], settings, embedder=embedder)
    return settings


def test_the_rest_of_a_page_comes_after_the_hits_in_order(settings, embedder):
    with Retriever(settings, embedder=embedder) as r:
        found = r.search("When was Rhea Sand born?", k=1)
        hits = found.hits
        assert hits[0].chunk.path.endswith("rhea-sand.md") and hits[0].chunk.ordinal == 0
        page = {hits[0].chunk.path: "rhea sand"}
        rest = r.rest_of_pages(hits, page, found.vector)
        # Without the query vector, each passage takes its page's best similarity.
        unscored = r.rest_of_pages(hits, page)
    assert [h.chunk.ordinal for h in rest] == list(range(1, len(rest) + 1))
    assert len(rest) >= 2 and "Karl Ness" in rest[-1].chunk.text
    assert [h.rank for h in rest] == list(range(2, len(rest) + 2))
    own = embedder.embed([h.chunk.text for h in rest]) @ found.vector
    assert [h.similarity for h in rest] == pytest.approx(list(own), abs=0.02)
    assert all(h.similarity == hits[0].similarity for h in unscored)


def test_a_spouse_comes_from_the_page_asked_about(settings, embedder):
    # One passage retrieved: the top of Rhea's page. Her marriage is in its last passage,
    # less like the question than the other people's "married to" sentences.
    settings = dataclasses.replace(settings, top_k=1, context_passages=1)
    with Asker(settings, preload=False) as a:
        a.retriever._embedder = embedder
        answer = a.ask("Who is Rhea Sand married to?")
    assert answer.answer == "Karl Ness", (answer.answer, answer.signals)
    assert [e["text"] for e in answer.evidence] == ["She is married to Karl Ness, a lock keeper."]
    assert {h.chunk.path.rsplit("/", 1)[-1] for h in answer.sources} == {"rhea-sand.md"}


def test_a_name_no_passage_holds_is_not_answered(settings, embedder):
    with Retriever(settings, embedder=embedder) as r:
        assert r.unknown_names(Question.parse("Which sails does Rhea Sand send to Hamburg?")) == [
            "hamburg"
        ]
        assert r.unknown_names(Question.parse("Where does Rhea Sand sing?")) == []
        # The first word and names of two letters are not taken for names.
        assert r.unknown_names(Question.parse("Hamburg: where does Rhea Sand sing on TV?")) == []
        assert r.unknown_names(Question.parse("Does Rhea Sand sing For Hamburg?")) == ["hamburg"]
    with Asker(settings, preload=False) as a:
        a.retriever._embedder = embedder
        answer = a.ask("Which sails does Rhea Sand send to Hamburg?")
        assert (answer.answer, answer.reason) == ("I don't know", "no_relevant_passages")
        assert not a.engine_loaded  # decided before the model
