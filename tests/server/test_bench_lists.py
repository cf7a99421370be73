"""`rag bench serve`'s client lists, the mix the load measurement promises, and how its
replies are judged against the answers asked alone."""

from __future__ import annotations

from ragcli.bench.served_vs_fresh import _load_report, client_lists, reworded


def test_each_client_gets_its_own_new_questions_and_the_shared_kinds():
    answerable = [f"Question {i}?" for i in range(12)]
    unanswerable = ["Nobody knows this?", "Nor this?"]
    lists = client_lists(answerable, unanswerable, clients=4, per_client=25)
    assert [len(items) for items in lists] == [25] * 4
    new = [[q for kind, q in items if kind == "new"] for items in lists]
    assert all(len(n) == 3 for n in new)
    assert not set(new[0]) & set(new[1])  # new means new to the whole run
    for items in lists:
        kinds = {kind for kind, _ in items}
        assert kinds == {"new", "reworded", "unanswerable", "repeated"}
        for kind, q in items:
            if kind == "reworded":
                assert q.startswith("Tell me, question ")
            if kind == "repeated":
                assert q in answerable
    assert lists == client_lists(answerable, unanswerable, clients=4, per_client=25)
    assert reworded("Who won?") == "Tell me, who won?"


def _reply(answer: str, source: str = "none", cached: str | None = None) -> dict:
    return {
        "answer": answer,
        "answered": answer != "I don't know",
        "timings": {"cache_source": source},
        "cached_question": cached,
    }


def test_replies_are_judged_against_the_answers_asked_alone():
    alone = {
        "Who won?": _reply("Australia"),
        "Tell me, who won?": _reply("Australia won"),  # alone, the wording changes the answer
        "Where?": _reply("Ahmedabad"),
        "Why?": _reply("I don't know"),
    }
    records = [
        {
            "kind": "new",
            "question": "Who won?",
            "ms": 10.0,
            "out": _reply("Australia", "live"),
            "error": None,
        },
        # the cache served the other wording's answer, which that wording gets alone: right
        {
            "kind": "reworded",
            "question": "Tell me, who won?",
            "ms": 5.0,
            "out": _reply("Australia", "answer", "Who won?"),
            "error": None,
        },
        {
            "kind": "new",
            "question": "Where?",
            "ms": 20.0,
            "out": _reply("Mumbai"),
            "error": None,
        },  # wrong
        # a cached answer that matches neither is wrong too
        {
            "kind": "unanswerable",
            "question": "Why?",
            "ms": 5.0,
            "out": _reply("Because", "answer", "Who won?"),
            "error": None,
        },
        {
            "kind": "unanswerable",
            "question": "Why?",
            "ms": 1.0,
            "out": None,
            "error": "queue full",
        },  # lost
    ]
    report = _load_report(records, alone, clients=1, per_client=5, wall_s=2.0)
    assert (report.requests, report.ok, report.lost) == (5, 4, 1)
    assert (report.wrong, report.from_answer_cache) == (2, 1)
    assert [m["question"] for m in report.mismatches] == ["Where?", "Why?"]
    assert report.cache_sources == {"live": 1, "answer": 2, "none": 1}
    assert report.kinds == {"new": 2, "reworded": 1, "unanswerable": 2}
