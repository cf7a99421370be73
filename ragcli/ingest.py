"""Find documents under the user's paths and read their visible text.

Each document keeps a map from its text lines back to the source file's
lines, so that a citation points at the lines a person would open, even for
HTML whose visible text is far shorter than its markup. PDF text lines also
carry their page number; Word paragraphs are numbered as lines.

Folder walks honour ``--include`` / ``--exclude`` globs and ``.ragignore`` /
``.gitignore`` files (a gitignore subset, see :class:`IgnoreRule`).
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

from .errors import UsageError

TEXT_SUFFIXES = frozenset({".txt", ".md", ".markdown", ".rst"})
HTML_SUFFIXES = frozenset({".html", ".htm"})
PDF_SUFFIXES = frozenset({".pdf"})
DOCX_SUFFIXES = frozenset({".docx"})
SUFFIXES = TEXT_SUFFIXES | HTML_SUFFIXES | PDF_SUFFIXES | DOCX_SUFFIXES
IGNORE_FILES = (".gitignore", ".ragignore")  # later files' rules win over earlier ones


@dataclass(frozen=True)
class SourceFile:
    """A file found on disk, identified by its resolved path and content hash."""

    path: Path
    sha256: str
    size: int


@dataclass
class Document:
    """Visible text of one file; ``line_map[i]`` is the source line of text line i."""

    path: Path
    text: str
    line_map: list[int]
    warnings: list[str] = field(default_factory=list)
    pages: list[int] | None = None  # PDF only: ``pages[i]`` is the page of text line i


@dataclass(frozen=True)
class Skipped:
    path: Path
    reason: str


@@DISCOVER@@

# Elements whose content is never part of the article a reader came for.
_SKIP_TAGS = frozenset(
    {
        "script",
        "style",
        "noscript",
        "template",
        "svg",
        "head",
        "nav",
        "header",
        "footer",
        "aside",
        "form",
        "button",
        "select",
        "iframe",
    }
)
# class/id/role words that mark navigation and page chrome (Sphinx, common themes).
_SKIP_MARKS = (
    "nav",
    "sidebar",
    "menu",
    "breadcrumb",
    "footer",
    "related",
    "skip-link",
    "headerlink",
    "cookie",
    "banner",
)
_VOID = frozenset(
    {
        "area",
        "base",
        "br",
        "col",
        "embed",
        "hr",
        "img",
        "input",
        "link",
        "meta",
        "source",
        "track",
        "wbr",
        "param",
    }
)
_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
_BLOCK = frozenset(
    {
        "p",
        "div",
        "section",
        "article",
        "main",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "li",
        "ul",
        "ol",
        "dl",
        "dt",
        "dd",
        "tr",
        "table",
        "blockquote",
        "pre",
        "br",
        "hr",
        "figcaption",
        "caption",
        "td",
        "th",
    }
)


class _VisibleText(HTMLParser):
    """Collects visible text lines, each tagged with its source line number."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, bool]] = []  # (tag, skipped)
        self.lines: list[str] = []
        self.line_map: list[int] = []
        self.current: list[str] = []
        self.current_line = 0
        self.in_pre = 0

    def _skipping(self) -> bool:
        return bool(self.stack) and self.stack[-1][1]

    def _break(self) -> None:
        text = " ".join("".join(self.current).split())
        if text:
            self.lines.append(text)
            self.line_map.append(self.current_line)
        self.current = []
        self.current_line = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _BLOCK:
            self._break()
        if tag in _HEADINGS and not self._skipping() and self.lines and self.lines[-1]:
            # A blank line before each heading: passages then prefer to end there.
            self.lines.append("")
            self.line_map.append(self.getpos()[0])
        if tag in _VOID:
            return
        marks = " ".join(v or "" for k, v in attrs if k in ("class", "id", "role")).lower()
        skip = (
            self._skipping()
            or tag in _SKIP_TAGS
            or any(m in marks for m in _SKIP_MARKS)
            or any(k == "hidden" or (k == "aria-hidden" and v == "true") for k, v in attrs)
        )
        self.stack.append((tag, skip))
        if tag == "pre":
            self.in_pre += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in _BLOCK:
            self._break()
        if not any(t == tag for t, _ in self.stack):
            return  # stray end tag
        while self.stack:
            open_tag, _ = self.stack.pop()
            if open_tag == "pre":
                self.in_pre -= 1
            if open_tag == tag:
                break

    def handle_data(self, data: str) -> None:
        if self._skipping() or not data:
            return
        line = self.getpos()[0]
        if self.in_pre:
            # Keep code lines apart: each becomes a text line of its own.
            for i, part in enumerate(data.split("\n")):
                if i:
                    self._break()
                if part.strip() and not self.current_line:
                    self.current_line = line + i
                self.current.append(part)
            return
        if data.strip() and not self.current_line:
            leading = data[: len(data) - len(data.lstrip())]
            self.current_line = line + leading.count("\n")
        self.current.append(data)


def html_text(markup: str) -> tuple[list[str], list[int]]:
    """Visible text lines of an HTML page (no scripts, styles, navigation)."""
    parser = _VisibleText()
    parser.feed(markup)
    parser.close()
    parser._break()
    return parser.lines, parser.line_map
