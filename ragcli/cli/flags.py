"""The options of the commands that search and answer, declared once.

The Typer commands are given their options from this table (:mod:`ragcli.cli.options`),
and the served client (:mod:`ragcli.cli.via_server`) parses argv with the same table, so the
two cannot drift. Standard library only: the served client reads it before any
framework is imported.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Flag:
    """One option: the parameter the command receives, its spellings, its help, and what
    it does to the settings (a value for ``setting``, or the fixed values in ``sets``)."""

    param: str
    names: tuple[str, ...]
    # "{default}" is replaced by the setting's default, "{choices}" by its choices. Help texts
    # are rich markup: a "[" before a letter, as in ragcli[milvus], is written "\\[".
    help: str
    kind: str = "str"  # str | int | path | switch
    setting: str = ""  # the Settings field a value sets; "": the command's own option
    sets: tuple[tuple[str, Any], ...] = ()  # a switch's settings
    minimum: int | None = None
    metavar: str | None = None

    @property
    def switch(self) -> bool:
        return self.kind == "switch"


INDEX = Flag(
    "index", ("--index",), "Index folder (default: {default}; env RAG_INDEX).", "path", "index_dir"
)
STORE = Flag(
    "store",
    ("--store",),
    "Keep the index in Milvus instead of the --index folder: milvus-lite://PATH.db or "
    "milvus://HOST:PORT/COLLECTION (needs ragcli\\[milvus]; env RAG_STORE).",
    setting="store",
    metavar="URL",
)
TOP_K = Flag(
    "top_k",
    ("-k", "--top-k"),
    "Passages to retrieve (default: {default}).",
    "int",
    "top_k",
    minimum=1,
)
RETRIEVER = Flag(
    "retriever", ("--retriever",), "{choices} (default: {default}).", setting="retriever"
)
MODEL = Flag(
    "model",
    ("--model",),
    "A model of `rag models` or a GGUF file (default: {default}; env RAG_MODEL).",
    setting="model",
    metavar="NAME|PATH",
)
LLM_URL = Flag(
    "llm_url",
    ("--llm-url",),
    "Generate on an OpenAI-compatible server, e.g. http://HOST:PORT/v1, instead of loading "
    "the model here (env RAG_LLM_URL).",
    setting="llm_url",
)
MAX_TOKENS = Flag(
    "max_tokens",
    ("--max-tokens",),
    "Answer length limit (default: {default}).",
    "int",
    "max_tokens",
    minimum=1,
)
NO_CACHE = Flag(
    "no_cache",
    ("--no-cache",),
    "Do not reuse or save answers or KV states (no cache at all).",
    "switch",
    sets=(("use_cache", False), ("answer_cache", False)),
)
NO_ANSWER_CACHE = Flag(
    "no_answer_cache",
    ("--no-answer-cache",),
    "Run the model even for a question answered before (the KV cache stays on).",
    "switch",
    sets=(("answer_cache", False),),
)
RERANK = Flag(
    "rerank",
    ("--rerank",),
    "Let the model re-rank more candidates by where its attention goes (env RAG_RERANK).",
    "switch",
    sets=(("rerank", True),),
)
NO_SERVER = Flag(
    "no_server",
    ("--no-server",),
    "Work in this process even when `rag serve` serves this index.",
    "switch",
)
JSON = Flag("json_out", ("--json",), "Print JSON for scripts.", "switch")
QUIET = Flag("quiet", ("--quiet", "-q"), "Draw no progress line on the terminal.", "switch")
PROFILE = Flag(
    "profile", ("--profile",), "Print where the time went, start-up included, on stderr.", "switch"
)

# What every command that searches takes, and what every command that answers takes.
SEARCHING = (TOP_K, RETRIEVER, RERANK, INDEX, STORE)
ANSWERING = (*SEARCHING, MODEL, LLM_URL, MAX_TOKENS, NO_CACHE, NO_ANSWER_CACHE)

# The options of the two commands a running server may answer (cli/via_server.py).
COMMANDS = {
    "ask": (*ANSWERING, NO_SERVER, JSON, PROFILE, QUIET),
    "search": (*SEARCHING, NO_SERVER, JSON, PROFILE),
}


def overrides(flags: Iterable[Flag], values: dict[str, Any]) -> dict[str, Any]:
    """The settings the given option values set (options left out or off set nothing)."""
    out: dict[str, Any] = {}
    for flag in flags:
        value = values.get(flag.param)
        if flag.switch:
            if value:
                out.update(flag.sets)
        elif flag.setting and value is not None:
            out[flag.setting] = value
    return out
