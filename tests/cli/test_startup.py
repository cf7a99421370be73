"""What a fresh process loads: `rag --help` and `rag search` never pull in torch or the LLM."""

import json
import subprocess
import sys

from ..conftest import CORPORA

HEAVY = ("torch", "transformers", "sentence_transformers", "llama_cpp")

PROBE = f"""
import json, sys
from typer.testing import CliRunner
from ragcli.cli import app
result = CliRunner().invoke(app, sys.argv[1:])
loaded = sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r}))
print(json.dumps({{"exit": result.exit_code, "loaded": loaded}}))
"""


def _loaded(*args: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    return json.loads(out.stdout.splitlines()[-1])


def test_importing_the_cli_loads_nothing_heavy():
    code = f"import sys, ragcli.cli; print(sorted(set(m.split('.')[0] for m in sys.modules) & set({HEAVY!r})))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_help_loads_nothing_heavy():
    assert _loaded("--help") == {"exit": 0, "loaded": []}


def test_search_loads_neither_torch_nor_the_llm(corpus_index):
    result = _loaded("search", "--index", str(corpus_index), "world cup final")
    assert result == {"exit": 0, "loaded": []}
    assert CORPORA.is_dir()
