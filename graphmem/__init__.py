"""graphmem: graph-oriented, bi-temporal memory for AI agents.

Facts are nodes, typed links are edges; SQLite (with FTS5) is the source of truth and LanceDB
holds a rebuildable vector index. Start with ``Memory.open``.
"""

from .errors import (
    Conflict,
    EmbedderError,
    EmbedderMismatch,
    Forbidden,
    GraphmemError,
    InvalidInput,
    NotFound,
    StorageError,
)
from .graph import LinkType, Node, Path, Subgraph
from .keys import ApiKey, KeyStore
from .memory import CheckReport, FactPage, Memory, PruneReport
from .models import Change, Fact, FactInput, Link, SearchHit, StoreResult
from .settings import Settings
from .temporal import TimeScope

__all__ = [
    "ApiKey",
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
    "Link",
    "LinkType",
    "Memory",
    "Node",
    "NotFound",
    "Path",
    "PruneReport",
    "SearchHit",
    "Settings",
    "StorageError",
    "StoreResult",
    "Subgraph",
    "TimeScope",
]
