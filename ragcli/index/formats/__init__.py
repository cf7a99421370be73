"""The document formats `rag index` reads, by file name suffix: one module per format.

Each format module turns a file's bytes (or decoded text) into text lines and a map
from those lines back to the source's lines, pages or paragraphs; choosing the module
by suffix is :func:`ragcli.index.document.read_document`'s. This package module holds
only what its format modules share, so that they import it and it imports none of them.
"""

from __future__ import annotations

TEXT_SUFFIXES = frozenset({".txt", ".md", ".markdown", ".rst"})
HTML_SUFFIXES = frozenset({".html", ".htm"})
PDF_SUFFIXES = frozenset({".pdf"})
DOCX_SUFFIXES = frozenset({".docx"})
SUFFIXES = TEXT_SUFFIXES | HTML_SUFFIXES | PDF_SUFFIXES | DOCX_SUFFIXES


class Unusable(ValueError):
    """A document format's reason to skip a file, passed through as is."""
