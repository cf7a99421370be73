"""The answering options are declared once: the Typer commands and the served client's
parser (cli/via_server.py) take the same options, with the same meaning."""

from __future__ import annotations

import pytest
import typer

from ragcli.cli import app, flags, via_server


def _command(name: str):
    return typer.main.get_command(app).commands[name]  # type: ignore[attr-defined]


def _options(name: str) -> dict[str, bool]:
    """Each spelling of each option of the command -> whether it is an on/off switch."""
    out = {}
    for param in _command(name).params:
        if param.param_type_name == "option" and "--help" not in param.opts:
            for spelling in param.opts:
                out[spelling] = param.is_flag
    return out


@pytest.mark.parametrize("name", sorted(flags.COMMANDS))
def test_the_served_client_knows_exactly_the_commands_options(name):
    table = {n: f.switch for f in flags.COMMANDS[name] for n in f.names}
    assert _options(name) == table


@pytest.mark.parametrize("name", ["ask", "chat", "eval", "mcp", "serve"])
def test_every_answering_command_takes_the_answering_options(name):
    options = _options(name)
    for flag in flags.ANSWERING:
        for spelling in flag.names:
            assert options[spelling] == flag.switch, (name, spelling)


def test_the_served_client_reads_them_as_the_command_does():
    argv = ["ask", "--index=/tmp/x", "-k", "3", "--no-answer-cache", "--json", "Why?"]
    assert via_server.parse(argv) == (
        "ask",
        "Why?",
        True,
        {"index_dir": "/tmp/x", "top_k": 3, "answer_cache": False},
    )
    assert via_server.parse(["search", "--retriever", "bm25", "bees"]) == (
        "search",
        "bees",
        False,
        {"retriever": "bm25"},
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["ask", "--no-server", "Why?"],  # work here: not the server's
        ["ask", "--profile", "Why?"],  # measure this process
        ["ask", "-"],  # a batch on stdin
        ["ask", "-k", "0", "Why?"],  # a bad value: the full command says why
        ["search", "--model", "m", "bees"],  # not an option of search
        ["index", "docs"],  # not a served command
        ["ask", "Why?", "Because?"],
    ],
)
def test_the_served_client_leaves_the_rest_to_the_full_command(argv):
    assert via_server.parse(argv) is None
