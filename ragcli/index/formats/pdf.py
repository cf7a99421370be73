"""PDF text, page by page, with pypdf (imported on first use)."""

from __future__ import annotations

import io
import logging

from . import Unusable


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
                raise Unusable(f"encrypted PDF that cannot be decrypted here ({exc})") from None
            if not opened:
                raise Unusable("encrypted PDF (needs a password)")
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
    except Unusable:
        raise
    except Exception as exc:  # pypdf raises many kinds on damaged files
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise Unusable(f"unreadable PDF ({detail})") from None
    return lines, pages
