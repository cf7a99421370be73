"""A query-time embedder that needs neither torch nor sentence-transformers.

Importing sentence-transformers pulls in torch and transformers and takes
seconds, which dominates a one-question ``rag ask``. For the common case, a
BERT model with mean pooling and normalization (all-MiniLM-L6-v2 and its
kin), the forward pass is small enough to run in plain numpy over the
model's own ``model.safetensors``, tokenized by ``tokenizers`` from the
folder's ``tokenizer.json``. The vectors match sentence-transformers to
float32 rounding (cosine > 0.99999).

``supports(info)`` says whether a model folder can run this way; callers fall
back to ``SentenceTransformerEmbedder`` when it cannot. Nothing heavy happens
at import or construction: weights are memory-mapped on the first ``embed``.
"""

from __future__ import annotations

import contextlib
import json
import math
import mmap
import struct
from pathlib import Path
from typing import TYPE_CHECKING

from ..models import EmbeddingModelInfo

if TYPE_CHECKING:
    import numpy as np

    from .base import Progress

_TRANSFORMER = "sentence_transformers.models.Transformer"
_POOLING = "sentence_transformers.models.Pooling"
_NORMALIZE = "sentence_transformers.models.Normalize"
_WEIGHTS = "model.safetensors"
_ATTENTION_BYTES = 32 << 20  # cap on one pass's attention scores
_THREADED_TOKENS = 1024  # below this many (padded) tokens BLAS runs on one thread
_DTYPES = {"F32": "<f4", "F16": "<f2", "BF16": "<u2", "F64": "<f8", "I64": "<i8"}


