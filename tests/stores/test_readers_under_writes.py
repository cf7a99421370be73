"""Readers never fail while `rag index` changes the index, and never mix two commits.

While a writer adds, changes and deletes files (and sometimes rebuilds), three kinds of
reader search in a loop: fresh `rag search` processes, one long-lived `Rag` in this
process, and one `rag mcp` session. Every file holds one passage with a token naming
its version, and every search asks for more passages than the index holds, so each
result must be exactly the passages of one committed state of the folder.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import threading
import time
from pathlib import Path

import anyio
import pytest

from ragcli.config import load_settings
from ragcli.index.pipeline import build_index

from ..conftest import RAG

QUERY = "lighthouse ledger entry"
TOP_K = 40  # more than the folder ever holds: a result is a whole state


def _text(name: str, version: int) -> str:
    return f"# Ledger {name}\n\nThe lighthouse ledger entry {name}v{version} records ships.\n"


class Folder:
    """The documents, and every state of them a commit may have made visible."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.now: dict[str, str] = {}
        self.states: list[frozenset[tuple[str, str]]] = []
        self.rng = random.Random(5)
        self.serial = 0
        root.mkdir()
        for _ in range(4):
            self.add()
        self.record()

    def add(self) -> None:
        self.serial += 1
        self.write(f"f{self.serial}", 1)

    def write(self, name: str, version: int) -> None:
        (self.root / f"{name}.md").write_text(_text(name, version))
        self.now[str(self.root / f"{name}.md")] = f"{name}v{version}"

    def change(self) -> None:
        """Add, change or delete one file (never down to nothing)."""
        kind = self.rng.choice(["add", "change", "delete"] if len(self.now) > 2 else ["add"])
        if kind == "add" or len(self.now) > 9:
            if len(self.now) > 9:
                kind = "delete"
            else:
                return self.add()
        path = self.rng.choice(sorted(self.now))
        name = Path(path).stem
        if kind == "delete":
            Path(path).unlink()
            del self.now[path]
        else:
            self.write(name, int(self.now[path].rsplit("v", 1)[1]) + 1)

    def record(self) -> None:
        self.states.append(frozenset(self.now.items()))


def _seen(results: list[dict]) -> frozenset[tuple[str, str]]:
    """(path, version token) of each passage of one search result."""
    out = set()
    for r in results:
        token = r["text"].split("entry ", 1)[1].split()[0]
        out.add((r["path"], token))
    return frozenset(out)


def _stress(tmp_path: Path, embedder, seconds: float) -> None:
    folder = Folder(tmp_path / "docs")
    index = tmp_path / "index"
    build_index([folder.root], load_settings({"index_dir": index}), embedder=embedder)
    deadline = time.monotonic() + seconds
    failures: list[str] = []
    seen: list[tuple[str, frozenset]] = []
    lock = threading.Lock()

    def note(reader: str, results: list[dict]) -> None:
        with lock:
            seen.append((reader, _seen(results)))

    runs = 0

    def writer() -> None:
        nonlocal runs
        while time.monotonic() < deadline:
            runs += 1
            for _ in range(folder.rng.randint(1, 3)):
                folder.change()
            folder.record()
            rebuild = ["--rebuild"] if runs % 4 == 0 else []
            out = subprocess.run(
                [str(RAG), "index", str(folder.root), "--index", str(index), "-q", *rebuild],
                capture_output=True,
                text=True,
                timeout=300,
            )
            if out.returncode != 0:
                failures.append(f"writer: {out.stderr.strip()}")

    def fresh_searches() -> None:
        while time.monotonic() < deadline:
            out = subprocess.run(
                [str(RAG), "search", QUERY, "--index", str(index), "--no-server", "--json",
                 "-k", str(TOP_K)],
                capture_output=True, text=True, timeout=300,
            )  # fmt: skip
            if out.returncode != 0:
                failures.append(f"rag search exit {out.returncode}: {out.stderr.strip()}")
            else:
                note("rag search", json.loads(out.stdout)["results"])

    def long_lived() -> None:
        from ragcli import Rag

        with Rag.open(index, top_k=TOP_K, answer_cache=False) as rag:
            while time.monotonic() < deadline:
                try:
                    note("Rag", rag.search(QUERY).as_dict()["results"])
                except Exception as exc:
                    failures.append(f"Rag: {type(exc).__name__}: {exc}")
                time.sleep(0.05)

    def mcp_session() -> None:
        from mcp.client import Client
        from mcp.client.stdio import StdioServerParameters

        params = StdioServerParameters(
            command=str(RAG), args=["mcp", "--index", str(index)], env=dict(os.environ)
        )

        async def run() -> None:
            async with Client(params) as client:
                while time.monotonic() < deadline:
                    call = await client.call_tool("search", {"query": QUERY, "top_k": TOP_K})
                    if call.is_error:
                        failures.append(f"rag mcp: {call.content}")
                    else:
                        note("rag mcp", call.structured_content["results"])
                    await anyio.sleep(0.05)

        try:
            anyio.run(run)
        except Exception as exc:
            failures.append(f"rag mcp session: {type(exc).__name__}: {exc}")

    threads = [
        threading.Thread(target=t) for t in (writer, fresh_searches, long_lived, mcp_session)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    counts = {r: sum(1 for who, _ in seen if who == r) for r in ("rag search", "Rag", "rag mcp")}
    print(
        f"\n{runs} rag index runs ({runs // 4} rebuilds), reads: {counts}, failures: {len(failures)}"
    )
    assert failures == []
    states = set(folder.states)
    mixed = [(reader, sorted(s)) for reader, s in seen if s not in states]
    assert mixed == []
    readers = {reader for reader, _ in seen}
    assert readers == {"rag search", "Rag", "rag mcp"}
    # The readers did meet commits: they saw more than one state of the folder.
    assert len({s for _, s in seen}) > 2


def test_readers_under_writes(tmp_path, embedder):
    pytest.importorskip("mcp")
    _stress(tmp_path, embedder, seconds=25)


@pytest.mark.slow
def test_readers_under_writes_for_two_minutes(tmp_path, embedder):
    pytest.importorskip("mcp")
    _stress(tmp_path, embedder, seconds=150)
