"""Headings of plain text formats: Markdown and reStructuredText.

Their text is the file itself, line for line, so only the headings need reading: a
passage is labelled with the section it falls under.
"""

from __future__ import annotations

import re

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
