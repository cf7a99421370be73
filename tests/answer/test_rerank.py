"""The model re-ranks what retrieval found, by where its attention goes, through the
default model (answer/rerank.py, llm/attention.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import cast

import pytest

from ragcli.answer.rerank import (
    CONTENT_FREE,
    END_LAYER_SHARE,
    FIRST_LAYER_SHARE,
    by_attention,
    layout,
)
from ragcli.config import load_settings
from ragcli.errors import ConfigError
from ragcli.index.pipeline import build_index
from ragcli.llm.base import Ranker
from ragcli.llm.factory import open_engine
from ragcli.rag import Rag
from tests.conftest import rag

# Eleven passages that repeat the question's words and do not answer it, and one that
# answers it in other words: retrieval ranks it last of twelve.
KERROW = {
    "visitors": "The lighthouse at Kerrow Point opens to visitors from May to September. "
    "Tickets for the lighthouse tour are sold at the gate of Kerrow Point car park.",
    "paint": "The lighthouse at Kerrow Point is painted in red and white bands. The Kerrow "
    "Point lighthouse was last repainted in 2009.",
    "keepers": "Three keepers lived at the Kerrow Point lighthouse until 1987. The "
    "lighthouse keepers kept a log of passing ships at Kerrow Point.",
    "lamp": "The lighthouse lamp at Kerrow Point flashes white every ten seconds. The light "
    "of the Kerrow Point lighthouse reaches 20 nautical miles.",
    "birds": "Puffins and razorbills nest on the cliffs of Kerrow Point below the lighthouse. "
    "Birdwatchers gather at the Kerrow Point lighthouse each June.",
    "museum": "The old oil store of the Kerrow Point lighthouse is now a museum. The museum "
    "of the lighthouse shows lenses and logbooks from Kerrow Point.",
    "storm": "In the storm of 1953 waves broke over the Kerrow Point lighthouse gallery. The "
    "lighthouse at Kerrow Point lost two windows.",
    "walk": "A coastal path of six kilometres leads from the village to the Kerrow Point "
    "lighthouse. Walkers reach the lighthouse at Kerrow Point in two hours.",
    "fog": "A fog horn was added to the Kerrow Point lighthouse in 1902. The fog signal of "
    "the lighthouse at Kerrow Point sounded twice a minute.",
    "origins": "The tower on the headland was the work of the engineer Maud Ellery. Her plans "
    "of 1871 set the lantern forty metres above high water.",
    "harbour": "The fishing harbour of Kerrow lies three kilometres east of the point. Boats "
    "from Kerrow land crab and lobster.",
    "village": "Kerrow village has a church, a school and two inns. The village of Kerrow "
    "grew around the harbour in the eighteenth century.",
}
QUESTION = "Who designed the lighthouse at Kerrow Point?"
MODEL = "qwen2.5-coder-1.5b"


@pytest.fixture(scope="module")
def kerrow(tmp_path_factory: pytest.TempPathFactory, embedder) -> Path:
    docs = tmp_path_factory.mktemp("kerrow")
    for name, text in KERROW.items():
        (docs / f"{name}.md").write_text(f"# {name.title()}\n\n{text}\n")
    index = docs.parent / f"{docs.name}-index"
    build_index([docs], load_settings({"index_dir": index}), embedder=embedder)
    return index


def _names(hits) -> list[str]:
    return [Path(h.chunk.path).stem for h in hits]


def test_re_ranking_off_keeps_the_retrievers_order_and_loads_no_model(kerrow, embedder):
    with Rag(load_settings({"index_dir": kerrow, "top_k": 12}), preload=False) as r:
        twelve = r.search(QUESTION)
        four = r.search(QUESTION, 4)
        assert r._asker is None  # a plain search needs no model
    assert _names(four.hits) == _names(twelve.hits)[:4]
    assert all(h.rerank_score is None for h in twelve.hits)
    assert four.rerank_ms == 0
    # Retrieval alone ranks the answer's passage past the four the model reads.
    assert _names(twelve.hits).index("origins") >= 5


def test_the_answer_retrieved_last_comes_into_the_top_four(kerrow):
    found = rag(
        "search", "--rerank", "--json", "--no-server", "-k", "4", "--index", str(kerrow),
        QUESTION, env={"RAG_MODEL": MODEL},
    )  # fmt: skip
    assert found.returncode == 0, found.stderr
    out = json.loads(found.stdout)
    results = out["results"]
    assert [Path(r["path"]).stem for r in results].count("origins") == 1
    assert [r["rank"] for r in results] == [1, 2, 3, 4]
    ranked = [r["rerank_score"] for r in results]
    assert ranked == sorted(ranked, reverse=True)
    assert all(r["score"] > 0 for r in results)  # the retriever's score is kept beside it
    assert out["timings"]["rerank_ms"] > 0
    assert out["timings"]["rerank_tokens"] > sum(len(t.split()) for t in KERROW.values())


def test_an_answer_from_a_passage_retrieval_ranked_last(kerrow, embedder):
    settings = {"index_dir": kerrow, "model": MODEL, "answer_cache": False}
    answers = {}
    for rerank in (False, True):
        with Rag(load_settings({**settings, "rerank": rerank}), embedder=embedder) as r:
            answers[rerank] = r.ask(QUESTION)
    assert not answers[False].answered  # the passage that says it is not read
    reranked = answers[True]
    assert "Maud Ellery" in reranked.answer
    assert reranked.timings.rerank_ms > 0
    assert "origins" in _names(reranked.sources)


def test_the_content_free_query_changes_the_order(kerrow):
    # The lamp's passage draws attention whatever is asked ("N/A" pays it more than any other,
    # half as much again as the next): the question alone ranks it above the birds' passage
    # (by about 15 %), and less what "N/A" pays each, below it (by about 20 %).
    with Rag(load_settings({"index_dir": kerrow, "top_k": 12}), preload=False) as r:
        hits = r.search(QUESTION).hits
    engine = open_engine(load_settings({"model": MODEL}))
    try:
        calibrated = _names(by_attention(QUESTION, hits, cast(Ranker, engine), 12).hits)
        head, body, between = layout(engine, [h.chunk.text for h in hits])
        attention, _ = cast(Ranker, engine).passage_attention(
            head, body, between, [QUESTION, CONTENT_FREE], END_LAYER_SHARE
        )
    finally:
        engine.close()
    band = attention[:, round(attention.shape[1] * FIRST_LAYER_SHARE / END_LAYER_SHARE) :]
    asked, content_free = band.sum(axis=1)
    names = _names(hits)
    assert names[int(content_free.argmax())] == "lamp"
    alone = [names[i] for i in sorted(range(len(hits)), key=lambda i: -asked[i])]
    assert alone.index("lamp") < alone.index("birds")
    assert calibrated.index("lamp") > calibrated.index("birds")


def test_no_candidates_is_refused():
    with pytest.raises(ConfigError, match="rerank_candidates"):
        load_settings({"rerank_candidates": 0})
