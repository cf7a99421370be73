"""Settings: defaults, then a TOML file, then environment, then flags.

All sources are validated once, into one frozen dataclass, so that a typo in
a key or a wrong type is an error at start-up instead of a setting that is
silently ignored.
"""

from __future__ import annotations

import dataclasses
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .errors import ConfigError

DEFAULT_EMBED_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
RETRIEVERS = ("dense", "bm25", "hybrid")  # see docs/BENCHMARKS.md
# How passages are embedded: ONNX Runtime (int8 or fp32 weights) or torch (the fallback).
EMBED_BACKENDS = ("onnx-int8", "onnx-fp32", "torch")
# fp32: int8 indexes twice as fast with the same dev-set retrieval, but the sentences it picks
# for the model cost dev answers (abstention 0.83 against 1.00; docs/BENCHMARKS.md,
# "Embeddings on ONNX Runtime")
DEFAULT_EMBED_BACKEND = "onnx-fp32"
# The settings that shape an answer, given the index and the model: the answer cache keys
# on them, and a client uses a server only when they are equal (serve/locate.py).
ANSWER_SETTINGS = (
    "top_k",
    "retriever",
    "context_passages",
    "context_sentences",
    "min_score",
    "min_support",
    "max_tokens",
    "n_ctx",
    "copy_answers",
    "min_answerable",
)


def _default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "ragcli"


