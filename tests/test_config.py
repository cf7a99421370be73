import json
import re
from pathlib import Path

import pytest

from ragcli.config import Settings, load_settings
from ragcli.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent


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


# -- every environment variable is a setting, read once and checked at load ----------------


@pytest.mark.parametrize(
    ("var", "value", "name", "expected"),
    [
        ("RAG_SERVER", "/tmp/rag.sock", "server", "/tmp/rag.sock"),
        ("RAG_SERVER", "http://127.0.0.1:8731", "server", "http://127.0.0.1:8731"),
        ("RAG_SERVER_TOKEN", "s3cret", "server_token", "s3cret"),
        ("RAG_MILVUS_TOKEN", "root:Milvus", "milvus_token", "root:Milvus"),
        ("RAG_DEBUG", "1", "debug", True),
        ("RAG_DEBUG", "off", "debug", False),
    ],
)
def test_each_variable_sets_its_setting(monkeypatch, tmp_path, var, value, name, expected):
    monkeypatch.setenv(var, value)
    assert getattr(load_settings(path=tmp_path / "none.toml"), name) == expected


@pytest.mark.parametrize(
    ("var", "value", "message"),
    [
        ("RAG_SERVER", "http://127.0.0.1", "must be a socket path or http://HOST:PORT"),
        ("RAG_SERVER", "https://host:8731", "must be a socket path or http://HOST:PORT"),
        ("RAG_SERVER", "http://host:99999", "must be a socket path or http://HOST:PORT"),
        ("RAG_DEBUG", "maybe", "RAG_DEBUG: debug = 'maybe' is not a valid bool"),
    ],
)
def test_a_bad_variable_is_an_error_at_load(monkeypatch, tmp_path, var, value, message):
    monkeypatch.setenv(var, value)
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_settings(path=tmp_path / "none.toml")


def test_the_server_setting_is_where_clients_look():
    from ragcli.serve.locate import client_endpoint

    tcp = client_endpoint(Settings(server="http://10.0.0.2:9000", server_token="t"))
    assert (tcp.unix, tcp.host, tcp.port, tcp.token) == (None, "10.0.0.2", 9000, "t")
    assert client_endpoint(Settings(server="~/rag.sock")).unix == Path.home() / "rag.sock"


def test_tokens_stay_out_of_repr_and_of_what_a_server_reports():
    from ragcli.serve.locate import client_endpoint, identity

    s = Settings(server="http://h:1", server_token="tok-one", milvus_token="tok-two")
    shown = repr(s) + repr(client_endpoint(s)) + json.dumps(identity(s))
    assert "tok-one" not in shown and "tok-two" not in shown


def test_no_module_reads_a_rag_variable_but_config():
    """Every RAG_* variable goes through Settings, so each is checked once, at start-up."""
    reads = re.compile(r"""(environ(\.get)?\s*[\[(]|getenv\()\s*["']RAG_""")
    readers = {
        str(path.relative_to(ROOT))
        for path in (ROOT / "ragcli").rglob("*.py")
        if reads.search(path.read_text(encoding="utf-8"))
    }
    assert readers == {"ragcli/config.py"}