def _read_json(path: Path) -> dict | list | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _safetensors_header(path: Path) -> tuple[dict, int]:
    """The tensor table of a .safetensors file and where its data starts."""
    with open(path, "rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        if size > 100_000_000:
            raise ValueError(f"{path}: implausible safetensors header size {size}")
        header = json.loads(f.read(size))
    return header, 8 + size


def _weight_prefix(names) -> str | None:
    """'' for a bare BertModel checkpoint, 'bert.' for a BertFor* one, None if neither."""
    for prefix in ("", "bert."):
        if f"{prefix}embeddings.word_embeddings.weight" in names:
            return prefix
    return None


def supports(info: EmbeddingModelInfo) -> bool:
    """Whether ``NumpyBertEmbedder`` reproduces this model folder exactly.

    It must be a plain BERT encoder (absolute positions, exact GELU) with
    safetensors weights and a fast-tokenizer ``tokenizer.json``, followed by
    mean pooling and Normalize and nothing else.
    """
    path = Path(info.path)
    try:
        config = _read_json(path / "config.json")
        if not isinstance(config, dict):
            return False
        archs = config.get("architectures") or []
        if config.get("model_type") != "bert" and not any(str(a).startswith("Bert") for a in archs):
            return False
        if config.get("hidden_act", "gelu") != "gelu":
            return False
        if config.get("position_embedding_type", "absolute") != "absolute":
            return False
        if int(config["hidden_size"]) % int(config["num_attention_heads"]):
            return False
        if not (path / "tokenizer.json").is_file() or not (path / _WEIGHTS).is_file():
            return False

        modules = _read_json(path / "modules.json")
        if not isinstance(modules, list):
            return False
        types = [m.get("type") for m in sorted(modules, key=lambda m: int(m.get("idx", 0)))]
        if types != [_TRANSFORMER, _POOLING, _NORMALIZE]:
            return False
        pooling_dir = next(m.get("path", "") for m in modules if m.get("type") == _POOLING)
        pooling = _read_json(path / pooling_dir / "config.json")
        if not isinstance(pooling, dict) or not _is_plain_mean(pooling):
            return False
        if int(pooling.get("word_embedding_dimension", config["hidden_size"])) != int(
            config["hidden_size"]
        ):
            return False

        header, _ = _safetensors_header(path / _WEIGHTS)
        prefix = _weight_prefix(header)
        if prefix is None:
            return False
        return all(
            header.get(f"{prefix}{n}", {}).get("dtype") in ("F32", "F16", "BF16")
            for n in _weight_names(int(config["num_hidden_layers"]))
        )
    except (OSError, ValueError, KeyError, TypeError, StopIteration, struct.error):
        return False


def _is_plain_mean(pooling: dict) -> bool:
    modes = {k: bool(v) for k, v in pooling.items() if k.startswith("pooling_mode_")}
    if pooling.get("include_prompt") is False:
        return False
    return modes.get("pooling_mode_mean_tokens", False) and not any(
        v for k, v in modes.items() if k != "pooling_mode_mean_tokens"
    )


def _weight_names(layers: int) -> list[str]:
    names = [
        "embeddings.word_embeddings.weight",
        "embeddings.position_embeddings.weight",
        "embeddings.token_type_embeddings.weight",
        "embeddings.LayerNorm.weight",
        "embeddings.LayerNorm.bias",
    ]
    for i in range(layers):
        p = f"encoder.layer.{i}."
        for part in (
            "attention.self.query",
            "attention.self.key",
            "attention.self.value",
            "attention.output.dense",
            "intermediate.dense",
            "output.dense",
        ):
            names += [f"{p}{part}.weight", f"{p}{part}.bias"]
        for part in ("attention.output.LayerNorm", "output.LayerNorm"):
            names += [f"{p}{part}.weight", f"{p}{part}.bias"]
    return names


def _erf(x: np.ndarray) -> np.ndarray:
    """erf within 4e-7 in float32 (Numerical Recipes erfc Chebyshev fit, 1.2e-7 exact)."""
    import numpy as np

    z = np.abs(x)
    t = 1.0 / (1.0 + 0.5 * z)
    # erfc(z) = t * exp(-z^2 - 1.26551223 + t*(1.00002368 + t*(...)))
    poly = t * 0.17087277 - 0.82215223
    for c in (1.48851587, -1.13520398, 0.27886807, -0.18628806, 0.09678418, 0.37409196):
        poly *= t
        poly += c
    poly *= t
    poly += 1.00002368
    poly *= t
    poly -= 1.26551223
    poly -= z * z
    np.exp(poly, out=poly)
    poly *= t  # erfc(|x|)
    r = 1.0 - poly
    return np.copysign(r, x, out=r)


def _gelu(x: np.ndarray) -> np.ndarray:
    """The exact (erf) GELU that BERT's "gelu" means, in float32."""
    import numpy as np

    y = _erf(x * np.float32(1.0 / math.sqrt(2.0)))
    y += 1.0
    y *= 0.5
    y *= x
    return y


def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    import numpy as np

    mean = x.mean(axis=-1, keepdims=True)
    x = x - mean
    var = np.mean(np.square(x), axis=-1, keepdims=True)
    x *= 1.0 / np.sqrt(var + np.float32(eps))
    x *= w
    x += b
    return x


class _Weights:
    """The model's tensors as float32 numpy arrays over a memory map of the file."""

    def __init__(self, path: Path) -> None:
        import numpy as np

        header, start = _safetensors_header(path)
        header.pop("__metadata__", None)
        self._prefix = _weight_prefix(header) or ""
        with open(path, "rb") as f:
            self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        self._arrays: dict[str, np.ndarray] = {}
        for name, meta in header.items():
            dtype = _DTYPES.get(meta["dtype"])
            if dtype is None:
                continue
            begin, end = meta["data_offsets"]
            count = int(np.prod(meta["shape"], dtype=np.int64))
            arr = np.frombuffer(self._map, dtype=dtype, count=count, offset=start + begin)
            if end - begin != arr.nbytes:
                raise ValueError(f"{path}: tensor {name} has the wrong size")
            arr = arr.reshape(meta["shape"])
            if meta["dtype"] == "BF16":
                arr = (arr.astype(np.uint32) << 16).view(np.float32)
            elif meta["dtype"] in ("F16", "F64"):
                arr = arr.astype(np.float32)
            self._arrays[name] = arr

    def __getitem__(self, name: str) -> np.ndarray:
        return self._arrays[self._prefix + name]


class _Layer:
    __slots__ = ("ln1_b", "ln1_w", "ln2_b", "ln2_w", "o_b", "o_w", "out_b", "out_w", "qkv_b", "qkv_w", "up_b", "up_w")  # fmt: skip


class _BertModel:
    """BERT's encoder forward pass, as transformers' BertModel computes it."""

    def __init__(self, path: Path, config: dict) -> None:
        import numpy as np

        w = _Weights(path / _WEIGHTS)
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        self.heads = int(config["num_attention_heads"])
        self.hidden = int(config["hidden_size"])
        self.word = w["embeddings.word_embeddings.weight"]  # stays mapped: rows read on demand
        self.pos = np.ascontiguousarray(w["embeddings.position_embeddings.weight"])
        self.type0 = np.array(w["embeddings.token_type_embeddings.weight"][0])
        self.emb_ln_w = np.array(w["embeddings.LayerNorm.weight"])
        self.emb_ln_b = np.array(w["embeddings.LayerNorm.bias"])
        self.layers: list[_Layer] = []
        for i in range(int(config["num_hidden_layers"])):
            p = f"encoder.layer.{i}."
            layer = _Layer()
            # one fused projection for query, key and value; weights kept as W.T views
            layer.qkv_w = np.concatenate(
                [w[f"{p}attention.self.{n}.weight"] for n in ("query", "key", "value")]
            ).T
            layer.qkv_b = np.concatenate(
                [w[f"{p}attention.self.{n}.bias"] for n in ("query", "key", "value")]
            )
            layer.o_w = w[f"{p}attention.output.dense.weight"].T
            layer.o_b = np.array(w[f"{p}attention.output.dense.bias"])
            layer.ln1_w = np.array(w[f"{p}attention.output.LayerNorm.weight"])
            layer.ln1_b = np.array(w[f"{p}attention.output.LayerNorm.bias"])
            layer.up_w = w[f"{p}intermediate.dense.weight"].T
            layer.up_b = np.array(w[f"{p}intermediate.dense.bias"])
            layer.out_w = w[f"{p}output.dense.weight"].T
            layer.out_b = np.array(w[f"{p}output.dense.bias"])
            layer.ln2_w = np.array(w[f"{p}output.LayerNorm.weight"])
            layer.ln2_b = np.array(w[f"{p}output.LayerNorm.bias"])
            self.layers.append(layer)
        self._threadpools = None

    def _one_blas_thread(self):
        """Run BLAS on one thread inside this context (when threadpoolctl can say so).

        A multi-threaded OpenBLAS wakes and syncs its threads on every GEMM. For a
        query's few tokens, and for attention (numpy runs a stacked matmul as one small
        GEMM per batch row and head), that costs far more than it saves, and on a busy
        machine it made a 10-token query take ~1 s instead of ~20 ms.
        """
        if self._threadpools is None:
            try:
                from threadpoolctl import ThreadpoolController

                self._threadpools = ThreadpoolController()
            except Exception:  # not installed, or cannot inspect this BLAS: run as is
                self._threadpools = False
        if not self._threadpools:
            return contextlib.nullcontext()
        return self._threadpools.limit(limits=1, user_api="blas")

    def __call__(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Last hidden states, shape (batch, length, hidden), for token ids and a 0/1 mask."""
        if ids.size < _THREADED_TOKENS:
            with self._one_blas_thread():
                return self._forward(ids, mask, threaded=False)
        return self._forward(ids, mask, threaded=True)

    def _forward(self, ids: np.ndarray, mask: np.ndarray, threaded: bool) -> np.ndarray:
        import numpy as np

        b, n = ids.shape
        h, d = self.heads, self.hidden // self.heads
        x = self.word[ids.reshape(-1)].reshape(b, n, self.hidden)
        x = x + self.pos[:n]
        x += self.type0
        x = _layer_norm(x.reshape(b * n, self.hidden), self.emb_ln_w, self.emb_ln_b, self.eps)
        # padded keys get the most negative float32, exactly as transformers does
        bias = np.where(mask[:, None, None, :] > 0, 0.0, np.finfo(np.float32).min)
        bias = bias.astype(np.float32)
        scale = np.float32(1.0 / math.sqrt(d))
        for layer in self.layers:
            qkv = x @ layer.qkv_w
            qkv += layer.qkv_b
            # (3, b, h, n, d), contiguous so that every per-head product goes to BLAS
            qkv = np.ascontiguousarray(qkv.reshape(b, n, 3, h, d).transpose(2, 0, 3, 1, 4))
            q, k, v = qkv[0], qkv[1], qkv[2]
            with self._one_blas_thread() if threaded else contextlib.nullcontext():
                scores = q @ k.transpose(0, 1, 3, 2)
                scores *= scale
                scores += bias
                scores -= scores.max(axis=-1, keepdims=True)
                np.exp(scores, out=scores)
                scores /= scores.sum(axis=-1, keepdims=True)
                ctx = scores @ v
            del scores, q, k, v, qkv
            ctx = ctx.transpose(0, 2, 1, 3).reshape(b * n, self.hidden)
            a = ctx @ layer.o_w
            a += layer.o_b
            a += x
            x = _layer_norm(a, layer.ln1_w, layer.ln1_b, self.eps)
            u = x @ layer.up_w
            u += layer.up_b
            u = _gelu(u)
            o = u @ layer.out_w
            del u
            o += layer.out_b
            o += x
            x = _layer_norm(o, layer.ln2_w, layer.ln2_b, self.eps)
        return x.reshape(b, n, self.hidden)


class NumpyBertEmbedder:
    """Same vectors as ``SentenceTransformerEmbedder``, without torch.

    Only for folders where ``supports(info)`` is true.
    """

    def __init__(self, info: EmbeddingModelInfo, batch_size: int = 32) -> None:
        self.info = info
        self.batch_size = batch_size
        self._model: _BertModel | None = None
        self._tokenizer = None
        self._lower = False

    @staticmethod
    def supports(info: EmbeddingModelInfo) -> bool:
        return supports(info)

    def _load(self) -> tuple[_BertModel, object]:
        if self._model is None:
            from tokenizers import Tokenizer

            path = Path(self.info.path)
            config = _read_json(path / "config.json")
            if not isinstance(config, dict):
                raise ValueError(f"{path}: unreadable config.json")
            st_config = _read_json(path / "sentence_bert_config.json") or {}
            max_len = int(
                st_config.get("max_seq_length") or config.get("max_position_embeddings", 512)
            )
            max_len = min(max_len, int(config.get("max_position_embeddings", max_len)))
            self._lower = bool(st_config.get("do_lower_case", False))
            tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
            tokenizer.no_padding()  # the file asks for fixed padding to 128; we pad per batch
            tokenizer.enable_truncation(max_length=max_len)
            self._tokenizer = tokenizer
            self._model = _BertModel(path, config)
        return self._model, self._tokenizer

    def embed(self, texts: list[str], progress: Progress | None = None) -> np.ndarray:
        import numpy as np

        model, tokenizer = self._load()
        out = np.zeros((len(texts), self.info.dim), dtype=np.float32)
        if self._lower:
            texts = [t.lower() for t in texts]
        ids = [e.ids for e in tokenizer.encode_batch(texts, add_special_tokens=True)]
        # run similar lengths together so little compute goes to padding, and cap the
        # rows per pass so the (rows, heads, n, n) attention scores stay under ~32 MB
        order = sorted(range(len(texts)), key=lambda i: len(ids[i]))
        pos = 0
        while pos < len(order):
            rows = order[pos : pos + self.batch_size]
            n = len(ids[rows[-1]])
            cap = max(1, _ATTENTION_BYTES // (4 * model.heads * n * n))
            rows = rows[:cap]
            n = len(ids[rows[-1]])
            batch = np.zeros((len(rows), n), dtype=np.int64)
            mask = np.zeros((len(rows), n), dtype=np.float32)
            for r, i in enumerate(rows):
                batch[r, : len(ids[i])] = ids[i]
                mask[r, : len(ids[i])] = 1.0
            hidden = model(batch, mask)
            summed = np.einsum("bnh,bn->bh", hidden, mask)
            pooled = summed / np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
            norms = np.linalg.norm(pooled, axis=1, keepdims=True)
            out[rows] = pooled / np.maximum(norms, 1e-12)
            pos += len(rows)
            if progress:
                progress(len(rows))
        return out
