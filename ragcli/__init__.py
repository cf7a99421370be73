"""ragcli: local retrieval-augmented question answering over your documents.

The library API lives in :mod:`ragcli.index.pipeline` (build or update an index),
:mod:`ragcli.answer.retrieval` (search it) and :mod:`ragcli.answer.asker` (ask it); the
``rag`` command in :mod:`ragcli.cli` is a thin layer over those.
"""

__version__ = "0.1.0"
