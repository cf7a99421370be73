from pathlib import Path

import pytest

from ragcli.config import load_settings
from ragcli.errors import ConfigError


def test_file_env_and_flags_layer_in_order(tmp_path, monkeypatch):
    cfg = tmp_path / "config.toml"
    cfg.write_text('top_k = 6\nindex_dir = "from-file"\nmax_tokens = 20\n')
    monkeypatch.setenv("RAG_INDEX", "from-env")
    s = load_settings({"top_k": 2}, path=cfg)
    assert s.top_k == 2  # flag beats file
    assert s.index_dir == Path("from-env")  # environment beats file
    assert s.max_tokens == 20  # file beats default


def test_unknown_key_is_an_error(tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text("topk = 3\n")
    with pytest.raises(ConfigError, match="unknown setting 'topk'"):
        load_settings(path=cfg)


@pytest.mark.parametrize(
    "line",
    ['top_k = "four"', "top_k = 0", "chunk_overlap = 500", "use_cache = 3", "min_score = 2.0"],
)
def test_bad_values_are_errors(tmp_path, line):
    cfg = tmp_path / "config.toml"
    cfg.write_text(line + "\n")
    with pytest.raises(ConfigError):
        load_settings(path=cfg)


def test_missing_config_named_by_env_is_an_error(tmp_path, monkeypatch):
    monkeypatch.setenv("RAG_CONFIG", str(tmp_path / "nope.toml"))
    with pytest.raises(ConfigError, match="not a file"):
        load_settings()
