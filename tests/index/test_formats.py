"""PDF (with page numbers) and Word documents; folder filters and ignore files;
files that cannot be read are reported, never fatal."""

from __future__ import annotations

import io
import json
import os
import sqlite3
from pathlib import Path

import pytest

from ragcli.answer.retrieval import Retriever
from ragcli.config import load_settings
from ragcli.errors import IndexMismatchError
from ragcli.index.discover import discover
from ragcli.index.document import read_document
from ragcli.index.pipeline import build_index
from ragcli.stores.base import FORMAT_VERSION
from ragcli.stores.faiss_store import FaissStore


def make_pdf(pages: list[list[str]]) -> bytes:
    """A minimal valid PDF: each page a list of Helvetica text lines."""
    objects: list[bytes] = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    kids = []
    for lines in pages:
        ops = ["BT /F1 12 Tf 14 TL 72 720 Td"]
        for line in lines:
            esc = line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
            ops.append(f"({esc}) Tj T*")
        ops.append("ET")
        stream = "\n".join(ops).encode("latin-1")
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            b"/Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>" % len(objects)
        )
        kids.append(len(objects))
    refs = b" ".join(b"%d 0 R" % k for k in kids)
    objects[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (refs, len(kids))
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


PAGES = [
    ["Glaciers", "A glacier is a persistent body of dense ice.", "It moves under its own weight."],
    ["Deserts", "The Atacama desert in Chile is among the driest places on Earth."],
    [],  # a page without text
    ["Volcanoes", "Magma that reaches the surface is called lava."],
]


def _encrypted(data: bytes, user: str, owner: str = "owner") -> bytes:
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(data)))
    writer.encrypt(user_password=user, owner_password=owner, algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def _settings(tmp_path, **kw):
    return load_settings({"index_dir": tmp_path / "idx", **kw})


# -- PDF -------------------------------------------------------------------


def test_pdf_lines_carry_their_page(tmp_path):
    f = tmp_path / "earth.pdf"
    f.write_bytes(make_pdf(PAGES))
    doc = read_document(f)
    lines = doc.text.split("\n")
    assert doc.pages is not None
    assert len(lines) == len(doc.pages) == len(doc.line_map)
    by_line = dict(zip(lines, doc.pages, strict=True))
    assert by_line["A glacier is a persistent body of dense ice."] == 1
    assert by_line["The Atacama desert in Chile is among the driest places on Earth."] == 2
    assert by_line["Magma that reaches the surface is called lava."] == 4
    assert doc.line_map == sorted(doc.line_map)


def test_text_documents_have_no_pages(tmp_path):
    f = tmp_path / "a.txt"
    f.write_text("plain\ntext\n")
    assert read_document(f).pages is None


def test_pdf_openable_without_password_is_read(tmp_path):
    f = tmp_path / "owner-only.pdf"
    f.write_bytes(_encrypted(make_pdf(PAGES), user=""))
    assert "Atacama" in read_document(f).text


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (_encrypted(make_pdf(PAGES), user="secret"), "encrypted PDF (needs a password)"),
        (b"%PDF-1.7\nthis is not a pdf at all\n%%EOF\n", "unreadable PDF"),
        (make_pdf(PAGES)[:300], "unreadable PDF"),
        (b"", "empty file"),
    ],
    ids=["encrypted", "garbage", "truncated", "empty"],
)
def test_bad_pdfs_raise_a_reason(tmp_path, data, reason):
    f = tmp_path / "bad.pdf"
    f.write_bytes(data)
    with pytest.raises(ValueError, match="^" + reason.replace("(", r"\(").replace(")", r"\)")):
        read_document(f)


def test_pdf_needing_a_missing_crypto_library_is_skipped(tmp_path, monkeypatch):
    from pypdf import PdfReader
    from pypdf.errors import DependencyError

    def decrypt(self, password):
        raise DependencyError("cryptography>=3.1 is required for AES algorithm")

    monkeypatch.setattr(PdfReader, "decrypt", decrypt)
    f = tmp_path / "aes.pdf"
    f.write_bytes(_encrypted(make_pdf(PAGES), user="secret"))
    with pytest.raises(ValueError, match="encrypted PDF that cannot be decrypted here"):
        read_document(f)


