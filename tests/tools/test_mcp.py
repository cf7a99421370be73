"""`rag mcp` as an MCP client meets it: a real subprocess over stdio, the SDK's own client."""

from __future__ import annotations

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


async def _session(index: Path, *calls: tuple[str, dict]) -> tuple[list[str], list]:
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(
        command=str(RAG), args=["mcp", "--index", str(index)], env=dict(os.environ)
    )
    async with Client(params) as client:
        tools = sorted(t.name for t in (await client.list_tools()).tools)
        results = [await client.call_tool(name, args) for name, args in calls]
    return tools, results


def test_search_and_ask_over_stdio_carry_sources_and_line_ranges(corpus_index):
    question = "Which ship picked up the Apollo 11 crew after splashdown?"
    tools, (search, ask, empty) = anyio.run(
        _session,
        corpus_index,
        ("search", {"query": "Apollo 11 splashdown recovery ship", "top_k": 3}),
        ("ask", {"question": question}),
        ("ask", {"question": "   "}),
    )
    assert tools == ["ask", "search"]
    found = _result(search)
    assert len(found["results"]) == 3
    for r in found["results"]:
        assert r["path"].endswith(".md") and 1 <= r["start_line"] <= r["end_line"]
        assert r["text"] and isinstance(r["score"], float) and isinstance(r["similarity"], float)
    assert found["results"][0]["path"].endswith("space/apollo-11.md")
    answer = _result(ask)
    assert answer["question"] == question and answer["answer"]
    assert answer["sources"] and all("start_line" in s and "path" in s for s in answer["sources"])
    shown = {(s["path"], s["start_line"], s["end_line"]) for s in answer["sources"]}
    assert {(c["path"], c["start_line"], c["end_line"]) for c in answer["cited"]} <= shown
    assert answer["cited"] or not answer["answered"]
    assert empty.is_error and "empty" in json.dumps([c.text for c in empty.content])


def test_a_missing_index_fails_before_serving(tmp_path):
    from tests.conftest import rag

    out = rag("mcp", "--index", str(tmp_path / "nothing"), input="")
    assert out.returncode == 3 and out.stderr.startswith("rag: error:")
    assert len(out.stderr.strip().splitlines()) == 1
