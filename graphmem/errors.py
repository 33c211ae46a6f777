"""The exceptions graphmem raises on purpose, and every error code a client can meet.

Each exception carries a stable ``code``, which the CLI prints and GraphQL and MCP answer::

    GraphmemError             base class (never raised itself)
    ├── InvalidInput          INVALID_INPUT      bad text, category, time, importance, cursor…
    ├── NotFound              NOT_FOUND          no fact with that id (visible at the time scope)
    ├── Conflict              CONFLICT           the operation contradicts the stored state
    ├── Forbidden             FORBIDDEN          the API key does not allow this operation
    ├── EmbedderMismatch      EMBEDDER_MISMATCH  store was built by another embedder
    ├── EmbedderError         EMBEDDER_ERROR     model file damaged, endpoint failing, bad dims
    ├── LLMError              LLM_ERROR          chat endpoint failing or answering badly
    ├── StorageError          STORAGE_ERROR      disk full, read-only or damaged files, newer schema
    ├── QueryTimeout          TIMEOUT            a read ran past its time limit (sql_time_limit)
    └── SubscriberTooSlow     UNAVAILABLE        a subscription fell too far behind

``CODES`` says what each code means and where clients meet it, including the six that only the
service answers (INVALID_QUERY, UNAUTHENTICATED, PAYLOAD_TOO_LARGE, TOO_COSTLY, RATE_LIMITED,
INTERNAL_ERROR). The error tables of docs/graphql.md and docs/mcp.md and the GraphQL
``ErrorCode`` enum are built from it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar, Final
from urllib.parse import urlsplit, urlunsplit

from .limits import SUBSCRIBER_BACKLOG


class Code(StrEnum):
    """Every error code graphmem answers with."""

    INVALID_INPUT = "INVALID_INPUT"
    NOT_FOUND = "NOT_FOUND"
    CONFLICT = "CONFLICT"
    FORBIDDEN = "FORBIDDEN"
    EMBEDDER_MISMATCH = "EMBEDDER_MISMATCH"
    EMBEDDER_ERROR = "EMBEDDER_ERROR"
    LLM_ERROR = "LLM_ERROR"
    STORAGE_ERROR = "STORAGE_ERROR"
    TIMEOUT = "TIMEOUT"
    UNAVAILABLE = "UNAVAILABLE"
    INVALID_QUERY = "INVALID_QUERY"
    UNAUTHENTICATED = "UNAUTHENTICATED"
    PAYLOAD_TOO_LARGE = "PAYLOAD_TOO_LARGE"
    TOO_COSTLY = "TOO_COSTLY"
    RATE_LIMITED = "RATE_LIMITED"
    INTERNAL_ERROR = "INTERNAL_ERROR"


@dataclass(frozen=True, slots=True)
class CodeUse:
    """What an error code means (Markdown) and where clients meet it."""

    meaning: str
    #: The HTTP status of a request refused as a whole with this code; None: the code only
    #: comes inside an answer (GraphQL ``errors``, a mutation's ``error``, an MCP tool error).
    http_status: int | None = None
    #: GraphQL answers carry it (``extensions.code``, or a refused request's body).
    graphql: bool = True
    #: A mutation returns it as data, in its payload's ``error`` (the GraphQL ``ErrorCode``).
    payload: bool = False
    #: MCP clients meet it: as a tool error, or as the JSON-RPC error of a refused request.
    mcp: bool = True


#: Every code, what it means and where it appears (keyed by ``Code``; a plain string finds its
#: code too, as every exception's ``code`` is one).
CODES: Final[Mapping[str, CodeUse]] = {
    Code.INVALID_INPUT: CodeUse(
        "an argument was refused (empty text, a number out of range, a time in none of the "
        "accepted forms, a bad cursor, an unknown tool or tool argument…); the message names it "
        "and nothing was written. HTTP 400 when `X-Graphmem-Namespace` is not a valid name",
        http_status=400,
        payload=True,
    ),
    Code.NOT_FOUND: CodeUse(
        "no fact or link with that id, or no entity a name reaches, in this namespace",
        payload=True,
    ),
    Code.CONFLICT: CodeUse(
        "the request contradicts the stored state (forgetting a forgotten fact, superseding a "
        "replaced one, linking a forgotten fact, splitting an entity's only name)",
        payload=True,
    ),
    Code.FORBIDDEN: CodeUse(
        "the key is read-only (mutations and writing tools answer it), or has no access to the "
        "namespace asked for; HTTP 403 for that, and for a request to a loopback server that "
        "names another host or comes from a page elsewhere",
        http_status=403,
        payload=True,
    ),
    Code.EMBEDDER_MISMATCH: CodeUse(
        "the namespace was indexed with another embedder (provider, model or vector size) than "
        "the server's, so it cannot be opened (HTTP 503) until `graphmem reindex` rebuilds its "
        "vectors, or the server runs with the old embedder",
        http_status=503,
    ),
    Code.EMBEDDER_ERROR: CodeUse(
        "the embedder could not embed the text (endpoint failing after its retries, damaged "
        "model file, vectors of the wrong size); HTTP 503 when it fails while opening a namespace",
        http_status=503,
    ),
    Code.LLM_ERROR: CodeUse(
        "the classifier's chat endpoint failed or answered something unusable. No write fails "
        "with it: classify-before-write adds the facts instead and says why in their `reason`",
        graphql=False,
        mcp=False,
    ),
    Code.STORAGE_ERROR: CodeUse(
        "the namespace's files cannot be used or written: the disk is full, the directory is "
        "read-only, a file is damaged or was written by a newer graphmem, or the PostgreSQL "
        "store cannot be reached (the message says which; a write that fails with it wrote "
        "nothing). HTTP 503 for a namespace that cannot be opened at all, or an API key file "
        "that cannot be read",
        http_status=503,
    ),
    Code.TIMEOUT: CodeUse(
        "the request's reads ran past the `sql_time_limit` setting and were stopped, or the "
        "whole request past `request_timeout`"
    ),
    Code.UNAVAILABLE: CodeUse(
        f"a `memoryChanged` subscription fell more than {SUBSCRIBER_BACKLOG:,} changes behind "
        "the writes (or changes other processes committed were dropped from the namespace's "
        "change log before it read them) and was ended; subscribe again and re-read what you "
        "need. HTTP 503 (`Retry-After`) for a WebSocket upgrade while the server holds as many "
        "sockets waiting for their key as it may",
        http_status=503,
        mcp=False,
    ),
    Code.INVALID_QUERY: CodeUse(
        "the request is malformed: a GraphQL document that does not parse or validate (unknown "
        "field, wrong variable type, a `DateTime` variable in none of the accepted forms), "
        "exceeds a document limit or holds several operations without `operationName`; or "
        "(refused as a whole) a body that is not JSON, not UTF-8, nests too deep or has no "
        "query (HTTP 400), a POST that is not `application/json` (415), a mutation over GET or "
        "a method other than GET and POST (405, with `Allow`)",
        http_status=400,
    ),
    Code.UNAUTHENTICATED: CodeUse(
        "keys exist and the request has none, or an unknown or revoked one", http_status=401
    ),
    Code.PAYLOAD_TOO_LARGE: CodeUse("the request body exceeds `max_body_bytes`", http_status=413),
    Code.TOO_COSTLY: CodeUse(
        "the document's worst-case cost (the most list items its answer may hold: each "
        "list's page size times the items above it, every alias again) exceeds "
        "`graphql_max_cost`, so it was refused before it ran; or its answer came to more than "
        "`graphql_max_response_bytes` (the Python `Client`: more than its `max_answer_bytes`). "
        "The message names the cost and the budget",
        mcp=False,
    ),
    Code.RATE_LIMITED: CodeUse(
        "the API key has spent its `rate_limit_per_minute` cost points or its "
        "`server_seconds_per_minute` of server time, or has too many calls waiting for its "
        "turn, or (at a WebSocket upgrade) its client address holds as many sockets waiting for "
        "their key as it may; HTTP 429 with `Retry-After` (the seconds until enough are back)",
        http_status=429,
    ),
    Code.INTERNAL_ERROR: CodeUse(
        "anything unexpected: the message is masked, the details go to the server's log"
    ),
}


def shown_url(url: object) -> str:
    """``url`` as a message may show it: without the user name and password a URL may carry
    (``https://user:secret@host/v1`` is shown as ``https://host/v1``), since messages reach
    clients, logs and recorded maintenance runs."""
    text = str(url)
    parts = urlsplit(text)
    if "@" not in parts.netloc:
        return text
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


class GraphmemError(Exception):
    """Base class of every error graphmem raises deliberately."""

    code: ClassVar[str] = "ERROR"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidInput(GraphmemError, ValueError):
    """The caller's input was rejected; nothing was written."""

    code = Code.INVALID_INPUT

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

    code = Code.NOT_FOUND


class Conflict(GraphmemError):
    """The request contradicts what is stored, e.g. superseding a fact that is no longer live."""

    code = Code.CONFLICT


class Forbidden(GraphmemError):
    """The caller's API key does not allow the operation (e.g. a write with a read-only key)."""

    code = Code.FORBIDDEN


class EmbedderMismatch(GraphmemError):
    """The namespace was indexed by a different embedder; `graphmem reindex` rebuilds it."""

    code = Code.EMBEDDER_MISMATCH


class EmbedderError(GraphmemError):
    """The embedder cannot produce vectors (damaged model file, failing endpoint, wrong size)."""

    code = Code.EMBEDDER_ERROR


class LLMError(GraphmemError):
    """The chat endpoint failed, or answered something unusable. Classify-before-write never
    lets it through: it falls back to ADD and records why."""

    code = Code.LLM_ERROR


class StorageError(GraphmemError):
    """The namespace's files cannot be used or written: the disk is full, the directory is
    read-only, a file is damaged or written by a newer graphmem. A write that fails with it
    wrote nothing. ``unreachable``: the store (an object store holding the vector index) did
    not answer in time: an outage, not damage, so the same call may succeed later."""

    code = Code.STORAGE_ERROR

    def __init__(self, message: str, *, unreachable: bool = False) -> None:
        super().__init__(message)
        self.unreachable = unreachable


class QueryTimeout(GraphmemError, TimeoutError):
    """A read ran longer than its time limit (the ``sql_time_limit`` setting) and was stopped."""

    code = Code.TIMEOUT


class SubscriberTooSlow(GraphmemError):
    """A subscription to memory's changes fell too far behind the writes and was ended."""

    code = Code.UNAVAILABLE


#: The exception class of each code graphmem raises itself: the classes above, whose tree the
#: module's docstring draws (a client raises the same for the codes the service answers).
RAISED: Final[Mapping[str, type[GraphmemError]]] = {
    cls.code: cls for cls in GraphmemError.__subclasses__()
}