def test_pdf_pages_reach_the_index_and_search(tmp_path, embedder):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "earth.pdf").write_bytes(make_pdf(PAGES))
    (docs / "locked.pdf").write_bytes(_encrypted(make_pdf(PAGES), user="secret"))
    (docs / "broken.pdf").write_bytes(b"%PDF-1.7\ngarbage\n")
    (docs / "scan.pdf").write_bytes(make_pdf([[], []]))
    (docs / "notes.md").write_text("# Notes\n\nOtters hold hands while they sleep.\n")
    s = _settings(tmp_path, chunk_tokens=24, chunk_overlap=0)
    report = build_index([docs], s, embedder=embedder)
    assert report.added == 2
    reasons = {Path(x["path"]).name: x["reason"] for x in report.skipped}
    assert reasons == {
        "locked.pdf": "encrypted PDF (needs a password)",
        "broken.pdf": reasons["broken.pdf"],
        "scan.pdf": "no extractable text (a scanned PDF needs OCR)",
    }
    assert reasons["broken.pdf"].startswith("unreadable PDF")

    store = FaissStore.open(s.index_dir)
    chunks = list(store.all_chunks())
    page_of = {line: n for n, lines in enumerate(PAGES, 1) for line in lines}
    pdf_chunks = [c for c in chunks if c.path.endswith("earth.pdf")]
    for c in pdf_chunks:  # a passage's page is the page of its first line
        assert c.page == page_of[c.text.split("\n")[0]], c
    assert {c.page for c in pdf_chunks} == {1, 2, 4}  # small passages: one per page
    assert all(c.page is None for c in chunks if c.path.endswith("notes.md"))
    store.close()

    r = Retriever(s, embedder=embedder)
    hit = r.search("What is magma called at the surface?", 1).hits[0]
    r.close()
    assert hit.chunk.path.endswith("earth.pdf")
    assert hit.chunk.page == 4
    assert "lava" in hit.chunk.text


def test_older_format_index_is_refused_and_rebuilt(tmp_path, embedder):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Honey bees dance to tell their sisters where flowers are.\n")
    s = _settings(tmp_path)
    build_index([docs], s, embedder=embedder)
    db = sqlite3.connect(s.index_dir / "index.sqlite")
    with db:  # turn it into what ragcli with format 2 wrote
        db.execute("UPDATE meta SET value = '2' WHERE key = 'info.format_version'")
        db.execute("ALTER TABLE chunks DROP COLUMN page")
        db.execute("ALTER TABLE chunks DROP COLUMN heading")
        db.execute("ALTER TABLE files DROP COLUMN mtime_ns")
    db.close()
    with pytest.raises(IndexMismatchError, match=r"has format 2.*rebuild"):
        FaissStore.open(s.index_dir)
    with pytest.raises(IndexMismatchError, match="rebuild"):
        build_index([docs], s, embedder=embedder)
    assert build_index([docs], s, rebuild=True, embedder=embedder).added == 1
    store = FaissStore.open(s.index_dir)
    assert [(c.page, c.heading) for c in store.all_chunks()] == [(None, "")]
    assert store.info.format_version == FORMAT_VERSION
    store.close()


# -- Word ------------------------------------------------------------------


def _docx(path: Path) -> None:
    import docx

    d = docx.Document()
    d.add_heading("Glaciers", level=1)
    d.add_paragraph("A glacier is a persistent body of dense ice.")
    d.add_paragraph("It moves under its own weight.")
    d.add_heading("Deserts", level=2)
    d.add_paragraph("The Atacama desert is among the driest places on Earth.")
    table = d.add_table(rows=2, cols=2)
    table.cell(0, 0).text = "Desert"
    table.cell(0, 1).text = "Country"
    table.cell(1, 0).text = "Atacama"
    table.cell(1, 1).text = "Chile"
    d.save(str(path))


def test_docx_paragraphs_and_headings_are_lines(tmp_path):
    f = tmp_path / "earth.docx"
    _docx(f)
    doc = read_document(f)
    lines = doc.text.split("\n")
    assert lines == [
        "Glaciers",
        "A glacier is a persistent body of dense ice.",
        "It moves under its own weight.",
        "",
        "Deserts",
        "The Atacama desert is among the driest places on Earth.",
        "Desert | Country",
        "Atacama | Chile",
    ]
    assert len(doc.line_map) == len(lines)
    assert doc.line_map == sorted(doc.line_map)
    assert doc.pages is None


def test_corrupt_docx_is_a_reason(tmp_path, embedder):
    bad = tmp_path / "docs" / "bad.docx"
    bad.parent.mkdir()
    bad.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(ValueError, match="unreadable Word document"):
        read_document(bad)
    _docx(bad.parent / "good.docx")
    report = build_index([bad.parent], _settings(tmp_path), embedder=embedder)
    assert report.added == 1
    assert [Path(x["path"]).name for x in report.skipped] == ["bad.docx"]


# -- filters and ignore files ------------------------------------------------


def _tree(root: Path, files: list[str]) -> None:
    for rel in files:
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"text of {rel}\n")


def _names(root: Path, **kw) -> list[str]:
    found, _ = discover([root], **kw)
    return [p.relative_to(root.resolve()).as_posix() for p in found]


FILES = ["a.md", "b.txt", "drafts/c.md", "docs/d.md", "docs/api/e.md", "docs/api/f.txt"]


