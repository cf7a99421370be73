"""sha256 digests of large model files, remembered by size and mtime.

A GGUF of a gigabyte takes seconds to hash, and every use of a model checks its
digest, so each file is hashed once and its digest kept in a small JSON file under
the model cache until the file's size or modification time changes.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path


def _memo(path: Path, digests_dir: Path) -> tuple[Path, list[int]]:
    stat = path.stat()
    key = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:24]
    return digests_dir / f"{key}.json", [stat.st_size, stat.st_mtime_ns]


def file_digest(path: Path, digests_dir: Path) -> str:
    """sha256 of a (large) file, remembered by size and mtime so it is hashed once."""
    memo, stamp = _memo(path, digests_dir)
    try:
        saved = json.loads(memo.read_text())
        if saved["stamp"] == stamp and len(saved["sha256"]) == 64:
            return str(saved["sha256"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(1 << 20):
            digest.update(block)
    remember_digest(path, digests_dir, digest.hexdigest())
    return digest.hexdigest()


def remember_digest(path: Path, digests_dir: Path, value: str) -> None:
    """Keep a digest already known (of a file just assembled and checked) for later uses."""
    memo, stamp = _memo(path, digests_dir)
    try:
        digests_dir.mkdir(parents=True, exist_ok=True)
        tmp = memo.with_suffix(".tmp")
        tmp.write_text(json.dumps({"stamp": stamp, "sha256": value}))
        os.replace(tmp, memo)
    except OSError:
        pass  # a read-only cache only costs a re-hash next time
