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
import logging
import os
import re
import stat
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

from ..errors import UsageError
from ..records import Document, SourceFile

TEXT_SUFFIXES = frozenset({".txt", ".md", ".markdown", ".rst"})
HTML_SUFFIXES = frozenset({".html", ".htm"})
PDF_SUFFIXES = frozenset({".pdf"})
DOCX_SUFFIXES = frozenset({".docx"})
SUFFIXES = TEXT_SUFFIXES | HTML_SUFFIXES | PDF_SUFFIXES | DOCX_SUFFIXES
IGNORE_FILES = (".gitignore", ".ragignore")  # later files' rules win over earlier ones


@dataclass(frozen=True)
class Skipped:
    path: Path
    reason: str


def _glob_regex(pattern: str) -> re.Pattern[str]:
    """A glob as a regex over "/"-separated paths: ``*`` and ``?`` stay within one
    folder, ``**`` crosses folders (``a/**/b`` also matches ``a/b``)."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[" and (j := pattern.find("]", i + 2)) != -1:
            body = pattern[i + 1 : j]
            if body[0] in "!^":
                body = "^" + body[1:]
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = j + 1
            continue
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out))


@dataclass(frozen=True)
class IgnoreRule:
    """One glob: from ``--include``/``--exclude`` or a line of an ignore file.

    As in gitignore, a pattern without a slash matches a name at any depth; one
    with a slash matches the path relative to its base folder; a trailing slash
    matches folders only; a leading ``!`` re-includes what an earlier rule ignored.
    """

    regex: re.Pattern[str]
    anchored: bool
    dir_only: bool = False
    negate: bool = False
    base: str = ""  # folder (relative to the walk root) the pattern is relative to

    @classmethod
    def parse(cls, pattern: str, base: str = "", *, gitignore: bool = False) -> IgnoreRule | None:
        p = pattern.rstrip("\n\r")
        if gitignore:
            p = p.rstrip(" ")
            if not p or p.startswith("#"):
                return None
        else:
            p = p.strip()
            if not p:
                return None
        negate = gitignore and p.startswith("!")
        if negate:
            p = p[1:]
        if p.startswith("\\") and p[1:2] in ("#", "!"):
            p = p[1:]
        dir_only = p.endswith("/")
        p = p.rstrip("/")
        if not p:
            return None
        anchored = "/" in p
        p = p.lstrip("/")
        return cls(_glob_regex(p), anchored, dir_only, negate, base)

    def matches(self, rel: str, is_dir: bool) -> bool:
        """Does this rule match ``rel`` (a path relative to the walk root)?"""
        if self.dir_only and not is_dir:
            return False
        if self.base:
            if not rel.startswith(self.base + "/"):
                return False
            rel = rel[len(self.base) + 1 :]
        target = rel if self.anchored else rel.rsplit("/", 1)[-1]
        return self.regex.fullmatch(target) is not None


def _read_ignore_file(folder: Path, base: str) -> list[IgnoreRule]:
    rules: list[IgnoreRule] = []
    for name in IGNORE_FILES:
        try:
            text = (folder / name).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            if rule := IgnoreRule.parse(line, base, gitignore=True):
                rules.append(rule)
    return rules


def _ignored(rules: Sequence[IgnoreRule], rel: str, is_dir: bool) -> bool:
    ignored = False
    for rule in rules:
        if rule.matches(rel, is_dir):
            ignored = not rule.negate
    return ignored


def discover(
    paths: Iterable[Path],
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
) -> tuple[list[Path], list[Skipped]]:
    """All supported files under the given files and folders, sorted, deduplicated.

    Hidden files and folders (``.git``, the ``.rag`` index itself) are not entered.
    In folders, ``include`` globs (any may match) and ``exclude`` globs (none may
    match) are tried on the path relative to the folder given, and ``.gitignore``
    / ``.ragignore`` files are honoured. Files named directly are always taken.
    Symbolic links to files are followed; links to folders are not entered.
    """
    includes = [r for p in include if (r := IgnoreRule.parse(p))]
    excludes = [r for p in exclude if (r := IgnoreRule.parse(p))]
    found: set[Path] = set()
    skipped: list[Skipped] = []

    def take(path: Path) -> None:
        try:
            resolved = path.resolve(strict=True)
            mode = resolved.stat().st_mode
        except FileNotFoundError:
            why = "broken symbolic link" if path.is_symlink() else "vanished before it was read"
            skipped.append(Skipped(path, why))
            return
        except RuntimeError:  # Python < 3.13 reports a symlink loop this way
            skipped.append(Skipped(path, "symbolic link loop"))
            return
        except OSError as exc:
            skipped.append(Skipped(path, read_error(exc)))
            return
        if not stat.S_ISREG(mode):
            skipped.append(Skipped(path, "not a regular file"))
            return
        if not _is_text(str(resolved)):
            skipped.append(Skipped(path, "its name is not valid UTF-8 (rename it to index it)"))
            return
        found.add(resolved)

    for root in paths:
        if not root.exists() and not root.is_symlink():
            raise UsageError(f"{root}: no such file or folder")
        if not root.is_dir():
            if root.suffix.lower() in SUFFIXES:
                take(root)
            else:
                skipped.append(Skipped(root, f"unsupported file type {root.suffix or '(none)'}"))
            continue
        inherited: dict[str, list[IgnoreRule]] = {"": []}
        for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
            here = Path(dirpath)
            rel_dir = here.relative_to(root).as_posix()
            rel_dir = "" if rel_dir == "." else rel_dir
            rules = inherited.pop(rel_dir, []) + _read_ignore_file(here, rel_dir)

            def rel(name: str, rel_dir: str = rel_dir) -> str:
                return f"{rel_dir}/{name}" if rel_dir else name

            kept = []
            for d in sorted(dirnames):
                r = rel(d)
                if d.startswith(".") or _ignored(rules, r, True):
                    continue
                if any(x.matches(r, True) for x in excludes):
                    continue
                kept.append(d)
                inherited[r] = rules
            dirnames[:] = kept
            for name in filenames:
                if name.startswith(".") or Path(name).suffix.lower() not in SUFFIXES:
                    continue
                r = rel(name)
                if _ignored(rules, r, False) or any(x.matches(r, False) for x in excludes):
                    continue
                if includes and not any(x.matches(r, False) for x in includes):
                    continue
                take(here / name)
    return sorted(found), skipped


def _is_text(name: str) -> bool:
    """Whether a path decoded from the file system is valid text: the index stores
    paths as UTF-8, and undecodable bytes reach Python as lone surrogates."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def fingerprint(path: Path) -> SourceFile:
    """Hash a file's bytes: an unchanged hash means an unchanged document."""
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as fh:
        while block := fh.read(1 << 20):
            digest.update(block)
            size += len(block)
    return SourceFile(path=path, sha256=digest.hexdigest(), size=size)


