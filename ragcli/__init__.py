"""ragcli: local retrieval-augmented question answering over your documents.

The public API, for programs that use ragcli without the ``rag`` command::

    from ragcli import Rag, build_index, load_settings

    settings = load_settings({"index_dir": ".rag"})
    build_index([Path("docs")], settings)
    with Rag(settings) as rag:
        print(rag.ask("What does the lock protect?").answer)
        for hit in rag.search("lock").hits:
            print(hit.citation)

:class:`Rag` is the face every front end uses (the commands, `rag serve`, `rag mcp`);
it follows each commit of `rag index` while it stays open. ``Retriever`` and ``Asker``
are its two halves, for programs that need only one.

Names are resolved on first use (PEP 562), so ``import ragcli`` stays cheap and
``rag --help`` does not load what it does not need. docs/ARCHITECTURE.md maps the
packages behind these names.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> the module that defines it
_API = {
    "Rag": "ragcli.rag",
    "load_settings": "ragcli.config",
    "Settings": "ragcli.config",
    "build_index": "ragcli.index.pipeline",
    "IndexReport": "ragcli.index.pipeline",
    "Retriever": "ragcli.answer.retrieval",
    "SearchResult": "ragcli.answer.retrieval",
    "Hit": "ragcli.records",
    "Asker": "ragcli.answer.asker",
    "Answer": "ragcli.answer.asker",
    "AnswerTimings": "ragcli.answer.asker",
    "RagError": "ragcli.errors",
}

__all__ = ["__version__", *_API]


def __getattr__(name: str) -> Any:
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module 'ragcli' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API))
