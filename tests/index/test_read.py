from pathlib import Path

import pytest

from ragcli.errors import UsageError
from ragcli.index.discover import discover
from ragcli.index.document import read_document
from ragcli.index.source import decode

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
    assert lines[-3:] == ["", "line one", "line two"]  # a code block is set apart


TOC_PAGE = """<html><body><h1>The Guide</h1>
<p>This guide has the chapters below; the <a href="intro.html">introduction</a> is short.</p>
<div class="toctree-wrapper"><ul>
<li><a href="intro.html">1. Introduction</a><ul>
<li><a href="intro.html#a">1.1. Installing</a></li><li><a href="intro.html#b">1.2. First steps</a></li>
</ul></li>
<li><a href="files.html">2. Reading files</a></li><li><a href="errors.html">3. Errors</a></li>
<li><a href="classes.html">4. Classes</a></li>
</ul></div>
<h2>See also</h2>
<ul><li><a href="faq.html">The FAQ</a></li><li><a href="glossary.html">Glossary</a></li></ul>
<h2>Conventions</h2>
<ul><li>Code is shown in <a href="fonts.html">monospace</a> type.</li><li>Prompts start with >>>.</li>
<li>Output follows the prompt.</li><li>Comments start with #.</li><li>Paths use slashes.</li></ul>
</body></html>
"""


def test_html_lists_of_links_are_dropped_as_navigation(tmp_path):
    """A table of contents names every topic of a site in a few lines and would crowd out
    the sections it points to; short link lists and lists of prose stay."""
    page = tmp_path / "index.html"
    page.write_text(TOC_PAGE)
    doc = read_document(page)
    for toc_line in ("1. Introduction", "1.1. Installing", "2. Reading files", "4. Classes"):
        assert toc_line not in doc.text
    for kept in ("the introduction is short", "The FAQ", "Glossary", "Code is shown in monospace"):
        assert kept in doc.text
    assert [h[2] for h in doc.headings] == ["The Guide", "See also", "Conventions"]
    assert len(doc.text.split("\n")) == len(doc.line_map)


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
