"""Fixed limits: how much one call may ask for or carry, and how far the graph is walked.

Each limit is a constant here, imported where it is enforced; ``LIMITS`` says what each bounds,
and the limits table of docs/configuration.md and the API descriptions that quote a limit are
built from it. Limits a deployment may change (request size, GraphQL document limits, time per
request) are settings instead: graphmem/settings.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

MAX_LIMIT: Final = 1_000
MAX_BATCH: Final = 10_000
MAX_TEXT_LENGTH: Final = 10_000
MAX_FIELD_LENGTH: Final = 1_000
MAX_NOTE_LENGTH: Final = 10_000
MAX_TAGS: Final = 32
MAX_TAG_LENGTH: Final = 64
MAX_METADATA_BYTES: Final = 16_384
MAX_DEPTH: Final = 6
MAX_NODES: Final = 10_000
FAN_OUT: Final = 200
PATH_MAX_VISITED: Final = 100_000
MAX_RECALL_TOKENS: Final = 100_000
MAX_CAPTURE_MESSAGES: Final = 1_000
MAX_QUERY_TERMS: Final = 64
CLUSTER_MAX_LINKS: Final = 200_000
MAX_CYCLES: Final = 20
SUBSCRIBER_BACKLOG: Final = 10_000
MAX_CHANGES: Final = 10_000
CHANGE_LOG_KEPT: Final = 100_000
MAX_READ_LINES: Final = 1_000
MAX_SYNC_PATHS: Final = 1_000
MAX_DOCUMENT_BYTES: Final = 10_000_000
MAX_SUBSCRIPTIONS_PER_SOCKET: Final = 20
MAX_SOCKETS_PER_KEY: Final = 50
MAX_CHECKPOINT_FILES: Final = 100
#: A model's longest answer (about 128,000 tokens, some 500 KB of text) even with every
#: character escaped in the JSON around it (six bytes for one at worst) fits 4 MiB.
MAX_CHAT_ANSWER_BYTES: Final = 4_194_304
#: A float32 written as JSON takes at most 25 bytes with its separator
#: ("-1.2345678918063641e-05, "); 48 leaves room for an answer laid out with indentation.
EMBEDDING_VALUE_BYTES: Final = 48
EMBEDDING_ANSWER_BYTES: Final = 1_048_576
#: A quarter of Python's recursion limit, so that code walking an answer recursively (repr,
#: json.dumps, copy.deepcopy) still has room.
MAX_ANSWER_NESTING: Final = 256


@dataclass(frozen=True, slots=True)
class Limit:
    """A fixed limit: its constant's name, its value and unit, and what it bounds (Markdown)."""

    name: str
    value: int
    unit: str
    bounds: str


