"""The storage interface: everything the engine asks of a storage engine, and nothing more.

The rest of graphmem (the write path, search, expansion, decay, vector sync) talks to storage
only through ``Store`` and the ``Transaction`` it opens. Each is composed of roles, as graphiti
splits its driver: a transaction of ``FactWrites``, ``LinkWrites``, ``EpisodeWrites``,
``OutboxWrites``, ``UpkeepWrites``, ``TransferWrites`` and ``EntityWrites``; a store of
``Lifecycle``, ``FactReads``, ``HistoryReads``, ``KeywordReads``, ``EpisodeReads``,
``GraphReads``, ``OutboxReads``, ``UpkeepReads``, ``TransferReads`` and ``EntityReads``. A
module that needs one role types against it (expansion reads the graph only: ``GraphReads``).
Both engines implement it on the shared SQL (:class:`graphmem.storage.sql.store.SQLStore`);
tests/storage/test_conformance.py is the suite every implementation must pass.

Contracts every implementation keeps:

* **Transaction time comes from the store.** A transaction's ``now`` is stamped by the store
  while the write is exclusive, never before an earlier transaction's, so transaction time
  follows commit order; callers never stamp ``recorded_at``.
* **Writes are all or nothing.** A transaction whose block raises leaves nothing behind.
* **Reads obey the time rule** of the scope they are given, and ``snapshot()`` makes the reads
  of one thread inside it see one state.
* **Typed errors**: NotFound, Conflict, InvalidInput, StorageError, QueryTimeout
  (:mod:`graphmem.errors`), never an engine's own exception.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any, NamedTuple, Protocol

from ..models import Fact
from ..temporal import TimeScope
from ..timehints import TimeHint

if TYPE_CHECKING:
    from .. import analytics, graph
    from ..documents import DocumentFile
    from ..episodes import Episode, EpisodeInput
    from ..erasure import Erasure, PurgeFilter, PurgeReport
    from ..models import Fact, Link, MaintenanceRun, RunStatus, Tier, Vectors
    from ..temporal import TimeInput, TimeScope


#: An entity name as a store keeps it: (name as compared, a spelling, facts carrying it, first
#: recorded at).
EntityName = tuple[str, str, int, float]
#: A declaration as a store keeps it: (position, kind, name, target, recorded_at, retracted_at).
Declaration = tuple[int, str, str, str, float, float | None]


class EntitySignature(NamedTuple):
    """What changes whenever an entity name comes or goes or a declaration is made or
    retracted: how often names or declarations were removed, the newest name's position
    (never reused; None for no name), the declarations' count and newest position, then the
    newest time a name was first recorded, a declaration recorded and one retracted."""

    removals: int
    name_position: int | None
    declarations: int
    declaration_position: int | None
    named_at: float | None
    declared_at: float | None
    retracted_at: float | None


class Step(NamedTuple):
    """One link followed from a frontier fact (``via``) to ``step``."""

    via: str
    step: str
    link_id: str
    rank: int  # among via's links of this level, strongest first
    strength: float


@dataclass(frozen=True, slots=True)
class SoftDecay:
    """The soft-decay rule the engine gives the store (graphmem.prune): a fact past ``after``
    of its TTL loses confidence by ``factor`` on each prune, never from at or below ``floor``;
    a fact whose confidence is below ``floor`` has faded."""

    after: float
    factor: float
    floor: float


class ImportRules(Protocol):
    """The engine's rules for the rows of an imported export (graphmem.imports), beyond the
    columns and values the store can keep: each raises InvalidInput saying what is wrong with
    ``row`` (a dict of its columns, times as epoch seconds); the store names the line."""

    def episode(self, row: dict[str, Any], /) -> None: ...
    def fact(self, row: dict[str, Any], /) -> None: ...
    def link(self, row: dict[str, Any], /) -> None: ...
    def file(self, row: dict[str, Any], /) -> None: ...
    def declarations(
        self, names: Sequence[str], held: Sequence[Declaration], /
    ) -> Callable[[dict[str, Any]], bool]:
        """The rule for the declarations of one import, given the entity names the store's
        facts then carry (as compared) and the declarations it already ``held``: called on
        each declaration's row in turn, it answers whether the row is new (False: the store
        holds it already), after setting its ``target`` to the name it is stored as."""
        ...


@dataclass(frozen=True, slots=True)
class Purged:
    """What ``Transaction.purge`` deleted: how many facts, which ids, and the facts whose
    vector must be brought in line (the purged ones and those that shared their vector)."""

    removed: int
    gone: list[str]
    touched: list[str]
    links: int = 0
    vectors: int = 0
    episodes: int = 0


@dataclass
class BatchChanges:
    """Everything a stored batch writes, for ``Transaction.apply`` to write at once."""

    #: New facts: dicts of every fact column (access_count, last_accessed_at and retracted_at
    #: included, at their defaults).
    inserts: list[dict[str, Any]] = field(default_factory=list)
    #: (valid_until, valid_until_recorded_at, superseded_by, id) of the facts it supersedes.
    supersessions: list[tuple[float, float, str, str]] = field(default_factory=list)
    #: (retracted_at, id) of the facts a DELETE retracts.
    retractions: list[tuple[float, str]] = field(default_factory=list)
    #: (source, target, recorded_at, valid_from) of its SUPERSEDES links.
    links: list[tuple[str, str, float, float]] = field(default_factory=list)
    #: (supersedes_id, id): a later version now points back at the new one, if it pointed nowhere.
    back_links: list[tuple[str, str]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Counts:
    """The store's side of ``Memory.stats``."""

    facts: int
    superseded: int
    retracted: int
    expired: int
    by_decay_class: dict[str, int]
    by_category: dict[str, int]
    links: int
    outbox: int


