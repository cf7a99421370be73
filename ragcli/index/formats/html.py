"""The visible text of an HTML page: the article, without scripts, styles or navigation.

Each text line keeps the source line it starts on, so that a citation points at the
lines a person would open, though the visible text is far shorter than the markup.
"""

from __future__ import annotations

from dataclasses import dataclass
from html.parser import HTMLParser

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
