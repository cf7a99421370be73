"""The model catalogue: names, verified files, and the default model end to end."""

import json
import os
from pathlib import Path

import pytest

from ragcli.errors import ModelError
from ragcli.models import CATALOG, DEFAULT_MODEL, generation_model

from .conftest import CORPORA, rag


def test_models_lists_the_catalogue_with_the_default_first():
    result = rag("models", "--json")
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["name"] for r in rows] == list(CATALOG)
    assert [r["name"] for r in rows if r["default"]] == [DEFAULT_MODEL]
    for r in rows:
        assert r["licence"] and r["prompt"] in ("chat", "completion")
        assert r["installed"] is True  # `make install` pulled them all
    assert rows[0]["sha256"] == CATALOG[DEFAULT_MODEL].sha256


def test_piped_models_list_prints_whole_values():
    """Piped, rich would fold the table to 80 columns (or COLUMNS) and cut names with "…"."""
    result = rag("models", env={"COLUMNS": "80"})
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "…" not in result.stdout and len(lines) == 1 + len(CATALOG)
    for line, model in zip(lines[1:], CATALOG.values(), strict=True):
        name = model.name + (" (default)" if model.name == DEFAULT_MODEL else "")
        assert line.startswith(name + " ") and model.licence in line and model.about in line


def test_a_file_that_does_not_check_out_is_removed_not_used(tmp_path):
    entry = CATALOG[DEFAULT_MODEL]
    target = tmp_path / "models" / entry.file
    target.parent.mkdir()
    target.write_bytes(b"GGUF" + b"\0" * 100)  # the right name, the wrong bytes
    with pytest.raises(ModelError, match=f"rag models pull {DEFAULT_MODEL}"):
        generation_model(None, tmp_path)
    assert not target.exists()


def test_a_truncated_bundled_model_is_rebuilt(tmp_path):
    good = generation_model("gemma-3-270m", tmp_path)
    with good.path.open("r+b") as fh:
        fh.truncate(1 << 20)
    os.utime(good.path, ns=(1, 1))  # a new stamp: the remembered digest no longer applies
    again = generation_model("gemma-3-270m", tmp_path)
    assert again.path.stat().st_size == CATALOG["gemma-3-270m"].size
    assert again.digest == good.digest


@pytest.mark.parametrize("command", ["ask", "pull"])
def test_unknown_model_is_one_line_exit_3(corpus_index, command):
    if command == "ask":
        args = ("ask", "--index", str(corpus_index), "--model", "no-such-model", "Who won?")
    else:
        args = ("models", "pull", "no-such-model")
    result = rag(*args)
    assert result.returncode == 3
    assert result.stderr.count("\n") == 1 and "no-such-model" in result.stderr


def test_the_default_model_answers_from_the_documents(tmp_path):
    """The 1.5B instruct model, through its own chat template, in a fresh process."""
    env = {"RAG_MODEL": ""}  # the tests' small model off: the real default
    assert rag("index", str(CORPORA), cwd=tmp_path).returncode == 0
    result = rag("ask", "--json", "Who won the 2023 Cricket World Cup?", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["model"] == CATALOG[DEFAULT_MODEL].file
    assert "Australia" in answer["answer"] and answer["cited"]
    outside = rag("ask", "--json", "Who painted the Mona Lisa?", cwd=tmp_path, env=env)
    assert outside.returncode == 1 and not json.loads(outside.stdout)["answered"]
    assert Path(tmp_path, ".rag").is_dir()
