"""The work a running `rag serve` of the index can take: `rag ask QUESTION` and `rag search
QUERY` answered before the CLI framework is imported, and the client the full commands
hand their work to.

Typer, rich and numpy together take about 200 ms to import, more than a served answer
takes, so the entry point first tries this module: it understands the common options of
the two commands, finds the server of the index, and prints exactly what the command
would print, with the same exit codes. Anything else (another command, an option it
does not know, a bad value, no server, other settings) makes it decline by returning
None, and the full command runs. Standard library only.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

from ..errors import ExitCode, RagError
from .flags import COMMANDS, NO_SERVER, PROFILE, Flag, overrides

if TYPE_CHECKING:
    from ..config import Settings

# The options the served path leaves to the full command: working here, and measuring it.
_DECLINED = {NO_SERVER.param, PROFILE.param}


def _spellings(flags: tuple[Flag, ...]) -> dict[str, Flag]:
    return {name: f for f in flags for name in f.names}


def parse(argv: list[str]) -> tuple[str, str, bool, dict[str, Any]] | None:
    """(command, question, json, setting overrides), or None for what this does not handle.

    The options are those of the Typer command (:data:`ragcli.cli.flags.COMMANDS`)."""
    if not argv or argv[0] not in COMMANDS:
        return None
    command, rest = argv[0], argv[1:]
    flags = COMMANDS[command]
    spelled = _spellings(flags)
    values: dict[str, Any] = {}
    positional: list[str] = []
    i = 0
    while i < len(rest):
        arg = rest[i]
        name, eq, inline = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        flag = spelled.get(name)
        if flag is not None and flag.switch and not eq:
            if flag.param in _DECLINED:
                return None
            values[flag.param] = True
        elif flag is not None and not flag.switch:
            if eq:
                value = inline
            elif i + 1 < len(rest):
                i += 1
                value = rest[i]
            else:
                return None
            if flag.kind == "int":
                if not value.isdigit() or int(value) < (flag.minimum or 0):
                    return None  # the full command reports the bad value
                values[flag.param] = int(value)
            else:
                values[flag.param] = value
        elif arg.startswith("-"):
            return None  # an option this does not know, `--`, or a batch from stdin
        else:
            positional.append(arg)
        i += 1
    if len(positional) != 1:
        return None
    return command, positional[0], bool(values.get("json_out")), overrides(flags, values)


def through_server(argv: list[str]) -> int | None:
    """The exit code after a server did the work, or None to run the full command."""
    parsed = parse(argv)
    if parsed is None:
        return None
    command, text, json_out, overrides = parsed
    from ..config import load_settings
    from ..server.client import NoServer, connect

    try:
        settings = load_settings(overrides)
        if settings.debug:
            return None  # tracebacks and native logs need the full command
        client = connect(settings, purpose=command)
    except NoServer:
        return None  # the full command says why, when there is something to say
    except RagError:
        return None  # a settings error: the full command reports it as it always does
    try:
        with client:
            if command == "ask":
                return _ask(client, text, json_out)
            return _search(client, text, json_out, settings.top_k, settings.retriever)
    except RagError as exc:
        return _fail(str(exc), exc.exit_code)
    except KeyboardInterrupt:
        return _fail("interrupted", ExitCode.INTERRUPTED)
    except BrokenPipeError:  # `rag ... | head`: nobody reads on
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return ExitCode.BROKEN_PIPE


def served(s: Settings, no_server: bool, purpose: str = "ask"):
    """A client of the `rag serve` that serves this index with these settings, or None
    (none runs, ``--no-server``, or it has other settings: then a note says so)."""
    if no_server:
        return None
    from ..server.client import NoServer, connect

    try:
        return connect(s, purpose=purpose)
    except NoServer as exc:
        if exc.note:
            import logging  # the full commands only: the served path stays without it

            from ..log import LOGGER

            logging.getLogger(LOGGER).info(exc.note)
        return None


def _fail(message: str, code: int) -> int:
    from .output import error_line

    error_line(message)
    return code


def _ask(client, text: str, json_out: bool) -> int:
    from ..answer.question_batch import check_question
    from .output import print_answer, print_json

    result = client.ask(check_question(text))
    if json_out:
        print_json(result)
    else:
        print_answer(result)
    return ExitCode.ANSWERED if result["answered"] else ExitCode.NOT_FOUND


def _search(client, text: str, json_out: bool, top_k: int, retriever: str) -> int:
    from .output import print_json, print_search

    result = client.search(text, top_k, retriever)
    if json_out:
        print_json(result)
    else:
        print_search(result)
    return ExitCode.ANSWERED if result["results"] else ExitCode.NOT_FOUND
