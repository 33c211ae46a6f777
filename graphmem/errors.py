"""The exceptions graphmem raises on purpose.

Every one carries a stable ``code`` (used by the CLI and the GraphQL error payloads):

    GraphmemError                 base class, code "ERROR"
    ├── InvalidInput              "INVALID_INPUT"  bad text, category, date, importance, …
    ├── NotFound                  "NOT_FOUND"      no fact with that id (visible at the time scope)
    ├── Conflict                  "CONFLICT"       the operation contradicts the stored state
    ├── Forbidden                 "FORBIDDEN"      the API key does not allow this operation
    ├── EmbedderMismatch          "EMBEDDER_MISMATCH"  store was built by another embedder
    ├── EmbedderError             "EMBEDDER_ERROR" model file damaged, endpoint failing, bad dims
    ├── LLMError                  "LLM_ERROR"      chat endpoint failing or answering badly
    ├── StorageError              "STORAGE_ERROR"  disk full, read-only or damaged files, newer schema
    └── QueryTimeout              "TIMEOUT"        a read ran past its time limit (sql_time_limit)
"""

from __future__ import annotations


class GraphmemError(Exception):
    """Base class of every error graphmem raises deliberately."""

    code = "ERROR"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidInput(GraphmemError, ValueError):
    """The caller's input was rejected; nothing was written."""

    code = "INVALID_INPUT"

    def __init__(self, message: str, *, field: str | None = None, index: int | None = None) -> None:
        where = []
        if index is not None:
            where.append(f"item {index}")
        if field is not None:
            where.append(field)
        super().__init__(f"{': '.join(where)}: {message}" if where else message)
        self.field = field
        self.index = index


class NotFound(GraphmemError, LookupError):
    """No fact (or link) with that id exists, or none is visible at the requested time."""

    code = "NOT_FOUND"


class Conflict(GraphmemError):
    """The request contradicts what is stored, e.g. superseding a fact that is no longer live."""

    code = "CONFLICT"


class Forbidden(GraphmemError):
    """The caller's API key does not allow the operation (e.g. a write with a read-only key)."""

    code = "FORBIDDEN"


class EmbedderMismatch(GraphmemError):
    """The namespace was indexed by a different embedder; `graphmem reindex` rebuilds it."""

    code = "EMBEDDER_MISMATCH"


class EmbedderError(GraphmemError):
    """The embedder cannot produce vectors (damaged model file, failing endpoint, wrong size)."""

    code = "EMBEDDER_ERROR"


class LLMError(GraphmemError):
    """The chat endpoint failed, or answered something unusable. Classify-before-write never
    lets it through: it falls back to ADD and records why."""

    code = "LLM_ERROR"


class StorageError(GraphmemError):
    """The namespace's files cannot be used or written: the disk is full, the directory is
    read-only, a file is damaged or written by a newer graphmem. A write that fails with it
    wrote nothing."""

    code = "STORAGE_ERROR"


class QueryTimeout(GraphmemError, TimeoutError):
    """A read ran longer than its time limit (the ``sql_time_limit`` setting) and was stopped."""

    code = "TIMEOUT"
