from pathlib import Path

import pytest

from ragcli.errors import UsageError
from ragcli.index.read import decode, discover, read_document

PAGE = """<!DOCTYPE html>
<html><head><title>T</title><style>p { color: red }</style>
<script>var secret = "do not index";</script></head>
<body>
<nav><a href="/">Home</a> <a href="/about">About us</a></nav>
<div class="sphinxsidebar">Quick search box</div>
<main>
<h1>Glaciers</h1>
<p>A glacier is a persistent body of dense ice
that moves under its own weight.</p>
<pre>line one
line two</pre>
</main>
<footer>Copyright 2024 Example Site</footer>
</body></html>
"""


def test_html_keeps_article_text_and_source_lines(tmp_path):
    page = tmp_path / "g.html"
    page.write_text(PAGE)
    doc = read_document(page)
    text = doc.text
    assert "A glacier is a persistent body of dense ice that moves under its own weight." in text
    for chrome in ("do not index", "color: red", "Home", "About us", "Quick search", "Copyright"):
        assert chrome not in text
    lines = text.split("\n")
    source = PAGE.split("\n")
    for line, src in zip(lines, doc.line_map, strict=True):
        # each text line starts on the source line the map names
        if line:
            assert line.split()[0] in source[src - 1], (line, src)
    assert lines[-2:] == ["line one", "line two"]


def test_non_utf8_text_is_read_with_a_warning(tmp_path):
    f = tmp_path / "latin.txt"
    f.write_bytes("Caf\xe9 cr\xe8me on the terrace".encode("cp1252"))
    doc = read_document(f)
    assert doc.text == "Café crème on the terrace"
    assert doc.warnings and "not UTF-8" in doc.warnings[0]


def test_binary_data_is_refused():
    with pytest.raises(ValueError, match="binary"):
        decode(b"\x89PNG\r\n\x1a\n\x00\x00\x00")


def test_discover_filters_types_and_hidden_folders(tmp_path):
    (tmp_path / "a.md").write_text("# a")
    (tmp_path / "b.py").write_text("print()")
    (tmp_path / ".rag").mkdir()
    (tmp_path / ".rag" / "c.txt").write_text("index internals")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "d.TXT").write_text("upper-case suffix")
    found, skipped = discover([tmp_path])
    assert [p.name for p in found] == ["a.md", "d.TXT"]
    assert skipped == []


def test_discover_missing_path_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="no such file"):
        discover([Path(tmp_path / "missing")])
