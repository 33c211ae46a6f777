"""``Memory``: one namespace's facts, their vectors, and every read and write on them.

Write path (DESIGN §4): validate → embed (outside the write lock) → with the LLM classifier,
one chat request for the batch (also outside the lock) → one SQLite transaction that dedups,
classifies (rules, or applies the LLM's verdicts), supersedes, inserts and queues an outbox row
per vector to sync → commit → bring LanceDB in line and clear the outbox. A crash after the
commit loses nothing: ``open`` replays the outbox.

For agent loops, ``recall`` builds the ``<memory-context>`` block before a turn
(:mod:`graphmem.recall`) and ``capture`` stores what a turn's messages say
(:mod:`graphmem.capture`).
"""

from __future__ import annotations

import collections
import functools
import itertools
import json
import logging
import math
import re
import shutil
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Final, TypeVar

import numpy as np

from . import analytics, classify, expansion, graph, ingest, transfer
from . import autolink as autolinks
from . import capture as captures
from . import recall as recalls
from . import search as ranking
from .decay import (
    DECAY_CLASSES,
    PRUNE_CONFIDENCE,
    REFRESH_ON_ACCESS,
    SOFT_DECAY_AFTER,
    SOFT_DECAY_FACTOR,
    classify_decay,
    expiry,
    freshness,
)
from .embedders import Embedder, EmbeddingCache, Vectors, create_embedder, text_hash
from .errors import Conflict, EmbedderMismatch, InvalidInput, NotFound, StorageError
from .keyword import KeywordRanker
from .llm import ChatClient
from .models import (
    MAX_BATCH,
    MAX_TEXT_LENGTH,
    Change,
    ChangeKind,
    Fact,
    FactInput,
    Link,
    SearchHit,
    StoreResult,
    Verdict,
    fact_columns,
)
from .settings import Settings
from .storage import Database
from .temporal import TimeInput, TimeScope

#: Most results one search or lookup returns.
MAX_LIMIT: Final = 1_000
SQLITE_FILE: Final = "graphmem.sqlite3"
VECTOR_DIR: Final = "vectors"

_NAMESPACE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_log = logging.getLogger("graphmem")
_CHUNK: Final = 500  # ids per `IN (...)` list, well under SQLite's variable limit
#: Facts per LanceDB write when syncing (a batch of 1,000 is one commit, not two).
_SYNC_CHUNK: Final = 5_000

#: Called as ``progress(done, total)`` during long operations.
Progress = Callable[[int, int], None]
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class FactPage:
    """A page of ``Memory.facts``: (position, fact) pairs in order, and whether more follow."""

    items: list[tuple[int, Fact]]
    has_more: bool


@dataclass(frozen=True, slots=True)
class PruneReport:
    """What ``prune`` removed (or, with dry_run, would remove)."""

    expired: int
    decayed: int
    low_confidence: int
    dry_run: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "expired": self.expired,
            "decayed": self.decayed,
            "low_confidence": self.low_confidence,
            "dry_run": self.dry_run,
        }


@dataclass(frozen=True, slots=True)
class CheckReport:
    """Every disagreement between SQLite (the truth) and the LanceDB index."""

    facts: int
    vectors: int
    missing_vectors: list[str] = field(default_factory=list)
    orphan_vectors: list[str] = field(default_factory=list)
    stale_live_flags: list[str] = field(default_factory=list)
    wrong_vectors: list[str] = field(default_factory=list)
    duplicate_vectors: list[str] = field(default_factory=list)
    pending_outbox: int = 0

    @property
    def ok(self) -> bool:
        return not (
            self.missing_vectors
            or self.orphan_vectors
            or self.stale_live_flags
            or self.wrong_vectors
            or self.duplicate_vectors
            or self.pending_outbox
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "facts": self.facts,
            "vectors": self.vectors,
            "missing_vectors": self.missing_vectors,
            "orphan_vectors": self.orphan_vectors,
            "stale_live_flags": self.stale_live_flags,
            "wrong_vectors": self.wrong_vectors,
            "duplicate_vectors": self.duplicate_vectors,
            "pending_outbox": self.pending_outbox,
        }


