"""graphmem: graph-oriented, bi-temporal memory for AI agents.

Facts are nodes, typed links are edges; SQLite (with FTS5) is the source of truth and LanceDB
holds a rebuildable vector index. Start with ``Memory.open``.
"""

from .errors import (
    Conflict,
    EmbedderError,
    EmbedderMismatch,
    GraphmemError,
    InvalidInput,
    NotFound,
    StorageError,
)
from .graph import LinkType, Node, Path, Subgraph
from .memory import CheckReport, Memory, PruneReport
from .models import Fact, FactInput, Link, SearchHit, StoreResult
from .settings import Settings
from .temporal import TimeScope

__all__ = [
    "CheckReport",
    "Conflict",
    "EmbedderError",
    "EmbedderMismatch",
    "Fact",
    "FactInput",
    "GraphmemError",
    "InvalidInput",
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
