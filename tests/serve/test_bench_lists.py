"""`rag bench serve`'s client lists: the mix the load measurement promises."""

from __future__ import annotations

from ragcli.bench.serve import client_lists, reworded


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