#: Every fixed limit, in the order the docs list them.
LIMITS: Final = (
    Limit(
        "MAX_LIMIT",
        MAX_LIMIT,
        "items",
        "results of one `search` or `lookup` (`limit`), and one page of `facts` or of a "
        "fact's `links` (`first`)",
    ),
    Limit("MAX_BATCH", MAX_BATCH, "facts", "stored by one `store_many` (GraphQL `storeFacts`)"),
    Limit("MAX_TEXT_LENGTH", MAX_TEXT_LENGTH, "characters", "a fact's text, and a search query"),
    Limit("MAX_FIELD_LENGTH", MAX_FIELD_LENGTH, "characters", "entity, key, value or source"),
    Limit("MAX_NOTE_LENGTH", MAX_NOTE_LENGTH, "characters", "summary, why or context"),
    Limit("MAX_TAGS", MAX_TAGS, "tags", "on one fact"),
    Limit("MAX_TAG_LENGTH", MAX_TAG_LENGTH, "characters", "one tag"),
    Limit("MAX_METADATA_BYTES", MAX_METADATA_BYTES, "bytes", "a link's metadata, as JSON"),
    Limit(
        "MAX_DEPTH",
        MAX_DEPTH,
        "links",
        "a traversal's `depth`, a path's length, and the `graphDepth` of `search` and `recall`",
    ),
    Limit(
        "MAX_NODES",
        MAX_NODES,
        "facts",
        "returned by one traversal (`maxNodes`), and the facts it may start from",
    ),
    Limit(
        "FAN_OUT",
        FAN_OUT,
        "links",
        "a traversal follows per fact and level, strongest first (more mark it truncated by "
        "`fan_out`)",
    ),
    Limit(
        "PATH_MAX_VISITED",
        PATH_MAX_VISITED,
        "facts",
        "a path search visits before it gives up and answers that there is no path",
    ),
    Limit("MAX_RECALL_TOKENS", MAX_RECALL_TOKENS, "tokens", "`recall`'s budget (`maxTokens`)"),
    Limit("MAX_CAPTURE_MESSAGES", MAX_CAPTURE_MESSAGES, "messages", "read by one `capture`"),
    Limit(
        "MAX_QUERY_TERMS",
        MAX_QUERY_TERMS,
        "words",
        "of a query that keyword search matches (the rest are left out)",
    ),
    Limit(
        "CLUSTER_MAX_LINKS",
        CLUSTER_MAX_LINKS,
        "links",
        "read by `graphmem clusters` (beyond them the answer says it is partial)",
    ),
    Limit("MAX_CYCLES", MAX_CYCLES, "cycles", "reported by `graphmem deps`"),
    Limit(
        "SUBSCRIBER_BACKLOG",
        SUBSCRIBER_BACKLOG,
        "changes",
        "a `memoryChanged` subscriber may fall behind before it is ended with `UNAVAILABLE`",
    ),
    Limit("MAX_CHANGES", MAX_CHANGES, "changes", "returned by one `Memory.changes_since`"),
    Limit(
        "CHANGE_LOG_KEPT",
        CHANGE_LOG_KEPT,
        "changes",
        "kept in a namespace's change log, the newest (a reader further behind is told it "
        "missed some)",
    ),
    Limit(
        "MAX_READ_LINES", MAX_READ_LINES, "lines", "read back from a document by one `read_lines`"
    ),
    Limit(
        "MAX_SYNC_PATHS", MAX_SYNC_PATHS, "paths", "named by one `sync_files` (folders count once)"
    ),
    Limit(
        "MAX_DOCUMENT_BYTES",
        MAX_DOCUMENT_BYTES,
        "bytes",
        "a markdown file `sync_files` indexes and `read_lines` reads back (a larger one is "
        "skipped with the reason, and not read back: `INVALID_INPUT`)",
    ),
    Limit(
        "MAX_SUBSCRIPTIONS_PER_SOCKET",
        MAX_SUBSCRIPTIONS_PER_SOCKET,
        "operations",
        "running at once on one WebSocket (subscriptions, and queries still answering); one "
        "more is answered with an error",
    ),
    Limit(
        "MAX_SOCKETS_PER_KEY",
        MAX_SOCKETS_PER_KEY,
        "sockets",
        "open at once with one API key in one server process; one more is closed with 4429",
    ),
    Limit(
        "MAX_CHECKPOINT_FILES",
        MAX_CHECKPOINT_FILES,
        "paths",
        "the working files one checkpoint names (the whole checkpoint is also at most "
        "MAX_NOTE_LENGTH characters as JSON)",
    ),
    Limit(
        "MAX_CHAT_ANSWER_BYTES",
        MAX_CHAT_ANSWER_BYTES,
        "bytes",
        "read of a chat endpoint's answer; the request stops there and fails with `LLM_ERROR`",
    ),
    Limit(
        "EMBEDDING_VALUE_BYTES",
        EMBEDDING_VALUE_BYTES,
        "bytes",
        "an embedding endpoint's answer may spend on each value of its vectors, besides "
        "EMBEDDING_ANSWER_BYTES; the request stops there and fails with `EMBEDDER_ERROR`",
    ),
    Limit(
        "EMBEDDING_ANSWER_BYTES",
        EMBEDDING_ANSWER_BYTES,
        "bytes",
        "an embedding answer may have besides its values (the whole answer of the probe that "
        "learns the vector size)",
    ),
    Limit(
        "MAX_ANSWER_NESTING",
        MAX_ANSWER_NESTING,
        "levels",
        "of JSON nesting read from a chat or embedding endpoint, or by the Python `Client` from "
        "the service; deeper is refused as a malformed answer",
    ),
)
