"""The answerability signals that need no model: which words of a question are rare in the
index (BM25 lookups in a real index), and whether the answer's sentence names them."""

from __future__ import annotations

import pytest

from ragcli.answer.answerable import subject
from ragcli.answer.question import Question
from ragcli.answer.retrieval import Retriever
from ragcli.config import load_settings
from ragcli.index.pipeline import build_index

PEOPLE = ["Ann Lee", "Bo Park", "Cy Ode", "Di Vance", "Ed Moss", "Flo Tain"]


@pytest.fixture(scope="module")
def retriever(tmp_path_factory, embedder):
    docs = tmp_path_factory.mktemp("people")
    for n, name in enumerate(PEOPLE * 4):
        town = f"Town{n}"
        (docs / f"page-{n}.md").write_text(
            f"# {name} of {town}\n\n{name} lives in {town}. She keeps a garden and "
            f"she is married to Partner{n}.\n"
        )
    index = tmp_path_factory.mktemp("index") / "index"
    settings = load_settings({"index_dir": index})
    build_index([docs], settings, embedder=embedder)
    with Retriever(settings) as r:
        r._embedder = embedder
        yield r


def test_words_few_passages_hold_are_rare(retriever):
    # 24 pages: every one says "garden" and "married", four name each person, one each town.
    assert retriever.rare_words(["garden", "married", "town7", "partner3", "woman"]) == [
        "town7",
        "partner3",
        "woman",
    ]
    assert retriever.rare_words(["lee"]) == []  # on 4 of 24 pages: more than a tenth


def test_an_answer_copied_from_a_neighbours_page_does_not_name_the_subject(retriever):
    question = Question.parse("Who is the woman from Town7 married to?")
    own = [("Bo Park of Town7", "She is married to Partner7.")]
    neighbour = [("Cy Ode of Town8", "She is married to Partner8.")]
    # "woman" is on no page: rare, and in no answer's sentence.
    assert subject(question, own, retriever.rare_words)["subject_words"] == 0.5
    assert subject(question, neighbour, retriever.rare_words)["subject_words"] == 0.0
    assert subject(question, neighbour, retriever.rare_words)["subject_names"] == 0.0
    # Nothing copied: nothing to judge.
    assert subject(question, [], retriever.rare_words)["subject_words"] == 1.0
