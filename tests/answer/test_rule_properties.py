"""The prompt builder and the grounding rule over arbitrary questions, passages and
model output (Hypothesis): nothing crashes, and "I don't know" is never part of an
answer that is kept."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from ragcli.answer.asker import Asker
from ragcli.answer.language import WORDS as REPLIES
from ragcli.answer.language import detect, say
from ragcli.answer.prompt import IDK, completion_prompt
from ragcli.answer.retrieval import SearchResult
from ragcli.config import load_settings
from ragcli.llm.base import Generation, Timings
from ragcli.records import Hit, StoredChunk

WORDS = st.sampled_from(
    ["Paris", "France", "capital", "the", "is", "of", "1889", "I", "don't", "know", "IDK",
     "i do not know", "Unknown", "[1]", ".", "\n", "\n\n", "  ", "Eiffel", "tower", "twenty"]
)  # fmt: skip
PHRASE = st.lists(st.one_of(WORDS, st.text(max_size=12)), max_size=14).map(" ".join)
PASSAGES = st.lists(PHRASE, min_size=1, max_size=4)


@dataclass
class _Engine:
    """Says whatever the test wants the model to say."""

    text: str = ""
    model: SimpleNamespace = field(default_factory=lambda: SimpleNamespace(name="fake.gguf"))
    chat_template: str | None = None
    bos: str = ""
    eos: str = ""
    can_constrain: bool = False  # free text: the rule under test judges it afterwards

    def generate(
        self, prompt, max_tokens, on_text=None, use_cache=True, constraint=None
    ) -> Generation:
        assert constraint is None
        assert prompt.text.endswith(prompt.segments[2])
        return Generation(self.text, Timings(prompt_tokens=1))

    def close(self) -> None:
        pass


class _Retriever:
    """Returns the test's passages as hits, with the real embedder for the focus step."""

    def __init__(self, embedder) -> None:
        self.embedder = embedder
        self.hits: list[Hit] = []

    def search(self, question: str, k: int) -> SearchResult:
        return SearchResult(question, self.hits[:k], embed_ms=0.0, search_ms=0.0)

    def unknown_names(self, question: str) -> list[str]:
        return []

    def close(self) -> None:
        pass


@pytest.fixture(scope="module")
def asker(embedder):
    engine = _Engine()
    # min_score below any cosine: the model always runs, so the rule always decides.
    # No answer cache: every case must reach the rule, not an earlier case's answer.
    settings = load_settings({"min_score": -1.0, "use_cache": False, "answer_cache": False})
    a = Asker(settings, retriever=_Retriever(embedder), engine=engine)  # the engine seam
    yield a, engine
    a.close()


def _hits(passages: list[str]) -> list[Hit]:
    return [
        Hit(StoredChunk("/d.txt", i, 1, 1, text, 1, id=i), 1.0, i + 1, 1.0)
        for i, text in enumerate(passages)
    ]


@given(question=PHRASE, passages=PASSAGES, said=PHRASE)
@example(question="LE", passages=[""], said="")
def test_a_kept_answer_never_holds_the_abstention(asker, question, passages, said):
    a, engine = asker
    a.retriever.hits = _hits(passages)
    engine.text = said
    answer = a.ask(question)
    if answer.answered:
        for idk in (w["idk"] for w in REPLIES.values()):
            assert idk.lower() not in answer.answer.lower(), answer
        assert answer.answer.strip()
    else:
        # In the question's language: "LE" reads as French.
        assert answer.answer == say(IDK, detect(question))
    assert set(answer.cited) <= {h.rank for h in answer.sources}


@given(question=st.text(), context=st.lists(st.text(), max_size=5))
def test_the_completion_prompt_ends_with_the_question(question, context):
    prompt = completion_prompt(question, context)
    assert prompt.text == "".join(prompt.segments)
    assert " ".join(question.split()) in prompt.segments[2]
