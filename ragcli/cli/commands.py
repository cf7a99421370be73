"""The Typer application of `rag`: every command registered, and its error handling."""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from typer._click import exceptions as click  # the click typer runs on (vendored)

from .. import __version__
from ..errors import ExitCode
from . import ask, bench, cache, chat, evaluate, index, mcp, models, search, serve
from .failures import fail
from .notes import show_notes

app = typer.Typer(
    name="rag",
    help="Ask questions about your documents, answered by a local model on your CPU.\n\n"
    "Exit codes: 0 answered, 1 not in the documents, 2 usage error, 3 index or model problem, "
    "4 unexpected failure, 130 interrupted, 141 output closed, 143 terminated.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"rag {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    debug: Annotated[
        bool, typer.Option("--debug", help="Show tracebacks and llama.cpp logs.")
    ] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version.")
    ] = False,
) -> None:
    """Options of every command."""
    show_notes(debug=debug)  # the debug setting (RAG_DEBUG) turns it on when settings load


app.command("index")(index.index_command)
app.command("search")(search.search_command)
app.command("ask")(ask.ask_command)
app.command("eval")(evaluate.eval_command)
app.command("chat")(chat.chat_command)
app.command("serve")(serve.serve_command)
app.command("mcp")(mcp.mcp_command)
app.add_typer(cache.app, name="cache")
app.add_typer(models.app, name="models")
app.add_typer(bench.app, name="bench")


def run() -> None:
    """Run `rag`; a bad command line is one stderr line with a hint, like every other error."""
    try:
        code = app(standalone_mode=False)
    except click.NoArgsIsHelpError as exc:  # bare `rag`: the help, as before
        sys.stdout.write(exc.ctx.get_help() + "\n")
        code = ExitCode.USAGE
    except click.UsageError as exc:
        hint = f" (see: {exc.ctx.command_path} -h)" if exc.ctx else ""
        code = fail(exc.format_message() + hint, ExitCode.USAGE).exit_code
    except click.ClickException as exc:
        code = fail(exc.format_message(), ExitCode.USAGE).exit_code
    except typer.Abort:  # Ctrl-C while click itself was prompting or parsing
        code = fail("interrupted", ExitCode.INTERRUPTED).exit_code
    sys.exit(code or 0)
