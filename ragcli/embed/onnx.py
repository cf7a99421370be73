"""The embedding model on ONNX Runtime: indexing and queries, without torch.

The graph (exported by :mod:`ragcli.embed.onnx_export`) holds the transformer, the
pooling and the normalisation, so a batch of token ids goes in and finished vectors
come out; ``tokenizers`` reads the folder's own ``tokenizer.json``. Index and query
load the same file, so they get the same vectors for the same text. Nothing heavy
happens at import or construction: the session is made on the first ``embed``.

The int8 graph quantizes each MatMul's input on the fly with one scale for the whole
tensor, so a text's vector would depend on the texts batched with it (and their
padding). It therefore runs one text per call: a passage's vector at indexing is the
question-time vector of the same text, whatever else was embedded with it. One text is
too little work to split across cores (the threads would mostly wait for each other), so
each call runs on one thread and ``threads`` calls run side by side. fp32 has no such
coupling and runs in batches of similar length, each batch on all the threads.

A query session (the one made without prepacking) embeds a question and its candidate
sentences while the model loads on another thread, and just before the model's prefill:
it takes at most QUERY_THREADS, leaves a core to the loader, and its idle threads sleep.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from ..cpus import physical_cores
from ..models import EmbeddingModelInfo
from .manifest import OnnxModel

if TYPE_CHECKING:
    import numpy as np

    from ..progress import Progress

BATCH_TOKENS = 2048  # fp32: padded tokens per run (8192 took 196 MB more, no faster)
MAX_BATCH = 64
# A question and a few dozen sentences: more threads would mostly wait for each other.
QUERY_THREADS = 2


def query_threads(threads: int) -> int:
    """Threads of a query session: one core left to the model loading beside it."""
    return max(1, min(QUERY_THREADS, threads - 1))


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


class OnnxEmbedder:
    """Vectors from one verified ONNX file of the model (fp32 or int8)."""

    backend = "onnx"

    def __init__(
        self,
        info: EmbeddingModelInfo,
        model: OnnxModel,
        threads: int = 0,
        spinning: bool = True,
        optimized: bool = True,
        prepack: bool = True,
    ) -> None:
        self.info = info
        self.model = model
        self.quantization = model.quantization
        self.threads = threads or physical_cores()
        self.spinning = spinning
        self.optimized = optimized  # the graph was saved optimized: skip the optimizer
        # Repacking the weights for the matrix kernels pays off over thousands of passages,
        # not for one question: a query session skips it and starts in about half the time.
        self.prepack = prepack
        if not prepack:  # a query session (see the module's docstring)
            self.threads = query_threads(self.threads)
            self.spinning = False
        self._session = None
        self._tokenizer = None
        self._lower = False
        self._inputs: list[str] = []

    @property
    def loaded(self) -> bool:
        return self._session is not None

    def release(self) -> None:
        """Drop the session and its memory arena (the next ``embed`` loads it again):
        `rag index` frees them before its final commit, which may rebuild the vectors."""
        self._session = None

    def _load(self):
        if self._session is None:
            import onnxruntime as ort
            from tokenizers import Tokenizer

            path = Path(self.info.path)
            config = _read_json(path / "config.json")
            st_config = _read_json(path / "sentence_bert_config.json")
            limit = int(config.get("max_position_embeddings", 512))
            max_len = min(int(st_config.get("max_seq_length") or limit), limit)
            self._lower = bool(st_config.get("do_lower_case", False))
            tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
            tokenizer.no_padding()  # padded per batch here, to the batch's longest text
            tokenizer.enable_truncation(max_length=max_len)
            options = ort.SessionOptions()
            # int8: one thread per call, calls side by side (see the module's docstring).
            options.intra_op_num_threads = 1 if self.quantization == "int8" else self.threads
            options.inter_op_num_threads = 1
            options.log_severity_level = 3  # errors only: nothing on stderr otherwise
            # Memory patterns plan one block per input shape; every batch has a new shape
            # here (padded to its longest text): off, 60 MB less resident, no slower.
            options.enable_mem_pattern = False
            if self.optimized:
                options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
            if not self.prepack:
                options.add_session_config_entry("session.disable_prepacking", "1")
            if not self.spinning:
                # Idle threads sleep instead of spinning: the cores go to the parsers.
                options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            try:
                session = ort.InferenceSession(
                    str(self.model.path), options, providers=["CPUExecutionProvider"]
                )
            except Exception as exc:  # onnxruntime raises its own classes
                from ..errors import ModelError

                raise ModelError(f"ONNX Runtime cannot load {self.model.path}: {exc}") from None
            self._inputs = [i.name for i in session.get_inputs()]
            self._tokenizer = tokenizer
            self._session = session
        return self._session, self._tokenizer

    def embed(self, texts: list[str], progress: Progress | None = None) -> np.ndarray:
        import numpy as np

        session, tokenizer = self._load()
        out = np.zeros((len(texts), self.info.dim), dtype=np.float32)
        if not texts:
            return out
        if self._lower:
            texts = [t.lower() for t in texts]
        ids = [e.ids for e in tokenizer.encode_batch(texts, add_special_tokens=True)]
        # Longest first: batches of similar length waste little on padding, and side by
        # side single calls finish together.
        order = sorted(range(len(texts)), key=lambda i: -len(ids[i]))
        if self.quantization == "int8":
            self._embed_singly(session, ids, order, out, progress)
            return out
        pos = 0
        done = 0  # rows since the last progress call: report about every MAX_BATCH texts
        while pos < len(order):
            n = max(1, len(ids[order[pos]]))
            rows = order[pos : pos + max(1, min(MAX_BATCH, BATCH_TOKENS // n))]
            out[rows] = self._run(session, [ids[i] for i in rows], n)
            pos += len(rows)
            done += len(rows)
            if progress and (done >= MAX_BATCH or pos == len(order)):
                progress(done)
                done = 0
        return out

    def _embed_singly(self, session, ids, order, out, progress: Progress | None) -> None:
        """One text per call, ``threads`` calls at a time (ONNX Runtime releases the GIL)."""
        from concurrent.futures import ThreadPoolExecutor

        def one(i: int) -> np.ndarray:
            return self._run(session, [ids[i]], len(ids[i]))[0]

        workers = max(1, min(self.threads, len(order)))
        with ThreadPoolExecutor(workers, thread_name_prefix="embed") as pool:
            run = pool.map if workers > 1 else map
            for start in range(0, len(order), MAX_BATCH):
                rows = order[start : start + MAX_BATCH]
                for i, vector in zip(rows, run(one, rows), strict=True):
                    out[i] = vector
                if progress:
                    progress(len(rows))

    def _run(self, session, rows: list[list[int]], n: int) -> np.ndarray:
        """Vectors of token-id rows, padded to ``n`` tokens."""
        import numpy as np

        batch = np.zeros((len(rows), max(1, n)), dtype=np.int64)
        mask = np.zeros_like(batch)
        for r, row in enumerate(rows):
            batch[r, : len(row)] = row
            mask[r, : len(row)] = 1
        feeds = {"input_ids": batch, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(batch)
        return session.run(None, feeds)[0]
