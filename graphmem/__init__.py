"""graphmem: graph-oriented, bi-temporal memory for AI agents.

Facts are nodes, typed links are edges; SQLite (with FTS5) is the source of truth and LanceDB
holds a rebuildable vector index. Start with ``Memory.open``.
"""

from .analytics import Clusters, DependencyOrder
from .api import MemoryAPI
from .capture import CaptureResult
from .categorize import CategoryInfo, ClassifyReport
from .checkpoints import Checkpoint
from .client import AsyncClient, Client, ServiceError
from .consolidation import ConsolidateReport
from .documents import DocumentFile, SyncReport
from .entities import Entity
from .episodes import Episode
from .erasure import Erasure, PurgeReport
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
from .graph import LinkPosition, Node, Path, Subgraph
from .memory import Memory
from .models import (
    Change,
    ChangePage,
    Fact,
    FactInput,
    Link,
    LinkInput,
    LinkType,
    MaintenanceRun,
    Reranked,
    SearchHit,
    SearchInput,
    StoreResult,
)
from .profiles import Profile
from .prune import PruneReport
from .recall import RecallItem, RecallResult
from .reflection import ReflectReport
from .rerank import Reranker
from .settings import Settings
from .statedtime import StatedTime
from .stats import Stats
from .storage.interface import FactPage, ImportReport
from .storage.keys import ApiKey, KeyStore
from .temporal import TimeScope
from .timehints import TimeHint
from .usage import Usage
from .vectors.outbox import CheckReport
from .version import __version__ as __version__

__all__ = [
    "ApiKey",
    "AsyncClient",
    "CaptureResult",
    "CategoryInfo",
    "Change",
    "ChangePage",
    "CheckReport",
    "Checkpoint",
    "ClassifyReport",
    "Client",
    "Clusters",
    "Conflict",
    "ConsolidateReport",
    "DependencyOrder",
    "DocumentFile",
    "EmbedderError",
    "EmbedderMismatch",
    "Entity",
    "Episode",
    "Erasure",
    "Fact",
    "FactInput",
    "FactPage",
    "Forbidden",
    "GraphmemError",
    "ImportReport",
    "InvalidInput",
    "KeyStore",
    "LLMError",
    "Link",
    "LinkInput",
    "LinkPosition",
    "LinkType",
    "MaintenanceRun",
    "Memory",
    "MemoryAPI",
    "Node",
    "NotFound",
    "Path",
    "Profile",
    "PruneReport",
    "PurgeReport",
    "QueryTimeout",
    "RecallItem",
    "RecallResult",
    "ReflectReport",
    "Reranked",
    "Reranker",
    "SearchHit",
    "SearchInput",
    "ServiceError",
    "Settings",
    "StatedTime",
    "Stats",
    "StorageError",
    "StoreResult",
    "Subgraph",
    "SyncReport",
    "TimeHint",
    "TimeScope",
    "Usage",
]
