"""How a passage is cited: ``path:start-end — section``, or ``path:page N`` for PDF pages.

Apart from :mod:`ragcli.records` because the served client prints citations from a
server's JSON and needs nothing else of it (a fresh client process stays small).
"""

from __future__ import annotations


def location(path: str, start_line: int, end_line: int, page: int | None) -> str:
    """``path:page N`` for paged documents, else ``path:start-end``."""
    return f"{path}:page {page}" if page else f"{path}:{start_line}-{end_line}"


def citation(source: dict) -> str:
    """A source as :meth:`Hit.as_dict` writes it, cited: location, then section if any.

    Works on the JSON form so that a client printing a server's answer cites exactly as
    the command does in-process.
    """
    where = location(source["path"], source["start_line"], source["end_line"], source["page"])
    return cite(where, source.get("heading", ""))


def cite(where: str, heading: str) -> str:
    return f"{where} — {heading}" if heading else where
