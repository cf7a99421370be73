"""The `rag` command end to end, in new processes, with the real models."""

import json
import re
from collections.abc import Iterator

import pytest
import typer
from rich.text import Text
from typer._click import core as click

from ragcli import __version__
from ragcli.cli import app

from ..conftest import CORPORA, rag

CRICKET = "Who won the 2023 Cricket World Cup?"
TIMING_KEYS = {
    "prompt_tokens", "cached_tokens", "prefill_tokens", "prefill_ms", "prefill_tok_s",
    "ttft_ms", "completion_tokens", "decode_tok_s", "total_ms",
}  # fmt: skip


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A folder whose .rag index holds the demo corpus, built by `rag index`."""
    d = tmp_path_factory.mktemp("work")
    result = rag("index", str(CORPORA), cwd=d)
    assert result.returncode == 0, result.stderr
    assert "6 added, 0 updated, 0 removed, 0 unchanged" in result.stdout
    assert result.stderr == ""  # piped: no progress bar, no library noise
    return d


def test_ask_answers_the_cricket_question_with_its_source(workdir):
    result = rag("ask", CRICKET, cwd=workdir)
    assert result.returncode == 0, result.stderr
    first, *rest = result.stdout.splitlines()
    assert "Australia" in first
    assert any("corpora/cricket/cricket-world-cup-2023.md:" in line for line in rest)
    assert "prefill" in result.stderr and "first token" in result.stderr


def test_ask_json_has_the_documented_keys(workdir):
    result = rag("ask", "--json", "--no-answer-cache", CRICKET, cwd=workdir)  # the model's run
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert {"question", "answer", "answered", "sources", "timings", "model"} <= out.keys()
    assert {"cache_similarity", "cached_question"} <= out.keys()
    assert out["answered"] is True and "Australia" in out["answer"]
    assert out["timings"].keys() >= TIMING_KEYS
    assert out["timings"]["prompt_tokens"] > 100
    src = out["sources"][0]
    assert {"path", "start_line", "end_line", "score", "text"} <= src.keys()
    assert src["start_line"] <= src["end_line"]


def test_question_outside_the_documents_exits_1(workdir):
    result = rag("ask", "What is the capital of France?", cwd=workdir)
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout.startswith("I don't know")


def test_batch_from_stdin_gives_one_json_line_per_question(workdir):
    questions = f"{CRICKET}\n\nWhat is the capital of France?\n"
    result = rag("ask", "-", input=questions, cwd=workdir)
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [x["question"] for x in lines] == [CRICKET, "What is the capital of France?"]
    assert [x["answered"] for x in lines] == [True, False]
    assert result.returncode == 1  # not every question was answered


def test_search_json(workdir):
    result = rag("search", "--json", "-k", "2", "Apollo 11 landing site", cwd=workdir)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert len(out["results"]) == 2
    assert out["results"][0]["path"].endswith("apollo-11.md")


def test_missing_index_is_exit_3_with_one_line(tmp_path):
    result = rag("ask", CRICKET, cwd=tmp_path)
    assert result.returncode == 3
    assert result.stderr.count("\n") == 1 and "rag index" in result.stderr
    assert "Traceback" not in result.stderr


def test_bad_input_is_exit_2_with_one_line(tmp_path):
    result = rag("index", str(tmp_path / "no-such-folder"), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith("rag: error:") and result.stderr.count("\n") == 1
    (tmp_path / "empty").mkdir()
    result = rag("index", "empty", cwd=tmp_path)
    assert result.returncode == 2 and "no documents" in result.stderr
    result = rag("ask", "--top-k", "0", CRICKET, cwd=tmp_path)
    assert result.returncode == 2


def test_bad_config_is_exit_2(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text("top_kk = 3\n")
    result = rag("search", "x", cwd=tmp_path, env={"RAG_CONFIG": str(cfg)})
    assert result.returncode == 2 and "unknown setting 'top_kk'" in result.stderr


def test_help_and_version():
    result = rag("--help", env={"COLUMNS": "200"})
    assert result.returncode == 0, result.stderr
    assert "Ask questions about your documents, answered by a local model" in result.stdout
    from ragcli.errors import ExitCode

    for code in ExitCode:  # every documented exit code is named in the help
        assert f" {int(code)} " in result.stdout.split("Exit codes:", 1)[1].split("╭")[0]
    listed = re.findall(r"^│ (\w+) ", result.stdout, re.MULTILINE)
    assert listed == [
        "index", "search", "ask", "eval", "chat", "serve", "mcp", "cache", "models", "bench"
    ]  # fmt: skip
    version = rag("--version")
    assert version.returncode == 0 and version.stdout == f"rag {__version__}\n"


@pytest.mark.parametrize(
    ("command", "extras"),
    [("serve", ["ragcli[milvus]"]), ("index", ["ragcli[milvus]", "ragcli[ray]"])],
)
def test_help_prints_brackets_as_written(command, extras):
    result = rag(command, "--help", env={"COLUMNS": "200"})
    assert result.returncode == 0, result.stderr
    for extra in extras:
        assert extra in result.stdout


def _help_texts(command: click.Command, path: str = "rag") -> Iterator[tuple[str, str]]:
    if command.help:
        yield path, command.help
    for param in command.params:
        if getattr(param, "help", None):
            yield f"{path} {param.name}", param.help
    for name, sub in getattr(command, "commands", {}).items():
        yield from _help_texts(sub, f"{path} {name}")


def test_no_help_text_loses_text_to_rich_markup():
    """Typer renders help as rich markup: what it prints must be the text as written."""
    for where, text in _help_texts(typer.main.get_command(app)):
        assert Text.from_markup(text).plain == text.replace("\\[", "["), where


def test_chat_keeps_the_model_and_its_cache_between_questions(workdir):
    questions = f"{CRICKET}\nWhen did Apollo 11 launch?\n"
    result = rag("chat", "--no-answer-cache", input=questions, cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Australia")
    timing_lines = [line for line in result.stderr.splitlines() if line.startswith("prompt ")]
    assert len(timing_lines) == 2
    # The second question reuses the instructions and examples: from the live KV cache, or,
    # when the first prompt reached past Gemma's 512-token sliding window (so the live cache
    # cannot be cut back to the shared prefix), from the state saved on disk.
    cached = re.search(r"\((\d+) cached, (live|disk)\)", timing_lines[1])
    assert cached and int(cached.group(1)) > 0, timing_lines[1]
