"""Make the ONNX files of an embedding model: an fp32 export and an int8 variant.

This is the only module that needs torch at run time for ONNX, so it runs at install
time (`rag models pull all-MiniLM-L6-v2`) or when `rag index` finds the files missing,
never on the query path. Why ``torch.onnx.export`` and not optimum: the folder's own
transformer is traced with mean pooling and normalisation on top, so one graph gives
the finished vector; it needs only torch (already there for the fallback) and ``onnx``
(already needed by the quantizer), where optimum would add a large stack for the same
graph. The TorchScript exporter is used because it needs no further package (the newer
torch.export-based one needs onnxscript) and handles BERT-like models with dynamic
batch and length axes.

Every export is checked before it is kept: the fp32 graph must give the traced module's
vectors (cosine >= 0.9999) on sample texts, or the folder is reported unsupported and
``rag index`` keeps it on torch. The int8 variant is ONNX Runtime's dynamic quantization
of the weights of every MatMul, per output channel: per-tensor scales lost too much on
MiniLM (cosine to fp32 down to 0.89 on real passages; per channel: 0.99).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
import warnings
from pathlib import Path

from ..errors import ModelError
from ..models import EmbeddingModelInfo
from ..models.digests import file_digest
from .manifest import (
    ONNX_FILES,
    OnnxModel,
    onnx_dir,
    onnx_file_names,
    verified_onnx,
    write_onnx_manifest,
)

log = logging.getLogger(__name__)

_TRANSFORMER = "sentence_transformers.models.Transformer"
_POOLING = "sentence_transformers.models.Pooling"
_NORMALIZE = "sentence_transformers.models.Normalize"
_POOL_MODES = ("mean", "cls", "max")
_CHECK_TEXTS = [
    "hi",
    "How do I rebuild the index after adding documents?",
    "Retrieval-augmented generation answers from passages found by vector search. " * 8,
]
OPSET = 17
INT8_MIN_COSINE = 0.98  # int8 against fp32 on the check texts, below which the export fails


class ExportUnsupported(ModelError):
    """The model folder cannot be exported as one graph; torch is used for it instead."""


def _read_json(path: Path) -> dict | list | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def pooling_mode(info: EmbeddingModelInfo) -> str:
    """How the folder pools token vectors ("mean", "cls" or "max"), if the export covers it.

    Covered: a Transformer module, then Pooling with exactly one of those modes, then
    optionally Normalize (vectors are always normalised for the index), nothing else,
    and a fast-tokenizer ``tokenizer.json``. Anything else raises ExportUnsupported.
    """
    path = Path(info.path)
    modules = _read_json(path / "modules.json")
    if not isinstance(modules, list) or not (path / "tokenizer.json").is_file():
        raise ExportUnsupported(f"{info.name}: no modules.json or tokenizer.json")
    try:
        ordered = sorted(modules, key=lambda m: int(m.get("idx", 0)))
        types = [m.get("type") for m in ordered]
    except (AttributeError, TypeError, ValueError):
        raise ExportUnsupported(f"{info.name}: unreadable modules.json") from None
    if types not in ([_TRANSFORMER, _POOLING], [_TRANSFORMER, _POOLING, _NORMALIZE]):
        raise ExportUnsupported(f"{info.name}: modules {types} are not Transformer, Pooling")
    if ordered[0].get("path", "") not in ("", "."):
        raise ExportUnsupported(f"{info.name}: the transformer is not at the folder's top")
    pooling = _read_json(path / str(ordered[1].get("path", "")) / "config.json")
    if not isinstance(pooling, dict) or pooling.get("include_prompt") is False:
        raise ExportUnsupported(f"{info.name}: unsupported pooling configuration")
    modes = [k for k, v in pooling.items() if k.startswith("pooling_mode_") and v]
    chosen = [
        m
        for m in _POOL_MODES
        if f"pooling_mode_{m}_token" in modes or f"pooling_mode_{m}_tokens" in modes
    ]
    if len(modes) != 1 or len(chosen) != 1:
        raise ExportUnsupported(f"{info.name}: pooling {modes} is not one of {_POOL_MODES}")
    return chosen[0]


def ensure_onnx(info: EmbeddingModelInfo, cache_dir: Path, quantization: str) -> OnnxModel:
    """The verified ONNX file for ``quantization``, exporting both files first if either
    is missing or fails its sha256 (it is removed, never used)."""
    pooling_mode(info)
    found = verified_onnx(info, cache_dir, quantization)
    other = "fp32" if quantization == "int8" else "int8"
    if found is not None and verified_onnx(info, cache_dir, other) is not None:
        return found
    export(info, cache_dir)
    found = verified_onnx(info, cache_dir, quantization)
    if found is None:
        raise ModelError(f"the ONNX export of {info.name} does not verify after export")
    return found


def export(info: EmbeddingModelInfo, cache_dir: Path) -> dict[str, OnnxModel]:
    """Export the folder to fp32 ONNX, check it, quantize it to int8, optimize both graphs
    for ONNX Runtime, and record the sha256 of every file."""
    mode = pooling_mode(info)
    folder = onnx_dir(info, cache_dir)
    log.info("exporting %s to ONNX (once; this loads torch)", info.name)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=folder, prefix=".export-") as tmp:
            work = Path(tmp)
            plain = {"fp32": work / "plain.onnx", "int8": work / "plain.int8.onnx"}
            versions = _export_fp32(info, mode, plain["fp32"])
            _quantize(plain["fp32"], plain["int8"])
            digests: dict[str, str] = {}
            for q in ("fp32", "int8"):
                graph, data = onnx_file_names(q)
                _optimize(plain[q], work / graph, data)
                _check_optimized(info, plain["fp32"], work / graph, q)
                for name in (graph, data):
                    os.chmod(work / name, 0o644)
                    os.replace(work / name, folder / name)
                    digests[name] = file_digest(folder / name, folder)
            write_onnx_manifest(folder, digests, {"source": str(info.path), **versions})
    except OSError as exc:
        raise ModelError(
            f"cannot write the ONNX export of {info.name} in {folder}: {exc}"
        ) from None
    return {
        q: OnnxModel(folder / ONNX_FILES[q], q, digests[ONNX_FILES[q]]) for q in ("fp32", "int8")
    }


def _optimize(source: Path, target: Path, data_name: str) -> None:
    """Save the graph as ONNX Runtime optimizes it (fused attention, layer norms), with the
    weights in ``data_name`` beside it: loading it skips the optimizer (a third of the time
    of a fresh `rag search`'s session) and memory-maps the weights instead of copying them,
    so the word-embedding rows a query never touches stay on disk."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(target)
    options.log_severity_level = 3
    options.add_session_config_entry(
        "session.optimized_model_external_initializers_file_name", data_name
    )
    options.add_session_config_entry(
        "session.optimized_model_external_initializers_min_size_in_bytes", "1024"
    )
    ort.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])


