"""Which store the ``store`` setting names: the folder at ``index_dir`` when it is
empty, else Milvus (``milvus-lite://PATH.db``, ``milvus://HOST:PORT/NAME``)."""

from __future__ import annotations

import contextlib

from ..config import Settings
from .base import IndexInfo, Store
from .faiss_store import FaissStore, FaissWriter
from .milvus_store import MilvusStore, MilvusWriter, milvus_writer


def open_store(settings: Settings) -> Store:
    """The index to read: the FAISS folder at ``index_dir``, or Milvus by ``store``."""
    if not settings.store:
        return FaissStore.open(settings.index_dir)
    return MilvusStore.open(settings.store, settings.milvus_token)


def store_writer(
    settings: Settings, info: IndexInfo, rebuild: bool = False
) -> contextlib.AbstractContextManager[FaissWriter | MilvusWriter]:
    """The writer for the same choice as :func:`open_store` (a context manager)."""
    if not settings.store:
        return FaissStore.writer(settings.index_dir, info, rebuild=rebuild)
    return milvus_writer(settings.store, info, rebuild=rebuild, token=settings.milvus_token)
