"""`rag index --ray`: parse and embed on Ray Data, on this machine or a cluster.

The pipeline is the single-process one spread out: files are read, parsed and
chunked by :func:`ragcli.index.pipeline.prepare_file` in Ray tasks (one row per
passage, plus one row per file carrying its :class:`PreparedFile`), and the
passages are embedded by a pool of actors that each load the model once and
run the same :class:`SentenceTransformerEmbedder`, so passages and vectors
equal the single-process run's. Results stream back to this process file by
file and are written to the store there, so memory stays bounded by what Ray
keeps in flight, not by the corpus.

On a cluster every node needs ragcli installed and the files readable at the
same paths (a shared filesystem), as with any Ray Data reader.

Ray is an optional extra (``pip install 'ragcli[ray]'``); it is imported only here.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, UsageError
from ..log import debugging
from ..models import EmbeddingModelInfo
from .prepare import PreparedFile, prepare_file, token_counter

if TYPE_CHECKING:
    import numpy as np

    from ..config import Settings

LOCAL = ("", "local")  # start a private Ray on this machine for the run
ROWS_PER_EMBED_CALL = 64  # passages per actor call: small enough to spread over the pool
FILES_PER_BLOCK = 4  # files per parse task
CONNECT_TIMEOUT_S = 5.0
_HINT = "--ray needs Ray Data: pip install 'ragcli[ray]'"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_ERROR_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception)): (.+)$")  # "pkg.KeyError: msg"

# Set while Ray starts (the local processes inherit them), restored after.
_QUIET_ENV = {"RAY_USAGE_STATS_ENABLED": "0"}  # no usage-stats prompt or upload


def prepare_with_ray(
    paths: list[Path],
    settings: Settings,
    model: EmbeddingModelInfo,
    address: str,
    *,
    num_cpus: int | None = None,
) -> Iterator[tuple[PreparedFile, np.ndarray]]:
    """Every path's :class:`PreparedFile` and its passage vectors, as each file completes.

    Files come back in completion order, not input order. Vectors are float32,
    L2-normalised, one row per chunk (``(0, dim)`` for a skipped file).
    ``address``: ``""``/``"local"`` starts a Ray on this machine (``num_cpus``,
    default all) and stops it afterwards; ``"auto"`` joins the cluster that
    ``ray start`` runs here; anything else is a cluster address
    (``HOST:PORT`` or ``ray://HOST:PORT``).
    """
    if not paths:
        return iter(())
    ray = _import_ray()
    started = _connect(ray, address, num_cpus)  # now, not at the first next()
    return _results(ray, started, paths, settings, model)


def check_ray(address: str) -> None:
    """Fail before any work when the extra is missing or the address is bad or
    unreachable (cheap: imports nothing, one TCP connect at most)."""
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        raise ConfigError(_HINT)
    if not _is_local(address) and address != "auto":
        _check_reachable(address)


def _results(
    ray: Any, started: bool, paths: list[Path], settings: Settings, model: EmbeddingModelInfo
) -> Iterator[tuple[PreparedFile, np.ndarray]]:
    try:
        yield from _pipeline(ray, paths, settings, model)
    finally:
        if started:
            ray.shutdown()


def _import_ray() -> Any:
    try:
        import ray
        import ray.data  # ray without the [data] extra lacks pandas/pyarrow
    except ImportError:
        raise ConfigError(_HINT) from None
    return ray


@contextmanager
def _quiet_env() -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in _QUIET_ENV}
    for key, value in _QUIET_ENV.items():
        os.environ.setdefault(key, value)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _connect(ray: Any, address: str, num_cpus: int | None) -> bool:
    """Start or join Ray; True when this call did (and so must shut it down)."""
    if ray.is_initialized():
        return False  # the caller's Ray (a notebook, a test): use it, leave it running
    local = _is_local(address)
    if not local and address != "auto":
        _check_reachable(address)
    options: dict[str, Any] = {
        "include_dashboard": False,
        "log_to_driver": False,  # worker output stays in Ray's log files
        "logging_level": logging.ERROR,
    }
    if local:
        options.update(address="local", num_cpus=num_cpus)
    else:
        options["address"] = address
    try:
        with _quiet_env():
            ray.init(**options)
    except ConnectionError as exc:
        if address == "auto":
            raise UsageError(
                "--ray auto: no Ray cluster runs on this machine "
                "(start one with `ray start --head`, or use --ray local)"
            ) from None
        raise UsageError(f"--ray {address}: cannot connect: {_first_line(exc)}") from None
    except (RuntimeError, ValueError) as exc:  # version mismatch, bad address form
        raise UsageError(f"--ray {address}: cannot connect: {_first_line(exc)}") from None
    _quiet_data(ray)
    return True


def _is_local(address: str) -> bool:
    return address.strip().lower() in LOCAL


def _check_reachable(address: str) -> None:
    """Fail fast: ray.init retries an unreachable address for minutes."""
    hostport = address.split("://", 1)[-1].rstrip("/")
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit():
        raise UsageError(f"--ray {address}: expected HOST:PORT, ray://HOST:PORT, auto or local")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), CONNECT_TIMEOUT_S):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise UsageError(f"--ray {address}: cannot reach a Ray cluster there ({reason})") from None


def _quiet_data(ray: Any) -> None:
    """No progress bars or execution banners from Ray Data: stderr is ours."""
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    ctx.print_on_execution_start = False
    # Failures reach the caller as one exception; Ray's own error logs repeat
    # them with internal tracebacks (kept with debug logging).
    level = logging.ERROR if debugging() else logging.CRITICAL
    for name in ("ray", "ray.data"):
        logging.getLogger(name).setLevel(level)


def _failure(exc: Exception) -> Exception:
    """One line for a failure inside Ray: a ragcli error raised on a worker
    (say a missing model) keeps its class and message, so its exit code;
    anything else becomes the original error's line of the remote traceback."""
    from .. import errors

    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, errors.RagError):
            return seen
        seen = getattr(seen, "cause", None) or seen.__cause__
    # Ray carries the remote exception as traceback text, innermost error first.
    lines = [_ANSI.sub("", line).strip() for line in str(exc).splitlines()]
    found = [m for line in lines if (m := _ERROR_LINE.match(line))]
    for m in found:
        cls = getattr(errors, m[1].removeprefix("ragcli.errors."), None)
        ours = m[1].startswith("ragcli.errors.") and isinstance(cls, type)
        if ours and issubclass(cls, errors.RagError):
            return cls(m[2])
    if found:
        return RuntimeError(f"the Ray run failed: {found[0][1].rsplit('.', 1)[-1]}: {found[0][2]}")
    return RuntimeError(f"the Ray run failed: {next((x for x in lines if x), repr(exc))}")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _pipeline(
    ray: Any, paths: list[Path], settings: Settings, model: EmbeddingModelInfo
) -> Iterator[tuple[PreparedFile, np.ndarray]]:
    import numpy as np

    cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
    blocks = -(-len(paths) // FILES_PER_BLOCK)
    items = [{"index": i, "path": str(p)} for i, p in enumerate(paths)]
    model_args = {
        "name": model.name,
        "path": str(model.path),
        "dim": model.dim,
        "backend": settings.embed_backend,  # the driver's choice: every actor embeds alike
        "cache_dir": str(settings.cache_dir),
    }
    ds = ray.data.from_items(items, override_num_blocks=blocks)
    # Parse tasks claim no CPU: an actor pool holding every CPU would otherwise
    # starve them and the run would hang (ray-project/ray#44687). A few at a
    # time share the cores with the actors; parsing is a small part of the work.
    ds = ds.map_batches(
        _parse_batch,
        batch_size=None,  # a whole block of files per task
        compute=ray.data.TaskPoolStrategy(size=max(1, cpus // 2)),
        num_cpus=0,
        fn_kwargs={
            "model": model_args,
            "chunk_tokens": settings.chunk_tokens,
            "chunk_overlap": settings.chunk_overlap,
        },
    )
    embed = {
        "fn_constructor_kwargs": {"model": model_args},
        "batch_size": ROWS_PER_EMBED_CALL,
        # A fixed pool (an autoscaling one grows too late for short runs), and
        # work goes only to an idle actor, so none waits behind a busy one.
        "compute": ray.data.ActorPoolStrategy(
            size=min(cpus, blocks), max_tasks_in_flight_per_actor=1
        ),
        "num_cpus": 1,
    }
    try:
        with warnings.catch_warnings():
            # max_restarts is a "ray_remote_args" extra, deprecated without a
            # replacement; a Ray that no longer takes it gets Ray's default.
            warnings.filterwarnings("ignore", message=".*ray_remote_args.*deprecated")
            ds = ds.map_batches(EmbedActor, **embed, **_no_restarts(ray))
    except TypeError:
        ds = ds.map_batches(EmbedActor, **embed)

    # Rows of a file may arrive in any order and in several batches: gather
    # them until the file row and all its passages are in.
    waiting: dict[int, list[Any]] = {}  # index -> [PreparedFile | None, {position: vector}]
    try:
        for batch in ds.iter_batches(batch_size=None, batch_format="numpy"):
            for index, position, prepared, vector in zip(
                batch["index"], batch["position"], batch["prepared"], batch["vector"], strict=True
            ):
                entry = waiting.setdefault(int(index), [None, {}])
                if position < 0:
                    entry[0] = prepared
                else:
                    entry[1][int(position)] = vector
                done = entry[0]
                if done is not None and len(entry[1]) == len(done.chunks):
                    del waiting[int(index)]
                    rows = [entry[1][k] for k in range(len(done.chunks))]
                    vectors = (
                        np.stack(rows).astype(np.float32, copy=False)
                        if rows
                        else np.zeros((0, model.dim), dtype=np.float32)
                    )
                    yield done, vectors
    except Exception as exc:
        raise _failure(exc) from exc
    if waiting:
        raise RuntimeError(f"the Ray run lost the results of {len(waiting)} files")


def _no_restarts(ray: Any) -> dict[str, int]:
    """Actor restarts only where there is another node to restart on.

    Ray Data restarts a lost actor by default; on one machine that only helps
    after a crash that will likely recur, and Ray prints a caveat about the
    restart to stderr whenever restarts are on.
    """
    if sum(1 for n in ray.nodes() if n.get("Alive")) > 1:
        return {}
    return {"max_restarts": 0}


def _model_info(model: dict[str, Any]) -> EmbeddingModelInfo:
    """The embedding model on this node: the driver's folder if present here,
    else the same model resolved by name (its wheel may live elsewhere)."""
    from ..errors import ModelError
    from ..models import embedding_model

    path = Path(model["path"])
    if (path / "config.json").is_file():
        return EmbeddingModelInfo(model["name"], path, model["dim"])
    info = embedding_model(model["name"])
    if info.dim != model["dim"]:
        raise ModelError(f"embedding model {model['name']} has another dimension on this node")
    return info


def _parse_batch(
    batch: dict[str, np.ndarray], model: dict[str, Any], chunk_tokens: int, chunk_overlap: int
) -> dict[str, np.ndarray]:
    """Ray task: files in, one row per file (its PreparedFile) and one per passage out."""
    import numpy as np

    counter = token_counter(_model_info(model).path / "tokenizer.json")
    index: list[int] = []
    position: list[int] = []
    text: list[str] = []
    prepared: list[Any] = []
    for i, path in zip(batch["index"], batch["path"], strict=True):
        pf = prepare_file(Path(str(path)), counter, chunk_tokens, chunk_overlap)
        index.append(int(i))
        position.append(-1)
        text.append("")
        prepared.append(pf)
        for k, chunk in enumerate(pf.chunks):
            index.append(int(i))
            position.append(k)
            text.append(chunk.text)
            prepared.append(None)
    objects = np.empty(len(prepared), dtype=object)
    objects[:] = prepared
    return {
        "index": np.array(index, dtype=np.int64),
        "position": np.array(position, dtype=np.int64),
        "text": np.array(text, dtype=object),
        "prepared": objects,
    }


class EmbedActor:
    """Ray actor: holds one loaded model and embeds the passage rows of each batch."""

    def __init__(self, model: dict[str, Any]) -> None:
        from ..config import Settings
        from ..embed.base import indexing_embedder

        self.dim = model["dim"]
        # one actor per CPU: each runs its model on one thread
        own = Settings(
            embed_backend=model["backend"], cache_dir=Path(model["cache_dir"]), n_threads=1
        )
        self.embedder = indexing_embedder(_model_info(model), own)
        self.embedder.embed(["warm-up"])  # load now, not inside the first batch

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        import numpy as np

        passages = batch["position"] >= 0
        vectors = np.zeros((len(passages), self.dim), dtype=np.float32)
        if passages.any():
            vectors[passages] = self.embedder.embed([str(t) for t in batch["text"][passages]])
        return {
            "index": batch["index"],
            "position": batch["position"],
            "prepared": batch["prepared"],
            "vector": vectors,
        }