class Memory:
    """A namespace of graph memory. Thread-safe; also a context manager that closes on exit."""

    def __init__(
        self,
        directory: Path,
        namespace: str,
        db: Database,
        embedder: Embedder,
        settings: Settings,
        clock: Callable[[], float],
        llm: ChatClient | None = None,
    ) -> None:
        from .vectors import VectorIndex

        self.directory = directory
        self.namespace = namespace
        self.settings = settings
        self.embedder = embedder
        self._db = db
        self._clock = clock
        self._cache = EmbeddingCache(embedder)
        self._vectors = VectorIndex(directory / VECTOR_DIR, embedder.dimensions)
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="graphmem-search")
        self._keywords = KeywordRanker()
        self._access_lock = threading.Lock()
        self._accessed: dict[str, tuple[int, float]] = {}  # id -> (count, last time) to write
        self._accesses_written = -math.inf  # when accesses were last written (memory's clock)
        db.on_write = self._flush_access
        self._listeners: list[Callable[[list[Change]], None]] = []
        self._llm = llm
        self._token_counter: recalls.TokenCounter | None = None
        self._sync_lock = threading.Lock()
        self._sync_failed = False  # a vector write failed: the next sync replays the outbox

    # ----------------------------------------------------------------------------- lifecycle

    @classmethod
    def open(
        cls,
        data_dir: str | Path | None = None,
        namespace: str | None = None,
        embedder: str | Embedder | None = None,
        *,
        settings: Settings | None = None,
        clock: Callable[[], float] | None = None,
        reindex: bool = False,
        progress: Progress | None = None,
        llm: ChatClient | None = None,
    ) -> Memory:
        """Open (creating if needed) a namespace under ``data_dir``.

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
        namespace = settings.namespace if namespace is None else namespace
        check_namespace(namespace)
        directory = Path(data_dir if data_dir is not None else settings.data_dir) / namespace
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageError(
                f"cannot create the namespace directory {directory}: {exc.strerror}"
            ) from exc
        if llm is None and settings.classifier == "llm":
            llm = ChatClient.from_settings(settings)
        if isinstance(embedder, str) or embedder is None:
            embedder = create_embedder(embedder or settings.embedder, settings)
        db = Database(directory / SQLITE_FILE)
        try:
            recorded = _read_meta(db, "embedder")
            wanted = {
                "provider": embedder.provider,
                "model": embedder.model,
                "dimensions": embedder.dimensions,
            }
            if recorded is not None and recorded != wanted and not reindex:
                raise EmbedderMismatch(
                    f"namespace {namespace!r} was indexed with {_describe(recorded)}, but this "
                    f"process uses {_describe(wanted)}; run `graphmem reindex` to rebuild the "
                    "vectors with the new embedder (or open it with the old one)"
                )
            rebuild = reindex or recorded != wanted
            if rebuild and (directory / VECTOR_DIR).exists():
                # Rebuilt from SQLite anyway; removing it first also recovers a damaged index.
                shutil.rmtree(directory / VECTOR_DIR)
            try:
                memory = cls(directory, namespace, db, embedder, settings, clock or time.time, llm)
            except StorageError as exc:  # the index cannot be read: it is derived, rebuild it
                _log.warning("%s: namespace %r: rebuilding it from SQLite", exc.message, namespace)
                shutil.rmtree(directory / VECTOR_DIR, ignore_errors=True)
                memory = cls(directory, namespace, db, embedder, settings, clock or time.time, llm)
                rebuild = True
            if not rebuild and memory._vectors.missing and memory._count_facts():
                _log.warning(
                    "the vector index of namespace %r is missing: rebuilding it from SQLite",
                    namespace,
                )
                rebuild = True
            if not rebuild:
                memory.replay_outbox()
                expected = memory._count_vector_owners()
                if not memory._sync_failed and memory._vectors.count() != expected:
                    _log.warning(
                        "the vector index of namespace %r holds %d vectors where SQLite has %d "
                        "facts to index: run `graphmem check`, then `graphmem reindex`",
                        namespace,
                        memory._vectors.count(),
                        expected,
                    )
            if rebuild:
                memory.reindex(progress)
            if recorded != wanted:  # only once the vectors are this embedder's
                with db.write() as conn:
                    conn.execute(
                        "INSERT OR REPLACE INTO meta (key, value) VALUES ('embedder', ?)",
                        [json.dumps(wanted, sort_keys=True)],
                    )
        except BaseException:
            db.close()
            raise
        return memory

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        if self._accessed and not self._db.closed:
            with self._db.write(durable=False):
                pass  # the write's start hook (_flush_access) writes the waiting accesses
        self._db.close()

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
        entity: str | None = None,
        key: str | None = None,
        value: str | None = None,
        category: str | None = None,
        tags: Sequence[str] | str | None = None,
        importance: float | None = None,
        decay_class: str | None = None,
        source: str | None = None,
        valid_from: TimeInput | None = None,
        supersedes: str | None = None,
        autolink: bool | None = None,
        **extra: Any,
    ) -> StoreResult:
        """Store one fact through the write pipeline; see ``store_many``.

        ``autolink=False`` makes no automatic links for this write (None follows the settings).
        ``extra`` takes the other FactInput fields: summary, why, context, confidence,
        source_date, expires_at, classify, entity_links.
        """
        item = {
            "text": text,
            "entity": entity,
            "key": key,
            "value": value,
            "category": category,
            "tags": tags,
            "importance": importance,
            "decay_class": decay_class,
            "source": source,
            "valid_from": valid_from,
            "supersedes": supersedes,
            "autolink": autolink,
            **extra,
        }
        return self.store_many([{k: v for k, v in item.items() if v is not None}])[0]

    def store_many(
        self, items: Sequence[Mapping[str, Any] | FactInput], *, autolink: bool | None = None
    ) -> list[StoreResult]:
        """Store a batch: one validation pass, one embedding pass, one SQLite transaction (with
        the new facts' automatic links, see :mod:`graphmem.autolink`).

        ``autolink=False`` makes no automatic links for items that do not say otherwise.
        With ``classifier = llm``, one chat request classifies the batch (per ``llm_batch_size``
        facts) before the transaction; if it fails, the facts are added (see
        :mod:`graphmem.classify`). Raises InvalidInput (nothing written) if any item is invalid, NotFound or Conflict if a
        ``supersedes`` id is unknown or not live. Results are in input order.
        """
        if isinstance(items, Mapping | str | bytes):
            raise InvalidInput("store_many takes a list of facts")
        if len(items) > MAX_BATCH:
            raise InvalidInput(f"at most {MAX_BATCH} facts per batch, got {len(items)}")
        inputs = [FactInput.parse(item, index=i) for i, item in enumerate(items)]
        if not inputs:
            return []
        if autolink is False:
            inputs = [
                x if x.autolink is not None else x.model_copy(update={"autolink": False})
                for x in inputs
            ]
        vectors, fresh = self._cache.embed(self._db.reader(), [x.text for x in inputs])
        options = autolinks.Options.resolve(self.settings, self.embedder.provider)
        twins, similar = self._similar(vectors, inputs, options)
        verdicts = self._classify(inputs, vectors) if self.settings.classifier == "llm" else None
        with self._db.write() as conn:
            # Stamped once the writer is held: recorded_at follows commit order, so a read at a
            # fixed knownAt sees the same facts whichever moment it runs (see _search).
            now = self._now()
            results, touched = ingest.write_batch(conn, inputs, twins, now, self.settings, verdicts)
            autolinks.link_batch(conn, now, inputs, results, similar, options)
            self._cache.store(conn, fresh, now)
            _queue(conn, touched, now)
        known = {r.fact.id: vectors[i] for i, r in enumerate(results) if r.fact is not None}
        self._sync(touched, known)
        changes: list[tuple[ChangeKind, str]] = []
        for r in results:
            if r.action in ("ADD", "UPDATE") and r.fact is not None:
                changes.append(("FACT_STORED", r.fact.id))
            kind: ChangeKind = "FACT_FORGOTTEN" if r.action == "DELETE" else "FACT_SUPERSEDED"
            if r.action in ("UPDATE", "DELETE"):
                changes.extend((kind, target) for target in r.target_ids)
        self._announce(changes, now)
        return results

    def forget(self, fact_id: str) -> Fact:
        """Retract a fact: current reads stop seeing it; reads known at an earlier time still do.

        Returns the fact as it was. NotFound for an unknown id, Conflict if already retracted.
        """
        with self._db.write() as conn:
            now = self._now()
            row = _row(conn, fact_id)
            if row is None:
                raise NotFound(f"no fact with id {fact_id!r}")
            if row["retracted_at"] is not None:
                raise Conflict(f"fact {fact_id} was already forgotten")
            conn.execute("UPDATE facts SET retracted_at = ? WHERE id = ?", [now, fact_id])
            _queue(conn, [fact_id], now)
        self._sync([fact_id])
        self._announce([("FACT_FORGOTTEN", fact_id)], now)
        return Fact.from_row(row)

    def purge(self, fact_id: str) -> None:
        """Delete a fact for good: its row, links, vector and cached embedding (privacy)."""
        if not self._purge_ids([fact_id]):
            raise NotFound(f"no fact with id {fact_id!r}")
        self._vectors.compact(erase=True)  # no older table version keeps the vector

    # ----------------------------------------------------------------------------- reads

    def get(
        self, fact_id: str, as_of: TimeInput | None = None, known_at: TimeInput | None = None
    ) -> Fact | None:
        """The fact if it is visible at the time scope, else None (also for unknown ids)."""
        scope = self._scope(as_of, known_at)
        row = (
            self._db.reader()
            .execute(
                f"SELECT * FROM facts f WHERE f.id = :id AND {scope.fact_clause()}",
                {"id": fact_id, **scope.params},
            )
            .fetchone()
        )
        return None if row is None else Fact.from_row(row)

    def get_many(
        self,
        ids: Iterable[str],
        as_of: TimeInput | None = None,
        known_at: TimeInput | None = None,
        *,
        include_superseded: bool = False,
    ) -> dict[str, Fact]:
        """The facts among ``ids`` visible at the time scope, by id, in one query."""
        scope = self._scope(as_of, known_at)
        rows = self._db.reader().execute(
            f"SELECT {fact_columns('f')} FROM facts f WHERE f.id IN"
            " (SELECT value FROM json_each(:ids))"
            f" AND {scope.fact_clause(include_superseded=include_superseded)}",
            {"ids": json.dumps(list(ids)), **scope.params},
        )
        return {r[0]: Fact.from_values(r) for r in rows}

    def facts(
        self,
        first: int = 50,
        after: int | None = None,
        tag: str | None = None,
        category: str | None = None,
        entity: str | None = None,
        source: str | None = None,
        as_of: TimeInput | None = None,
        known_at: TimeInput | None = None,
        *,
        include_superseded: bool = False,
    ) -> FactPage:
        """Visible facts in the order they were recorded, ``first`` at a time after position
        ``after`` (a keyset: facts written meanwhile join the end, so no page repeats or skips
        a fact that stays visible)."""
        _check_limit(first)
        if after is not None and (isinstance(after, bool) or not isinstance(after, int)):
            raise InvalidInput("after must be a position from a previous page", field="after")
        scope = self._scope(as_of, known_at)
        params: dict[str, Any] = {**scope.params, "after": after or 0, "first": first + 1}
        visible = _filters(scope, params, include_superseded, tag, category, entity, source)
        rows = (
            self._db.reader()
            .execute(
                f"SELECT f.seq, {fact_columns('f')} FROM facts f WHERE f.seq > :after AND {visible}"
                " ORDER BY f.seq LIMIT :first",
                params,
            )
            .fetchall()
        )
        items = [(r[0], Fact.from_values(r[1:])) for r in rows[:first]]
        return FactPage(items, has_more=len(rows) > first)

    def lookup(
        self,
        entity: str,
        key: str | None = None,
        tag: str | None = None,
        as_of: TimeInput | None = None,
        known_at: TimeInput | None = None,
        *,
        include_superseded: bool = False,
        limit: int = 100,
    ) -> list[Fact]:
        """Facts about ``entity`` (and ``key``), case-insensitive, by SQL alone (no embedding).

        Ordered by confidence, then the newest effective date first.
        """
        if not isinstance(entity, str) or not entity.strip():
            raise InvalidInput("entity must be a non-empty string", field="entity")
        _check_limit(limit)
        scope = self._scope(as_of, known_at)
        where = [
            "lower(f.entity) = lower(:entity)",
            scope.fact_clause(include_superseded=include_superseded),
        ]
        params: dict[str, Any] = {"entity": entity.strip(), **scope.params, "limit": limit}
        if key is not None:
            where.append("lower(f.key) = lower(:key)")
            params["key"] = key.strip()
        if tag is not None:
            where.append(_tag_clause(tag, params))
        rows = (
            self._db.reader()
            .execute(
                f"SELECT * FROM facts f WHERE {' AND '.join(where)} ORDER BY f.confidence DESC,"
                " COALESCE(f.source_date, f.valid_from) DESC, f.seq DESC LIMIT :limit",
                params,
            )
            .fetchall()
        )
        facts = [Fact.from_row(r) for r in rows]
        if scope.current:
            self._track_access([f.id for f in facts])
        return facts

    def search(
        self,
        query: str,
        limit: int = 10,
        tag: str | None = None,
        category: str | None = None,
        entity: str | None = None,
        as_of: TimeInput | None = None,
        known_at: TimeInput | None = None,
        include_superseded: bool = False,
        mode: str = "hybrid",
        *,
        source: str | None = None,
        graph_depth: int = 0,
    ) -> list[SearchHit]:
        """Facts matching ``query``, best first: keyword and vector legs fused (DESIGN §5).

        Returns ``limit`` hits whenever that many visible facts match, however many superseded
        or retracted versions rank above them. ``graph_depth`` > 0 lets linked candidates lend
        each other evidence and adds the linked neighbours of the hits, up to that many links
        away, each scored below the fact that reached it; a hit linked to a stronger one may rise
        to just below it (see docs/graph.md).
        """
        hits, scope = self._search(
            query,
            limit,
            tag,
            category,
            entity,
            as_of,
            known_at,
            include_superseded,
            mode,
            source,
            graph_depth,
        )
        if scope.current:
            self._track_access([h.fact.id for h in hits])
        return hits

    def _search(
        self,
        query: str,
        limit: int,
        tag: str | None,
        category: str | None,
        entity: str | None,
        as_of: TimeInput | None,
        known_at: TimeInput | None,
        include_superseded: bool,
        mode: str,
        source: str | None,
        graph_depth: int,
    ) -> tuple[list[SearchHit], TimeScope]:
        """``search`` without access tracking; also returns the resolved time scope."""
        if not isinstance(query, str) or not query.strip():
            raise InvalidInput("query must be a non-empty string", field="query")
        if len(query) > MAX_TEXT_LENGTH:
            raise InvalidInput(f"query longer than {MAX_TEXT_LENGTH} characters", field="query")
        if mode not in ranking.MODES:
            raise InvalidInput(f"unknown mode {mode!r}; use hybrid, fts or vector", field="mode")
        _check_limit(limit)
        if (
            isinstance(graph_depth, bool)
            or not isinstance(graph_depth, int)
            or not (0 <= graph_depth <= graph.MAX_DEPTH)
        ):
            raise InvalidInput(
                f"graph_depth must be from 0 to {graph.MAX_DEPTH}", field="graph_depth"
            )
        scope = self._scope(as_of, known_at)
        params: dict[str, Any] = dict(scope.params)
        visible = _filters(scope, params, include_superseded, tag, category, entity, source)
        wanted = max(self.settings.fusion_candidates, limit)
        conn = self._db.reader()
        live_only = scope.current and not include_superseded
        fts: dict[str, float] = {}
        vec: dict[str, float] = {}
        query_vector: Vectors | None = None
        candidates: dict[str, sqlite3.Row] = {}
        # The legs run concurrently: FTS5 and the embedding/matrix product release the GIL.
        pending = (
            self._pool.submit(
                self._limited,
                self._db.deadline,
                self._vector_leg,
                query,
                visible,
                params,
                wanted,
                live_only,
            )
            if mode != "fts"
            else None
        )
        if mode != "vector":
            fts, rows = self._fts_leg(conn, query, visible, params, wanted)
            candidates.update(rows)
        if pending is not None:
            vec, rows, query_vector = pending.result()
            candidates.update(rows)
        if mode == "hybrid":
            relevance = ranking.fuse(fts, vec, self.settings.fts_weight)
        elif mode == "fts":
            relevance = ranking.min_max(fts)
        else:
            relevance = dict(vec)
        if graph_depth > 0:
            relevance = expansion.lend_evidence(conn, relevance, scope)
        ranked = []
        for fact_id, rel in relevance.items():
            row = candidates[fact_id]
            score = ranking.adjust(
                rel,
                importance=row["importance"],
                confidence=row["confidence"],
                freshness=freshness(row["expires_at"], row["last_confirmed_at"], scope.known_at),
                decay_class=row["decay_class"],
            )
            effective = row["source_date"] if row["source_date"] is not None else row["valid_from"]
            ranked.append((score, effective, fact_id))
        ranked.sort(reverse=True)
        top = ranked[:limit]
        reached: dict[str, tuple[float, int, str]] = {}
        if graph_depth > 0:
            reached = expansion.neighbours(
                conn,
                [(fact_id, score) for score, _, fact_id in top],
                graph_depth,
                scope,
                lambda ids: {r["id"] for r in _candidates(conn, "id", ids, visible, params)},
                {fact_id: score for score, _, fact_id in ranked},
                None
                if query_vector is None
                else functools.partial(self._vectors.similarities, query_vector),
            )
            merged = [(score, 0, fact_id) for score, _, fact_id in top if fact_id not in reached]
            merged += [(score, depth, fact_id) for fact_id, (score, depth, _) in reached.items()]
            merged.sort(key=lambda x: (-x[0], x[1]))
            top = [(score, 0, fact_id) for score, _, fact_id in merged[:limit]]
        # The legs ran as separate statements, so a write committed between them (a
        # supersession) may have hidden a candidate since. The hits are read again, visible, in
        # one snapshot: old and new version are never both returned; the next candidates fill in.
        more = iter([] if graph_depth > 0 else ranked[limit:])
        shown: dict[str, sqlite3.Row] = {}
        with self._db.snapshot() as final:
            while True:
                shown.update(_visible_rows(final, [f for _, _, f in top], visible, params))
                if len(shown) >= min(limit, len(top)) or graph_depth > 0:
                    break
                extra = list(itertools.islice(more, limit - len(shown)))
                if not extra:
                    break
                top = [hit for hit in top if hit[2] in shown] + extra
        out = [
            SearchHit(
                Fact.from_row(shown[fact_id]),
                score,
                fts.get(fact_id),
                vec.get(fact_id),
                *(reached[fact_id][1:] if fact_id in reached else (0, None)),
            )
            for score, _, fact_id in top
            if fact_id in shown
        ]
        return out, scope

    def recall(
        self,
        prompt: str,
        max_tokens: int = recalls.DEFAULT_MAX_TOKENS,
        format: recalls.Format = "full",
        graph_depth: int = 0,
        as_of: TimeInput | None = None,
        known_at: TimeInput | None = None,
    ) -> recalls.RecallResult:
        """The ``<memory-context>`` block for a prompt, within ``max_tokens`` (auto-recall).

        Hybrid search on the prompt (its first 10,000 characters), with the facts of any known
        entity it names merged in and, with ``graph_depth`` > 0, linked facts; best first, long
        texts as summaries, one line per fact in ``format`` (full, short or minimal). See
        :mod:`graphmem.recall`. The facts in the block count as accessed.
        """
        recalls.check(prompt, max_tokens, format)
        query = prompt[:MAX_TEXT_LENGTH]
        hits, scope = self._search(
            query,
            recalls.CANDIDATES,
            None,
            None,
            None,
            as_of,
            known_at,
            False,
            "hybrid",
            None,
            graph_depth,
        )
        candidates = [
            recalls.Candidate(
                h.fact,
                h.score,
                "graph" if h.depth else "sqlite" if h.fts_score is not None else "lance",
            )
            for h in hits
        ]
        ranked = recalls.ranked(candidates, self._entity_facts(query, scope))
        # Hits and entity facts were read by separate statements; one more keeps only the facts
        # visible together, so a supersession between them never puts both versions in.
        shown = _visible_rows(
            self._db.reader(), [c.fact.id for c in ranked], scope.fact_clause(), dict(scope.params)
        )
        ranked = [c for c in ranked if c.fact.id in shown]
        result = recalls.assemble(ranked, max_tokens, format, self._count_tokens())
        if scope.current:
            self._track_access([f.id for f in result.facts])
        return result

    def capture(self, messages: Sequence[Mapping[str, Any]]) -> list[captures.CaptureResult]:
        """Store what a turn's messages say that is worth remembering (auto-capture).

        ``messages`` are ``{"role", "content"}`` objects (OpenAI chat format). Sentences that a
        trigger marks as memorable, from messages without sensitive content, go through the
        write path in one batch; see :mod:`graphmem.capture`. Returns one result per candidate
        (and a SKIP for each message without one), in order. InvalidInput, with nothing stored,
        for messages that are not a list of role/content objects or have an unknown role.
        """
        found = captures.candidates(
            captures.parse_messages(messages), self.settings.capture_max_chars
        )
        items = [c.item for c in found if c.item is not None]
        stored = iter(self.store_many(items) if items else [])
        out = []
        for c in found:
            if c.item is None:
                out.append(captures.CaptureResult("SKIP", None, c.reason, c.message, c.role, None))
                continue
            r = next(stored)
            out.append(
                captures.CaptureResult(
                    r.action, r.fact, r.reason, c.message, c.role, c.text, r.target_ids
                )
            )
        return out

    def history(
        self, fact_id: str, as_of: TimeInput | None = None, known_at: TimeInput | None = None
    ) -> list[Fact]:
        """Every version in ``fact_id``'s supersession chain, oldest first.

        Versions recorded after ``known_at``, retracted by then, or starting after ``as_of`` are
        left out. NotFound if the id is unknown.
        """
        scope = self._scope(as_of, known_at)
        conn = self._db.reader()
        if _row(conn, fact_id) is None:
            raise NotFound(f"no fact with id {fact_id!r}")
        rows = conn.execute(
            """
            WITH RECURSIVE chain(id) AS (
                SELECT :id
                UNION
                SELECT CASE WHEN l.source_id = chain.id THEN l.target_id ELSE l.source_id END
                FROM links l JOIN chain ON l.source_id = chain.id OR l.target_id = chain.id
                WHERE l.type = 'SUPERSEDES'
            )
            SELECT f.* FROM facts f JOIN chain ON f.id = chain.id
            WHERE f.recorded_at <= :known_at
              AND (f.retracted_at IS NULL OR f.retracted_at > :known_at)
              AND f.valid_from <= :as_of
            ORDER BY f.valid_from, f.recorded_at, f.seq
            """,
            {"id": fact_id, **scope.params},
        ).fetchall()
        return [Fact.from_row(r) for r in rows]

    # ----------------------------------------------------------------------------- graph

    def link(
        self,
        source_id: str,
        target_id: str,
        type: str,
        strength: float = 1.0,
        *,
        valid_from: TimeInput | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Link:
        """Link two facts (``source -[type]-> target``), or update the live link's strength.

        Types: CAUSED_BY, PART_OF, RELATED_TO, DEPENDS_ON (SUPERSEDES comes from storing a new
        version). NotFound for an unknown fact, Conflict for a forgotten one.
        """
        with self._db.write() as conn:
            now = self._now()
            made = graph.link(
                conn,
                now,
                source_id,
                target_id,
                type,
                strength,
                valid_from=valid_from,
                metadata=metadata,
            )
        self._announce([("LINK_MADE", made.id)], now)
        return made

    def unlink(self, link_id: str) -> Link:
        """Retract a link: current reads stop following it, earlier ``known_at`` still do."""
        with self._db.write() as conn:
            now = self._now()
            removed = graph.unlink(conn, now, link_id)
        self._announce([("LINK_REMOVED", link_id)], now)
        return removed

    def subscribe(self, listener: Callable[[list[Change]], None]) -> Callable[[], None]:
        """Call ``listener`` with the changes of each write once it has committed (in the
        writing thread; keep it quick). Returns a function that unsubscribes it."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def links_page(
        self,
        fact_ids: Sequence[str],
        direction: str = "BOTH",
        types: Iterable[str] | None = None,
        first: int = 50,
        after: graph.LinkPosition | None = None,
        as_of: TimeInput | None = None,
        known_at: TimeInput | None = None,
    ) -> dict[str, tuple[list[tuple[graph.LinkPosition, Link]], bool]]:
        """A page of each fact's visible links, strongest first (see
        :func:`graphmem.graph.links_page`): one query for any number of facts."""
        scope = self._scope(as_of, known_at)
        return graph.links_page(
            self._db.reader(),
            fact_ids,
            scope,
            direction=direction,
            types=types,
            first=first,
            after=after,
        )

    def links(
        self,
        fact_id: str,
        direction: str = "BOTH",
        types: Iterable[str] | None = None,
        as_of: TimeInput | None = None,
        known_at: TimeInput | None = None,
    ) -> list[Link]:
        """A fact's links visible at the time scope, strongest first."""
        scope = self._scope(as_of, known_at)
        return graph.links_of(self._db.reader(), fact_id, scope, direction=direction, types=types)

    def traverse(
        self,
        ids: Iterable[str] | str,
        depth: int = 2,
        types: Iterable[str] | None = None,
        direction: str = "BOTH",
        as_of: TimeInput | None = None,
        known_at: TimeInput | None = None,
        max_nodes: int = graph.DEFAULT_MAX_NODES,
        min_strength: float = 0.0,
    ) -> graph.Subgraph:
        """Breadth-first from ``ids`` (see :func:`graphmem.graph.traverse`)."""
        scope = self._scope(as_of, known_at)
        with self._db.snapshot() as conn:
            return graph.traverse(
                conn,
                ids,
                scope,
                depth=depth,
                types=types,
                direction=direction,
                max_nodes=max_nodes,
                min_strength=min_strength,
            )

    def path(
        self,
        source_id: str,
        target_id: str,
        types: Iterable[str] | None = None,
        direction: str = "BOTH",
        as_of: TimeInput | None = None,
        known_at: TimeInput | None = None,
        max_depth: int = graph.MAX_DEPTH,
    ) -> graph.Path | None:
        """A shortest path between two facts over visible links, or None."""
        scope = self._scope(as_of, known_at)
        with self._db.snapshot() as conn:
            return graph.path(
                conn,
                source_id,
                target_id,
                scope,
                types=types,
                direction=direction,
                max_depth=max_depth,
            )

    def clusters(
        self,
        types: Iterable[str] | None = None,
        min_size: int = 2,
        as_of: TimeInput | None = None,
        known_at: TimeInput | None = None,
    ) -> analytics.Clusters:
        """Groups of facts connected by visible links (connected components)."""
        scope = self._scope(as_of, known_at)
        with self._db.snapshot() as conn:
            return analytics.clusters(conn, scope, types=types, min_size=min_size)

    def centrality(
        self,
        ids: Iterable[str] | str,
        depth: int = 2,
        types: Iterable[str] | None = None,
        as_of: TimeInput | None = None,
        known_at: TimeInput | None = None,
        max_nodes: int = graph.DEFAULT_MAX_NODES,
    ) -> list[tuple[str, float, float]]:
        """(id, degree centrality, betweenness) over the neighbourhood of ``ids``."""
        sub = self.traverse(ids, depth, types, "BOTH", as_of, known_at, max_nodes)
        return analytics.centrality(sub)

    def dependency_order(
        self, fact_id: str, as_of: TimeInput | None = None, known_at: TimeInput | None = None
    ) -> analytics.DependencyOrder:
        """What ``fact_id`` depends on (DEPENDS_ON, outward), dependencies first; cycles listed."""
        sub = self.traverse(
            fact_id, graph.MAX_DEPTH, ["DEPENDS_ON"], "OUT", as_of, known_at, graph.MAX_NODES
        )
        return analytics.dependency_order(sub)

    def causes(
        self, fact_id: str, as_of: TimeInput | None = None, known_at: TimeInput | None = None
    ) -> graph.Subgraph:
        """The cause chain: what ``fact_id`` was caused by (CAUSED_BY, outward), and so on."""
        return self.traverse(
            fact_id, graph.MAX_DEPTH, ["CAUSED_BY"], "OUT", as_of, known_at, graph.MAX_NODES
        )

    def parts(
        self,
        fact_id: str,
        above: bool = False,
        as_of: TimeInput | None = None,
        known_at: TimeInput | None = None,
    ) -> graph.Subgraph:
        """The PART_OF tree below ``fact_id`` (its parts, their parts…), or above it."""
        return self.traverse(
            fact_id,
            graph.MAX_DEPTH,
            ["PART_OF"],
            "OUT" if above else "IN",
            as_of,
            known_at,
            graph.MAX_NODES,
        )

    # ----------------------------------------------------------------------------- decay

    def prune(self, dry_run: bool = False, soft: bool = False) -> PruneReport:
        """Hard-delete expired facts, then soft-decay ageing ones and delete the faded.

        ``soft`` skips the hard prune of expired facts; ``dry_run`` only counts.
        """
        now = self._now()
        conn = self._db.reader()
        expired = (
            []
            if soft
            else [
                r[0]
                for r in conn.execute(
                    "SELECT id FROM facts WHERE expires_at IS NOT NULL AND expires_at < ?", [now]
                )
            ]
        )
        ageing = (
            "expires_at IS NOT NULL AND expires_at > :now AND last_confirmed_at IS NOT NULL"
            " AND (:now - last_confirmed_at) > (expires_at - last_confirmed_at) * :after"
            " AND confidence > :floor"
        )
        args = {
            "now": now,
            "after": SOFT_DECAY_AFTER,
            "floor": PRUNE_CONFIDENCE,
            "factor": SOFT_DECAY_FACTOR,
        }
        if dry_run:
            decayed = conn.execute(f"SELECT count(*) FROM facts WHERE {ageing}", args).fetchone()[0]
            faded = conn.execute(
                f"SELECT count(*) FROM facts WHERE (confidence < :floor OR ({ageing}"
                " AND confidence * :factor < :floor))"
                + ("" if soft else " AND NOT (expires_at IS NOT NULL AND expires_at < :now)"),
                args,
            ).fetchone()[0]
            return PruneReport(len(expired), decayed, faded, dry_run=True)
        self._purge_ids(expired)
        with self._db.write() as wconn:
            decayed = wconn.execute(
                f"UPDATE facts SET confidence = confidence * :factor WHERE {ageing}", args
            ).rowcount
        faded = [
            r[0]
            for r in conn.execute("SELECT id FROM facts WHERE confidence < ?", [PRUNE_CONFIDENCE])
        ]
        self._purge_ids(faded)
        if expired or faded:
            self._vectors.compact(erase=True)
        return PruneReport(len(expired), decayed, len(faded), dry_run=False)

    def backfill_decay(self, dry_run: bool = False) -> dict[str, int]:
        """Re-run the decay heuristics on every fact; returns how many moved to each class."""
        conn = self._db.reader()
        changes: dict[str, list[tuple[str, float | None, str]]] = {}
        for row in conn.execute(
            "SELECT id, entity, key, value, text, decay_class,"
            " last_confirmed_at, recorded_at FROM facts"
        ):
            new = classify_decay(row["entity"], row["key"], row["value"], row["text"])
            if new != row["decay_class"]:
                since = row["last_confirmed_at"] or row["recorded_at"]
                changes.setdefault(new, []).append((new, expiry(new, since), row["id"]))
        if not dry_run:
            with self._db.write() as wconn:
                for rows in changes.values():
                    wconn.executemany(
                        "UPDATE facts SET decay_class = ?, expires_at = ? WHERE id = ?", rows
                    )
        return {k: len(v) for k, v in sorted(changes.items())}

    # ----------------------------------------------------------------------------- operations

    def stats(self) -> dict[str, Any]:
        """Counts by state, decay class and category, plus index and embedder facts, and the
        ``usage`` of the embedder and the classifier's chat model (calls, retries, tokens; see
        :mod:`graphmem.usage`)."""
        now = self._now()
        scope = TimeScope(now, now)
        conn = self._db.reader()
        live = scope.fact_clause()

        def one(sql: str, *args: Any) -> int:
            return int(conn.execute(sql, args).fetchone()[0])

        by_class = dict.fromkeys(DECAY_CLASSES, 0)
        for name, n in conn.execute(
            f"SELECT decay_class, count(*) FROM facts f WHERE {live} GROUP BY decay_class",
            scope.params,
        ):
            by_class[name] = n
        by_category = dict(
            conn.execute(
                f"SELECT category, count(*) FROM facts f WHERE {live} GROUP BY category",
                scope.params,
            ).fetchall()
        )
        return {
            "namespace": self.namespace,
            "facts": one("SELECT count(*) FROM facts"),
            "current": sum(by_class.values()),
            "superseded": one("SELECT count(*) FROM facts WHERE superseded_by IS NOT NULL"),
            "retracted": one("SELECT count(*) FROM facts WHERE retracted_at IS NOT NULL"),
            "expired_pending_prune": one(
                "SELECT count(*) FROM facts WHERE expires_at IS NOT NULL AND expires_at < ?", now
            ),
            "by_decay_class": by_class,
            "by_category": by_category,
            "links": one("SELECT count(*) FROM links WHERE retracted_at IS NULL"),
            "vectors": self._vectors.count(),
            "outbox_pending": one("SELECT count(*) FROM outbox"),
            "embedder": {
                "provider": self.embedder.provider,
                "model": self.embedder.model,
                "dimensions": self.embedder.dimensions,
            },
            "usage": {
                "embedding": self.embedder.meter.snapshot().to_dict(),
                "llm": None if self._llm is None else self._llm.meter.snapshot().to_dict(),
            },
        }

    def check(self) -> CheckReport:
        """Compare LanceDB with SQLite and list every disagreement (changes nothing)."""
        conn = self._db.reader()
        owners = _vector_owners(conn)
        stored = self._vectors.rows()
        expected = self._expected_vectors(conn, list(owners))
        missing = sorted(set(owners) - stored.keys())
        orphans = sorted(stored.keys() - set(owners))
        stale = sorted(i for i in set(owners) & stored.keys() if stored[i][1] != owners[i])
        wrong = sorted(
            i
            for i in set(owners) & stored.keys()
            if i in expected and not np.allclose(stored[i][0], expected[i], atol=1e-5)
        )
        rows = collections.Counter(self._vectors.ids())
        return CheckReport(
            facts=self._count_facts(),
            vectors=len(stored),
            missing_vectors=missing,
            orphan_vectors=orphans,
            stale_live_flags=stale,
            wrong_vectors=wrong,
            duplicate_vectors=sorted(i for i, n in rows.items() if n > 1),
            pending_outbox=conn.execute("SELECT count(*) FROM outbox").fetchone()[0],
        )

    def reindex(self, progress: Progress | None = None) -> int:
        """Rebuild the vector index from SQLite and the embedding cache; returns vectors written.

        Texts missing from the cache are embedded (and cached). ``progress(done, total)`` is
        called after each chunk.
        """
        self._vectors.clear()
        conn = self._db.reader()
        owners = _vector_owners(conn)
        ids = list(owners)
        written = 0
        for start in range(0, len(ids), _CHUNK):
            chunk = ids[start : start + _CHUNK]
            vectors = self._expected_vectors(conn, chunk, embed_missing=True)
            self._vectors.upsert(
                chunk, np.stack([vectors[i] for i in chunk]), [owners[i] for i in chunk]
            )
            written += len(chunk)
            if progress:
                progress(written, len(ids))
        with self._db.write() as wconn:
            wconn.execute("DELETE FROM outbox")
        self._vectors.compact()
        return written

    def replay_outbox(self) -> int:
        """Apply vector writes that a crash left pending; returns how many facts were synced."""
        ids = [r[0] for r in self._db.reader().execute("SELECT fact_id FROM outbox")]
        for start in range(0, len(ids), _CHUNK):
            self._sync(ids[start : start + _CHUNK])
        return len(ids)

    def export_jsonl(self, out: IO[str]) -> int:
        """Write every fact and link as JSON Lines (see transfer.py); returns lines written."""
        with self._db.snapshot() as conn:
            return transfer.write_export(conn, self.namespace, out)

    def import_jsonl(
        self, lines: Iterable[str], progress: Progress | None = None
    ) -> transfer.ImportReport:
        """Load an export in one transaction (all or nothing), then embed and index its facts.

        Facts and links whose ids already exist are skipped and counted.
        """
        now = self._now()
        with self._db.write() as conn:
            report, ids = transfer.import_rows(conn, lines)
            _queue(conn, ids, now)
        for start in range(0, len(ids), _CHUNK):
            self._sync(ids[start : start + _CHUNK])
            if progress:
                progress(min(start + _CHUNK, len(ids)), len(ids))
        return report

    def time_limit(self, seconds: float | None = None) -> AbstractContextManager[None]:
        """Stop this thread's reads inside the block ``seconds`` from now with QueryTimeout
        (default: the ``sql_time_limit`` setting, where 0 means no limit). The server gives
        each request one. Writes are not stopped: a batch is bounded by its size."""
        if seconds is None:
            seconds = self.settings.sql_time_limit or None
        return self._db.time_limit(None if seconds is None else time.monotonic() + seconds)

    def optimize(self) -> dict[str, Any]:
        """Compact the vector index; past the in-memory size, build its ANN index (slow)."""
        return self._vectors.optimize()

    # ----------------------------------------------------------------------------- internals

    def _now(self) -> float:
        return round(self._clock(), 6)

    def _announce(self, changes: Sequence[tuple[ChangeKind, str]], at: float) -> None:
        if not changes or not self._listeners:
            return
        batch = [Change(kind, item, self.namespace, at) for kind, item in changes]
        for listener in list(self._listeners):
            try:
                listener(batch)
            except Exception:  # a listener's failure must not fail a committed write
                _log.exception("memory change listener failed")

    def _scope(self, as_of: TimeInput | None, known_at: TimeInput | None) -> TimeScope:
        return TimeScope.resolve(self._now(), as_of, known_at)

    def _classify(self, inputs: Sequence[FactInput], vectors: Vectors) -> list[Verdict | None]:
        """The LLM classifier's verdicts for the items it may decide (classify on, no explicit
        ``supersedes``, not a repeat that dedup will catch); None for the others. See
        :mod:`graphmem.classify`."""
        conn = self._db.reader()
        repeats = classify.repeats(conn, inputs, self._now(), self.settings.fuzzy_dedup)
        asked = [
            i
            for i, x in enumerate(inputs)
            if x.classify and x.supersedes is None and i not in repeats
        ]
        out: list[Verdict | None] = [None] * len(inputs)
        if not asked:
            return out
        if self._llm is None:
            self._llm = ChatClient.from_settings(self.settings)
        chosen = [inputs[i] for i in asked]
        neighbours = self._vectors.neighbours_many(
            vectors[asked], classify.SIMILAR_FACTS, live_only=True
        )
        similar = classify.similar_facts(conn, chosen, neighbours, self._now())
        verdicts = classify.classify(self._llm, chosen, similar, self.settings.llm_batch_size)
        for i, verdict in zip(asked, verdicts, strict=True):
            out[i] = verdict
        return out

    def _entity_facts(self, prompt: str, scope: TimeScope) -> list[Fact]:
        """The facts of every entity the prompt names (recall's entity lookup): up to
        ENTITY_FACTS each, most confident and newest first, in one query."""
        rows = (
            self._db.reader()
            .execute(
                f"""SELECT * FROM (
                SELECT f.*, row_number() OVER (PARTITION BY lower(f.entity) ORDER BY
                    f.confidence DESC, COALESCE(f.source_date, f.valid_from) DESC, f.seq DESC) AS n
                FROM facts f WHERE lower(f.entity) IN (SELECT value FROM json_each(:names))
                AND {scope.fact_clause()}
            ) WHERE n <= :per_entity ORDER BY n, seq""",
                {
                    "names": json.dumps(recalls.entity_names(prompt)),
                    "per_entity": recalls.ENTITY_FACTS,
                    **scope.params,
                },
            )
            .fetchall()
        )
        return [Fact.from_row(r) for r in rows]

    def _count_tokens(self) -> recalls.TokenCounter:
        if self.settings.recall_tokenizer is None:
            return recalls.chars_counter
        if self._token_counter is None:
            self._token_counter = recalls.tokenizer_counter(self.settings.recall_tokenizer)
        return self._token_counter

    def _count_facts(self) -> int:
        return int(self._db.reader().execute("SELECT count(*) FROM facts").fetchone()[0])

    def _count_vector_owners(self) -> int:
        sql = "SELECT count(*) FROM facts WHERE vector_of IS NULL"
        return int(self._db.reader().execute(sql).fetchone()[0])

    def _similar(
        self, vectors: Vectors, inputs: Sequence[FactInput], options: autolinks.Options
    ) -> tuple[list[str | int | None], list[list[autolinks.Neighbour]]]:
        """For each new vector: the live fact id, or the earlier batch position, that it
        near-duplicates (cosine ≥ vector_dedup_threshold), else None; and its candidates for
        similarity links (cosine ≥ the autolink threshold), most similar first."""
        dedup = self.settings.vector_dedup_threshold
        linking = [options.similarity_for(x) for x in inputs]
        # Two spare neighbours: the version a fact supersedes and a retracted one are skipped.
        k = options.max_similar + 2 if any(linking) else 1
        floor = min(dedup, options.threshold if any(linking) else dedup)
        twins: list[str | int | None] = [None] * len(vectors)
        similar: list[list[autolinks.Neighbour]] = [[] for _ in range(len(vectors))]
        if floor > 1.0:
            return twins, similar
        stored = self._vectors.neighbours_many(vectors, k, live_only=True, floor=floor)
        in_batch = autolinks.batch_neighbours(vectors, k, floor)
        for i in range(len(vectors)):
            merged = sorted([*stored[i], *in_batch[i]], key=lambda hit: -hit[1])
            if merged and merged[0][1] >= dedup:
                twins[i] = merged[0][0]
            if linking[i]:
                similar[i] = [hit for hit in merged if hit[1] >= options.threshold]
        return twins, similar

    def _fts_leg(
        self, conn: sqlite3.Connection, query: str, visible: str, params: dict[str, Any], n: int
    ) -> tuple[dict[str, float], dict[str, sqlite3.Row]]:
        """bm25 of the ``n`` best visible keyword matches (higher is better).

        The ranked matches (:class:`~graphmem.keyword.KeywordRanker`) are read in growing
        slices, each filtered for visibility, until ``n`` visible matches are found or the
        matches run out: ranking happens once however many invisible versions rank above the
        visible ones.
        """
        ranked = self._keywords.ranked(conn, query)
        scores: dict[str, float] = {}
        rows: dict[str, sqlite3.Row] = {}
        size = n
        while len(scores) < n:
            chunk = list(itertools.islice(ranked, size))
            if not chunk:
                break
            by_seq = {
                r["seq"]: r
                for r in _candidates(conn, "seq", [seq for seq, _ in chunk], visible, params)
            }
            for seq, rank in chunk:
                row = by_seq.get(seq)
                if row is not None and len(scores) < n:
                    rows[row["id"]] = row
                    scores[row["id"]] = -rank  # bm25: lower is better
            size *= 4
        ranked.close()
        return scores, rows

    def _limited(self, deadline: float | None, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` with its reads stopped at ``deadline`` (for work on pool threads)."""
        with self._db.time_limit(deadline):
            return fn(*args)

    def _vector_leg(
        self, query: str, visible: str, params: dict[str, Any], n: int, live_only: bool
    ) -> tuple[dict[str, float], dict[str, sqlite3.Row], Vectors]:
        """Cosine of the ``n`` most similar visible facts, widening the ANN search as needed;
        and the query's vector.

        Runs on a pool thread, with that thread's own read connection.
        """
        conn = self._db.reader()
        vector = self.embedder.embed([query])[0]
        total = self._vectors.count()
        k = n
        while True:
            hits = dict(self._vectors.nearest(vector, k, live_only=live_only))
            scores = dict(hits)
            for owner, dependant in _dependants(conn, hits.keys()):
                scores[dependant] = hits[owner]
            shown = _candidates(conn, "id", list(scores), visible, params)
            if len(shown) >= n or len(hits) < k or k >= total:
                break
            k = min(total, k * 4)
        shown.sort(key=lambda row: scores[row["id"]], reverse=True)
        best = shown[:n]
        return (
            {row["id"]: scores[row["id"]] for row in best},
            {row["id"]: row for row in best},
            vector,
        )

    def _track_access(self, ids: list[str]) -> None:
        """Count an access; facts in refreshable classes get their TTL restarted.

        Written without an fsync (``durable=False``): an access counter lost to a power cut or
        a crash is harmless, and search latency would otherwise include a disk flush. Written
        at most once per ``access_write_interval``: every write makes the readers drop their
        page caches, which costs the next search more than the write itself (4 ms at 100k
        facts). Accesses in between wait in memory and go out with the next write of any kind,
        the first search after the interval, or at close. Never waits for the writer: while
        another write holds it, they wait for the next chance.
        """
        if not self.settings.track_access:
            return
        now = self._now()
        with self._access_lock:
            for fact_id in ids:
                count, _ = self._accessed.get(fact_id, (0, now))
                self._accessed[fact_id] = (count + 1, now)
            due = now - self._accesses_written >= self.settings.access_write_interval
            if not self._accessed or not due:
                return
        transaction = self._db.try_write(durable=False)
        if transaction is not None:
            with transaction:
                pass  # the write's start hook (_flush_access) writes them

    def _flush_access(self, conn: sqlite3.Connection) -> None:
        """Write the accesses waiting in memory, in ``conn``'s transaction."""
        with self._access_lock:
            pending, self._accessed = self._accessed, {}
            if not pending:
                return
            self._accesses_written = self._now()
        classes = sorted(REFRESH_ON_ACCESS)
        refreshed = f"decay_class IN ({','.join(map(repr, classes))}) AND expires_at IS NOT NULL"
        restart = " ".join(f"WHEN '{c}' THEN :{c}" for c in classes)
        conn.executemany(
            f"""UPDATE facts SET access_count = access_count + :count, last_accessed_at = :at,
                last_confirmed_at = CASE WHEN {refreshed} THEN :at ELSE last_confirmed_at END,
                expires_at = CASE WHEN {refreshed}
                    THEN CASE decay_class {restart} END ELSE expires_at END
                WHERE id = :id""",
            [
                {"id": i, "count": n, "at": at, **{c: expiry(c, at) for c in classes}}
                for i, (n, at) in pending.items()
            ],
        )

    def _purge_ids(self, ids: Sequence[str]) -> int:
        """Delete facts, their links, references to them and their cached embeddings."""
        removed = 0
        now = self._now()
        touched: set[str] = set()
        gone: list[str] = []
        with self._db.write() as conn:
            for start in range(0, len(ids), _CHUNK):
                chunk = list(ids[start : start + _CHUNK])
                marks = ",".join("?" * len(chunk))
                found = conn.execute(
                    f"SELECT id, text FROM facts WHERE id IN ({marks})", chunk
                ).fetchall()
                gone.extend(r[0] for r in found)
                texts = [r[1] for r in found]
                dependants = [
                    r[0]
                    for r in conn.execute(
                        f"SELECT id FROM facts WHERE vector_of IN ({marks})", chunk
                    )
                ]
                removed += conn.execute(f"DELETE FROM facts WHERE id IN ({marks})", chunk).rowcount
                conn.execute(
                    f"DELETE FROM links WHERE source_id IN ({marks}) OR target_id IN ({marks})",
                    [*chunk, *chunk],
                )
                conn.execute(
                    f"UPDATE facts SET superseded_by = NULL WHERE superseded_by IN ({marks})", chunk
                )
                conn.execute(
                    f"UPDATE facts SET supersedes_id = NULL WHERE supersedes_id IN ({marks})", chunk
                )
                conn.execute(
                    f"UPDATE facts SET vector_of = NULL WHERE vector_of IN ({marks})", chunk
                )
                for text in texts:
                    if (
                        conn.execute("SELECT 1 FROM facts WHERE text = ?", [text]).fetchone()
                        is None
                    ):
                        conn.execute(
                            "DELETE FROM embedding_cache WHERE text_hash = ?", [text_hash(text)]
                        )
                touched.update(chunk, dependants)
            _queue(conn, touched, now)
        self._sync(touched)
        self._announce([("FACT_PURGED", i) for i in gone], now)
        return removed

    def _sync(self, ids: Iterable[str], known: Mapping[str, Vectors] | None = None) -> None:
        """Make LanceDB agree with SQLite for these facts, then clear their outbox rows.

        ``known`` holds vectors the caller already has (by fact id), saving cache lookups.
        One sync at a time: two writers' syncs interleaved could leave the older state of a
        fact in LanceDB. An outbox row queued again while this runs is left for the sync of
        the write that queued it. If LanceDB cannot be written (disk full, index damaged), the
        write that called this has still committed: the outbox keeps the rows, the failure is
        logged, and the next sync retries every pending row (as does the next ``open``).
        """
        ids = list(dict.fromkeys(ids))
        if not ids:
            return
        with self._sync_lock:
            if self._sync_failed:
                ids = list(dict.fromkeys([*ids, *self._pending_outbox()]))
            try:
                self._sync_chunks(ids, known or {})
            except (OSError, RuntimeError, ValueError, StorageError) as exc:
                self._sync_failed = True
                _log.error(
                    "namespace %r: the vector index could not be written (%s); its "
                    "outbox keeps the writes and retries them",
                    self.namespace,
                    exc,
                )
                return
            self._sync_failed = False

    def _sync_chunks(self, ids: list[str], known: Mapping[str, Vectors]) -> None:
        for start in range(0, len(ids), _SYNC_CHUNK):
            chunk = ids[start : start + _SYNC_CHUNK]
            conn = self._db.reader()
            marks = ",".join("?" * len(chunk))
            queued = conn.execute(
                f"SELECT fact_id, rowid FROM outbox WHERE fact_id IN ({marks})", chunk
            ).fetchall()
            found = _rows_by_id(conn, chunk, columns="id, vector_of")
            gone = [i for i in chunk if i not in found or found[i]["vector_of"] is not None]
            owner_ids = {found[i]["vector_of"] or i for i in chunk if i in found}
            owners = _vector_owners(conn, owner_ids)
            vectors = {i: known[i] for i in owners if i in known}
            missing = [i for i in owners if i not in vectors]
            vectors.update(self._expected_vectors(conn, missing, embed_missing=True))
            self._vectors.delete(gone)
            ordered = list(owners)
            if ordered:
                self._vectors.upsert(
                    ordered, np.stack([vectors[i] for i in ordered]), [owners[i] for i in ordered]
                )
            # Only the rows read above: one queued again since (a new rowid) stays for its own
            # sync. Not flushed to disk: a row that survives a power cut is replayed, harmlessly.
            with self._db.write(durable=False) as wconn:
                wconn.executemany(
                    "DELETE FROM outbox WHERE fact_id = ? AND rowid = ?",
                    [(r[0], r[1]) for r in queued],
                )

    def _pending_outbox(self) -> list[str]:
        return [r[0] for r in self._db.reader().execute("SELECT fact_id FROM outbox")]

    def _expected_vectors(
        self, conn: sqlite3.Connection, ids: list[str], *, embed_missing: bool = False
    ) -> dict[str, Vectors]:
        """The vector each fact should have in LanceDB: from the embedding cache, or embedded."""
        texts = _rows_by_id(conn, ids, columns="id, text")
        by_hash = {i: text_hash(r["text"]) for i, r in texts.items()}
        cached = self._cache.lookup(conn, list(by_hash.values()))
        out = {i: cached[h] for i, h in by_hash.items() if h in cached}
        todo = [i for i in by_hash if i not in out]
        if todo and embed_missing:
            vectors, fresh = self._cache.embed(conn, [texts[i]["text"] for i in todo])
            with self._db.write() as wconn:
                self._cache.store(wconn, fresh, self._now())
            out.update(zip(todo, vectors, strict=True))
        return out


# --------------------------------------------------------------------------------- helpers


def check_namespace(name: str) -> str:
    """``name`` if it can name a namespace (its directory), else InvalidInput."""
    if not isinstance(name, str) or not _NAMESPACE.match(name):
        raise InvalidInput(
            f"invalid namespace {name!r}: 1-64 letters, digits, '_', '-' or '.', "
            "starting with a letter or digit",
            field="namespace",
        )
    return name


def _describe(embedder: Mapping[str, Any]) -> str:
    return f"{embedder['provider']}/{embedder['model']} ({embedder['dimensions']} dims)"


def _read_meta(db: Database, key: str) -> dict[str, Any] | None:
    row = db.reader().execute("SELECT value FROM meta WHERE key = ?", [key]).fetchone()
    return None if row is None else dict(json.loads(row[0]))


def _check_limit(limit: int) -> None:
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"limit must be an integer from 1 to {MAX_LIMIT}", field="limit")


def _tag_clause(tag: str, params: dict[str, Any]) -> str:
    params["tag_pattern"] = "%," + tag.strip().lower().replace("%", "").replace("_", "\\_") + ",%"
    return "(',' || f.tags || ',') LIKE :tag_pattern ESCAPE '\\'"


def _filters(
    scope: TimeScope,
    params: dict[str, Any],
    include_superseded: bool,
    tag: str | None,
    category: str | None,
    entity: str | None,
    source: str | None,
) -> str:
    """The SQL condition on ``facts f`` of a filtered read in ``scope``; fills ``params``."""
    where = [scope.fact_clause(include_superseded=include_superseded)]
    if category is not None:
        where.append("f.category = :category")
        params["category"] = category.lower()
    if entity is not None:
        where.append("lower(f.entity) = lower(:entity)")
        params["entity"] = entity
    if source is not None:
        where.append("f.source = :source")
        params["source"] = source
    if tag is not None:
        where.append(_tag_clause(tag, params))
    return " AND ".join(where)


def _row(conn: sqlite3.Connection, fact_id: str) -> sqlite3.Row | None:
    row: sqlite3.Row | None = conn.execute("SELECT * FROM facts WHERE id = ?", [fact_id]).fetchone()
    return row


def _rows_by_id(
    conn: sqlite3.Connection, ids: Iterable[str], columns: str = "*"
) -> dict[str, sqlite3.Row]:
    ids = list(ids)
    out: dict[str, sqlite3.Row] = {}
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start : start + _CHUNK]
        for row in conn.execute(
            f"SELECT {columns} FROM facts WHERE id IN ({','.join('?' * len(chunk))})", chunk
        ):
            out[row["id"]] = row
    return out


_CANDIDATE_COLUMNS: Final = (
    "f.id, f.seq, f.importance, f.confidence, f.expires_at, f.last_confirmed_at, f.decay_class,"
    " f.source_date, f.valid_from"
)


def _visible_rows(
    conn: sqlite3.Connection, ids: Sequence[str], visible: str, params: dict[str, Any]
) -> dict[str, sqlite3.Row]:
    """Every column of the facts among ``ids`` that satisfy ``visible``, by id."""
    if not ids:
        return {}
    rows = conn.execute(
        f"SELECT f.* FROM facts f WHERE f.id IN (SELECT value FROM json_each(:ids)) AND {visible}",
        {**params, "ids": json.dumps(list(ids))},
    )
    return {r["id"]: r for r in rows}


def _candidates(
    conn: sqlite3.Connection,
    column: str,
    values: Sequence[Any],
    visible: str,
    params: dict[str, Any],
) -> list[sqlite3.Row]:
    """The visible facts among those whose ``column`` is in ``values``, with the columns that
    ranking needs."""
    out: list[sqlite3.Row] = []
    for start in range(0, len(values), _CHUNK):
        chunk = values[start : start + _CHUNK]
        names = {f"c{n}": v for n, v in enumerate(chunk)}
        out.extend(
            conn.execute(
                f"SELECT {_CANDIDATE_COLUMNS} FROM facts f"
                f" WHERE f.{column} IN ({','.join(':' + k for k in names)}) AND {visible}",
                {**params, **names},
            )
        )
    return out


def _dependants(conn: sqlite3.Connection, owners: Iterable[str]) -> list[tuple[str, str]]:
    """(owner, fact) pairs for facts that share an owner's vector."""
    owners = list(owners)
    out: list[tuple[str, str]] = []
    for start in range(0, len(owners), _CHUNK):
        chunk = owners[start : start + _CHUNK]
        out.extend(
            conn.execute(
                f"SELECT vector_of, id FROM facts WHERE vector_of IN ({','.join('?' * len(chunk))})",
                chunk,
            ).fetchall()
        )
    return out


def _vector_owners(conn: sqlite3.Connection, ids: Iterable[str] | None = None) -> dict[str, bool]:
    """Facts that own a LanceDB row, each with its live flag: it, or a fact sharing its vector,
    is neither retracted nor superseded."""
    sql = """
        SELECT o.id, EXISTS (
            SELECT 1 FROM facts s WHERE (s.id = o.id OR s.vector_of = o.id)
              AND s.retracted_at IS NULL AND s.superseded_by IS NULL
        ) FROM facts o WHERE o.vector_of IS NULL"""
    if ids is None:
        return {r[0]: bool(r[1]) for r in conn.execute(sql + " ORDER BY o.seq")}
    wanted = list(ids)
    out: dict[str, bool] = {}
    for start in range(0, len(wanted), _CHUNK):
        chunk = wanted[start : start + _CHUNK]
        out.update(
            (r[0], bool(r[1]))
            for r in conn.execute(sql + f" AND o.id IN ({','.join('?' * len(chunk))})", chunk)
        )
    return out


def _queue(conn: sqlite3.Connection, ids: Iterable[str], now: float) -> None:
    conn.executemany(
        "INSERT OR REPLACE INTO outbox (fact_id, queued_at) VALUES (?, ?)",
        [(i, now) for i in ids],
    )
