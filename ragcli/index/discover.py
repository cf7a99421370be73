"""Find the documents under the user's paths.

Folder walks honour ``--include`` / ``--exclude`` globs and ``.ragignore`` /
``.gitignore`` files (a gitignore subset, see :class:`IgnoreRule`); only files of
the formats :mod:`ragcli.index.formats` reads are taken.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError
from .formats import SUFFIXES
from .source import read_error

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