class Record(Protocol):
    """A row read by column name (a ``sqlite3.Row``, or a dict)."""

    def __getitem__(self, key: str, /) -> Any: ...


class Walker(Protocol):
    """One breadth-first level at a time (see :class:`graphmem.storage.sql.traversal.Walk`)."""

    def level(self, frontier: list[str]) -> list[Step]: ...


class FactWrites(Protocol):
    """The write path's reads at the transaction's time and its writes of facts (rows: dicts of
    every fact column)."""

    @property
    def now(self) -> float:
        """The transaction time of what it writes (stamped by the store, see above)."""
        ...

    def savepoint(self) -> AbstractContextManager[None]:
        """Inside the block, writes that are undone alone if the block raises (the exception
        goes on; what the transaction wrote before the block stays). A storage failure
        raises StorageError."""
        ...

    def live_by_hash(self, hashes: Sequence[str]) -> list[dict[str, Any]]: ...
    def current_by_key(self, pairs: Sequence[tuple[str, str]]) -> list[dict[str, Any]]: ...
    def fact_row(self, fact_id: str) -> dict[str, Any] | None: ...
    def is_live(self, fact_id: str) -> bool: ...
    def live_ids(self, ids: Sequence[str]) -> set[str]: ...
    def recent_same_entity(self, fact_id: str, k: int) -> list[str]: ...
    def valid_from(self, ids: Iterable[str]) -> dict[str, float]: ...
    def apply(self, changes: BatchChanges) -> None: ...
    def retract(self, fact_id: str) -> Fact: ...
    def set_tier(self, fact_id: str, tier: Tier, *, only_from: Tier | None = None) -> Fact: ...
    def purge(self, ids: Sequence[str]) -> Purged: ...
    def purge_where(self, where: PurgeFilter) -> Purged: ...


