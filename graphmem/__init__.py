"""graphmem: graph-oriented, bi-temporal memory for AI agents.

Facts are nodes, typed links are edges; SQLite (with FTS5) is the source of truth and LanceDB
holds a rebuildable vector index. Start with ``Memory.open``.
"""

from .capture import CaptureResult
from .errors import (
    Conflict,
    EmbedderError,
    EmbedderMismatch,
    Forbidden,
    GraphmemError,
    InvalidInput,
    LLMError,
    NotFound,
    QueryTimeout,
    StorageError,
)
from .graph import LinkType, Node, Path, Subgraph
from .keys import ApiKey, KeyStore
from .memory import CheckReport, FactPage, Memory, PruneReport
from .models import Change, Fact, FactInput, Link, SearchHit, StoreResult
from .recall import RecallItem, RecallResult
from .settings import Settings
from .temporal import TimeScope
from .usage import Usage

__all__ = [
    "ApiKey",
    "CaptureResult",
    "Change",
    "CheckReport",
    "Conflict",
    "EmbedderError",
    "EmbedderMismatch",
    "Fact",
    "FactInput",
    "FactPage",
    "Forbidden",
    "GraphmemError",
    "InvalidInput",
    "KeyStore",
    "LLMError",
    "Link",
    "LinkType",
    "Memory",
    "Node",
    "NotFound",
    "Path",
    "PruneReport",
    "QueryTimeout",
    "RecallItem",
    "RecallResult",
    "SearchHit",
    "Settings",
    "StorageError",
    "StoreResult",
    "Subgraph",
    "TimeScope",
    "Usage",
]