def read_source(path: Path) -> tuple[SourceFile, bytes]:
    """A regular file's identity and bytes, read once (so the hash fits the text).

    Raises OSError when it cannot be read and ValueError when it is not a
    regular file; a FIFO or device never blocks the walk.
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        st = os.fstat(fd)  # before reading: a later change shows as a newer mtime
        if not stat.S_ISREG(st.st_mode):
            raise ValueError("not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read()
    finally:
        os.close(fd)
    return SourceFile(path, hashlib.sha256(data).hexdigest(), len(data), st.st_mtime_ns), data


def read_error(exc: OSError) -> str:
    """Why a file could not be read, in words."""
    if isinstance(exc, FileNotFoundError):
        return "vanished before it was read"
    if isinstance(exc, PermissionError):
        return "permission denied"
    if isinstance(exc, IsADirectoryError):
        return "is a folder"
    return f"unreadable ({exc.strerror or exc})"


def decode(data: bytes) -> tuple[str, str | None]:
    """Text of a file's bytes and a warning when it was not UTF-8.

    Raises ValueError for binary data (a NUL byte), which is not text at all.
    """
    if b"\x00" in data[:8192]:
        raise ValueError("binary file (contains NUL bytes)")
    try:
        return data.decode("utf-8-sig"), None
    except UnicodeDecodeError:
        pass
    try:
        return data.decode("cp1252"), "not UTF-8; read as Windows-1252"
    except UnicodeDecodeError:
        return data.decode("latin-1"), "not UTF-8; read as Latin-1"


def read_document(path: Path, data: bytes | None = None) -> Document:
    """Read one supported file (or its already-read ``data``) into visible text.

    Raises OSError when the file cannot be read, ValueError when it holds no
    usable text (empty, binary, encrypted or corrupt).
    """
    if data is None:
        data = path.read_bytes()
    if not data:
        raise ValueError("empty file")
    suffix = path.suffix.lower()
    if suffix in PDF_SUFFIXES:
        lines, pages = pdf_text(data)
        return Document(path, "\n".join(lines), list(range(1, len(lines) + 1)), pages=pages)
    if suffix in DOCX_SUFFIXES:
        lines, line_map, headings = docx_text(data)
        return Document(path, "\n".join(lines), line_map, headings=headings)
    text, warning = decode(data)
    warnings = [warning] if warning else []
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if suffix in HTML_SUFFIXES:
        lines, line_map, headings = html_text(text)
        return Document(path, "\n".join(lines), line_map, warnings, headings=headings)
    line_map = list(range(1, text.count("\n") + 2))
    return Document(path, text, line_map, warnings, headings=text_headings(text, suffix))


STREAM_BYTES = 64 << 20  # text files larger than this are read in blocks, never whole
BLOCK_CHARS = 1 << 20  # a streamed block ends at the first blank line after this many chars


def streams(path: Path, size: int, limit: int = STREAM_BYTES) -> bool:
    """Whether a file is big enough to read in blocks (plain text formats only)."""
    return size > limit and path.suffix.lower() in TEXT_SUFFIXES


def stream_source(path: Path) -> tuple[SourceFile, str, str | None]:
    """Hash a large text file and choose its encoding in one pass of 1 MB reads.

    Returns the identity, the codec to read it with and a warning when it is
    not UTF-8. Raises ValueError for binary data, like :func:`decode`.
    """
    import codecs

    digest = hashlib.sha256()
    size = 0
    utf8 = codecs.getincrementaldecoder("utf-8-sig")()
    is_utf8 = True
    mtime_ns = path.stat().st_mtime_ns
    with path.open("rb") as fh:
        while block := fh.read(1 << 20):
            if not size and b"\x00" in block[:8192]:
                raise ValueError("binary file (contains NUL bytes)")
            digest.update(block)
            size += len(block)
            if is_utf8:
                try:
                    utf8.decode(block)
                except UnicodeDecodeError:
                    is_utf8 = False
    if not size:
        raise ValueError("empty file")
    source = SourceFile(path, digest.hexdigest(), size, mtime_ns)
    if is_utf8:
        return source, "utf-8-sig", None
    # cp1252 leaves five bytes undefined; Latin-1 decodes anything.
    return source, "cp1252", "not UTF-8; read as Windows-1252 (undefined bytes replaced)"


def stream_document(
    path: Path, encoding: str, block_chars: int = BLOCK_CHARS
) -> Iterator[Document]:
    """A large text file as a series of Documents of about BLOCK_CHARS each.

    Blocks end at a blank line where possible, so passages do not straddle
    them; lines longer than a block are cut (their pieces keep the line number).
    Memory stays at a few blocks whatever the file's size.
    """
    suffix = path.suffix.lower()
    with path.open(encoding=encoding, errors="replace", newline=None) as fh:
        lines: list[str] = []
        line_map: list[int] = []
        chars, number, at_line_start = 0, 1, True
        while piece := fh.readline(block_chars):
            ends = piece.endswith("\n")
            text = piece.rstrip("\n")
            if not at_line_start:
                number -= 1  # the rest of a line cut by the read limit (or by a block's end)
            lines.append(text)
            line_map.append(number)
            chars += len(piece)
            number += 1
            at_line_start = ends
            if chars >= block_chars and (not text.strip() or chars >= 4 * block_chars):
                block = "\n".join(lines)
                yield Document(path, block, line_map, headings=text_headings(block, suffix))
                lines, line_map, chars = [], [], 0
        if lines:
            block = "\n".join(lines)
            yield Document(path, block, line_map, headings=text_headings(block, suffix))


_ATX = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_ADORNMENT = re.compile(r"^([=\-~^\"'`#*+:.,_!$%&/;<>?@\\|])\1{2,}\s*$")


def text_headings(text: str, suffix: str) -> list[tuple[int, int, str]]:
    """Headings of Markdown (ATX ``#`` and setext underlines) and reStructuredText
    (titles underlined, optionally overlined, levels in order of first use)."""
    lines = text.split("\n")
    found: list[tuple[int, int, str]] = []
    if suffix in (".md", ".markdown"):
        fenced = False
        for i, line in enumerate(lines):
            if _FENCE.match(line):
                fenced = not fenced
            elif fenced:
                continue
            elif m := _ATX.match(line):
                found.append((i, len(m.group(1)), m.group(2).strip()))
            elif (
                i
                and lines[i - 1].strip()
                and re.fullmatch(r" {0,3}(=+|-+)\s*", line)
                and not _ATX.match(lines[i - 1])
                and (not found or found[-1][0] != i - 1)
            ):
                found.append((i - 1, 1 if "=" in line else 2, lines[i - 1].strip()))
    elif suffix == ".rst":
        styles: list[tuple[str, bool]] = []
        for i, line in enumerate(lines):
            m = _ADORNMENT.match(line)
            title = lines[i - 1].strip() if i else ""
            if not m or not title or _ADORNMENT.match(lines[i - 1]):
                continue
            if len(line.rstrip()) < len(title):
                continue
            over = i >= 2 and lines[i - 2].rstrip() == line.rstrip()
            style = (m.group(1), over)
            if style not in styles:
                styles.append(style)
            found.append((i - 1, min(styles.index(style) + 1, 6), title))
    found.sort()
    return found


class _Unusable(ValueError):
    """A document format's reason to skip a file, passed through as is."""


def pdf_text(data: bytes) -> tuple[list[str], list[int]]:
    """Text lines of a PDF and the page (1-based) of each; a blank line between pages.

    Encrypted PDFs that open without a password are read; others, and PDFs pypdf
    cannot parse, raise ValueError with the reason.
    """
    from pypdf import PdfReader
    from pypdf.errors import DependencyError

    # pypdf logs each repair of a damaged file; the skip reason is enough.
    logging.getLogger("pypdf").setLevel(logging.ERROR)
    lines: list[str] = []
    pages: list[int] = []
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            try:
                opened = reader.decrypt("")
            except (DependencyError, NotImplementedError) as exc:
                raise _Unusable(f"encrypted PDF that cannot be decrypted here ({exc})") from None
            if not opened:
                raise _Unusable("encrypted PDF (needs a password)")
        for number, page in enumerate(reader.pages, 1):
            text = (page.extract_text() or "").replace("\r\n", "\n").replace("\r", "\n")
            page_lines = [" ".join(line.split()) for line in text.split("\n")]
            while page_lines and not page_lines[-1]:
                page_lines.pop()
            if not any(page_lines):
                continue
            if lines:
                lines.append("")  # passages prefer to end at a page break
                pages.append(number)
            lines.extend(page_lines)
            pages.extend([number] * len(page_lines))
    except _Unusable:
        raise
    except Exception as exc:  # pypdf raises many kinds on damaged files
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise _Unusable(f"unreadable PDF ({detail})") from None
    return lines, pages


def docx_text(data: bytes) -> tuple[list[str], list[int], list[tuple[int, int, str]]]:
    """Paragraphs (and table rows, cells joined by " | ") of a Word document.

    Each paragraph is one text line numbered by its position in the document;
    a blank line goes before each heading so passages prefer to end there.
    """
    import docx
    from docx.table import Table

    lines: list[str] = []
    line_map: list[int] = []
    headings: list[tuple[int, int, str]] = []
    try:
        document = docx.Document(io.BytesIO(data))
        for number, block in enumerate(document.iter_inner_content(), 1):
            if isinstance(block, Table):
                rows = []
                for row in block.rows:
                    cells = [" ".join(c.text.split()) for c in row.cells]
                    rows.append(" | ".join(dict.fromkeys(c for c in cells if c)))
                texts = [r for r in rows if r]
                heading = False
            else:
                texts = [" ".join(part.split()) for part in block.text.split("\n")]
                style = (block.style.name if block.style is not None else "") or ""
                heading = style.lower().startswith(("heading", "title"))
            if heading and lines and lines[-1]:
                lines.append("")
                line_map.append(number)
            if heading and (title := " ".join(t for t in texts if t)):
                level = style.rsplit(" ", 1)[-1]
                headings.append((len(lines), int(level) if level.isdigit() else 1, title))
            for t in texts:
                lines.append(t)
                line_map.append(number)
    except Exception as exc:  # zip, XML and package errors on damaged files
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise _Unusable(f"unreadable Word document ({detail})") from None
    return lines, line_map, headings


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


# A list is navigation (a table of contents, a menu, "next/previous" links) when nearly all
# its text is link text: the link-density rule of boilerplate removal. Such lists crowd out
# the sections they point to, since they name every topic of a site in a few lines.
_NAV_LIST_ITEMS = 5  # shorter lists of links ("see also") are kept
_NAV_LINK_SHARE = 0.9


@dataclass
class _OpenList:
    """An outermost <ul>/<ol> being read: its place on the tag stack, where its lines start
    and how much of it is link text."""

    depth: int
    first_line: int
    first_heading: int
    items: int = 0
    chars: int = 0
    link_chars: int = 0

    def is_navigation(self) -> bool:
        return (
            self.items >= _NAV_LIST_ITEMS
            and self.chars > 0
            and self.link_chars >= _NAV_LINK_SHARE * self.chars
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
        self.heading_level = 0  # inside <hN>
        self.headings: list[tuple[int, int, str]] = []
        self.link_depth: int | None = None  # stack depth of the open <a href>, if any
        self.outer_list: _OpenList | None = None

    def _skipping(self) -> bool:
        return bool(self.stack) and self.stack[-1][1]

    def _break(self) -> None:
        text = " ".join("".join(self.current).split())
        if text:
            if self.heading_level:
                self.headings.append((len(self.lines), self.heading_level, text.rstrip("¶ ")))
            self.lines.append(text)
            self.line_map.append(self.current_line)
        self.current = []
        self.current_line = 0

    def _blank(self) -> None:
        """A blank line, unless one is there: it ends a paragraph for the sentence splitter
        and is where a passage prefers to end. Code blocks are set apart with it, so that
        the output line of an interpreter session is not read as the start of the prose
        sentence after it."""
        if self.lines and self.lines[-1]:
            self.lines.append("")
            self.line_map.append(self.getpos()[0])

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _BLOCK:
            self._break()
        if tag in _HEADINGS and not self._skipping():
            self.heading_level = int(tag[1])
            self._blank()  # passages then prefer to end before a heading
        if tag == "pre" and not self._skipping():
            self._blank()
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
        if skip:
            return
        if tag == "a" and self.link_depth is None and any(k == "href" for k, _ in attrs):
            self.link_depth = len(self.stack)
        elif tag in ("ul", "ol") and self.outer_list is None:
            self.outer_list = _OpenList(len(self.stack), len(self.lines), len(self.headings))
        elif tag == "li" and self.outer_list is not None:
            self.outer_list.items += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in _BLOCK:
            self._break()
        if tag in _HEADINGS:
            self.heading_level = 0
        if not any(t == tag for t, _ in self.stack):
            return  # stray end tag
        while self.stack:
            depth = len(self.stack)
            open_tag, skipped = self.stack.pop()
            if open_tag == "pre":
                self.in_pre -= 1
                if not skipped:
                    self._blank()
            self._closed(depth)
            if open_tag == tag:
                break

    def _closed(self, depth: int) -> None:
        """The element at ``depth`` of the stack ended: a link, or an outermost list, which
        is dropped as navigation when it is one."""
        if self.link_depth == depth:
            self.link_depth = None
        nav = self.outer_list
        if nav is not None and nav.depth == depth:
            self.outer_list = None
            if nav.is_navigation():
                del self.lines[nav.first_line :]
                del self.line_map[nav.first_line :]
                del self.headings[nav.first_heading :]

    def handle_data(self, data: str) -> None:
        if self._skipping() or not data:
            return
        if self.outer_list is not None:
            chars = len(data.strip())
            self.outer_list.chars += chars
            if self.link_depth is not None:
                self.outer_list.link_chars += chars
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


def html_text(markup: str) -> tuple[list[str], list[int], list[tuple[int, int, str]]]:
    """Visible text lines of an HTML page (no scripts, styles, navigation),
    their source lines, and its headings."""
    parser = _VisibleText()
    parser.feed(markup)
    parser.close()
    parser._break()
    while parser.lines and not parser.lines[-1]:
        parser.lines.pop()
        parser.line_map.pop()
    return parser.lines, parser.line_map, parser.headings