@dataclass(frozen=True)
class Settings:
    """Everything a run can be configured with; see README "Settings"."""

    index_dir: Path = Path(".rag")
    model: str | None = None  # a catalogue name or a GGUF path; None: models.DEFAULT_MODEL
    embed_model: str | None = (
        None  # None: the index's own model (DEFAULT_EMBED_MODEL for a new one)
    )
    # None: the index's own for queries, DEFAULT_EMBED_BACKEND for `rag index`
    embed_backend: str | None = None
    top_k: int = 4
    retriever: str = "hybrid"  # dense | bm25 | hybrid (see docs/BENCHMARKS.md)
    chunk_tokens: int = 200
    chunk_overlap: int = 40
    n_ctx: int = 4096
    n_batch: int = 512
    n_threads: int = 0  # 0: one per physical core (hyper-threads not counted)
    # llama.cpp runs on only the cores other processes leave free, judged again every
    # quarter second (llm/threads.py); off: always n_threads
    adaptive_threads: bool = True
    # llama.cpp's load-time copy of the weights into its interleaved CPU layout. Off: on this
    # project's 2-core AVX2 machine it cost 1 s of load and 600 MB of memory for no faster
    # prefill (docs/BENCHMARKS.md, "Loading the model").
    repack_weights: bool = False
    max_tokens: int = 24
    # The answer is copied from the sentences shown, token by token (answer/copying.py);
    # off: the model writes freely and the support rule judges it afterwards.
    copy_answers: bool = True
    context_passages: int = 4  # the model reads sentences of this many best passages ...
    context_sentences: int = 8  # ... the ones closest to the question, with their neighbours
    min_score: float = 0.42  # best sentence similarity below this: "I don't know", no model
    min_support: float = 0.5  # share of answer words that must occur in the passages
    # A copied answer whose answerability (answer/answerable.py) is below this is withheld;
    # the cut `python -m ragcli.bench.answerability` chose (docs/BENCHMARKS.md)
    min_answerable: float = 0.27
    cache_dir: Path = field(default_factory=_default_cache_dir)
    cache_max_bytes: int = 1 << 30
    use_cache: bool = True  # the prompt (KV) cache; `--no-cache` turns off this and the next
    answer_cache: bool = True  # the semantic answer cache (answer/semcache.py)
    answer_cache_threshold: float = 0.90  # cosine of question vectors; `rag bench semcache`
    answer_cache_max_bytes: int = 64 << 20
    commit_seconds: float = 30.0  # `rag index` commits this often: a killed run keeps its work
    embed_batch: int = 1024  # passages per embedding call while indexing
    llm_url: str | None = None  # an OpenAI-compatible server's base URL (".../v1"); None: local
    store: str = ""  # "": FAISS in index_dir; milvus-lite://PATH.db; milvus://HOST:PORT/NAME
    # FAISS factory string, or "auto": by size (docs/BENCHMARKS.md); None: the index's own
    index_type: str | None = None

    def __post_init__(self) -> None:
        positive = (
            "top_k",
            "chunk_tokens",
            "n_ctx",
            "n_batch",
            "max_tokens",
            "context_passages",
            "context_sentences",
            "cache_max_bytes",
            "answer_cache_max_bytes",
            "embed_batch",
        )
        for name in positive:
            if getattr(self, name) <= 0:
                raise ConfigError(f"setting {name} must be positive, got {getattr(self, name)}")
        if not 0 <= self.chunk_overlap < self.chunk_tokens:
            raise ConfigError("setting chunk_overlap must be >= 0 and smaller than chunk_tokens")
        if self.retriever not in RETRIEVERS:
            raise ConfigError(
                f"setting retriever must be {one_of(RETRIEVERS)}, not {self.retriever!r}"
            )
        if self.embed_backend is not None and self.embed_backend not in EMBED_BACKENDS:
            raise ConfigError(
                f"setting embed_backend must be {one_of(EMBED_BACKENDS)}, not {self.embed_backend!r}"
            )
        if self.commit_seconds < 0:
            raise ConfigError("setting commit_seconds must be >= 0")
        if self.n_threads < 0:
            raise ConfigError("setting n_threads must be >= 0")
        if self.index_type is not None and (
            not self.index_type.strip() or self.index_type != self.index_type.strip()
        ):
            raise ConfigError(  # FAISS itself checks the string when an index is built
                f'setting index_type must be "auto" or a FAISS factory string, not {self.index_type!r}'
            )
        if not -1.0 <= self.min_score <= 1.0:
            raise ConfigError("setting min_score must lie between -1 and 1")
        if not 0.0 < self.answer_cache_threshold <= 1.0:
            raise ConfigError("setting answer_cache_threshold must lie above 0 and at most 1")
        if not 0.0 <= self.min_answerable <= 1.0:
            raise ConfigError("setting min_answerable must lie between 0 and 1")
        if not 0.0 <= self.min_support <= 1.0:
            raise ConfigError("setting min_support must lie between 0 and 1")
        if self.llm_url is not None:
            _check_url(self.llm_url)
        if self.store:
            parse_store(self.store)

    @property
    def index_name(self) -> str:
        """What names the index: the store URL, or the index folder's absolute path."""
        return self.store or str(self.index_dir.resolve())

    @property
    def where(self) -> str:
        """The index as the user named it, for messages."""
        return self.store or str(self.index_dir)

    @property
    def threads(self) -> int:
        """The thread count to run with: ``n_threads``, or the physical cores this process
        may use (hyper-threads share a core's arithmetic and gain little)."""
        from .cpus import physical_cores

        return self.n_threads or physical_cores()

    def replace(self, **changes: Any) -> Settings:
        """A copy with the given (already validated) changes; None values are skipped."""
        return dataclasses.replace(self, **{k: v for k, v in changes.items() if v is not None})


_FIELDS = {f.name: f for f in dataclasses.fields(Settings)}
_ENV = {
    "RAG_INDEX": "index_dir",
    "RAG_MODEL": "model",
    "RAG_EMBED_MODEL": "embed_model",
    "RAG_CACHE_DIR": "cache_dir",
    "RAG_LLM_URL": "llm_url",
    "RAG_STORE": "store",
}


def one_of(names: tuple[str, ...]) -> str:
    """'a, b or c'."""
    return ", ".join(names[:-1]) + " or " + names[-1]


def default(name: str) -> Any:
    """The default of one setting (help texts show it from here)."""
    f = _FIELDS[name]
    return f.default if f.default is not dataclasses.MISSING else f.default_factory()


