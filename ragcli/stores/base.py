"""What every store shares: how an index was built, the format version, the writer
protocol and the terms a lexical search looks for.

Two stores implement it: :mod:`ragcli.stores.faiss_store` (SQLite and a FAISS file in a
folder) and :mod:`ragcli.stores.milvus_store` (Milvus or Milvus Lite). :mod:`ragcli.stores.factory`
chooses between them by the ``store`` setting.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from .. import __version__
from ..errors import IndexMismatchError
from ..records import Chunk, SourceFile, StoredChunk

if TYPE_CHECKING:
    import numpy as np

AUTO = "auto"  # vector index type chosen by size (stores/faiss_index.py, auto_index_type)
# The layout of an index's tables; raised whenever a reader could misread an older one,
# which is then refused (check_format) with the command that rebuilds it.
FORMAT_VERSION = 4
# How documents become passages (the readers and the chunker). An index whose passages an
# older version made is re-read whole on its next update, so it never keeps stale text.
TEXT_VERSION = 2

# Words too common to help BM25 find a passage; FTS5 keeps them in the index.
STOPWORDS = frozenset(
    "a an and are as at be by can do does for from has have how i in is it its of on or that "
    "the this to was what when where which who why will with you your".split()
)


def lexical_terms(query: str) -> list[str]:
    """The words of ``query`` a BM25 search looks for, in order, stopwords left out."""
    return [t for t in re.findall(r"\w+", query.lower()) if t not in STOPWORDS]


def check_format(info: IndexInfo, where: str, rebuild_hint: str) -> None:
    """Refuse an index written in another format version than this ragcli reads."""
    if info.format_version != FORMAT_VERSION:
        raise IndexMismatchError(
            f"index {where} has format {info.format_version}, this ragcli reads {FORMAT_VERSION}; "
            + rebuild_hint
        )


def package_version(dist: str) -> str:
    from importlib import metadata  # 6-10 ms of imports: only where a version is recorded

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


@dataclass(frozen=True)
class IndexInfo:
    """How an index was built. Querying it with other settings is refused."""

    embed_model: str
    embed_dim: int
    chunk_tokens: int
    chunk_overlap: int
    index_type: str = "Flat"
    format_version: int = FORMAT_VERSION
    ragcli_version: str = __version__
    faiss_version: str = ""
    sentence_transformers_version: str = ""
    # index_type is what the vector file holds; index_spec what was asked for ("auto",
    # or a factory string); search_params are stored in the vector file too.
    index_spec: str | None = AUTO  # None only while building: keep what the index has
    search_params: str = ""
    # What computed the vectors: "onnx" or "torch", and "int8" or "fp32" weights. An index
    # from before ONNX has neither recorded: it was built on torch in fp32.
    embed_backend: str = "torch"
    embed_quantization: str = "fp32"
    # TEXT_VERSION of the stored passages; an index from before it was recorded has 1.
    text_version: int = 1

    @classmethod
    def for_build(
        cls,
        embed_model: str,
        embed_dim: int,
        chunk_tokens: int,
        chunk_overlap: int,
        index_spec: str | None = AUTO,
        embed_backend: str = "torch",
        embed_quantization: str = "fp32",
    ):
        return cls(
            embed_model=embed_model,
            embed_dim=embed_dim,
            chunk_tokens=chunk_tokens,
            chunk_overlap=chunk_overlap,
            embed_backend=embed_backend,
            embed_quantization=embed_quantization,
            faiss_version=package_version("faiss-cpu"),
            sentence_transformers_version=package_version("sentence-transformers"),
            index_spec=index_spec,
            text_version=TEXT_VERSION,
        )

    @property
    def embeddings(self) -> str:
        """The backend and quantization as the ``embed_backend`` setting spells them."""
        if self.embed_backend == "torch":
            return "torch"
        return f"{self.embed_backend}-{self.embed_quantization}"

    def mismatch(self, other: IndexInfo) -> str | None:
        """Why vectors built with ``other`` cannot go into this index, if they cannot."""
        if (self.embed_model, self.embed_dim) != (other.embed_model, other.embed_dim):
            return (
                f"it was built with embedding model {self.embed_model} ({self.embed_dim}-d), "
                f"not {other.embed_model} ({other.embed_dim}-d)"
            )
        if self.embeddings != other.embeddings:
            return (
                f"it was built with {self.embeddings} embeddings of {self.embed_model}, "
                f"not {other.embeddings}"
            )
        if (self.chunk_tokens, self.chunk_overlap) != (other.chunk_tokens, other.chunk_overlap):
            return (
                f"it was built with chunks of {self.chunk_tokens} tokens overlapping by "
                f"{self.chunk_overlap}, not {other.chunk_tokens}/{other.chunk_overlap}"
            )
        return None


class FileWriter:
    """What every store's writer shares: a whole file is a start, its chunks, a finish."""

    def start_file(self, source: SourceFile) -> None:
        raise NotImplementedError

    def add_chunks(self, path: str, chunks: list[Chunk], vectors: np.ndarray) -> None:
        raise NotImplementedError

    def finish_file(self, source: SourceFile, n_chunks: int) -> None:
        raise NotImplementedError

    def add_file(self, source: SourceFile, chunks: list[Chunk], vectors: np.ndarray) -> None:
        """Replace whatever the index held for this file with these chunks."""
        self.start_file(source)
        self.add_chunks(str(source.path), chunks, vectors)
        self.finish_file(source, len(chunks))


class Store(Protocol):
    """Read access to an index, whichever store holds it."""

    info: IndexInfo

    def files(self) -> dict[str, str]: ...

    def generation(self) -> str:
        """The index's committed state now (read afresh): it changes on every commit, so a
        long-lived reader or an answer cache can tell that the index moved under it."""
        ...

    def reading(self) -> contextlib.AbstractContextManager[str]:
        """The newest commit, held for the block: every read inside sees that one
        generation (yielded) and ``info`` is its build record. A reader that lives across
        commits wraps each search in this and so follows the index."""
        ...

    def count_chunks(self) -> int: ...

    def dense_search(self, query: np.ndarray, k: int) -> list[tuple[int, float]]: ...

    def similarity(self, query: np.ndarray, ids: list[int]) -> dict[int, float]: ...

    def lexical_search(self, query: str, k: int) -> list[tuple[int, float]]: ...

    def chunks(self, ids: list[int]) -> dict[int, StoredChunk]: ...

    def page(self, path: str, limit: int) -> list[StoredChunk]:
        """The first ``limit`` chunks of the file at ``path``, in order: the rest of a page
        a question is about, beyond the passages retrieved for it."""
        ...

    def all_chunks(self) -> Iterator[StoredChunk]: ...

    def close(self) -> None: ...
