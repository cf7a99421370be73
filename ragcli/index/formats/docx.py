"""Word documents (.docx) as numbered paragraphs, with python-docx (imported on first use)."""

from __future__ import annotations

import io

from . import Unusable


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
        raise Unusable(f"unreadable Word document ({detail})") from None
    return lines, line_map, headings
