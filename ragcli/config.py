"""Settings: defaults, then a TOML file, then environment, then flags.

All sources are validated once, into one frozen dataclass, so that a typo in
a key or a wrong type is an error at start-up instead of a setting that is
silently ignored.

This module is long because every setting is declared here once, with its default, its
variable and the text the README's table and `rag config` show, and checked here once.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .addresses import check_llm_url, parse_server, parse_store
from .errors import ConfigError

DEFAULT_EMBED_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
RETRIEVERS = ("dense", "bm25", "hybrid")  # see docs/BENCHMARKS.md
# How passages are embedded: ONNX Runtime (int8 or fp32 weights) or torch (the fallback).
EMBED_BACKENDS = ("onnx-int8", "onnx-fp32", "torch")
# The type llama.cpp keeps keys and values in; q8_0 needs its flash-attention kernels.
KV_TYPES = ("f16", "q8_0")
# int8: it indexes 2-3x faster than fp32 with the same retrieval on dev (hit@4, MRR and context
# recall equal) and on the near-topic set, and dev answers within one question of fp32
# (docs/BENCHMARKS.md, "Embeddings on ONNX Runtime"). An fp32 index keeps its own.
DEFAULT_EMBED_BACKEND = "onnx-int8"
# The settings that shape an answer, given the index and the model: the answer cache keys
# on them, and a client uses a server only when they are equal (serve/locate.py).
ANSWER_SETTINGS = (
    "top_k",
    "retriever",
    "rerank",
    "rerank_candidates",
    "context_passages",
    "context_sentences",
    "min_score",
    "min_support",
    "max_tokens",
    "n_ctx",
    "copy_answers",
    "check_answers",
    "min_answerable",
    "reading_cache",
    "reading_in_place",
    "reading_margin",
    "kv_type",
)


def _default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "ragcli"


def one_of(names: tuple[str, ...]) -> str:
    """'a, b or c'."""
    return ", ".join(names[:-1]) + " or " + names[-1]


def doc(text: str, env: str = "", shown: str = "") -> dict[str, str]:
    """A setting's row in README "Settings": what it does, its environment variable, and
    its default as written there when the true one depends on the machine."""
    return {"doc": text, "env": env, "shown": shown}


@dataclass(frozen=True)
class Settings:
    """Everything a run can be configured with; README "Settings" is generated from the
    ``doc`` metadata here (``python -m ragcli.config --markdown``)."""

    index_dir: Path = field(
        default=Path(".rag"),
        metadata=doc(
            "The FAISS index folder: `rag index` writes it, the other commands read it "
            "(`--index`).",
            env="RAG_INDEX",
        ),
    )
    model: str | None = field(
        default=None,
        metadata=doc(
            "A name from `rag models` or a GGUF file; unset: qwen2.5-coder-1.5b (`--model`).",
            env="RAG_MODEL",
        ),
    )
    embed_model: str | None = field(
        default=None,
        metadata=doc(
            "A sentence-transformers model folder; unset: the index's own, "
            f"{DEFAULT_EMBED_MODEL.split('/')[-1]} for a new index (`--embed-model`).",
            env="RAG_EMBED_MODEL",
        ),
    )
    embed_backend: str | None = field(
        default=None,
        metadata=doc(
            f"{one_of(tuple(f'`{b}`' for b in EMBED_BACKENDS))}; unset: the index's own for "
            f"questions, `{DEFAULT_EMBED_BACKEND}` for `rag index` (`--embed-backend`)."
        ),
    )
    top_k: int = field(default=4, metadata=doc("Passages retrieved per question (`-k`)."))
    retriever: str = field(
        default="hybrid",
        metadata=doc(f"{one_of(tuple(f'`{r}`' for r in RETRIEVERS))} (`--retriever`)."),
    )
    chunk_tokens: int = field(
        default=200,
        metadata=doc("Passage size in embedding-model tokens (the model truncates at 256)."),
    )
    chunk_overlap: int = field(
        default=40, metadata=doc("Tokens a passage repeats from the one before it.")
    )
    n_ctx: int = field(default=4096, metadata=doc("The model's context window, in tokens."))
    n_batch: int = field(default=512, metadata=doc("Prompt tokens llama.cpp reads per step."))
    n_threads: int = field(
        default=0,
        metadata=doc(
            "CPU threads of llama.cpp and ONNX Runtime; 0: one per physical core "
            "(hyper-threads not counted)."
        ),
    )
    # Beside other busy processes, llama.cpp's threads wait for each other at every step;
    # fewer threads then run faster (docs/BENCHMARKS.md, "Generation beside other work").
    adaptive_threads: bool = field(
        default=True,
        metadata=doc(
            "llama.cpp runs on the cores other processes leave free (judged every quarter "
            "second) and other ragcli engines have not claimed; `false`: always `n_threads`."
        ),
    )
    # Off: on this project's 2-core AVX2 machine the repack cost 1 s of load and 600 MB of
    # memory for no faster prefill (docs/BENCHMARKS.md, "Loading the model without weight repacking").
    repack_weights: bool = field(
        default=False,
        metadata=doc(
            "`true`: llama.cpp copies the weights into its interleaved CPU layout at load "
            "(slower load, more memory)."
        ),
    )
    max_tokens: int = field(
        default=24,
        metadata=doc("Answer length limit in tokens; a counted list may take 64 (`--max-tokens`)."),
    )
    copy_answers: bool = field(
        default=True,
        metadata=doc(
            "The answer is copied token by token from the sentences shown; `false`: the "
            "model writes freely and `min_support` judges it afterwards."
        ),
    )
    check_answers: bool = field(
        default=True,
        metadata=doc(
            "A copied answer is put to the model twice more (does the context answer the "
            "question; does the answer's sentence state it), about a second per answer; "
            "`false`: judged without."
        ),
    )
    rerank: bool = field(
        default=False,
        metadata=doc(
            "Let the model re-rank `rerank_candidates` retrieved passages by where its "
            "attention goes when it reads the question (answer/rerank.py), and read the best "
            "`top_k`.",
            env="RAG_RERANK",
        ),
    )
    rerank_candidates: int = field(
        default=12, metadata=doc("Passages retrieved for the model to re-rank.")
    )
    context_passages: int = field(
        default=4, metadata=doc("The model reads sentences of this many best passages ...")
    )
    context_sentences: int = field(
        default=8,
        metadata=doc("... the ones closest to the question, each with its neighbours."),
    )
    # The highest floor that cost no right answer on the rule's fit halves (docs/BENCHMARKS.md)
    min_score: float = field(
        default=0.39,
        metadata=doc(
            'Best-sentence similarity needed to run the model; below it: "I don\'t know".'
        ),
    )
    min_support: float = field(
        default=0.5,
        metadata=doc("Share of a freely written answer's words that must occur in the passages."),
    )
    # The rules of answer/answerable.py put the cut their fit chose at 0.5 (docs/BENCHMARKS.md)
    min_answerable: float = field(
        default=0.5,
        metadata=doc("Answerability below this withholds a copied answer; 0: never."),
    )
    cache_dir: Path = field(
        default_factory=_default_cache_dir,
        metadata=doc(
            "Models, prompt states and answers; `$XDG_CACHE_HOME/ragcli` when "
            "`XDG_CACHE_HOME` is set.",
            env="RAG_CACHE_DIR",
            shown='"~/.cache/ragcli"',
        ),
    )
    cache_max_bytes: int = field(
        default=1 << 30,
        metadata=doc("Bound of the prompt (KV) cache, 1 GiB; least recently used out first."),
    )
    use_cache: bool = field(
        default=True,
        metadata=doc("The prompt (KV) cache; `--no-cache` turns off it and the answer cache."),
    )
    reading_cache: bool = field(
        default=True,
        metadata=doc(
            "Keep the keys and values of each context sentence once a question has read "
            "it, so a later prompt whose sentences the cache holds reads only its question "
            "(llm/reading_cache.py); `false`: every prompt is read whole.",
            env="RAG_READING_CACHE",
        ),
    )
    warm_idle: bool = field(
        default=False,
        metadata=doc(
            "`rag serve` reads the index's passages into the reading cache while no request "
            "waits, those its questions found first."
        ),
    )
    reading_in_place: float = field(
        default=0.0,
        metadata=doc(
            "With the reading cache: the share of the context's characters, the sentences "
            "most likely to answer first, read in place after all before them instead of "
            "from the cache.",
        ),
    )
    reading_margin: float = field(
        default=1.5,
        metadata=doc(
            "With the reading cache: an answer read apart whose narrowest step led a token "
            "that would copy something else by fewer logits than this is read again whole, "
            "and that answer given (0: never).",
        ),
    )
    kv_type: str = field(
        default="f16",
        metadata=doc(
            f"{one_of(tuple(f'`{t}`' for t in KV_TYPES))}: how llama.cpp keeps the keys and "
            "values, in memory and in the prompt and reading caches; `q8_0` about halves "
            "them (with flash attention).",
            env="RAG_KV_TYPE",
        ),
    )
    reading_cache_max_bytes: int = field(
        default=4 << 30,
        metadata=doc("Bound of the reading cache, 4 GiB; least recently used out first."),
    )
    answer_cache: bool = field(
        default=True,
        metadata=doc(
            "The answer cache; `false` (or `--no-answer-cache`): the model runs for every question."
        ),
    )
    answer_cache_threshold: float = field(
        default=0.90,
        metadata=doc(
            "Question cosine needed to reuse an answer (calibrated by `python -m benchmarks semcache`)."
        ),
    )
    answer_cache_max_bytes: int = field(
        default=64 << 20, metadata=doc("Bound of the answer cache, 64 MiB.")
    )
    commit_seconds: float = field(
        default=30.0,
        metadata=doc("`rag index` commits this often; a killed run keeps what it committed."),
    )
    embed_batch: int = field(
        default=1024, metadata=doc("Passages per embedding call while indexing.")
    )
    llm_url: str | None = field(
        default=None,
        metadata=doc(
            "Generate on this OpenAI-compatible server (`http://HOST:PORT/v1`); unset: "
            "here (`--llm-url`).",
            env="RAG_LLM_URL",
        ),
    )
    store: str = field(
        default="",
        metadata=doc(
            "`milvus-lite://PATH.db` or `milvus://HOST:PORT/COLLECTION`: the index in "
            "Milvus; empty: FAISS in `index_dir` (`--store`).",
            env="RAG_STORE",
        ),
    )
    index_type: str | None = field(
        default=None,
        metadata=doc(
            "`auto` (by size) or a FAISS factory string such as `HNSW32`; unset: the "
            "index's own, `auto` for a new one (`--index-type`)."
        ),
    )
    server: str = field(
        default="",
        metadata=doc(
            "The `rag serve` clients use: a socket path or `http://HOST:PORT`; empty: the "
            "socket of the index, if one listens.",
            env="RAG_SERVER",
        ),
    )
    server_token: str = field(
        default="",
        repr=False,
        metadata=doc(
            "Bearer token of `rag serve` on TCP: clients send it, the server demands it "
            "(`rag serve --token`).",
            env="RAG_SERVER_TOKEN",
        ),
    )
    milvus_token: str = field(
        default="",
        repr=False,
        metadata=doc(
            "Token of a Milvus server that needs one (`user:password` or an API key).",
            env="RAG_MILVUS_TOKEN",
        ),
    )
    debug: bool = field(
        default=False,
        metadata=doc(
            "Tracebacks, and the logs of llama.cpp and Ray that are silenced otherwise "
            "(`rag --debug`).",
            env="RAG_DEBUG",
        ),
    )

    def __post_init__(self) -> None:
        positive = (
            "top_k",
            "chunk_tokens",
            "n_ctx",
            "n_batch",
            "max_tokens",
            "context_passages",
            "context_sentences",
            "rerank_candidates",
            "cache_max_bytes",
            "reading_cache_max_bytes",
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
        if self.kv_type not in KV_TYPES:
            raise ConfigError(f"setting kv_type must be {one_of(KV_TYPES)}, not {self.kv_type!r}")
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
        if not 0.0 <= self.reading_in_place <= 1.0:
            raise ConfigError("setting reading_in_place must lie between 0 and 1")
        if self.reading_margin < 0:
            raise ConfigError("setting reading_margin must not be negative")
        if self.llm_url is not None:
            check_llm_url(self.llm_url)
        if self.store:
            parse_store(self.store)
        if self.server:
            parse_server(self.server)

    @property
    def reads_apart(self) -> bool:
        """Whether the local engine reads the context's sentences apart, each kept in the
        reading cache: only then can an answer differ from reading whole."""
        return self.reading_cache and self.use_cache and not self.llm_url

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
# RAG_* variable -> setting
ENV = {f.metadata["env"]: f.name for f in dataclasses.fields(Settings) if f.metadata.get("env")}
# Variables that are not settings: where the settings file is, and the platform's folders.
OTHER_ENV = {
    "RAG_CONFIG": "The settings file (a name that is not a file is an error); unset: "
    "`$XDG_CONFIG_HOME/ragcli/config.toml`.",
    "XDG_CONFIG_HOME": "Where the settings file is looked for; unset: `~/.config`.",
    "XDG_CACHE_HOME": "Where `cache_dir` is by default; unset: `~/.cache`.",
    "XDG_RUNTIME_DIR": "Where `rag serve` puts its socket (under `ragcli/`) when the index "
    "folder's path is too long for one or the index is in Milvus; unset: `ragcli-UID` in the "
    "temporary folder.",
    "GOMP_SPINCOUNT": "Checks a llama.cpp thread waiting for the others makes before it sleeps "
    "(libgomp's own, read as the model's library loads); unset: ragcli sets 10000, not 300000.",
    "OMP_WAIT_POLICY": "libgomp's own: when set, ragcli leaves `GOMP_SPINCOUNT` to libgomp.",
}


def default(name: str) -> Any:
    """The default of one setting (help texts show it from here)."""
    f = _FIELDS[name]
    return f.default if f.default is not dataclasses.MISSING else f.default_factory()


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
    for var, key in ENV.items():
        if os.environ.get(var):
            values[key] = _coerce(key, os.environ[var], var)
    for key, raw in (overrides or {}).items():
        if raw is None:
            continue
        if key not in _FIELDS:
            raise ConfigError(f"unknown setting {key!r}")
        values[key] = _coerce(key, raw, f"--{key.replace('_', '-')}")
    return Settings(**values)


# -- README "Settings": the table is generated from the fields above -------------------


def _shown(f: dataclasses.Field) -> str:
    """A default as a settings file would write it; "unset" for None."""
    if f.metadata.get("shown"):
        return f"`{f.metadata['shown']}`"
    value = default(f.name)
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str | Path):
        return f'`"{value}"`'
    return f"`{value}`"


def markdown_table() -> str:
    """README "Settings": one row per setting, then the variables that are not settings."""
    rows = [
        "| setting | default | environment | what it does |",
        "|---|---|---|---|",
    ]
    for f in dataclasses.fields(Settings):
        env = f"`{f.metadata['env']}`" if f.metadata.get("env") else ""
        rows.append(f"| `{f.name}` | {_shown(f)} | {env} | {f.metadata['doc']} |")
    rows += ["", "| environment | what it does |", "|---|---|"]
    rows += [f"| `{name}` | {text} |" for name, text in OTHER_ENV.items()]
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    import sys

    if sys.argv[1:] != ["--markdown"]:
        sys.exit("usage: python -m ragcli.config --markdown")
    sys.stdout.write(markdown_table())
