"""Typer options from the one table of :mod:`ragcli.cli.flags`, and the settings they set.

A command says which options it takes with :func:`takes`; it receives the settings those
options set (parameter ``settings``) and its own switches (``json_out``, ``quiet``, ...)
by name. So ask, chat, eval, mcp and serve take the same answering options, spelled and
explained once.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from ..config import RETRIEVERS, Settings, default, load_settings, one_of
from ..models import DEFAULT_MODEL
from . import flags as table
from .flags import Flag, overrides
from .notes import show_notes

F = TypeVar("F", bound=Callable[..., Any])
_TYPES = {"str": str, "int": int, "path": Path}


def help_text(flag: Flag) -> str:
    """The flag's help with its setting's default (and choices) filled in."""
    if not flag.setting:
        return flag.help
    value = DEFAULT_MODEL if flag.setting == "model" else default(flag.setting)
    choices = one_of(RETRIEVERS) if flag.setting == "retriever" else ""
    return flag.help.format(default=value, choices=choices)


def parameter(flag: Flag) -> inspect.Parameter:
    """The Typer parameter of one flag: a switch defaults to off, a value to unset."""
    if flag.switch:
        annotation: Any = Annotated[bool, typer.Option(*flag.names, help=help_text(flag))]
        value: Any = False
    else:
        option = typer.Option(
            *flag.names,
            help=help_text(flag),
            min=flag.minimum,
            metavar=flag.metavar,
            show_default=False,
        )
        annotation, value = Annotated[_TYPES[flag.kind] | None, option], None
    return inspect.Parameter(
        flag.param, inspect.Parameter.KEYWORD_ONLY, default=value, annotation=annotation
    )


def annotated(flag: Flag) -> Any:
    """The flag as a parameter annotation, for a command that declares it by hand."""
    return parameter(flag).annotation


def settings(**values: Any) -> Settings:
    """Settings from file and environment, with the given (non-None) values on top; the
    ``debug`` setting (``RAG_DEBUG``) does what ``rag --debug`` does."""
    s = load_settings({k: v for k, v in values.items() if v is not None})
    if s.debug:
        show_notes(debug=True)
    return s


# Other commands (index, bench) take single options of the one table by these names.
IndexOpt = annotated(table.INDEX)
StoreOpt = annotated(table.STORE)
ModelOpt = annotated(table.MODEL)
TopKOpt = annotated(table.TOP_K)
RetrieverOpt = annotated(table.RETRIEVER)
JsonOpt = annotated(table.JSON)
QuietOpt = annotated(table.QUIET)
MaxTokensOpt = annotated(table.MAX_TOKENS)
NoCacheOpt = annotated(table.NO_CACHE)
ProfileOpt = annotated(table.PROFILE)
EmbedModelOpt = Annotated[
    str | None,
    typer.Option(
        "--embed-model",
        help="sentence-transformers model folder (default: the index's).",
        show_default=False,
    ),
]


def takes(*flags: Flag) -> Callable[[F], F]:
    """Give a command the options ``flags``; it is called with ``settings`` (when it has
    that parameter) and with each flag that names one of its parameters."""

    def decorate(fn: F) -> F:
        own = inspect.signature(fn, eval_str=True, globals={**fn.__globals__, "Settings": Settings})
        wants_settings = "settings" in own.parameters
        passed = [f.param for f in flags if f.param in own.parameters]  # e.g. json_out
        given = {f.param for f in flags}
        kept = [p for p in own.parameters.values() if p.name not in given | {"settings"}]

        @functools.wraps(fn)
        def command(**kwargs: Any) -> Any:
            values = {f.param: kwargs.pop(f.param, None) for f in flags}
            call = {**kwargs, **{name: values[name] for name in passed}}
            if wants_settings:
                call["settings"] = settings(**overrides(flags, values))
            return fn(**call)

        # Arguments first, then the table's options, then the command's own.
        keyword = inspect.Parameter.KEYWORD_ONLY
        required = [p for p in kept if p.default is inspect.Parameter.empty]
        optional = [p for p in kept if p.default is not inspect.Parameter.empty]
        params = [p.replace(kind=keyword) for p in required]
        params += [parameter(f) for f in flags]
        params += [p.replace(kind=keyword) for p in optional]
        command.__signature__ = own.replace(parameters=params)  # type: ignore[attr-defined]
        command.__annotations__ = {}  # the signature holds them, evaluated
        return command  # type: ignore[return-value]

    return decorate
