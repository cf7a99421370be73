"""The numpy embedder against sentence-transformers itself, on real model weights."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ragcli.embed.numpy_bert import NumpyBertEmbedder, supports
from ragcli.models import EmbeddingModelInfo, embedding_model

LITERAL_TEXTS = [
    "hi",
    "a",
    "?",
    "42",
    " ",
    "   \t\n  ",
    "",
    "Hello, world!",
    "What is retrieval-augmented generation?",
    "How do I install ragcli on a machine without internet access?",
    "The mitochondria is the powerhouse of the cell.",
    "Which command rebuilds the index after I add new documents?",
    "UPPER CASE QUERY ABOUT VECTOR DATABASES",
    "MiXeD cAsE tExT wItH sTrAnGe CaPiTaLs",
    "Café, naïve, résumé, façade, jalapeño, Ærøskøbing, Straße.",
    "Ça va? Où est la bibliothèque? À bientôt!",
    "Über den Wolken muss die Freiheit wohl grenzenlos sein.",
    "¿Dónde está la estación de tren más cercana?",
    "東京は日本の首都です。人口は約1400万人です。",
    "机器学习是人工智能的一个分支。",
    "한국어 문장도 처리할 수 있나요?",
    "Привет, мир! Как дела сегодня?",
    "Москва — столица России, крупнейший город страны.",
    "مرحبا بالعالم، كيف حالك اليوم؟",
    "שלום עולם, מה שלומך?",
    "नमस्ते दुनिया, आप कैसे हैं?",
    "Γειά σου Κόσμε! Η ελληνική γλώσσα.",
    "ไทย ภาษาไทย สวัสดีครับ",
    "🎉🚀 party time 😀👍🏽",
    "👨‍👩‍👧‍👦 family emoji with zero-width joiners",
    "I ❤️ NY ☕ and ♫ music ✓ done ★★★★☆",
    "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)",
    "SELECT id, name FROM users WHERE created_at > NOW() - INTERVAL '7 days';",
    "for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }",
    '{"key": [1, 2, 3], "nested": {"x": null, "y": true}}',
    "<html><body><p class='x'>Hello</p></body></html>",
    "$ pip install --upgrade ragcli && rag index ~/docs --model all-MiniLM-L6-v2",
    "https://example.com/path/to/page?query=string&lang=en#anchor",
    "user.name+tag@example.co.uk",
    "3.14159265358979323846264338327950288419716939937510",
    "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20",
    "2024-02-29T23:59:59Z",
    "$1,234,567.89 and €99.99 and ¥10000 and £5",
    "E = mc² ; ∑ᵢ xᵢ² ≤ ∞ ; √2 ≈ 1.414 ; α β γ δ",
    "........................................",
    "!!!???!!!",
    "---",
    "[CLS] [SEP] [PAD] [MASK] [UNK]",
    "antidisestablishmentarianism",
    "pneumonoultramicroscopicsilicovolcanoconiosis",
    "supercalifragilisticexpialidocious xyzzy plugh qwertyuiop",
    "tab\tseparated\tvalues\there",
    "line one\nline two\r\nline three",
    "non\u00a0breaking\u00a0spaces and zero\u200bwidth\u200bspaces",
    "control chars \x00\x01\x07 in the middle",
    "A" * 600,
    "word " * 400,
    "The the the the the the the the the the.",
    "Is it possible that the answer is no, or is the answer simply unknown?",
    "Mixed: English, français, 日本語, русский, العربية and 😀 in one line.",
]

WORDS = [
    "index",
    "passage",
    "retrieval",
    "model",
    "vector",
    "query",
    "answer",
    "document",
    "corpus",
    "embedding",
    "token",
    "cosine",
    "language",
    "local",
    "machine",
    "search",
    "chunk",
    "network",
    "memory",
    "latency",
    "cache",
    "river",
    "mountain",
    "forest",
    "ocean",
    "city",
    "history",
    "science",
    "music",
    "painting",
    "library",
    "quickly",
    "slowly",
    "carefully",
    "never",
    "always",
    "sometimes",
    "because",
    "although",
    "while",
]

PARAGRAPH = (
    "Retrieval-augmented generation combines a search step with a language model. "
    "First, documents are split into passages and each passage is turned into a vector. "
    "At question time the question is embedded the same way, the nearest passages are "
    "found by cosine similarity, and the model answers from them. Indexes must be rebuilt "
    "with the same embedding model that built them, or the vectors will not be comparable."
)


def _generated_texts() -> list[str]:
    rng = random.Random(1234)
    texts = []
    for n in (1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 180, 220, 250, 260, 300, 500):
        texts.append(" ".join(rng.choice(WORDS) for _ in range(n)))
    # long multi-paragraph documents: well past 256 tokens, so truncation matters
    for k in (2, 3, 5, 8):
        texts.append("\n\n".join(f"Section {i + 1}. {PARAGRAPH}" for i in range(k)))
    alphabet = "abcdefghijklmnopqrstuvwxyzéèüößçñ東京語мирعربي😀🚀0123456789 .,;:!?-'\"()"
    for n in (1, 4, 16, 64, 256, 1024):
        texts.append("".join(rng.choice(alphabet) for _ in range(n)))
    for i in range(20):
        words = [rng.choice(WORDS) for _ in range(rng.randint(3, 40))]
        texts.append(f"Q{i}: " + " ".join(words).capitalize() + "?")
    return texts


TEXTS = LITERAL_TEXTS + _generated_texts()


@pytest.fixture(scope="module")
def info() -> EmbeddingModelInfo:
    return embedding_model()


@pytest.fixture(scope="module")
def fast(info) -> NumpyBertEmbedder:
    return NumpyBertEmbedder(info)


@pytest.fixture(scope="module")
def reference(embedder) -> np.ndarray:
    return embedder.embed(TEXTS)


@pytest.fixture(scope="module")
def fast_vectors(fast) -> np.ndarray:
    return fast.embed(TEXTS)


def test_text_set_is_varied(fast):
    assert len(TEXTS) >= 100
    _, tokenizer = fast._load()
    lengths = [len(e.ids) for e in tokenizer.encode_batch(TEXTS)]
    assert min(lengths) == 2  # blank texts: just [CLS] [SEP]
    assert max(lengths) == 256  # truncated to max_seq_length, special tokens included
    assert sum(n == 256 for n in lengths) >= 5


def test_default_model_is_supported(info):
    assert supports(info)
    assert NumpyBertEmbedder.supports(info)


def test_matches_sentence_transformers(fast_vectors, reference, info):
    assert fast_vectors.shape == reference.shape == (len(TEXTS), info.dim)
    assert fast_vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(fast_vectors, axis=1), 1.0, atol=1e-5)
    cosines = np.sum(fast_vectors * reference, axis=1) / np.linalg.norm(reference, axis=1)
    worst = int(np.argmin(cosines))
    assert cosines.min() >= 0.999, f"cosine {cosines.min()} on {TEXTS[worst]!r}"
    # in practice the two agree to float32 rounding
    assert cosines.min() > 0.99999, f"cosine {cosines.min()} on {TEXTS[worst]!r}"


def test_batch_equals_one_at_a_time(fast, fast_vectors):
    rng = random.Random(7)
    picks = rng.sample(range(len(TEXTS)), 30)
    for i in picks:
        single = fast.embed([TEXTS[i]])[0]
        assert float(single @ fast_vectors[i]) > 0.999999, TEXTS[i]
        np.testing.assert_allclose(single, fast_vectors[i], atol=1e-5)


def test_batch_order_and_size_do_not_matter(info, fast_vectors):
    rng = random.Random(11)
    order = list(range(len(TEXTS)))
    rng.shuffle(order)
    small = NumpyBertEmbedder(info, batch_size=5)
    shuffled = small.embed([TEXTS[i] for i in order])
    np.testing.assert_allclose(shuffled, fast_vectors[order], atol=1e-5)


def test_progress_and_empty_input(fast, info):
    done: list[int] = []
    out = fast.embed(TEXTS[:70], progress=done.append)
    assert sum(done) == 70 and len(done) >= 3
    assert out.shape == (70, info.dim)
    empty = fast.embed([])
    assert empty.shape == (0, info.dim) and empty.dtype == np.float32


def test_unsupported_folders_are_refused(info, tmp_path: Path):
    def copy(name: str) -> Path:
        folder = tmp_path / name
        shutil.copytree(info.path, folder, ignore=shutil.ignore_patterns("model.safetensors"))
        (folder / "model.safetensors").symlink_to(info.path / "model.safetensors")
        return folder

    def info_for(folder: Path) -> EmbeddingModelInfo:
        return EmbeddingModelInfo(name=folder.name, path=folder, dim=info.dim)

    assert supports(info_for(copy("same")))

    no_tokenizer = copy("no_tokenizer")
    (no_tokenizer / "tokenizer.json").unlink()
    assert not supports(info_for(no_tokenizer))

    no_weights = copy("no_weights")
    (no_weights / "model.safetensors").unlink()
    assert not supports(info_for(no_weights))

    cls_pooling = copy("cls_pooling")
    pooling = json.loads((cls_pooling / "1_Pooling" / "config.json").read_text())
    pooling.update(pooling_mode_mean_tokens=False, pooling_mode_cls_token=True)
    (cls_pooling / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    assert not supports(info_for(cls_pooling))

    no_normalize = copy("no_normalize")
    modules = json.loads((no_normalize / "modules.json").read_text())
    (no_normalize / "modules.json").write_text(json.dumps(modules[:2]))
    assert not supports(info_for(no_normalize))

    roberta = copy("roberta")
    config = json.loads((roberta / "config.json").read_text())
    config.update(model_type="roberta", architectures=["RobertaModel"])
    (roberta / "config.json").write_text(json.dumps(config))
    assert not supports(info_for(roberta))


def test_does_not_import_torch_or_sentence_transformers():
    code = (
        "import ragcli.embed.numpy_bert as f, sys; from ragcli.models import embedding_model; "
        "f.NumpyBertEmbedder(embedding_model()).embed(['hi']); "
        "print(sorted(m for m in sys.modules "
        "if m.split('.')[0] in ('torch','transformers','sentence_transformers')))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_a_model_the_numpy_path_cannot_run_falls_back_with_one_note(tmp_path, caplog):
    import json
    import logging
    import shutil

    from ragcli.answer.retrieval import query_embedder
    from ragcli.embed.base import SentenceTransformerEmbedder
    from ragcli.models import embedding_model

    folder = tmp_path / "cls-pooled"
    shutil.copytree(embedding_model().path, folder)
    pooling = folder / "1_Pooling" / "config.json"
    config = json.loads(pooling.read_text())
    config.update(pooling_mode_cls_token=True, pooling_mode_mean_tokens=False)
    pooling.write_text(json.dumps(config))
    with caplog.at_level(logging.INFO, logger="ragcli"):
        embedder = query_embedder(embedding_model(str(folder)))
    assert isinstance(embedder, SentenceTransformerEmbedder)
    notes = [r.getMessage() for r in caplog.records if r.name.startswith("ragcli")]
    assert len(notes) == 1 and "sentence-transformers" in notes[0]