class LinkWrites(Protocol):
    """Links made and ended."""

    def add_links(
        self,
        links: Sequence[tuple[str, str, str, float, str, float]],
        metadata: Sequence[Mapping[str, Any]] | None = None,
    ) -> None:
        """New live links, recorded now: (source, target, type, strength, origin, valid_from),
        with ``metadata[i]`` for link i if given. An ``episode`` link takes over a live link of
        the same pair and type; another link whose pair already has one is not made."""
        ...

    def link(
        self,
        source_id: str,
        target_id: str,
        type: str,
        strength: float,
        *,
        valid_from: TimeInput | None = None,
        valid_until: TimeInput | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Link: ...
    def link_many(self, items: Sequence[Mapping[str, Any]]) -> list[Link]:
        """``link`` for each item (its arguments by name), in order; the first that fails
        raises."""
        ...

    def unlink(self, link_id: str) -> Link: ...


class EpisodeWrites(Protocol):
    """Episodes, their chains and windows of turns, synced files."""

    def episode(self, given: EpisodeInput) -> Episode: ...
    def episode_chain(self, episode_id: str, fact_ids: Sequence[str]) -> list[tuple[str, str]]: ...
    def add_windows(self, episode_id: str, facts: Sequence[tuple[str, str]]) -> int:
        """Cut the windows of turns (:mod:`graphmem.windows`) ending on the episode's new facts
        ``facts`` (id, text), in order; returns how many."""
        ...

    def rebuild_windows(self, episode_ids: Sequence[str]) -> int:
        """Cut the windows of ``episode_ids`` again from their facts; returns how many."""
        ...

    def current_chunks(self, episode_id: str) -> list[str]:
        """The episode's facts neither forgotten nor ended, in the order they were written."""
        ...

    def put_document(self, document: DocumentFile) -> None: ...
    def drop_document(self, path: str) -> None: ...


class OutboxWrites(Protocol):
    """What the vector index is owed and has done: the outbox, the vector and change logs, the
    embedding cache."""

    def queue_vectors(self, ids: Iterable[str]) -> None: ...
    def vectors_synced(self, queued: Sequence[tuple[str, int]]) -> None: ...
    def log_vectors(self, ids: Sequence[str], states: Sequence[int] | None = None) -> int:
        """Add the facts whose rows the vector index just changed to the vector log (``*``: it
        was rebuilt), each with the state its row was left in (``states``: graphmem.vectors.index'
        ROW_DELETED, ROW_STORED, ROW_LIVE; none given: to be read back from the index);
        returns the position of the last entry. Old entries are dropped."""
        ...

    def log_changes(self, changes: Sequence[tuple[str, str]], origin: str) -> None:
        """Add ``changes`` (kind, fact or link id), made by the writer ``origin``, to the change
        log at this transaction's time. Old entries are dropped (the newest CHANGE_LOG_KEPT
        are kept)."""
        ...

    def clear_outbox(self) -> None: ...
    def cache_vectors(
        self, provider: str, model: str, dimensions: int, fresh: Sequence[tuple[str, Vectors]]
    ) -> None: ...


class UpkeepWrites(Protocol):
    """The bookkeeping of upkeep: meta, access counts, decay, stated times, categories,
    maintenance runs."""

    def set_meta(self, key: str, value: Mapping[str, Any]) -> None: ...
    def record_accesses(self, accesses: Mapping[str, tuple[int, float]]) -> None: ...
    def soft_decay(self, rule: SoftDecay) -> int: ...
    def set_decay_classes(self, changes: Sequence[tuple[str, float | None, str]]) -> None: ...
    def set_stated(
        self, changes: Sequence[tuple[float | None, float | None, str | None, str]]
    ) -> None:
        """(start, end, words, fact id) of each fact whose stated time changes (in place: it
        is read from the text, which does not change)."""
        ...

    def set_categories(self, changes: Sequence[tuple[str, str]]) -> None:
        """(fact id, category) for each fact of category ``other`` that takes another (in
        place: a category is a label, not a version)."""
        ...

    def claim_run(self, job: str, lease: float) -> int | None:
        """Record a run of the maintenance ``job`` as running from now and return its number;
        None when a run of it started less than ``lease`` seconds ago is still running (see
        :mod:`graphmem.maintenance`)."""
        ...

    def finish_run(
        self,
        run: int,
        status: RunStatus,
        changed: Mapping[str, int],
        requests: int,
        error: str | None,
    ) -> None: ...


class TransferWrites(Protocol):
    """An export loaded."""

    def import_lines(
        self, lines: Iterable[str], rules: ImportRules
    ) -> tuple[ImportReport, list[str]]: ...


class EntityWrites(Protocol):
    """Aliases, merges and splits declared on entities, the derived names rebuilt (the names
    follow the facts' writes, purges and imports by themselves), and profile summaries kept
    (a purge deletes those resting on what it erases)."""

    def entity_declarations(self) -> list[Declaration]:
        """Every declaration, retracted or not, oldest first, as this transaction sees them."""
        ...

    def declare_entity(
        self, kind: str | None, name: str, target: str, *, retract: Sequence[int] = ()
    ) -> None:
        """Record a declaration (``kind``: alias, merge or split; None: none) of ``name`` on the
        entity name ``target`` at transaction time, retracting the live declarations
        ``retract``."""
        ...

    def rebuild_entities(self) -> int:
        """Count every entity name again from the facts; returns how many there are."""
        ...

    def keep_profile_summary(
        self,
        entity: str,
        signature: str,
        text: str,
        cited: Sequence[str],
        shown: Sequence[str],
    ) -> bool:
        """Keep a summary of ``entity`` written from what ``signature`` stands for, citing the
        facts ``cited``, in place of one kept under that signature before; a purge of any of
        the facts ``shown`` (those the model was shown) deletes it. The entity's oldest
        summaries beyond a few go. Not when a fact shown is gone (purged since it was read):
        returns whether it kept it."""
        ...


class Transaction(
    FactWrites,
    LinkWrites,
    EpisodeWrites,
    OutboxWrites,
    UpkeepWrites,
    TransferWrites,
    EntityWrites,
    Protocol,
):
    """One write transaction of a store; everything written through it commits together."""


class Lifecycle(Protocol):
    """Opening transactions and snapshots, read deadlines, closing, and the engine's own upkeep."""

    @property
    def closed(self) -> bool: ...
    def close(self) -> None: ...
    def now(self) -> float: ...
    def transaction(self, *, durable: bool = True) -> AbstractContextManager[Transaction]: ...
    def try_transaction(
        self, *, durable: bool = True
    ) -> AbstractContextManager[Transaction] | None: ...
    def on_transaction(self, hook: Callable[[Transaction], None]) -> None: ...
    def snapshot(self) -> AbstractContextManager[object]: ...
    def time_limit(self, deadline: float | None) -> AbstractContextManager[None]: ...
    def unlimited(self) -> AbstractContextManager[None]: ...
    @property
    def deadline(self) -> float | None: ...
    def meta(self, key: str) -> dict[str, Any] | None: ...
    def scrub(self) -> bool: ...
    def analyze(self) -> None:
        """Refresh what the engine's query planner knows of the tables (after a bulk load)."""
        ...

    def shared_vector_lock(self) -> Callable[[], AbstractContextManager[None]] | None:
        """The lock one writer of the namespace's vector index holds, when several machines
        share the store (None: the vector directory's own lock file serves)."""
        ...


class FactReads(Protocol):
    """Facts as a scope sees them."""

    def get(self, fact_id: str, scope: TimeScope) -> Fact | None: ...
    def get_many(
        self, ids: Iterable[str], scope: TimeScope, *, include_superseded: bool = False
    ) -> dict[str, Fact]: ...
    def known_now(self, ids: Iterable[str]) -> dict[str, Fact]: ...
    def page(
        self, scope: TimeScope, filters: Filters, *, first: int, after: int | None
    ) -> FactPage: ...
    def lookup(
        self,
        entity: str,
        scope: TimeScope,
        *,
        key: str | None = None,
        tag: str | None = None,
        include_superseded: bool = False,
        limit: int = 100,
        names: Sequence[str] = (),
    ) -> list[Fact]:
        """Facts about ``entity`` (and ``key``), case-insensitive, or (``names`` given) about
        any of those names, as the facts' index compares them (the names of one entity)."""
        ...

    def entity_facts(
        self, names: Sequence[str], scope: TimeScope, *, per_entity: int
    ) -> list[Fact]: ...
    def latest(
        self, entity: str, key: str, scope: TimeScope, *, limit: int, names: Sequence[str] = ()
    ) -> list[Fact]:
        """The visible facts with ``entity`` (or, given, any of its entity's ``names`` as the
        facts' index compares them) and ``key``, case-insensitive, latest valid first."""
        ...

    def pinned(self, scope: TimeScope, *, limit: int) -> list[Fact]:
        """Visible pinned facts, the earliest pinned first."""
        ...

    def drawn_from(self, ids: Sequence[str]) -> dict[str, list[str]]:
        """The turns that say each of ``ids`` that capture drew from a message (its live PART_OF
        links of origin ``capture``: the turn it was drawn from, and those that said it again),
        by fact id; ids drawn from none are absent."""
        ...

    def newest_keyed(
        self, entity: str, prefix: str, scope: TimeScope, *, unexpired_at: float, limit: int
    ) -> list[Fact]:
        """Visible facts of ``entity`` whose key starts with ``prefix``, unexpired at
        ``unexpired_at``, the newest written first."""
        ...

    def recent(
        self,
        scope: TimeScope,
        *,
        since: float,
        per_category: int,
        skip_categories: Sequence[str],
        skip_entity: str,
    ) -> list[Fact]:
        """Visible facts recorded since ``since``, the newest ``per_category`` of each category
        (none of ``skip_categories`` nor of entity ``skip_entity``), oldest first."""
        ...

    def texts_by_hash(self, hashes: Sequence[str], scope: TimeScope) -> dict[str, set[str]]: ...
    def visible(
        self, ids: Sequence[str], scope: TimeScope, filters: Filters
    ) -> dict[str, Fact]: ...
    def fact_ids(self) -> list[str]: ...


class HistoryReads(Protocol):
    """What time did to facts: a fact's versions, what a purge would erase and what purges
    erased."""

    def history(self, fact_id: str, scope: TimeScope) -> list[Fact]: ...
    def purge_count(self, where: PurgeFilter) -> PurgeReport: ...
    def erasures(self, limit: int) -> list[Erasure]: ...


class KeywordReads(Protocol):
    """Search's legs: keyword matches, the rows a vector leg's hits read, windows of turns."""

    def keyword_matches(
        self, query: str, scope: TimeScope, filters: Filters, n: int
    ) -> tuple[dict[str, float], dict[str, Record]]: ...
    def candidates(
        self, ids: Sequence[str], scope: TimeScope, filters: Filters
    ) -> list[Record]: ...
    def sharing_vectors(self, owners: Iterable[str]) -> list[tuple[str, str]]: ...
    def window_matches(self, query: str, n: int) -> dict[int, tuple[float, tuple[str, ...]]]:
        """The ``n`` best keyword matches among the windows of turns, whatever the time (search
        keeps those whose facts are visible): window -> (bm25, higher is better; its facts, in
        the episode's order)."""
        ...

    def windows_holding(self, fact_ids: Sequence[str]) -> dict[int, tuple[str, ...]]:
        """The windows holding any of ``fact_ids``: window -> its facts, in the episode's
        order."""
        ...

    def window_episodes(self) -> list[str]:
        """The episodes that have facts, oldest first (what a backfill of windows cuts)."""
        ...


class EpisodeReads(Protocol):
    """Episodes and synced files."""

    def episode(self, episode_id: str) -> Episode | None: ...
    def episodes(
        self,
        *,
        source: str | None,
        after: TimeInput | None,
        before: TimeInput | None,
        limit: int,
    ) -> list[Episode]: ...
    def episode_facts(self, episode_id: str, scope: TimeScope) -> list[Fact]: ...
    def documents(self, scopes: Sequence[str]) -> list[DocumentFile]:
        """The synced files each of ``scopes`` is, or holds (a folder's path), by path."""
        ...


class GraphReads(Protocol):
    """Links and the graph they make."""

    def links_of(
        self,
        fact_id: str,
        scope: TimeScope,
        *,
        direction: str = "BOTH",
        types: Iterable[str] | None = None,
    ) -> list[Link]: ...
    def links_page(
        self,
        fact_ids: Sequence[str],
        scope: TimeScope,
        *,
        direction: str = "BOTH",
        types: Iterable[str] | None = None,
        first: int = 50,
        after: graph.LinkPosition | None = None,
    ) -> dict[str, tuple[list[tuple[graph.LinkPosition, Link]], bool]]: ...
    def traverse(
        self,
        ids: Iterable[str] | str,
        scope: TimeScope,
        *,
        depth: int,
        types: Iterable[str] | None,
        direction: str,
        max_nodes: int,
        min_strength: float,
    ) -> graph.Subgraph: ...
    def path(
        self,
        source_id: str,
        target_id: str,
        scope: TimeScope,
        *,
        types: Iterable[str] | None,
        direction: str,
        max_depth: int,
    ) -> graph.Path | None: ...
    def preload_graph(self, wait: float) -> bool:
        """Start preparing whatever makes traversals fast (an in-memory copy); wait up to
        ``wait`` seconds; whether it is ready. A store without one says False."""
        ...

    def graph_loading(self) -> bool:
        """Whether what ``preload_graph`` prepares is being prepared now."""
        ...

    def clusters(
        self, scope: TimeScope, *, types: Iterable[str] | None, min_size: int
    ) -> analytics.Clusters: ...
    def link_pairs(
        self,
        ids: list[str],
        scope: TimeScope,
        *,
        skip_origins: Sequence[str],
        touching: list[str] | None = None,
    ) -> list[tuple[str, str, float]]: ...
    def walk(self, scope: TimeScope, *, skip_origins: Sequence[str]) -> Walker: ...


class OutboxReads(Protocol):
    """What the vector index is owed: vector owners and sources, the outbox, the vector and
    change logs, the embedding cache."""

    def vector_owners(self, ids: Iterable[str] | None = None) -> dict[str, bool]: ...
    def vector_sources(self, ids: Iterable[str]) -> dict[str, tuple[str, str | None]]: ...
    def outbox(self, ids: Iterable[str] | None = None) -> list[tuple[str, int]]: ...
    def waiting(self, limit: int, *, queued_before: float | None = None) -> list[str]:
        """Up to ``limit`` facts whose vector writes wait in the outbox, oldest first (only
        those queued before ``queued_before``, if given)."""
        ...

    def vector_log(self, after: int) -> list[tuple[int, str, int | None]]:
        """The vector log's entries after position ``after``: (position, fact id, state of its
        row or None), in order."""
        ...

    def vector_log_end(self) -> int:
        """The position of the vector log's newest entry (0 if none)."""
        ...

    def change_log(
        self, after: int, limit: int
    ) -> tuple[list[tuple[int, str, str, float, str]], int]:
        """Up to ``limit`` of the change log's entries after position ``after`` — (position,
        kind, id, time, origin), in order — and the position of its newest entry (0 if none),
        read after them."""
        ...

    def cached_vectors(
        self, provider: str, model: str, dimensions: int, hashes: Sequence[str]
    ) -> dict[str, Vectors]: ...
    def vector_owner_count(self) -> int: ...


class UpkeepReads(Protocol):
    """What upkeep reads: maintenance runs, decay and stated-time inputs, counts."""

    def maintenance_runs(self, job: str | None, limit: int) -> list[MaintenanceRun]:
        """The newest ``limit`` maintenance run records (of ``job`` only, if given)."""
        ...

    def last_runs(self) -> dict[str, MaintenanceRun]:
        """The newest maintenance run record of each job that has one."""
        ...

    def expired(self, now: float) -> list[str]: ...
    def faded(self, rule: SoftDecay) -> list[str]: ...
    def decay_forecast(self, now: float, rule: SoftDecay, *, soft: bool) -> tuple[int, int]: ...
    def decay_inputs(self) -> Iterator[Record]: ...
    def stated_inputs(self) -> Iterator[Record]: ...
    def counts(self, now: float) -> Counts: ...


class EntityReads(Protocol):
    """The entity names the facts carry, the declarations made on them, and what an entity's
    profile reads: its facts, the entities linked to it, its summaries."""

    def entity_names(self) -> list[EntityName]:
        """Every entity name: (name as the facts' index compares it, one spelling, how many
        facts carry it, when memory first recorded one)."""
        ...

    def entity_names_added(self, after: int, upto: int) -> list[EntityName]:
        """The entity names recorded at a position after ``after``, up to ``upto`` (positions
        as the signature gives them), oldest first."""
        ...

    def entity_declarations(self) -> list[Declaration]:
        """Every declaration, retracted or not, oldest first."""
        ...

    def entity_signature(self) -> EntitySignature:
        """What a cache of the names checks (:class:`EntitySignature`)."""
        ...

    def profile_facts(
        self, names: Sequence[str], scope: TimeScope, *, keys: int, per_key: int, unkeyed: int
    ) -> tuple[list[Fact], list[Fact]]:
        """The visible facts of the entity ``names`` (as the facts' index compares them): those
        with a key, at most ``per_key`` a key (the latest valid first) of the ``keys`` keys
        whose most important value is the most important, keys together; and those without
        one, at most ``unkeyed``, the most important then the newest first. Each list holds one
        more fact than asked for when more are visible."""
        ...

    def profile_links(
        self, names: Sequence[str], scope: TimeScope, *, limit: int
    ) -> list[tuple[str, str, int]]:
        """(an entity name as compared, a link type, how many links) of the other entities
        whose visible facts visible links other than SUPERSEDES join to visible facts of the
        entity ``names``, either way; the most links first, at most ``limit``."""
        ...

    def profile_summary(self, entity: str, signature: str) -> tuple[str, list[str]] | None:
        """The summary kept of ``entity`` under ``signature`` and the ids of the facts it
        cites, or None."""
        ...


class TransferReads(Protocol):
    """A namespace written out."""

    def export(self, namespace: str, out: IO[str]) -> int: ...


class Store(
    Lifecycle,
    FactReads,
    HistoryReads,
    KeywordReads,
    EpisodeReads,
    GraphReads,
    OutboxReads,
    UpkeepReads,
    TransferReads,
    EntityReads,
    Protocol,
):
    """One namespace's system of record: facts, links, keyword index, outbox, embedding cache
    and meta."""


@dataclass(frozen=True, slots=True)
class FactPage:
    """A page of ``Memory.facts``: (position, fact) pairs in order, and whether more follow."""

    items: list[tuple[int, Fact]]
    has_more: bool


@dataclass(frozen=True, slots=True)
class Filters:
    """What a filtered read keeps besides the time rule: a tag, category, entity or source, and
    whether superseded versions count as visible."""

    tag: str | None = None
    category: str | None = None
    entity: str | None = None
    source: str | None = None
    include_superseded: bool = False
    #: Only facts dated (source date, else valid_from) in this period of a query's time words.
    period: TimeHint | None = None
    #: The names (as the facts' index compares them) of the entity ``entity`` reaches through
    #: its aliases (graphmem.entities); empty: ``entity`` itself, case-insensitive.
    entity_names: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ImportReport:
    """What an import added: facts, links and entity declarations (aliases, merges, splits),
    and how many rows it skipped because the store held them already."""

    facts: int
    links: int
    skipped_existing: int
    declarations: int = 0

    def to_dict(self) -> dict[str, int]:
        return {
            "facts": self.facts,
            "links": self.links,
            "skipped_existing": self.skipped_existing,
            "declarations": self.declarations,
        }