def _check_url(url: str) -> None:
    """An LLM server URL must be http(s)://host[:port][/path], checked at load, not at first use."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (raises ValueError for a bad port)
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(
            f"setting llm_url must be an http(s) URL such as http://HOST:PORT/v1, not {url!r}"
        )
    if parts.query or parts.fragment:
        raise ConfigError(f"setting llm_url must not have a query or fragment: {url!r}")


def _coerce(name: str, value: Any, source: str) -> Any:
    """Turn a raw value from TOML or the environment into the field's type."""
    kind = str(_FIELDS[name].type)
    try:
        if "Path" in kind:
            return Path(os.path.expanduser(str(value)))
        if kind == "bool":
            if isinstance(value, bool):
                return value
            if str(value).lower() in ("1", "true", "yes", "on"):
                return True
            if str(value).lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(value)
        if kind == "int":
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError(value)
            return int(value)
        if kind == "float":
            if isinstance(value, bool):
                raise ValueError(value)
            return float(value)
        if not isinstance(value, str):
            raise ValueError(value)
        return value  # str and "str | None" fields
    except ValueError:
        raise ConfigError(f"{source}: {name} = {value!r} is not a valid {kind}") from None


def config_path() -> Path:
    """The settings file: $RAG_CONFIG, else $XDG_CONFIG_HOME/ragcli/config.toml."""
    if env := os.environ.get("RAG_CONFIG"):
        return Path(env)
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(base) / "ragcli" / "config.toml"


def load_settings(overrides: dict[str, Any] | None = None, path: Path | None = None) -> Settings:
    """Merge defaults, the TOML file, RAG_* variables and flag overrides; validate."""
    values: dict[str, Any] = {}
    path = path or config_path()
    if path.is_file():
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path}: not valid TOML ({exc})") from None
        for key, raw in data.items():
            if key not in _FIELDS:
                known = ", ".join(sorted(_FIELDS))
                raise ConfigError(f"{path}: unknown setting {key!r} (known: {known})")
            values[key] = _coerce(key, raw, str(path))
    elif "RAG_CONFIG" in os.environ:
        raise ConfigError(f"RAG_CONFIG names {path}, which is not a file")
    for var, key in _ENV.items():
        if os.environ.get(var):
            values[key] = _coerce(key, os.environ[var], var)
    for key, raw in (overrides or {}).items():
        if raw is None:
            continue
        if key not in _FIELDS:
            raise ConfigError(f"unknown setting {key!r}")
        values[key] = _coerce(key, raw, f"--{key.replace('_', '-')}")
    return Settings(**values)


# -- the store setting: its grammar is checked at load, before any work ----------

LITE_SCHEME = "milvus-lite://"
SERVER_SCHEME = "milvus://"
DEFAULT_COLLECTION = "ragcli"
DEFAULT_PORT = 19530
_COLLECTION_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,200}")


@dataclass(frozen=True)
class StoreURL:
    """A parsed ``--store`` value."""

    url: str
    collection: str
    lite_path: Path | None = None  # Milvus Lite: the .db path (a folder it creates)
    host: str = ""
    port: int = DEFAULT_PORT

    @property
    def meta(self) -> str:
        return f"{self.collection}_meta"


def parse_store(url: str) -> StoreURL:
    """Check a ``--store`` value at settings load, so a typo fails before any work."""
    if url.startswith(LITE_SCHEME):
        raw = url[len(LITE_SCHEME) :]
        if not raw.endswith(".db") or raw in (".db", "/.db"):
            raise ConfigError(
                f"store {url!r}: Milvus Lite needs a path ending in .db, "
                "e.g. milvus-lite://.rag-milvus.db"
            )
        return StoreURL(url, DEFAULT_COLLECTION, lite_path=Path(os.path.expanduser(raw)))
    if url.startswith(SERVER_SCHEME):
        try:
            parts = urlsplit("http://" + url[len(SERVER_SCHEME) :])
            port = parts.port or DEFAULT_PORT
        except ValueError:
            parts, port = None, 0
        name = parts.path.strip("/") if parts else ""
        if parts is None or not parts.hostname or parts.query or parts.fragment:
            raise ConfigError(f"store {url!r} must look like milvus://HOST:PORT/COLLECTION")
        if name and not _COLLECTION_NAME.fullmatch(name):
            raise ConfigError(
                f"store {url!r}: a Milvus collection name is letters, digits and _, "
                "not starting with a digit"
            )
        return StoreURL(url, name or DEFAULT_COLLECTION, host=parts.hostname, port=port)
    raise ConfigError(
        f"setting store must be empty (the FAISS index folder), milvus-lite://PATH.db or "
        f"milvus://HOST:PORT/COLLECTION, not {url!r}"
    )
