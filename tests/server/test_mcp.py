"""`rag mcp` as an MCP client meets it: a real subprocess over stdio, the SDK's own client."""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

import anyio
import pytest

from tests.conftest import RAG

pytest.importorskip("mcp")


def _result(call) -> dict:
    """A tool call's JSON object, from its structured content (or its text)."""
    assert not call.is_error, call.content
    if call.structured_content is not None:
        return call.structured_content
    return json.loads(call.content[0].text)


def _params(index: Path, env: dict | None = None):
    from mcp.client.stdio import StdioServerParameters

    return StdioServerParameters(
        command=str(RAG), args=["mcp", "--index", str(index)], env={**os.environ, **(env or {})}
    )


async def _session(index: Path, *calls: tuple[str, dict], env: dict | None = None):
    from mcp.client import Client

    async with Client(_params(index, env)) as client:
        tools = sorted(t.name for t in (await client.list_tools()).tools)
        results = [await client.call_tool(name, args) for name, args in calls]
    return tools, results


def test_search_and_ask_over_stdio_give_the_commands_json(corpus_index):
    """The default model answers from the Apollo page; the tools return what `--json` does."""
    question = "Which ship picked up the Apollo 11 crew after splashdown?"
    tools, (search, ask, empty) = anyio.run(
        functools.partial(
            _session,
            corpus_index,
            ("search", {"query": "Apollo 11 splashdown recovery ship", "top_k": 3}),
            ("ask", {"question": question}),
            ("ask", {"question": "   "}),
            env={"RAG_MODEL": ""},  # the default model: its answer is the one users get
        )
    )
    assert tools == ["ask", "search"]
    found = _result(search)
    assert [r["rank"] for r in found["results"]] == [1, 2, 3]
    for r in found["results"]:
        assert r["path"].endswith(".md") and 1 <= r["start_line"] <= r["end_line"]
        assert r["citation"].startswith(f"{r['path']}:{r['start_line']}-{r['end_line']}")
        assert r["text"] and isinstance(r["score"], float) and isinstance(r["similarity"], float)
    assert found["results"][0]["path"].endswith("space/apollo-11.md")
    assert set(found) == {"query", "results", "timings"}
    answer = _result(ask)
    assert answer["question"] == question
    assert answer["answered"] and answer["reason"] == "answered"
    assert "Hornet" in answer["answer"]
    by_rank = {s["rank"]: s for s in answer["sources"]}
    assert answer["cited"] and all(
        by_rank[r]["path"].endswith("apollo-11.md") for r in answer["cited"]
    )
    assert answer["evidence"] and all("Hornet" in e["text"] for e in answer["evidence"])
    assert empty.is_error and "empty" in json.dumps([c.text for c in empty.content])


def test_a_session_follows_commits_of_rag_index(tmp_path, embedder):
    """An agent keeps `rag mcp` open while the user adds and removes documents."""
    from ragcli.config import load_settings
    from ragcli.index.pipeline import build_index

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "bees.md").write_text("# Bees\n\nHoney bees dance to show where flowers are.\n")
    settings = load_settings({"index_dir": tmp_path / "index"})
    build_index([docs], settings, embedder=embedder)
    query = {"query": "Quillmoor lighthouse keeper logbook", "top_k": 2}

    async def session():
        from mcp.client import Client

        async with Client(_params(tmp_path / "index")) as client:
            before = _result(await client.call_tool("search", query))
            (docs / "lighthouse.md").write_text(
                "# Quillmoor\n\nThe Quillmoor lighthouse keeper writes a logbook every night.\n"
            )
            build_index([docs], settings, embedder=embedder)
            added = _result(await client.call_tool("search", query))
            (docs / "lighthouse.md").unlink()
            build_index([docs], settings, embedder=embedder)
            removed = _result(await client.call_tool("search", query))
        return before, added, removed

    before, added, removed = anyio.run(session)
    assert [r["path"] for r in before["results"]] == [str(docs / "bees.md")]
    assert added["results"][0]["path"] == str(docs / "lighthouse.md")
    assert [r["path"] for r in removed["results"]] == [str(docs / "bees.md")]


def test_a_missing_index_fails_before_serving(tmp_path):
    from tests.conftest import rag

    out = rag("mcp", "--index", str(tmp_path / "nothing"), input="")
    assert out.returncode == 3 and out.stderr.startswith("rag: error:")
    assert len(out.stderr.strip().splitlines()) == 1
