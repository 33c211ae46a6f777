"""``Memory``: one namespace's facts, their vectors, and every read and write on them.

A facade: each method resolves its time scope and hands the work to the module that owns it.

===================  ==================================================================
opening a namespace  :mod:`graphmem.namespace` (name, directory, embedder, rebuild)
storage              :mod:`graphmem.storage` (the interface; SQLite and PostgreSQL stores)
writes               :mod:`graphmem.writer` (store, forget, purge, link, import, file sync)
plain reads          :mod:`graphmem.storage.sql.reads` (get, facts, lookup, history)
search               :mod:`graphmem.search` (the pipeline), :mod:`graphmem.ranking`
graph                :mod:`graphmem.graph`, :mod:`graphmem.analytics`
agent loop, files    :mod:`graphmem.recall`, :mod:`graphmem.capture`, :mod:`graphmem.documents`
vector index         :mod:`graphmem.vectors.outbox`, :mod:`graphmem.vectors.cache`
upkeep               :mod:`graphmem.access`, :mod:`graphmem.decay`, :mod:`graphmem.prune`
entities             :mod:`graphmem.entities` (names, aliases, merges, splits),
                     :mod:`graphmem.profiles` (who an entity is)
statistics           :mod:`graphmem.stats`
===================  ==================================================================
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from types import TracebackType
from typing import IO, Any, cast

from . import (
    analytics,
    categorize,
    checkpoints,
    consolidation,
    documents,
    graph,
    maintenance,
    profiles,
    reflection,
    sensitive,
    statedtime,
    tracing,
    windows,
)
from . import capture as captures
from . import namespace as namespaces
from . import prune as pruning
from . import recall as recalls
from .access import AccessTracker
from .documents import DocumentFile, SyncReport
from .entities import Entities, Entity, check_name
from .episodes import Episode
from .erasure import Erasure, PurgeFilter, PurgeReport
from .errors import InvalidInput, NotFound
from .limits import (
    CHANGE_LOG_KEPT,
    MAX_CHANGES,
    MAX_DEPTH,
    MAX_LIMIT,
    MAX_NODES,
    MAX_TEXT_LENGTH,
)
from .llm import ChatClient
from .models import (
    DEFAULT_KEEP,
    DEFAULT_STRENGTH,
    TIERS,
    Change,
    ChangeKind,
    ChangePage,
    Fact,
    FactInput,
    Keep,
    Link,
    MaintenanceRun,
    SearchHit,
    StoreResult,
    Tier,
    check_limit,
    check_text,
)
from .profiles import Profile
from .prune import PruneReport
from .rerank import Reranker
from .search import Search
from .settings import Settings
from .stats import Stats, collect
from .storage import open_store
from .storage.interface import FactPage, Filters, ImportReport, Store
from .temporal import TimeInput, TimeScope
from .usage import Usage
from .vectors.cache import EmbeddingCache
from .vectors.embedders import Embedder, create_embedder
from .vectors.index import VectorIndex
from .vectors.outbox import CheckReport, Progress, VectorSync
from .writer import Writer


class Memory:
    """A namespace of graph memory. Thread-safe; also a context manager that closes on exit."""

    def __init__(
        self,
        directory: Path,
        namespace: str,
        store: Store,
        vectors: VectorIndex,
        embedder: Embedder,
        settings: Settings,
        llm: ChatClient | None = None,
    ) -> None:
        self.directory, self.namespace, self.embedder = directory, namespace, embedder
        self._store, self._vectors, self._settings = store, vectors, settings
        self._cache = EmbeddingCache(embedder)
        self._sync = VectorSync(store, vectors, self._cache, namespace)
        self._entities = Entities(store)
        self._writer = Writer(self._sync, settings, llm, self._entities)
        self._search = Search(self._sync, embedder, settings, entities=self._entities)
        self._access = AccessTracker(store, store.now, settings.access_write_interval)
        self._token_counter: recalls.TokenCounter | None = None

    @property
    def settings(self) -> Settings:
        """The settings this memory runs with."""
        return self._settings

    @settings.setter
    def settings(self, settings: Settings) -> None:
        """Run with other settings from the next call on (the embedder, the store and the
        namespace stay as opened)."""
        self._settings = settings
        self._writer.settings = settings
        self._search.settings = settings
        self._access.interval = settings.access_write_interval

    # ----------------------------------------------------------------------------- lifecycle

    @classmethod
    def open(
        cls,
        data_dir: str | Path | None = None,
        *,
        namespace: str | None = None,
        embedder: str | Embedder | None = None,
        settings: Settings | None = None,
        clock: Callable[[], float] | None = None,
        reindex: bool = False,
        progress: Progress | None = None,
        llm: ChatClient | None = None,
        store: str | None = None,
        vectors: str | None = None,
    ) -> Memory:
        """Open (creating if needed) a namespace under ``data_dir``.

        ``store`` (default: the ``store`` setting) puts the namespace's facts, links and
        keyword index in a PostgreSQL database (``postgresql://…``) instead of a SQLite file
        under ``data_dir``; ``vectors`` (default: the ``vectors`` setting) the vector index in
        an S3-compatible object store (``s3://bucket/prefix``, with the ``s3_*`` settings).

        Refuses with EmbedderMismatch when the namespace was indexed by another embedder, unless
        ``reindex`` is True, which rebuilds the vectors with this one (reporting to ``progress``).
        Replays the outbox. The vector index is derived from SQLite: when it is missing or cannot
        be read, it is rebuilt, with a warning on the ``graphmem`` logger; when it holds another
        number of vectors than SQLite has facts to index, the warning names `graphmem reindex`.
        StorageError when the namespace's directory or database cannot be created, opened or
        written.
        ``llm`` is the chat model of the LLM classifier (default: from the ``llm_*`` settings
        when ``classifier`` is ``llm``; InvalidInput if they name no endpoint).
        """
        settings = settings or Settings.load()
        if vectors is not None:
            settings = settings.model_copy(update={"vectors": vectors})
        name = settings.namespace if namespace is None else namespace
        directory = namespaces.directory(data_dir, name, settings)
        if llm is None and settings.classifier == "llm":
            llm = ChatClient.from_settings(settings)
        if isinstance(embedder, str) or embedder is None:
            embedder = create_embedder(embedder or settings.embedder, settings)
        opened = open_store(store or settings.store, directory, name, clock, settings)
        try:
            index = namespaces.indexing(opened, embedder, name, reindex=reindex)
            followed_from = opened.vector_log_end()  # before the table is read
            lock = opened.shared_vector_lock()
            where = namespaces.vector_location(directory, name, settings, lock)
            table, rebuild = namespaces.open_vectors(
                where, embedder.dimensions, name, rebuild=index.rebuild
            )
            table.follow(opened.vector_log, followed_from)
            memory = cls(directory, name, opened, table, embedder, settings, llm)
            namespaces.recover(
                opened,
                table,
                memory._sync,
                name,
                dataclasses.replace(index, rebuild=rebuild),
                progress,
            )
        except BaseException:
            opened.close()
            raise
        return memory

    def close(self) -> None:
        """Write the accesses still waiting, stop the search threads, let a vector write or read
        of the object store still running end, and close the store."""
        self._search.close()
        self._access.close()
        self._sync.close()
        self._vectors.close()
        self._store.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # ----------------------------------------------------------------------------- writes

    def store(
        self,
        text: str,
        *,
        entity: str | None = None,
        key: str | None = None,
        value: str | None = None,
        category: str | None = None,
        tags: Sequence[str] | str | None = None,
        importance: float | None = None,
        confidence: float | None = None,
        decay_class: str | None = None,
        source: str | None = None,
        summary: str | None = None,
        why: str | None = None,
        context: str | None = None,
        valid_from: TimeInput | None = None,
        source_date: TimeInput | None = None,
        expires_at: TimeInput | None = None,
        supersedes: str | None = None,
        classify: bool = True,
        autolink: bool | None = None,
        entity_links: bool | None = None,
    ) -> StoreResult:
        """Store one fact through the write pipeline; see ``store_many`` and
        :class:`~graphmem.models.FactInput` for each field.

        ``classify=False`` stores it without classify-before-write; ``autolink=False`` makes no
        automatic links for it, ``entity_links=False`` no same-entity links (None follows the
        settings).
        """
        # Its parameters are FactInput's fields, by the same names.
        given = {name: value for name, value in locals().items() if name != "self"}
        return self.store_many([{k: v for k, v in given.items() if v is not None}])[0]

    def store_many(
        self,
        items: Sequence[Mapping[str, Any] | FactInput],
        *,
        autolink: bool | None = None,
        episode: str | Mapping[str, Any] | None = None,
    ) -> list[StoreResult]:
        """Store a batch: one validation pass, one embedding pass, one transaction (with the
        new facts' automatic links, see :mod:`graphmem.autolink`); see :mod:`graphmem.writer`.

        ``autolink=False`` makes no automatic links for items that do not say otherwise.
        With ``classifier = llm``, one chat request classifies the batch (per ``llm_batch_size``
        facts) before the transaction; if it fails, the facts are added (see
        :mod:`graphmem.classify`). Raises InvalidInput (nothing written) if any item is invalid,
        NotFound or Conflict if a ``supersedes`` id is unknown or not live. Results are in input
        order.

        ``episode`` names the unit the facts come from (a conversation session, a document):
        an id, or ``{"id", "kind", "source", "time", "metadata"}`` (kind ``conversation``,
        ``document`` or ``other``, default conversation; time default now). It is recorded on
        first use (Conflict if named again with other attributes); the facts the batch adds
        belong to it, each linked RELATED_TO the one before it there (origin ``episode``).
        """
        return self._writer.store_many(items, autolink=autolink, episode=episode)

    def forget(self, fact_id: str) -> Fact:
        """Retract a fact: current reads stop seeing it; reads known at an earlier time still do.

        Returns the fact as it was. NotFound for an unknown id, Conflict if already retracted.
        """
        check_text(fact_id=fact_id)
        return self._writer.forget(fact_id)

    def pin(self, fact_id: str) -> Fact:
        """Pin a live fact: it leads every recall block, whatever the prompt (within the block's
        budget), until unpinned; a version that supersedes it stays pinned. A cold fact pinned
        is no longer cold. Returns the fact. NotFound for an unknown id, Conflict for a fact
        forgotten or superseded. A pin does not stop a fact from expiring: pin facts whose
        decay class lasts (see docs/concepts.md)."""
        return self._set_tier(fact_id, "pinned")

    def unpin(self, fact_id: str) -> Fact:
        """Unpin a fact (see ``pin``); a fact not pinned is left as it is."""
        return self._set_tier(fact_id, "normal", only_from="pinned")

    def set_cold(self, fact_id: str, cold: bool = True) -> Fact:
        """Make a live fact cold (recall leaves it out unless ``include_cold``; search still
        finds it), or no longer cold (a fact not cold is then left as it is). A pinned fact
        made cold is unpinned; a new version of a cold fact is not cold. Errors as for
        ``pin``."""
        if cold:
            return self._set_tier(fact_id, "cold")
        return self._set_tier(fact_id, "normal", only_from="cold")

    def set_tier(self, fact_id: str, tier: Tier) -> Fact:
        """Put a live fact in ``tier``: ``pinned``, ``normal`` or ``cold`` (see ``pin`` and
        ``set_cold``)."""
        if tier not in TIERS:
            raise InvalidInput(f"tier must be one of {', '.join(TIERS)}", field="tier")
        return self._set_tier(fact_id, tier)

    def _set_tier(self, fact_id: str, tier: Tier, only_from: Tier | None = None) -> Fact:
        check_text(fact_id=fact_id)
        return self._writer.set_tier(fact_id, tier, only_from)

    def purge(
        self,
        fact_id: str | None = None,
        *,
        ids: Iterable[str] | None = None,
        entity: str | None = None,
        source: str | None = None,
        episode: str | None = None,
        dry_run: bool = False,
    ) -> PurgeReport:
        """Delete facts for good (privacy): one by id, or every fact ``ids``, ``entity``,
        ``source`` and ``episode`` match (the filters given narrow each other), in any state:
        current, replaced or forgotten; with them the turns of a conversation those facts were
        drawn from or said again in, and the facts drawn from the turns matched (one step each
        way: they hold the same words; see ``capture``).

        ``entity`` is the whole entity it is a name or alias of, as grouped at the moment of
        the purge (:mod:`graphmem.entities`; "Melanie" takes the facts about "Mel" and
        "melanie's" too): the facts carrying any of its names, and once none is left every
        declaration made on its names, so no name or alias of it remains; the report's
        ``names`` lists the names and aliases covered. A name no entity has matches itself,
        case-insensitive (a purge guesses no short form).

        In one transaction it removes the facts, their links, their cached embeddings (of
        texts no other fact has), their keyword-index entries and the episodes left empty, and
        records the erasure (``erasures``); then their vectors, with every older version of the
        vector table, and the store scrubs its files, so no file of the namespace still holds
        an erased text or vector. Returns the counts; ``dry_run`` only counts.

        InvalidInput for no filter at all (a purge never erases a whole namespace); NotFound
        for an unknown ``fact_id`` (a filter that matches nothing answers zero counts and
        records no erasure).
        """
        check_text(fact_id=fact_id, entity=entity, source=source, episode=episode)
        if fact_id is not None:
            if ids is not None:
                raise InvalidInput("give fact_id or ids, not both", field="ids")
            if not self._store.known_now([fact_id]):
                raise NotFound(f"no fact with id {fact_id!r}")
            ids = [fact_id]
        where = PurgeFilter.of(ids=ids, entity=entity, source=source, episode=episode)
        if where.entity is not None and (reached := self._entities.erased_with(where.entity)):
            found, names, declared = reached
            where = where.reaching(names, declared, (*found.names, *found.aliases))
        if dry_run:
            return self._store.purge_count(where)
        return self._writer.purge_where(where)

    def erasures(self, *, limit: int = 100) -> list[Erasure]:
        """The erasure records, newest first: when each purge ran, its filter (values as
        SHA-256 digests) and how many of each kind it removed; never the content."""
        return self._store.erasures(limit)

    def capture(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        episode: str | Mapping[str, Any] | None = None,
        keep: Keep = DEFAULT_KEEP,
    ) -> list[captures.CaptureResult]:
        """Keep a conversation's messages, and the facts they state (auto-capture).

        ``messages`` are ``{"role", "content"}`` objects (OpenAI chat format). Each user and
        assistant message without sensitive content is kept as a turn of ``episode`` (a long
        one in parts), and the sentences a trigger marks as memorable are drawn from it as
        facts through the write rules, each linked to its turn; ``keep="facts"`` keeps the
        facts only. One batch; see :mod:`graphmem.capture`. With ``classifier = "llm"``, the
        one chat request that classifies the facts draws them too (the trigger facts are kept
        if it fails). Returns, per message, its turn (or a SKIP saying why nothing of it was
        kept) then its facts. InvalidInput, with nothing stored, for messages that are not a
        list of role/content objects or have an unknown role, or an unknown ``keep``.
        ``episode`` as for ``store_many`` (recorded when something is stored): give the
        conversation's session, so that its turns are read together (windows of turns).
        """
        planned, stored = self._writer.capture(
            captures.parse_messages(messages), keep=keep, episode=episode
        )
        return captures.results(planned, stored)

    def subscribe(self, listener: Callable[[list[Change]], None]) -> Callable[[], None]:
        """Call ``listener`` with the changes of each write once it has committed (in the
        writing thread; keep it quick). Returns a function that unsubscribes it.

        A listener hears of the writes made through this Memory; the writes of other processes
        (and other Memory objects) on the namespace are read from its change log with
        ``changes_since``."""
        return self._writer.subscribe(listener)

    def change_position(self) -> int:
        """The position of the newest entry of the namespace's change log (0 if none): what
        ``changes_since`` reads on from to hear of the changes committed from now on."""
        return self._store.change_log(0, 0)[1]  # no entries, the newest position

    def changes_since(
        self, position: int, *, limit: int = MAX_CHANGES, others_only: bool = False
    ) -> ChangePage:
        """The changes committed in this namespace after ``position`` of its change log, by
        any process, in commit order: up to ``limit`` log entries (at most MAX_CHANGES), with
        the position to read on from. ``others_only`` leaves out the changes made through this
        Memory (its ``subscribe`` listeners hear of them as they commit). The log keeps the
        newest CHANGE_LOG_KEPT changes; the page says when some were dropped unread."""
        if isinstance(position, bool) or not isinstance(position, int) or position < 0:
            raise InvalidInput("position must be a whole number, 0 or more", field="position")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_CHANGES:
            raise InvalidInput(f"limit must be between 1 and {MAX_CHANGES}", field="limit")
        rows, end = self._store.change_log(position, limit)
        own = self._writer.origin if others_only else None
        changes = [
            Change(cast(ChangeKind, kind), item, self.namespace, at)
            for _, kind, item, at, origin in rows
            if origin != own
        ]
        last = rows[-1][0] if rows else position
        return ChangePage(changes, last, last < end, position < end - CHANGE_LOG_KEPT)

    # ----------------------------------------------------------------------------- reads

    def get(
        self, fact_id: str, *, as_of: TimeInput | None = None, known_at: TimeInput | None = None
    ) -> Fact | None:
        """The fact if it is visible at the time scope, else None (also for unknown ids)."""
        check_text(fact_id=fact_id)
        return self._store.get(fact_id, self._scope(as_of, known_at))

    def get_many(
        self,
        ids: Iterable[str],
        *,
        as_of: TimeInput | None = None,
        known_at: TimeInput | None = None,
        include_superseded: bool = False,
    ) -> dict[str, Fact]:
        """The facts among ``ids`` visible at the time scope, by id, in one query."""
        scope = self._scope(as_of, known_at)
        return self._store.get_many(ids, scope, include_superseded=include_superseded)

    def episode(self, episode_id: str) -> Episode | None:
        """The episode with this id, or None."""
        check_text(episode_id=episode_id)
        return self._store.episode(episode_id)

    def episodes(
        self,
        *,
        source: str | None = None,
        after: TimeInput | None = None,
        before: TimeInput | None = None,
        limit: int = 100,
    ) -> list[Episode]:
        """Episodes oldest first by their time, from ``source`` if given, with ``after <=
        time < before``."""
        check_text(source=source)
        return self._store.episodes(source=source, after=after, before=before, limit=limit)

    def episode_facts(
        self,
        episode_id: str,
        *,
        as_of: TimeInput | None = None,
        known_at: TimeInput | None = None,
    ) -> list[Fact]:
        """The episode's facts visible at the time scope (superseded versions included), in
        the order they were written. NotFound for an unknown episode."""
        check_text(episode_id=episode_id)
        return self._store.episode_facts(episode_id, self._scope(as_of, known_at))

    def sync_files(
        self,
        paths: Sequence[str | os.PathLike[str]],
        *,
        root: str | os.PathLike[str] | None = None,
    ) -> SyncReport:
        """Keep memory in step with markdown files: ``paths`` are files and folders (searched
        for ``*.md`` and ``*.markdown``, hidden ones left out). An unchanged file costs nothing;
        a new one becomes a ``document`` episode (id: its absolute path) of line-based chunks;
        a changed one's chunks supersede the old ones; one gone from a synced folder (or a
        named file gone) has its chunks forgotten. Each file changes in one transaction.
        Returns the paths added, changed, removed, unchanged and skipped (with the reason: not
        UTF-8, unreadable, changed while read, too large) and the chunks written; see
        :mod:`graphmem.documents`.

        InvalidInput, with nothing written, for no paths, a named file that is not markdown, a
        path that neither exists nor was synced, or one outside ``root`` (when given).
        """
        return self._writer.sync_files(paths, root)

    def documents(self, *, under: str | os.PathLike[str] | None = None) -> list[DocumentFile]:
        """The synced files (all, or those at or under the path ``under``), by path."""
        if under is None:
            return self._store.documents(["/"])
        scope = str(documents.resolved(under, "under"))
        return self._store.documents([scope])

    def read_lines(self, path: str | os.PathLike[str], start: int, end: int | None) -> str:
        """Lines ``start`` to ``end`` (1-based, inclusive; None: to the end, at most
        ``MAX_READ_LINES``) of a synced file as it is on disk now: what a document hit came
        from (its ``source`` is ``path:start-end``). Only files memory has synced can be read.
        NotFound for another path, a file gone, or a record an import made (sync the file on
        this machine first); InvalidInput for a bad path or range, or a file grown past
        ``MAX_DOCUMENT_BYTES``. The file is opened as sync opens it: never through a symbolic
        link, only a regular file."""
        resolved = str(documents.resolved(path, "path"))
        found = self._store.documents([resolved])
        recorded = found[0] if found and found[0].path == resolved else None
        return documents.read_lines(recorded, str(path), start, end)

    def known_now(self, ids: Iterable[str]) -> dict[str, Fact]:
        """The facts among ``ids`` as memory knows them now, whatever their state (forgotten,
        superseded, expired, not yet valid), by id; unknown ids are left out.

        A read at a past ``known_at`` shows every field as memory knew it then: an end, a
        successor or a retraction recorded later reads as open / None. This is the separate
        question "and what do we know now?", for a view that marks what changed later.
        """
        return self._store.known_now(ids)

    def facts(
        self,
        *,
        first: int = 50,
        after: int | None = None,
        tag: str | None = None,
        category: str | None = None,
        entity: str | None = None,
        source: str | None = None,
        as_of: TimeInput | None = None,
        known_at: TimeInput | None = None,
        include_superseded: bool = False,
    ) -> FactPage:
        """Visible facts in the order they were recorded, ``first`` at a time after position
        ``after`` (a keyset: facts written meanwhile join the end, so no page repeats or skips
        a fact that stays visible)."""
        check_text(tag=tag, category=category, entity=entity, source=source)
        scope = self._scope(as_of, known_at)
        filters = self._filters(tag, category, entity, source, include_superseded, scope)
        return self._store.page(scope, filters, first=first, after=after)

    def fact_ids(self) -> list[str]:
        """The id of every fact the namespace holds, in any state, in the order recorded."""
        return self._store.fact_ids()

    def lookup(
        self,
        entity: str,
        *,
        key: str | None = None,
        tag: str | None = None,
        as_of: TimeInput | None = None,
        known_at: TimeInput | None = None,
        include_superseded: bool = False,
        limit: int = 100,
    ) -> list[Fact]:
        """Facts about ``entity`` (and ``key``), case-insensitive, by SQL alone (no embedding):
        about any name of the entity ``entity`` reaches ("Mel", "Melanie", "melanie's"; see
        :mod:`graphmem.entities`).

        Ordered by confidence, then the newest effective date first.
        """
        check_text(entity=entity, key=key, tag=tag)
        scope = self._scope(as_of, known_at)
        names = self._entities.names(entity, scope.known_at) if isinstance(entity, str) else []
        facts = self._store.lookup(
            entity,
            scope,
            key=key,
            tag=tag,
            include_superseded=include_superseded,
            limit=limit,
            names=names,
        )
        self._accessed(scope, facts)
        return facts

    def search(
        self,
        query: str,
        *,
        limit: int = 10,
        tag: str | None = None,
        category: str | None = None,
        entity: str | None = None,
        source: str | None = None,
        as_of: TimeInput | None = None,
        known_at: TimeInput | None = None,
        include_superseded: bool = False,
        mode: str = "hybrid",
        graph_depth: int = 0,
        episode_links: bool = True,
        time_hints: bool = True,
        rerank: str | Reranker | None = None,
    ) -> list[SearchHit]:
        """Facts matching ``query``, best first: keyword and vector legs fused (see
        :mod:`graphmem.search`).

        Returns ``limit`` hits whenever that many visible facts match, however many superseded
        or retracted versions rank above them. ``graph_depth`` > 0 lets linked candidates lend
        each other evidence and adds the linked neighbours of the hits, up to that many links
        away, each scored below the fact that reached it; a hit linked to a stronger one may rise
        to just below it (see docs/graph.md).

        ``episode_links`` (on by default): candidates next to each other in an episode (turns of
        one conversation, chunks of one document) lend each other part of their relevance, so
        an answer spread over adjacent turns ranks together (see :mod:`graphmem.expansion`);
        windows of up to four consecutive turns, ranked as one text, lend to the turns they
        hold, and may bring in a turn neither leg found (see :mod:`graphmem.windows`). Off:
        neither plays a part in ranking.

        A fact whose entity the query names ranks higher, and says so (``entity_matched``).

        ``time_hints`` (on by default): time words in the query ("last week", "in May 2023",
        "two years ago", "before 2020"), read relative to ``as_of`` or now, are searched as a
        period of the facts' dates instead of as keywords: facts dated in it rank higher, none
        is dropped; each hit's ``time_hint`` says what was understood (see
        :mod:`graphmem.timehints`).

        ``rerank`` (default: the ``reranker`` setting): ``none``, ``features``, ``http``, ``llm``
        or a :class:`graphmem.rerank.Reranker` puts the best ``rerank_candidates`` of the fused
        order in a new order; each hit's ``reranked`` says how (see :mod:`graphmem.rerank`). A
        reranker that fails leaves the fused order, and says why in ``reranked.fallback``.
        """
        check_text(query=query, tag=tag, category=category, entity=entity, source=source)
        scope = self._scope(as_of, known_at)
        filters = self._filters(tag, category, entity, source, include_superseded, scope)
        hits = self._search.run(
            query,
            scope,
            filters,
            limit=limit,
            mode=mode,
            graph_depth=graph_depth,
            episode_links=episode_links,
            time_hints=time_hints,
            rerank=rerank,
        )
        self._accessed(scope, [h.fact for h in hits])
        return hits

    def entities(self, *, known_at: TimeInput | None = None, limit: int = 100) -> list[Entity]:
        """The namespace's entities, the most facts first: each with every name its facts
        carry and the aliases declared for it, grouped as :mod:`graphmem.entities` says (as
        memory knew them at ``known_at``)."""
        check_limit(limit)
        return self._entities.listing(self._known_at(known_at), limit)

    def entity(self, name: str, *, known_at: TimeInput | None = None) -> Entity:
        """The entity ``name`` reaches: one of its names or aliases, whatever the case, spacing
        or possessive ("melanie's"), or a short form or nickname that fits one entity ("Mel").
        NotFound when it reaches none; InvalidInput for an empty or overlong name."""
        return self._entities.find(name, self._known_at(known_at))

    def profile(
        self,
        entity: str,
        *,
        as_of: TimeInput | None = None,
        known_at: TimeInput | None = None,
        summary: bool = False,
    ) -> Profile:
        """Who or what the entity ``entity`` reaches is (as :meth:`entity` finds it) at the
        time scope: its current values by key, each with its valid time and the fact behind
        it, its facts without a key, and the entities linked to it, each list bounded (see
        :mod:`graphmem.profiles`). ``summary``: with a chat model configured (the ``llm_*``
        settings), also a few sentences on it citing the facts they rest on, written in one
        request and kept until those facts change; when there is none, ``summary_error`` says
        why. NotFound when the name reaches no entity; InvalidInput for a bad name."""
        check_name(entity, "entity")  # a refusal names this argument, not the index's `name`
        scope = self._scope(as_of, known_at)
        index, group = self._entities.group(entity, self._known_at(known_at))
        found = profiles.read(self._store, index, group, scope)
        if summary:
            found = profiles.summarize(found, self._chat(required=False), self._store)
        self._accessed(scope, found.shown)
        return found

    def alias(self, name: str, *, of: str) -> Entity:
        """Declare ``name`` another name of the entity ``of`` reaches, from now on (an as-of
        read at an earlier ``known_at`` does not see it); returns the entity. NotFound when
        ``of`` reaches no entity."""
        return self._entities.alias(name, of)

    def merge_entities(self, a: str, b: str) -> Entity:
        """Declare the entity ``b`` reaches to be the entity ``a`` reaches, from now on; returns
        it, under ``a``'s name. NotFound when either reaches none."""
        return self._entities.merge(a, b)

    def split_alias(self, alias: str) -> Entity:
        """Take the name ``alias`` out of its entity from now on, whether it was declared or
        found by the rules; returns the entity it left. NotFound for a name no entity has,
        Conflict for an entity's only name or a name others are declared on."""
        return self._entities.split(alias)

    def rebuild_entities(self) -> int:
        """Count the entity names again from the facts (they are derived, like the vector
        index); returns how many there are."""
        return self._entities.rebuild()

    def rerank_usage(self) -> list[Usage]:
        """What the rerankers this memory's searches used have done since it opened: ``calls``
        (searches reranked), ``failed_calls`` (searches left in the fused order because the
        reranker failed), ``retries`` and ``inputs`` (candidates read)."""
        return self._search.reranking.usage()

    def recall(
        self,
        prompt: str,
        *,
        max_tokens: int = recalls.DEFAULT_MAX_TOKENS,
        format: recalls.Format = "full",
        graph_depth: int = 0,
        as_of: TimeInput | None = None,
        known_at: TimeInput | None = None,
        time_hints: bool = True,
        episode_links: bool = True,
        include_cold: bool = False,
        profile: bool | None = None,
    ) -> recalls.RecallResult:
        """The ``<memory-context>`` block for a prompt, within ``max_tokens`` (auto-recall).

        Pinned facts (``pin``) come first, whatever the prompt, as many as the budget holds;
        cold facts (``set_cold``, or untouched for ``cold_after_days``) are left out unless
        ``include_cold``.

        Hybrid search on the prompt (its first ``MAX_TEXT_LENGTH`` characters, a fixed limit of
        docs/configuration.md), with the facts of any known entity it names merged in and, with
        ``graph_depth`` > 0, linked facts; best first, long texts as summaries, one line per
        fact in ``format`` (full, short or minimal). See :mod:`graphmem.recall`. The facts in
        the block count as accessed. ``time_hints`` and ``episode_links`` as for ``search``.

        ``profile`` (default: the ``recall_profile`` setting): the block leads with the profile
        of each entity the prompt names (the first two; :meth:`profile`), one line of its
        current values by key in a quarter of the budget at most.
        """
        recalls.check(prompt, max_tokens, format)
        check_text(prompt=prompt)
        query = prompt[:MAX_TEXT_LENGTH]
        scope = self._scope(as_of, known_at)
        hits = self._search.run(
            query,
            scope,
            Filters(),
            limit=recalls.CANDIDATES,
            mode="hybrid",
            graph_depth=graph_depth,
            episode_links=episode_links,
            time_hints=time_hints,
        )
        said = recalls.entity_names(query)
        named = self._store.entity_facts(
            list(dict.fromkeys([*said, *self._entities.reached(said, scope.known_at)])),
            scope,
            per_entity=recalls.ENTITY_FACTS,
        )
        found_profiles: list[Profile] = []
        if self.settings.recall_profile if profile is None else profile:
            index = self._entities.index(self._known_at(known_at))
            found_profiles = profiles.named(self._store, index, said, scope, most=recalls.PROFILES)
        pinned = self._store.pinned(scope, limit=recalls.PINNED)
        found = recalls.candidates(hits)
        if not include_cold:  # before ranking: a cold hit must not set the bar for the others
            days = self.settings.cold_after_days
            stale_before = scope.as_of - days * 86_400 if days else None
            found = [c for c in found if not recalls.is_cold(c.fact, stale_before)]
            named = [f for f in named if not recalls.is_cold(f, stale_before)]
        ranked = recalls.ranked(found, named, pinned)
        # Hits and entity facts were read by separate statements; one more keeps only the facts
        # visible together, so a supersession between them never puts both versions in.
        shown = self._store.visible([c.fact.id for c in ranked], scope, Filters())
        ranked = [c for c in ranked if c.fact.id in shown]
        ranked = recalls.merged(ranked, self._store.drawn_from([c.fact.id for c in ranked]))
        result = recalls.assemble(ranked, max_tokens, format, self._count_tokens(), found_profiles)
        self._accessed(scope, [*result.facts, *(f for p in result.profiles for f in p.shown)])
        return result

    def checkpoint(
        self,
        intent: str,
        *,
        state: Any = None,
        expected_outcome: str | None = None,
        working_files: Sequence[str] = (),
    ) -> Fact:
        """Save the agent's working state before a risky step: what it intends, the state (any
        JSON value), what should come of it and the files it works on, as one fact of entity
        ``system`` (see :mod:`graphmem.checkpoints`). It expires with decay class
        ``checkpoint``. InvalidInput, nothing stored, when the state is not JSON or the
        checkpoint is over its limits."""
        item = checkpoints.fact_input(
            intent, state, expected_outcome, working_files, self._store.now()
        )
        if self.settings.store_secrets == "redact" and sensitive.sensitive(item["context"]):
            # Redacting inside the JSON would leave a checkpoint that cannot be restored.
            raise InvalidInput(
                "the checkpoint holds a secret; checkpoints are not redacted (store_secrets = "
                "redact): leave it out of the state",
                field="state",
            )
        [result] = self.store_many([item])
        assert result.fact is not None  # never deduplicated nor classified away
        return result.fact

    def restore_checkpoint(self) -> checkpoints.Checkpoint | None:
        """The newest unexpired checkpoint, or None when there is none."""
        scope = self._scope(None, None)
        for fact in self._store.newest_keyed(
            checkpoints.ENTITY,
            checkpoints.KEY_PREFIX,
            scope,
            unexpired_at=scope.as_of,
            limit=checkpoints.RESTORE_CANDIDATES,
        ):
            found = checkpoints.from_fact(fact)
            if found is not None:
                return found
        return None

    def history(
        self, fact_id: str, *, as_of: TimeInput | None = None, known_at: TimeInput | None = None
    ) -> list[Fact]:
        """Every version in ``fact_id``'s supersession chain, oldest first.

        Versions recorded after ``known_at``, retracted by then, or starting after ``as_of`` are
        left out. NotFound if the id is unknown.
        """
        check_text(fact_id=fact_id)
        return self._store.history(fact_id, self._scope(as_of, known_at))

    # ----------------------------------------------------------------------------- graph

    def link(
        self,
        source_id: str,
        target_id: str,
        type: str,
        *,
        strength: float = DEFAULT_STRENGTH,
        valid_from: TimeInput | None = None,
        valid_until: TimeInput | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Link:
        """Link two facts (``source -[type]-> target``), or update the live link's strength.

        Types: CAUSED_BY, PART_OF, RELATED_TO, DEPENDS_ON (SUPERSEDES comes from storing a new
        version). The link holds from ``valid_from`` (default: when both facts hold, the later
        of their ``valid_from``) until ``valid_until`` (default: open). Relinking with another
        validity replaces the live link. NotFound for an unknown fact, Conflict for a forgotten
        one, InvalidInput when ``valid_until`` is not later than ``valid_from``.
        """
        check_text(source_id=source_id, target_id=target_id)
        # One link is a batch of one: the same checks, errors and change record as link_many.
        fields: dict[str, Any] = {"source_id": source_id, "target_id": target_id, "type": type}
        fields |= {"strength": strength, "valid_from": valid_from, "valid_until": valid_until}
        return self._writer.link_many([{**fields, "metadata": metadata}])[0]

    def link_many(self, links: Iterable[Mapping[str, Any]]) -> list[Link]:
        """Make many links in one transaction, all or none: each a mapping with ``source_id``,
        ``target_id``, ``type`` and optionally ``strength`` (1.0), ``valid_from``,
        ``valid_until`` and ``metadata``, as ``link`` takes them. InvalidInput, NotFound or Conflict as ``link``
        raises them, for the first link that fails; then nothing is linked."""
        return self._writer.link_many(links)

    def unlink(self, link_id: str) -> Link:
        """Retract a link: current reads stop following it, earlier ``known_at`` still do."""
        check_text(link_id=link_id)
        return self._writer.unlink(link_id)

    def links_page(
        self,
        fact_ids: Sequence[str],
        *,
        direction: str = "BOTH",
        types: Iterable[str] | None = None,
        first: int = 50,
        after: graph.LinkPosition | None = None,
        as_of: TimeInput | None = None,
        known_at: TimeInput | None = None,
    ) -> dict[str, tuple[list[tuple[graph.LinkPosition, Link]], bool]]:
        """A page of each fact's visible links, strongest first (see
        :func:`graphmem.storage.sql.links.links_page`): one query for any number of facts."""
        return self._store.links_page(
            fact_ids,
            self._scope(as_of, known_at),
            direction=direction,
            types=types,
            first=first,
            after=after,
        )

    def links(
        self,
        fact_id: str,
        *,
        direction: str = "BOTH",
        types: Iterable[str] | None = None,
        as_of: TimeInput | None = None,
        known_at: TimeInput | None = None,
    ) -> list[Link]:
        """A fact's links visible at the time scope, strongest first."""
        scope = self._scope(as_of, known_at)
        return self._store.links_of(fact_id, scope, direction=direction, types=types)

    def preload_graph(self, *, wait: float = 0.0) -> bool:
        """Start loading the in-memory copy of the graph that traversals and paths walk (the
        first of them would start it otherwise; setting ``graph_in_memory``), and wait up to
        ``wait`` seconds for it. Returns whether it is ready (False when the setting is off)."""
        return self._store.preload_graph(wait)

    def prepare_vectors(self) -> dict[str, bool]:
        """Make now what vector search reads at this namespace's size: the projection of the
        in-memory copy up to 250,000 facts, and from 20,000 its inverted lists, which the
        first search or write after opening would make otherwise (about 30 s at a million
        facts, during which searches and writes wait). A server does it in the background as
        it opens a namespace."""
        return self._vectors.prepare()

    def graph_loading(self) -> bool:
        """Whether the in-memory copy of the graph is being loaded now (until it is, traversals
        walk in SQL, slower; a server's ``/healthz`` lists such namespaces as ``loading``)."""
        return self._store.graph_loading()

    def traverse(
        self,
        ids: Iterable[str] | str,
        *,
        depth: int = 2,
        types: Iterable[str] | None = None,
        direction: str = "BOTH",
        as_of: TimeInput | None = None,
        known_at: TimeInput | None = None,
        max_nodes: int = graph.DEFAULT_MAX_NODES,
        min_strength: float = 0.0,
    ) -> graph.Subgraph:
        """Breadth-first from ``ids`` (see :func:`graphmem.storage.sql.traversal.traverse`)."""
        attributes: tracing.Attributes = {
            tracing.NAMESPACE: self.namespace,
            "graphmem.traverse.depth": depth,
            "graphmem.traverse.max_nodes": max_nodes,
        }
        with tracing.span("graphmem.traverse", attributes) as span:
            found = self._store.traverse(
                ids,
                self._scope(as_of, known_at),
                depth=depth,
                types=types,
                direction=direction,
                max_nodes=max_nodes,
                min_strength=min_strength,
            )
            span.set_attributes(
                {
                    "graphmem.traverse.nodes": len(found.nodes),
                    "graphmem.traverse.edges": len(found.edges),
                    "graphmem.traverse.truncated_by": ",".join(found.truncated_by),
                }
            )
            return found

    def path(
        self,
        source_id: str,
        target_id: str,
        *,
        types: Iterable[str] | None = None,
        direction: str = "BOTH",
        as_of: TimeInput | None = None,
        known_at: TimeInput | None = None,
        max_depth: int = MAX_DEPTH,
    ) -> graph.Path | None:
        """A shortest path between two facts over visible links, or None."""
        check_text(source_id=source_id, target_id=target_id)
        attributes: tracing.Attributes = {
            tracing.NAMESPACE: self.namespace,
            "graphmem.path.max_depth": max_depth,
        }
        with tracing.span("graphmem.path", attributes) as span:
            found = self._store.path(
                source_id,
                target_id,
                self._scope(as_of, known_at),
                types=types,
                direction=direction,
                max_depth=max_depth,
            )
            span.set_attribute("graphmem.path.length", -1 if found is None else len(found))
            return found

    def clusters(
        self,
        *,
        types: Iterable[str] | None = None,
        min_size: int = 2,
        as_of: TimeInput | None = None,
        known_at: TimeInput | None = None,
    ) -> analytics.Clusters:
        """Groups of facts connected by visible links (connected components)."""
        scope = self._scope(as_of, known_at)
        return self._store.clusters(scope, types=types, min_size=min_size)

    def centrality(
        self,
        ids: Iterable[str] | str,
        *,
        depth: int = 2,
        types: Iterable[str] | None = None,
        as_of: TimeInput | None = None,
        known_at: TimeInput | None = None,
        max_nodes: int = graph.DEFAULT_MAX_NODES,
    ) -> list[tuple[str, float, float]]:
        """(id, degree centrality, betweenness) over the neighbourhood of ``ids``."""
        sub = self.traverse(
            ids, depth=depth, types=types, as_of=as_of, known_at=known_at, max_nodes=max_nodes
        )
        return analytics.centrality(sub)

    def dependency_order(
        self, fact_id: str, *, as_of: TimeInput | None = None, known_at: TimeInput | None = None
    ) -> analytics.DependencyOrder:
        """What ``fact_id`` depends on (DEPENDS_ON, outward), dependencies first; cycles listed."""
        sub = self._chain(fact_id, "DEPENDS_ON", "OUT", as_of, known_at)
        return analytics.dependency_order(sub)

    def causes(
        self, fact_id: str, *, as_of: TimeInput | None = None, known_at: TimeInput | None = None
    ) -> graph.Subgraph:
        """The cause chain: what ``fact_id`` was caused by (CAUSED_BY, outward), and so on."""
        return self._chain(fact_id, "CAUSED_BY", "OUT", as_of, known_at)

    def parts(
        self,
        fact_id: str,
        *,
        above: bool = False,
        as_of: TimeInput | None = None,
        known_at: TimeInput | None = None,
    ) -> graph.Subgraph:
        """The PART_OF tree below ``fact_id`` (its parts, their parts…), or above it."""
        return self._chain(fact_id, "PART_OF", "OUT" if above else "IN", as_of, known_at)

    # ----------------------------------------------------------------------------- decay

    def prune(self, *, dry_run: bool = False, soft: bool = False) -> PruneReport:
        """Hard-delete expired facts, then soft-decay ageing ones and delete the faded.

        ``soft`` skips the hard prune of expired facts; ``dry_run`` only counts.
        """
        report = pruning.prune(self._store, self._writer.purge, dry_run=dry_run, soft=soft)
        if not dry_run and (report.expired or report.low_confidence):
            self._writer.erase()
        return report

    # ----------------------------------------------------------------------------- upkeep

    def reflect(self, *, window_days: float | None = None) -> reflection.ReflectReport:
        """Ask the chat model for patterns among the facts recorded in the last ``window_days``
        (default: the ``reflect_window_days`` setting; at most 50 of each category), each
        backed by at least two of them, then for rules from the new patterns; store each as a
        fact linked to what it was drawn from (see :mod:`graphmem.reflection`). Fewer than two
        facts: an empty report and no request. InvalidInput when no chat endpoint is set (the
        ``llm_*`` settings)."""
        days = self.settings.reflect_window_days if window_days is None else window_days
        if isinstance(days, bool) or not isinstance(days, int | float) or not 0 < days <= 3650:
            raise InvalidInput(
                "window_days must be a number of days from 0 to 3650", field="window_days"
            )
        scope = self._scope(None, None)
        facts = self._store.recent(
            scope,
            since=scope.known_at - days * 86_400,
            per_category=reflection.PER_CATEGORY,
            skip_categories=(reflection.PATTERN, reflection.RULE),
            skip_entity=checkpoints.ENTITY,
        )
        if len(facts) < 2:
            return reflection.ReflectReport()

        def existing(category: str) -> list[Fact]:
            page = self._store.page(
                scope, Filters(category=category), first=reflection.MAX_COMPARED, after=None
            )
            return [fact for _, fact in page.items]

        def write(items: list[dict[str, Any]], then: Any) -> list[StoreResult]:
            return self._writer.store_many(items, autolink=None, then=then)

        chat = self._chat(required=True)
        assert chat is not None
        return reflection.reflect(chat, facts, existing, self._embed, write)

    def consolidate(self, *, dry_run: bool = False) -> consolidation.ConsolidateReport:
        """Merge clusters of near-duplicate live facts (cosine ≥ ``consolidate_similarity``, the
        same entity and key; contact details, ids and numbers left alone) into one fact each
        that supersedes every source; with a chat endpoint set, the model writes the merged
        text, else the newest most confident source's is kept (see
        :mod:`graphmem.consolidation`). ``dry_run`` only lists the clusters."""
        facts, cursor = self._slice(
            consolidation.CURSOR_KEY, Filters(), consolidation.MAX_CONSIDERED
        )
        floor = self.settings.consolidate_similarity
        self._vectors.catch_up(force=True)  # what the other processes wrote counts too

        def neighbours(vectors: Any) -> list[list[tuple[str, float]]]:
            found = self._vectors.neighbours_many(
                vectors, consolidation.MAX_CLUSTER * 2, live_only=True, floor=floor
            )
            # A fact that repeats another's text shares its vector (it has no row of its own):
            # it is as near as the fact whose vector it shares.
            sharing: dict[str, list[str]] = {}
            for owner, fact_id in self._store.sharing_vectors({i for h in found for i, _ in h}):
                sharing.setdefault(owner, []).append(fact_id)
            return [[(i, c) for o, c in hits for i in (o, *sharing.get(o, ()))] for hits in found]

        found = consolidation.clusters(facts, self._embed, neighbours)
        report = consolidation.ConsolidateReport(
            clusters=[[f.id for f in c] for c in found], dry_run=dry_run
        )
        if dry_run:
            return report
        texts = consolidation.merged_texts(self._chat(required=False), found, report)

        def write(item: dict[str, Any], also: list[str]) -> StoreResult:
            [result] = self._writer.store_many([item], autolink=None, merges=[also])
            return result

        for cluster, text in zip(found, texts, strict=True):
            if text is not None and (fact := consolidation.merge(cluster, text, write)):
                report.merged.append(fact)
                report.superseded += len(cluster)
        cursor()
        return report

    def auto_classify(self) -> categorize.ClassifyReport:
        """Relabel facts of category ``other`` with the chat model (with ``classifier =
        "llm"``; offline nothing changes), one request per 50 facts, up to 500 a run (the next
        run goes on after them); labels the model gives at least 10 of the facts that remain
        ``other`` (when 15 or more do) become categories of the namespace (see
        :mod:`graphmem.categorize`)."""
        if self.settings.classifier != "llm":
            return categorize.ClassifyReport()
        facts, cursor = self._slice(
            categorize.CURSOR_KEY, Filters(category="other"), categorize.MAX_PER_RUN
        )
        facts = [f for f in facts if (f.entity or "").lower() != checkpoints.ENTITY]
        report = categorize.ClassifyReport()
        if facts:
            chat = self._chat(required=True)
            assert chat is not None
            report = categorize.relabel(self._store, chat, facts)
        cursor()
        return report

    def categories(self) -> list[categorize.CategoryInfo]:
        """The categories a fact may have here: the built-in ones, then those discovered in this
        namespace's facts (``auto_classify``)."""
        return categorize.categories(self._store)

    def _slice(
        self, key: str, filters: Filters, most: int
    ) -> tuple[list[Fact], Callable[[], None]]:
        """Up to ``most`` visible facts matching ``filters``, in the order recorded, from where
        the previous slice under the meta ``key`` stopped; and the call that records where this
        one stopped (at the end, the next starts over), for once the slice is dealt with."""
        scope = self._scope(None, None)
        after = (self._store.meta(key) or {}).get("after")
        facts: list[Fact] = []
        more = True
        while more and len(facts) < most:
            first = min(MAX_LIMIT, most - len(facts))
            page = self._store.page(scope, filters, first=first, after=after)
            facts += [fact for _, fact in page.items]
            after = page.items[-1][0] if page.items else after
            more = page.has_more

        def record() -> None:
            with self._store.transaction() as tx:
                tx.set_meta(key, {"after": after if more else 0})

        return facts, record

    def maintain(
        self, jobs: Sequence[str] | None = None, *, force: bool = False
    ) -> list[MaintenanceRun]:
        """Run the maintenance jobs (``jobs``, or all those of ``graphmem.maintenance.REGISTRY``)
        that are due — their interval setting has passed since their last run, or they never
        ran — or each of them whatever its period when ``force``; each run is claimed and
        recorded in the store, so a job another process is running is returned as ``skipped``
        and not run twice (see :mod:`graphmem.maintenance`)."""
        return maintenance.run(self, self._store, jobs, force=force)

    def maintenance_runs(self, *, job: str | None = None, limit: int = 100) -> list[MaintenanceRun]:
        """The newest ``limit`` maintenance runs recorded (of ``job`` only, if given), newest
        first: a run still ``running``, or ``done`` or ``failed`` with what it changed, the
        model requests it made and why it failed."""
        if job is not None:
            maintenance.check_job(job)
        return self._store.maintenance_runs(job, limit)

    def last_runs(self) -> dict[str, MaintenanceRun]:
        """The newest recorded run of each maintenance job that has run."""
        return self._store.last_runs()

    def _chat(self, *, required: bool) -> ChatClient | None:
        """The chat model of the ``llm_*`` settings (the classifier's), or None when no endpoint
        is set (InvalidInput if ``required``)."""
        if self._writer.llm is None:
            given = self.settings.llm_base_url is not None or self.settings.llm_api_key is not None
            if not given and not required:
                return None
            self._writer.llm = ChatClient.from_settings(self.settings)
        return self._writer.llm

    def _embed(self, texts: Sequence[str]) -> Any:
        """Vectors of ``texts``, from the embedding cache where it has them."""
        return self._cache.embed(self._store, texts)[0]

    def backfill_stated_time(self, *, dry_run: bool = False) -> dict[str, int]:
        """Read the time every stored fact's text states, as writes do now (see
        :mod:`graphmem.statedtime`), for facts stored before graphmem read it; returns how many
        facts were read, how many state a time, and how many changed (``dry_run``: would)."""
        counts, changes = statedtime.backfill(self._store.stated_inputs())
        if not dry_run:
            for start in range(0, len(changes), statedtime.BACKFILL_BATCH):
                with self._store.transaction() as tx:
                    tx.set_stated(changes[start : start + statedtime.BACKFILL_BATCH])
        return counts

    def backfill_windows(self) -> dict[str, int]:
        """Cut the windows of turns of every episode again from its facts (see
        :mod:`graphmem.windows`), for episodes stored before graphmem cut them; returns how
        many episodes and windows there are."""
        episodes = self._store.window_episodes()
        made = 0
        for start in range(0, len(episodes), windows.BACKFILL_EPISODES):
            with self._store.transaction() as tx:
                made += tx.rebuild_windows(episodes[start : start + windows.BACKFILL_EPISODES])
        return {"episodes": len(episodes), "windows": made}

    def backfill_decay(self, *, dry_run: bool = False) -> dict[str, int]:
        """Re-run the decay heuristics on every fact but the turns (which keep the class capture
        gave them); returns how many moved to each class."""
        return pruning.backfill(self._store, dry_run=dry_run)

    # ----------------------------------------------------------------------------- operations

    def stats(self) -> Stats:
        """Counts by state, decay class and category, plus index and embedder facts, and the
        usage of the embedder and the classifier's chat model (calls, retries, tokens; see
        :mod:`graphmem.usage`). On an object store that does not answer within ``s3_timeout``,
        ``vectors`` is None (``degraded`` says why)."""
        return collect(self.namespace, self._store, self._vectors, self.embedder, self._writer.llm)

    def check(self, *, progress: Progress | None = None) -> CheckReport:
        """Compare the vector index with the store and list every disagreement (changes
        nothing). ``progress(done, total)`` is called after each batch of vectors read. An
        index on an object store that does not answer within ``s3_timeout`` (or fails a read)
        is reported ``unreadable``."""
        return self._sync.check(progress)

    def reindex(self, *, progress: Progress | None = None) -> int:
        """Rebuild the vector index from the store and the embedding cache; returns vectors
        written. Texts missing from the cache are embedded (and cached). ``progress(done,
        total)`` is called after each chunk."""
        return self._sync.reindex(progress)

    @property
    def degraded(self) -> str | None:
        """Why searches of this namespace are not at full strength now, naming the leg: its
        vector index cannot be written (writes still commit and are found, see
        docs/operations.md) or, on an object store, read in time (the vector leg scores only
        the writes still waiting); or None."""
        reasons = [r for r in (self._sync.degraded, self._vectors.degraded) if r]
        return "; ".join(reasons) or None

    def drain_outbox(self) -> int:
        """Write to the vector index the writes that have waited in the outbox for more than
        a couple of seconds (their process died after its commit, or the index refused them);
        the service calls this every second for each namespace it holds open. Returns how
        many facts were synced."""
        return self._sync.drain()

    def replay_outbox(self) -> int:
        """Apply vector writes that a crash left pending; returns how many facts were synced."""
        return self._sync.replay()

    def export_jsonl(self, out: IO[str]) -> int:
        """Write every episode, fact, link, synced file and entity declaration (aliases,
        merges, splits, with their transaction times) as JSON Lines (see
        :mod:`graphmem.storage.sql.transfer`); returns lines written."""
        return self._store.export(self.namespace, out)

    def import_jsonl(
        self, lines: Iterable[str], *, progress: Progress | None = None
    ) -> ImportReport:
        """Load an export in one transaction (all or nothing), then embed and index its facts.

        Facts and links whose ids already exist are skipped and counted, as are declarations
        the store holds already; a declaration must name an entity name the facts carry, and
        a name may have one live declaration (InvalidInput naming the line otherwise).
        """
        return self._writer.import_lines(lines, progress)

    def time_limit(self, *, seconds: float | None = None) -> AbstractContextManager[None]:
        """Stop this thread's reads inside the block ``seconds`` from now with QueryTimeout
        (default: the ``sql_time_limit`` setting, where 0 means no limit). The server gives
        each request one. Writes are not stopped: a batch is bounded by its size."""
        if seconds is None:
            seconds = self.settings.sql_time_limit or None
        return self._store.time_limit(None if seconds is None else time.monotonic() + seconds)

    def optimize(self) -> dict[str, Any]:
        """Refresh the store's query statistics (PostgreSQL: VACUUM ANALYZE), compact the
        vector index, and past the in-memory size build its ANN index (slow)."""
        self._store.analyze()
        return self._sync.optimize()

    # ----------------------------------------------------------------------------- internals

    def _filters(
        self,
        tag: str | None,
        category: str | None,
        entity: str | None,
        source: str | None,
        include_superseded: bool,
        scope: TimeScope,
    ) -> Filters:
        """The filters of a read, ``entity`` reaching every name of its entity."""
        names = (
            tuple(self._entities.names(entity, scope.known_at)) if isinstance(entity, str) else ()
        )
        return Filters(tag, category, entity, source, include_superseded, entity_names=names)

    def _known_at(self, known_at: TimeInput | None) -> float | None:
        """``known_at`` as a moment, None (now) when not given."""
        return None if known_at is None else self._scope(None, known_at).known_at

    def _scope(self, as_of: TimeInput | None, known_at: TimeInput | None) -> TimeScope:
        return TimeScope.resolve(self._store.now(), as_of, known_at)

    def _chain(
        self,
        fact_id: str,
        type: str,
        direction: str,
        as_of: TimeInput | None,
        known_at: TimeInput | None,
    ) -> graph.Subgraph:
        """Everything reached from ``fact_id`` along links of one type, as deep as allowed."""
        return self.traverse(
            fact_id,
            depth=MAX_DEPTH,
            types=[type],
            direction=direction,
            as_of=as_of,
            known_at=known_at,
            max_nodes=MAX_NODES,
        )

    def _accessed(self, scope: TimeScope, facts: Iterable[Fact]) -> None:
        """Count an access to facts a read at the current time returned."""
        if scope.current and self.settings.track_access:
            self._access.track([f.id for f in facts])

    def _count_tokens(self) -> recalls.TokenCounter:
        if self.settings.recall_tokenizer is None:
            return recalls.chars_counter
        if self._token_counter is None:
            self._token_counter = recalls.tokenizer_counter(self.settings.recall_tokenizer)
        return self._token_counter
