"""Exit codes and the exceptions that map to them.

Every failure a user can cause or fix is a ``RagError`` subclass; the CLI
prints its message as one line on stderr and exits with its code, so scripts
can branch on the code the way they do with grep.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Documented process exit codes (see README)."""

    ANSWERED = 0
    NOT_FOUND = 1  # no answer in the documents ("I don't know")
    USAGE = 2  # bad arguments, bad input files, bad settings
    INDEX_OR_MODEL = 3  # missing, broken or mismatched index or model
    FAILURE = 4  # anything unexpected: a bug; --debug shows the traceback
    INTERRUPTED = 130  # Ctrl-C (SIGINT)
    BROKEN_PIPE = 141  # the reader of stdout went away (`rag ... | head`)
    TERMINATED = 143  # SIGTERM


class Terminated(BaseException):
    """SIGTERM arrived; raised by the CLI's handler so a batch can stop cleanly."""


class RagError(Exception):
    """Base class: a failure with a one-line message and an exit code."""

    exit_code: ExitCode = ExitCode.USAGE


class UsageError(RagError):
    """The user asked for something that cannot be done as stated."""


class ConfigError(UsageError):
    """A settings file, environment variable or flag has a bad key or value."""


class IndexMissingError(RagError):
    exit_code = ExitCode.INDEX_OR_MODEL


class IndexCorruptError(RagError):
    exit_code = ExitCode.INDEX_OR_MODEL


class IndexMismatchError(RagError):
    """The index was built with other settings (embedding model, chunking)."""

    exit_code = ExitCode.INDEX_OR_MODEL


class DiskFullError(RagError):
    """A write failed for want of space; the index is as its last commit left it."""

    exit_code = ExitCode.INDEX_OR_MODEL


class IndexLockedError(RagError):
    exit_code = ExitCode.INDEX_OR_MODEL


class ModelError(RagError):
    """A model file is missing, unreadable or not a usable GGUF."""

    exit_code = ExitCode.INDEX_OR_MODEL


class ServerError(RagError):
    """A `rag serve` server refused or failed a request: busy, bad token, or an error it
    reports with its own exit code (which the client then exits with)."""

    exit_code = ExitCode.INDEX_OR_MODEL

    def __init__(self, message: str, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            known = exit_code in ExitCode._value2member_map_
            self.exit_code = ExitCode(exit_code) if known else ExitCode.FAILURE