def test_include_and_exclude_globs(tmp_path):
    _tree(tmp_path, FILES)
    assert _names(tmp_path, include=["*.md"]) == [
        "a.md",
        "docs/api/e.md",
        "docs/d.md",
        "drafts/c.md",
    ]
    assert _names(tmp_path, include=["docs/**"]) == ["docs/api/e.md", "docs/api/f.txt", "docs/d.md"]
    assert _names(tmp_path, include=["docs/*.md"]) == ["docs/d.md"]
    assert _names(tmp_path, include=["**/api/*.txt", "a.*"]) == ["a.md", "docs/api/f.txt"]
    assert _names(tmp_path, exclude=["drafts"]) == [
        "a.md",
        "b.txt",
        "docs/api/e.md",
        "docs/api/f.txt",
        "docs/d.md",
    ]
    assert _names(tmp_path, exclude=["docs/api/", "*.txt"]) == ["a.md", "docs/d.md", "drafts/c.md"]
    assert _names(tmp_path, include=["*.md"], exclude=["docs/**"]) == ["a.md", "drafts/c.md"]
    # a file named directly is always taken
    found, _ = discover([tmp_path / "b.txt"], exclude=["*.txt"])
    assert [p.name for p in found] == ["b.txt"]


def test_gitignore_and_ragignore(tmp_path):
    _tree(tmp_path, [*FILES, "build/g.md", "docs/build.md", "docs/api/keep.md", "notes/h.md"])
    (tmp_path / ".gitignore").write_text(
        "# generated\n\nbuild/\n/a.md\n*.txt\n   \ndocs/api/*.md\n!docs/api/keep.md\n"
    )
    (tmp_path / "notes" / ".ragignore").write_text("h.md\n")
    (tmp_path / "docs" / ".ragignore").write_text("/api/keep.md\n")
    # build/ is a folder-only rule: docs/build.md stays; /a.md is anchored to the root;
    # the deeper .ragignore ignores keep.md again after the root's negation
    assert _names(tmp_path) == ["docs/build.md", "docs/d.md", "drafts/c.md"]
    (tmp_path / "docs" / ".ragignore").unlink()
    assert _names(tmp_path) == ["docs/api/keep.md", "docs/build.md", "docs/d.md", "drafts/c.md"]


def test_excluded_files_leave_the_index(tmp_path, embedder):
    docs = tmp_path / "docs"
    _tree(docs, ["a.md", "drafts/b.md"])
    s = _settings(tmp_path)
    assert build_index([docs], s, embedder=embedder).added == 2
    report = build_index([docs], s, embedder=embedder, exclude=["drafts/"])
    assert (report.removed, report.unchanged, report.files_total) == (1, 1, 1)


# -- links and unreadable files ----------------------------------------------


def test_symlinks_and_special_files(tmp_path):
    root = tmp_path / "docs"
    _tree(root, ["real.md", "sub/inner.md"])
    outside = tmp_path / "outside.md"
    outside.write_text("outside\n")
    (root / "link-to-outside.md").symlink_to(outside)
    (root / "link-to-real.md").symlink_to(root / "real.md")
    (root / "dangling.md").symlink_to(tmp_path / "gone.md")
    (root / "loop1.md").symlink_to(root / "loop2.md")
    (root / "loop2.md").symlink_to(root / "loop1.md")
    (root / "sub" / "up").symlink_to(root, target_is_directory=True)  # a folder loop
    os.mkfifo(root / "pipe.txt")
    found, skipped = discover([root])
    assert sorted(p.name for p in found) == ["inner.md", "outside.md", "real.md"]
    reasons = {s.path.name: s.reason for s in skipped}
    assert reasons["dangling.md"] == "broken symbolic link"
    assert reasons["pipe.txt"] == "not a regular file"
    assert "loop" in reasons["loop1.md"] and "loop" in reasons["loop2.md"]


def test_unreadable_empty_and_vanishing_files(tmp_path, embedder, monkeypatch):
    import ragcli.index.pipeline as indexing

    docs = tmp_path / "docs"
    _tree(docs, ["good.md", "vanishing.md"])
    (docs / "empty.txt").write_bytes(b"")
    (docs / "blank.txt").write_text("\n  \n")
    os.mkfifo(docs / "pipe.md")
    (docs / "dangling.txt").symlink_to(tmp_path / "nowhere.txt")
    locked = docs / "locked.txt"
    locked.write_text("secret\n")
    locked.chmod(0)
    can_block = os.geteuid() != 0  # root reads mode-000 files anyway

    real_discover = indexing.discover

    def discover_then_delete(*args, **kw):
        found, skipped = real_discover(*args, **kw)
        (docs / "vanishing.md").unlink()
        return found, skipped

    monkeypatch.setattr(indexing, "discover", discover_then_delete)
    try:
        report = build_index([docs], _settings(tmp_path), embedder=embedder)
    finally:
        locked.chmod(0o644)
    reasons = {Path(x["path"]).name: x["reason"] for x in report.skipped}
    expected = {
        "vanishing.md": "vanished before it was read",
        "empty.txt": "empty file",
        "blank.txt": "no text",
        "pipe.md": "not a regular file",
        "dangling.txt": "broken symbolic link",
    }
    if can_block:
        expected["locked.txt"] = "permission denied"
    assert reasons == expected
    assert report.added == 1 + (not can_block)
    json.dumps(report.skipped)  # reasons are plain strings
