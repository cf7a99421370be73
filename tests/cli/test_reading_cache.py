"""`rag index --warm`, `rag ask` and `rag cache` with the reading cache, in new processes."""

from __future__ import annotations

import json
from pathlib import Path

from ragcli.config import Settings
from tests.conftest import rag

PAGES = {
    "danube.md": "# The Danube\n\nThe Danube rises in the Black Forest of Germany. It flows "
    "east for about 2,850 kilometres. It empties into the Black Sea through a wide delta.\n",
    "rhine.md": "# The Rhine\n\nThe Rhine rises in the Swiss Alps. It forms part of the border "
    "between Germany and France. It reaches the North Sea in the Netherlands.\n",
}
QUESTION = "Into which sea does the Danube flow?"


def _env(tmp_path: Path, reading: bool) -> dict:
    cache = tmp_path / "cache"
    if not cache.exists():
        cache.mkdir()
        (cache / "models").symlink_to(Settings().cache_dir / "models", target_is_directory=True)
    return {
        "RAG_CACHE_DIR": str(cache),
        "RAG_READING_CACHE": "true" if reading else "false",
        "RAG_CONFIG": str(tmp_path / "none.toml"),
    }


def test_warm_is_refused_while_the_reading_cache_is_off(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "danube.md").write_text(PAGES["danube.md"])
    (tmp_path / "none.toml").write_text("")
    out = rag(
        "index", str(docs), "--index", str(tmp_path / "idx"), "--warm", env=_env(tmp_path, False)
    )
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "reading_cache" in out.stderr
    assert not (tmp_path / "idx").exists()  # refused before anything was written


def test_warm_then_ask_reads_only_the_question(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in PAGES.items():
        (docs / name).write_text(text)
    # Margin 0: the answer is kept as read apart, never read again whole.
    (tmp_path / "none.toml").write_text("answer_cache = false\nreading_margin = 0.0\n")
    env, index = _env(tmp_path, True), str(tmp_path / "idx")
    out = rag("index", str(docs), "--index", index, "--warm", "--json", env=env)
    assert out.returncode == 0, out.stderr
    warm = json.loads(out.stdout)["warm"]
    assert warm["passages"] == 2 and warm["sentences"] >= 6 and warm["tokens_encoded"] > 0
    again = rag("index", str(docs), "--index", index, "--warm", "--json", env=env)
    assert json.loads(again.stdout)["warm"]["tokens_encoded"] == 0  # nothing left to read

    asked = rag("ask", "--json", "--index", index, QUESTION, env=env)
    assert asked.returncode == 0, asked.stderr
    t = json.loads(asked.stdout)["timings"]
    assert t["reading_tokens"] > 0 and t["lead_tokens"] == 0
    assert t["prompt_tokens"] == t["reading_tokens"] + t["prefill_tokens"] + t["cached_tokens"]
    shown = rag("ask", "--index", index, QUESTION, env=env)
    assert "from the reading cache" in shown.stderr

    stats = json.loads(rag("cache", "stats", "--json", env=env).stdout)
    assert stats["reading"]["files"] == warm["sentences"]
    cleared = rag("cache", "clear", env=env)
    assert cleared.returncode == 0 and f"{warm['sentences']} sentences" in cleared.stdout
    assert json.loads(rag("cache", "stats", "--json", env=env).stdout)["reading"]["files"] == 0