def _check_optimized(info: EmbeddingModelInfo, reference: Path, graph: Path, q: str) -> None:
    """The optimized graph must give the plain fp32 graph's vectors: to float rounding for
    fp32, within int8's stated bound for int8."""
    import numpy as np

    from .onnx import OnnxEmbedder

    def vectors(path: Path, optimized: bool) -> np.ndarray:
        model = OnnxModel(path, q, "")
        return OnnxEmbedder(info, model, threads=1, optimized=optimized).embed(_CHECK_TEXTS)

    cosines = np.sum(vectors(reference, False) * vectors(graph, True), axis=1)
    if float(cosines.min()) < (0.9999 if q == "fp32" else INT8_MIN_COSINE):
        raise ModelError(
            f"the optimized {q} ONNX graph of {info.name} drifts from the model "
            f"(cosine {float(cosines.min()):.4f}); not kept"
        )


def _export_fp32(info: EmbeddingModelInfo, mode: str, target: Path) -> dict[str, str]:
    """Trace the folder's transformer with pooling and normalisation into one graph."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    import inspect

    import numpy as np
    import torch
    from transformers import AutoModel

    try:
        model = AutoModel.from_pretrained(str(info.path), attn_implementation="eager").eval()
    except (OSError, ValueError, TypeError) as exc:
        raise ExportUnsupported(f"{info.name}: transformers cannot load it ({exc})") from None
    names = ["input_ids", "attention_mask"]
    if "token_type_ids" in inspect.signature(model.forward).parameters:
        names.append("token_type_ids")

    class Pooled(torch.nn.Module):
        """The transformer, then the folder's pooling, then L2 normalisation."""

        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
            hidden = self.model(**dict(zip(names, inputs, strict=True)))[0]
            mask = inputs[1].unsqueeze(-1).to(hidden.dtype)
            if mode == "cls":
                pooled = hidden[:, 0]
            elif mode == "max":
                pooled = (hidden + (mask - 1.0) * 1e9).max(dim=1).values
            else:
                pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2.0, dim=1)

    wrapped = Pooled().eval()
    sample = torch.ones((2, 16), dtype=torch.long)
    args = tuple(sample if n != "token_type_ids" else torch.zeros_like(sample) for n in names)
    axes = {n: {0: "batch", 1: "tokens"} for n in names} | {"embedding": {0: "batch"}}
    with torch.no_grad(), warnings.catch_warnings(), _quiet_stdout():
        warnings.simplefilter("ignore")
        try:
            torch.onnx.export(
                wrapped,
                args,
                str(target),
                dynamo=False,
                opset_version=OPSET,
                input_names=names,
                output_names=["embedding"],
                dynamic_axes=axes,
            )
        except Exception as exc:  # the exporter raises many kinds for unsupported graphs
            raise ExportUnsupported(f"{info.name}: torch.onnx.export failed ({exc})") from None
    # The graph must give the traced module's vectors, or it is not kept.
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(Path(info.path) / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=128)
    import onnxruntime as ort

    session = ort.InferenceSession(str(target), providers=["CPUExecutionProvider"])
    for enc in tokenizer.encode_batch(_CHECK_TEXTS):
        ids = torch.tensor([enc.ids], dtype=torch.long)
        feeds = [ids, torch.ones_like(ids), torch.zeros_like(ids)][: len(names)]
        with torch.no_grad():
            want = wrapped(*feeds).numpy()[0]
        got = session.run(None, dict(zip(names, (f.numpy() for f in feeds), strict=True)))[0][0]
        if float(np.dot(want, got)) < 0.9999:
            raise ExportUnsupported(f"{info.name}: the ONNX graph does not reproduce the model")
    return {"torch": torch.__version__, "onnxruntime": ort.__version__}


def _quantize(fp32: Path, int8: Path) -> None:
    """Dynamic int8 quantization of the MatMul weights, one scale per output channel.

    Weights use 7 of the 8 bits (``reduce_range``): on x86 CPUs without VNNI the int8
    kernels add pairs of products in 16 bits, which full-range weights can overflow. On
    such a CPU (AVX2, Zen 3) the worst cosine to sentence-transformers over the test texts
    rose from 0.966 to 0.974 with it (docs/BENCHMARKS.md, "Embeddings on ONNX Runtime").
    """
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with _quiet_logging():
        quantize_dynamic(
            str(fp32),
            str(int8),
            weight_type=QuantType.QInt8,
            op_types_to_quantize=["MatMul"],
            per_channel=True,
            reduce_range=True,
        )


@contextlib.contextmanager
def _quiet_stdout():
    """The TorchScript exporter prints diagnostics to stdout; keep `--json` clean."""
    import io
    import sys

    saved = sys.stdout
    sys.stdout = io.StringIO()
    try:
        yield
    finally:
        sys.stdout = saved


@contextlib.contextmanager
def _quiet_logging():
    """The quantizer logs advice on the root logger; it is not the user's concern."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        yield
    finally:
        root.setLevel(level)
