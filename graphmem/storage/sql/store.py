"""The store both engines share: the SQL of every read and write, in both engines' dialects.

``SQLStore`` implements :class:`graphmem.storage.interface.Store` over a namespace's
connections (:class:`graphmem.storage.sql.connections.Connections`); each engine's store
subclasses it with what differs — the clock and transaction time, keyword ranking, and
opening the database (:mod:`graphmem.storage.sqlite.store`, :mod:`graphmem.storage.postgres.store`).
What the engines spell differently, the statements take from ``conn.dialect``
(:mod:`graphmem.storage.sql.dialect`).
Writes run in a ``SQLTransaction``, which stamps transaction time once the writer is held, so
``recorded_at`` follows commit order.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import IO, Any, Concatenate, Final, Generic, ParamSpec, TypeVar

import numpy as np

from ... import analytics, graph
from ...decay import REFRESH_ON_ACCESS, expiry
from ...documents import DocumentFile
from ...episodes import Episode, EpisodeInput
from ...erasure import PurgeFilter, PurgeReport
from ...errors import Conflict, NotFound
from ...ids import new_id, text_hash
from ...limits import CHANGE_LOG_KEPT
from ...models import Fact, Link, LinkOrigin, RunStatus, Tier, Vectors
from ...temporal import TimeInput, TimeScope
from ..interface import (
    BatchChanges,
    Counts,
    EntitySignature,
    Filters,
    ImportReport,
    ImportRules,
    Purged,
    Record,
    SoftDecay,
    Store,
    Transaction,
)
from . import analytics as sql_analytics
from . import entities as sql_entities
from . import episodes as sql_episodes
from . import erasure as sql_erasure
from . import keyword_index, links, reads, transfer, traversal
from . import maintenance as sql_maintenance
from . import profiles as sql_profiles
from . import windows as sql_windows
from .connections import Connections, SQLConnection
from .dialect import Dialect
from .graph_copy import GraphCopy, prune_graph_log
from .params import id_list

#: The connections of the store's engine.
D = TypeVar("D", bound="Connections[Any]")

#: Vector log entries kept: a process that falls further behind reloads its in-memory copy of
#: the vector index whole.
VECTOR_LOG_KEPT: Final = 100_000


_FILE_COLUMNS: Final = "path, hash, mtime, size, chunks, synced_at, imported, inode"


def _ageing(d: Dialect) -> str:
    """The condition under which an ageing fact loses confidence (soft decay), on ``facts``."""
    now = d.param("now")
    return (
        f"expires_at IS NOT NULL AND expires_at > {now} AND last_confirmed_at IS NOT NULL"
        f" AND ({now} - last_confirmed_at) > (expires_at - last_confirmed_at) * {d.param('after')}"
        f" AND confidence > {d.param('floor')}"
    )


_FACT_COLUMNS: Final = (
    "id",
    "text",
    "category",
    "importance",
    "entity",
    "key",
    "value",
    "source",
    "tags",
    "summary",
    "why",
    "context",
    "date_terms",
    "decay_class",
    "expires_at",
    "confidence",
    "last_confirmed_at",
    "normalized_hash",
    "source_date",
    "valid_from",
    "valid_until",
    "valid_until_recorded_at",
    "recorded_at",
    "superseded_by",
    "supersedes_id",
    "vector_of",
    "episode_id",
)
#: Columns a new fact sets only when it has them (a new version of a pinned fact is pinned
#: too; the time its text states): left to their defaults otherwise, so that a write names no
#: column it does not need.
_OPTIONAL_FACT_COLUMNS: Final[tuple[tuple[str, ...], ...]] = (
    ("pinned_at",),
    ("stated_start", "stated_end", "stated_text"),
)


def _insert_fact(d: Dialect, optional: tuple[tuple[str, ...], ...]) -> str:
    """The INSERT of a new fact with the ``optional`` column groups besides the others."""
    names = [*_FACT_COLUMNS, *(c for group in optional for c in group)]
    values = ", ".join(d.param(c) for c in names)
    return f"INSERT INTO facts ({', '.join(names)}) VALUES ({values})"


def _append_log(conn: SQLConnection, into: str, rows: Sequence[tuple[Any, ...]], kept: int) -> int:
    """Append ``rows`` to a log (``into``: its table and columns, ``seq`` first, given here) at
    the positions after its newest entry, drop the entries beyond the newest ``kept``, and
    return the position of the last one. The caller holds the namespace's write lock.

    Positions are given, not drawn from the table's own counter, so that a namespace's are
    consecutive: a PostgreSQL identity column counts every namespace of the database, and a
    follower reads a gap as entries pruned before it read them."""
    d = conn.dialect
    table = into.split()[0]
    (last,) = conn.execute(f"SELECT coalesce(max(seq), 0) FROM {table}").fetchone()
    marks = ", ".join([d.arg] * (into.count(",") + 1))
    conn.executemany(
        f"INSERT INTO {into} VALUES ({marks})",
        [(last + n, *row) for n, row in enumerate(rows, 1)],
    )
    end = int(last) + len(rows)
    conn.execute(f"DELETE FROM {table} WHERE seq <= {d.arg}", [end - kept])
    return end


class SQLTransaction(Transaction):
    """One write transaction: every change made through it commits together, at ``now``."""

    def __init__(
        self,
        conn: SQLConnection,
        stamp: Callable[[SQLConnection], float],
        path: Path | str,
    ) -> None:
        self.conn = conn
        self._stamp = stamp
        self._path = path
        self._now: float | None = None

    @property
    def now(self) -> float:
        """Transaction time of everything this transaction writes, taken from the store when
        first asked for (a transaction that records no time takes none)."""
        if self._now is None:
            self._now = self._stamp(self.conn)
        return self._now

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        self.conn.execute("SAVEPOINT part")
        try:
            yield
        except BaseException:
            self.conn.execute("ROLLBACK TO part")
            raise
        finally:
            self.conn.execute("RELEASE part")

    # the write path's reads

    def live_by_hash(self, hashes: Sequence[str]) -> list[dict[str, Any]]:
        """The facts live now with one of these normalised hashes, in recorded order."""
        d = self.conn.dialect
        scope = TimeScope(self.now, self.now)
        rows = self.conn.execute(
            f"SELECT * FROM facts f WHERE {d.in_list('f.normalized_hash', d.param('ids'))}"
            f" AND {scope.fact_clause(param=d.param)} ORDER BY f.seq",
            {"ids": id_list(hashes), **scope.params},
        )
        return [dict(r) for r in rows]

    def current_by_key(self, pairs: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
        """The facts live now with one of these (entity, key) pairs, ASCII lower-cased (each
        engine reads the pairs its own way)."""
        raise NotImplementedError

    def fact_row(self, fact_id: str) -> dict[str, Any] | None:
        """Every column of a fact, whatever its state."""
        row = reads.row(self.conn, fact_id)
        return None if row is None else dict(row)

    def is_live(self, fact_id: str) -> bool:
        """Whether a read now would see the fact."""
        return reads.get(self.conn, fact_id, TimeScope(self.now, self.now)) is not None

    def live_ids(self, ids: Sequence[str]) -> set[str]:
        """The facts among ``ids`` neither retracted nor superseded."""
        d = self.conn.dialect
        rows = self.conn.execute(
            f"SELECT id FROM facts WHERE {d.in_list('id', d.param('ids'))}"
            " AND retracted_at IS NULL AND superseded_by IS NULL",
            {"ids": id_list(ids)},
        )
        return {r[0] for r in rows}

    def recent_same_entity(self, fact_id: str, k: int) -> list[str]:
        """The ``k`` most recently stored live facts naming the entity of ``fact_id``, before
        it."""
        d = self.conn.dialect
        rows = self.conn.execute(
            f"SELECT o.id FROM facts f JOIN facts o ON {d.lower_entity('o')} ="
            f" {d.lower_entity('f')}"
            " AND o.entity IS NOT NULL AND o.seq < f.seq AND o.retracted_at IS NULL"
            " AND o.superseded_by IS NULL"
            f" WHERE f.id = {d.arg} ORDER BY o.seq DESC {d.limit(d.arg)}",
            [fact_id, k],
        )
        return [r[0] for r in rows]

    def valid_from(self, ids: Iterable[str]) -> dict[str, float]:
        rows = reads.rows_by_id(self.conn, sorted(ids), "id, valid_from")
        return {i: r["valid_from"] for i, r in rows.items()}

    # writes

    def apply(self, changes: BatchChanges) -> None:
        """Write a stored batch: its facts (and their keyword index entries), supersessions,
        retractions and SUPERSEDES links."""
        d = self.conn.dialect
        conn = self.conn
        # Inserted in the batch's order (runs of rows with the same columns at once): a fact's
        # seq is its place in its episode (episode_facts, the chain, windows of turns).
        runs: list[tuple[tuple[tuple[str, ...], ...], list[dict[str, Any]]]] = []
        for row in changes.inserts:
            groups = tuple(g for g in _OPTIONAL_FACT_COLUMNS if row.get(g[0]) is not None)
            if runs and runs[-1][0] == groups:
                runs[-1][1].append(row)
            else:
                runs.append((groups, [row]))
        with keyword_index.indexing(conn):
            for groups, rows in runs:
                conn.executemany(_insert_fact(conn.dialect, groups), rows)
        sql_entities.count_in(conn, changes.inserts, self.now)
        conn.executemany(
            f"UPDATE facts SET valid_until = {d.arg}, valid_until_recorded_at = {d.arg},"
            f" superseded_by = {d.arg}"
            f" WHERE id = {d.arg}",
            changes.supersessions,
        )
        conn.executemany(
            f"UPDATE facts SET retracted_at = {d.arg} WHERE id = {d.arg}", changes.retractions
        )
        conn.executemany(
            "INSERT INTO links (id, source_id, target_id, type, strength, origin, recorded_at,"
            f" valid_from) VALUES ({d.arg}, {d.arg}, {d.arg}, 'SUPERSEDES', 1.0,"
            f" '{LinkOrigin.SUPERSESSION}', {d.arg}, {d.arg})",
            [(new_id(), *link) for link in changes.links],
        )
        conn.executemany(
            f"UPDATE facts SET supersedes_id = {d.arg}"
            f" WHERE id = {d.arg} AND supersedes_id IS NULL",
            changes.back_links,
        )

    def add_links(
        self,
        links: Sequence[tuple[str, str, str, float, str, float]],
        metadata: Sequence[Mapping[str, Any]] | None = None,
    ) -> None:
        d = self.conn.dialect
        extra = [json.dumps(m, sort_keys=True) for m in metadata or [{}] * len(links)]
        self.conn.executemany(
            "INSERT INTO links (id, source_id, target_id, type, strength, origin, recorded_at,"
            f" valid_from, metadata) VALUES ({d.arg}, {d.arg}, {d.arg}, {d.arg}, {d.arg}, {d.arg},"
            f" {d.arg}, {d.arg}, {d.arg})"
            f" {self.conn.dialect.on_conflict('source_id, target_id, type')}"
            " WHERE retracted_at IS NULL DO UPDATE"
            " SET origin = excluded.origin, strength = excluded.strength"
            f" WHERE excluded.origin = '{LinkOrigin.EPISODE}'",
            [
                (new_id(), s, t, kind, w, o, self.now, v, m)
                for (s, t, kind, w, o, v), m in zip(links, extra, strict=True)
            ],
        )

    def retract(self, fact_id: str) -> Fact:
        """Retract a live fact; returns it as it was. NotFound, or Conflict if retracted."""
        d = self.conn.dialect
        row = reads.row(self.conn, fact_id)
        if row is None:
            raise NotFound(f"no fact with id {fact_id!r}")
        if row["retracted_at"] is not None:
            raise Conflict(f"fact {fact_id} was already forgotten")
        self.conn.execute(
            f"UPDATE facts SET retracted_at = {d.arg} WHERE id = {d.arg}", [self.now, fact_id]
        )
        return Fact.from_row(row)

    def set_tier(self, fact_id: str, tier: Tier, *, only_from: Tier | None = None) -> Fact:
        """Put a live fact in ``tier`` (pinned, normal or cold; a pin's or a chill's time is now,
        kept when it was there already), unless ``only_from`` names a tier it is not in; returns
        it as it is after. NotFound if unknown, Conflict if it is no longer live (forgotten or
        superseded)."""
        d = self.conn.dialect
        row = reads.row(self.conn, fact_id)
        if row is None:
            raise NotFound(f"no fact with id {fact_id!r}")
        if row["retracted_at"] is not None or row["superseded_by"] is not None:
            raise Conflict(f"fact {fact_id} is no longer live; change its current version")
        now_in = (
            "pinned" if row["pinned_at"] is not None else "cold" if row["cold_at"] else "normal"
        )
        if now_in == tier or (only_from is not None and now_in != only_from):
            return Fact.from_row(row)
        self.conn.execute(
            f"UPDATE facts SET pinned_at = {d.arg}, cold_at = {d.arg} WHERE id = {d.arg}",
            [self.now if tier == "pinned" else None, self.now if tier == "cold" else None, fact_id],
        )
        updated = reads.row(self.conn, fact_id)
        assert updated is not None
        return Fact.from_row(updated)

    def purge(self, ids: Sequence[str]) -> Purged:
        """Delete facts for good: their rows, links, references to them and the cached
        embeddings of texts no other fact has."""
        d = self.conn.dialect
        conn, param = self.conn, {"ids": id_list(ids)}
        found = conn.execute(
            f"SELECT id, text FROM facts WHERE {d.in_list('id', d.param('ids'))}", param
        ).fetchall()
        gone = [r[0] for r in found]
        dependants = [
            r[0]
            for r in conn.execute(
                f"SELECT id FROM facts WHERE {d.in_list('vector_of', d.param('ids'))}", param
            )
        ]
        (vectors,) = conn.execute(
            f"SELECT count(*) FROM facts WHERE {d.in_list('id', d.param('ids'))} AND vector_of IS"
            " NULL",
            param,
        ).fetchone()
        touched_episodes = [
            r[0]
            for r in conn.execute(
                f"SELECT DISTINCT episode_id FROM facts WHERE {d.in_list('id', d.param('ids'))}"
                " AND episode_id IS NOT NULL",
                param,
            )
        ]
        named = sql_entities.names_of(conn, ids)
        removed = conn.execute(
            f"DELETE FROM facts WHERE {d.in_list('id', d.param('ids'))}", param
        ).rowcount
        # No entity name or declaration keeps a name only the erased facts carried.
        sql_entities.recount(conn, named)
        # No summary of a profile keeps what an erased fact said.
        sql_profiles.forget(conn, ids)
        links = conn.execute(
            f"DELETE FROM links WHERE {d.in_list('source_id', d.param('ids'))} OR"
            f" {d.in_list('target_id', d.param('ids'))}",
            param,
        ).rowcount
        # No window keeps an erased text: the episodes' windows are cut again without it.
        sql_windows.rebuild(conn, touched_episodes)
        emptied = conn.execute(
            f"DELETE FROM episodes WHERE {d.in_list('id', d.arg)}"
            " AND NOT EXISTS (SELECT 1 FROM facts f WHERE f.episode_id = episodes.id)",
            [id_list(touched_episodes)],
        ).rowcount
        # A document missing a chunk is indexed again from its file at the next sync.
        conn.execute(
            f"DELETE FROM files WHERE {d.in_list('path', d.arg)}",
            [id_list(touched_episodes)],
        )
        for column in ("superseded_by", "supersedes_id", "vector_of"):
            conn.execute(
                f"UPDATE facts SET {column} = NULL WHERE {d.in_list(column, d.param('ids'))}", param
            )
        orphaned = {text_hash(r[1]) for r in found} - {
            text_hash(r[0])
            for r in conn.execute(
                f"SELECT text FROM facts WHERE {d.in_list('text', d.param('texts'))}",
                {"texts": id_list(r[1] for r in found)},
            )
        }
        conn.execute(
            f"DELETE FROM embedding_cache WHERE {d.in_list('text_hash', d.arg)}",
            [id_list(orphaned)],
        )
        return Purged(removed, gone, [*ids, *dependants], links, int(vectors), emptied)

    def purge_where(self, where: PurgeFilter) -> Purged:
        """Purge the facts ``where`` matches and record the erasure (see ``purge``): a purge
        that matched nothing erased nothing, and leaves no record. Once no fact carries a name
        of the entity it names, the declarations ``where.declared`` go too."""
        purged = self.purge(sql_erasure.matching(self.conn, where))
        if purged.removed:
            sql_entities.forget(self.conn, where.declared, unless=where.entity_names)
            report = PurgeReport(purged.removed, purged.links, purged.vectors, purged.episodes)
            sql_erasure.record(self.conn, self.now, where, report)
        return purged

    def import_lines(
        self, lines: Iterable[str], rules: ImportRules
    ) -> tuple[ImportReport, list[str]]:
        """Load an export (:func:`graphmem.storage.sql.transfer.import_rows`), and cut the
        windows of the episodes it adds facts to; returns the new fact ids."""
        report, ids = transfer.import_rows(self.conn, lines, rules)
        sql_windows.rebuild(self.conn, sql_windows.episodes(self.conn, of=ids))
        return report, ids

    # entities

    def entity_declarations(self) -> list[tuple[int, str, str, str, float, float | None]]:
        return sql_entities.aliases(self.conn)

    def declare_entity(
        self, kind: str | None, name: str, target: str, *, retract: Sequence[int] = ()
    ) -> None:
        sql_entities.declare(self.conn, kind, name, target, self.now, retract=retract)

    def rebuild_entities(self) -> int:
        return sql_entities.rebuild(self.conn)

    def keep_profile_summary(
        self,
        entity: str,
        signature: str,
        text: str,
        cited: Sequence[str],
        shown: Sequence[str],
    ) -> bool:
        return sql_profiles.keep(self.conn, entity, signature, text, cited, shown, self.now)

    # links

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
    ) -> Link:
        fields: dict[str, Any] = {"source_id": source_id, "target_id": target_id, "type": type}
        fields |= {"strength": strength, "valid_from": valid_from, "valid_until": valid_until}
        return links.link_many(self.conn, self.now, [{**fields, "metadata": metadata}])[0]

    def link_many(self, items: Sequence[Mapping[str, Any]]) -> list[Link]:
        return links.link_many(self.conn, self.now, items)

    def unlink(self, link_id: str) -> Link:
        return links.unlink(self.conn, self.now, link_id)

    # episodes

    def episode(self, given: EpisodeInput) -> Episode:
        """The episode ``given`` names, recorded now if new (Conflict if it differs)."""
        return sql_episodes.resolve(self.conn, self.now, given)

    def episode_chain(self, episode_id: str, fact_ids: Sequence[str]) -> list[tuple[str, str]]:
        """(newer, older) pairs linking the episode's new facts to the fact before each."""
        return sql_episodes.chain(self.conn, episode_id, fact_ids)

    def add_windows(self, episode_id: str, facts: Sequence[tuple[str, str]]) -> int:
        return sql_windows.add(self.conn, episode_id, facts)

    def rebuild_windows(self, episode_ids: Sequence[str]) -> int:
        return sql_windows.rebuild(self.conn, episode_ids)

    # documents

    def current_chunks(self, episode_id: str) -> list[str]:
        d = self.conn.dialect
        return [
            r[0]
            for r in self.conn.execute(
                f"SELECT id FROM facts WHERE episode_id = {d.arg} AND retracted_at IS NULL"
                " AND valid_until IS NULL ORDER BY seq",
                [episode_id],
            )
        ]

    def put_document(self, document: DocumentFile) -> None:
        """Record what a file was at this sync (replacing the record of the last one)."""
        d = self.conn.dialect
        self.conn.execute(
            d.upsert(
                "files",
                _FILE_COLUMNS,
                f"VALUES ({d.arg}, {d.arg}, {d.arg}, {d.arg}, {d.arg}, {d.arg}, {d.arg}, {d.arg})",
                ("path",),
            ),
            [
                document.path,
                document.hash,
                document.mtime,
                document.size,
                document.chunks,
                document.synced_at,
                int(document.imported),
                document.inode,
            ],
        )

    def drop_document(self, path: str) -> None:
        d = self.conn.dialect
        self.conn.execute(f"DELETE FROM files WHERE path = {d.arg}", [path])

    # bookkeeping

    def queue_vectors(self, ids: Iterable[str]) -> None:
        """Queue the facts whose vector must be brought in line with the store (the outbox)."""
        d = self.conn.dialect
        self.conn.executemany(
            d.upsert(
                "outbox",
                "fact_id, queued_at",
                f"VALUES ({d.arg}, {d.arg})",
                ("fact_id",),
                renumber=True,
            ),
            [(i, self.now) for i in ids],
        )

    def vectors_synced(self, queued: Sequence[tuple[str, int]]) -> None:
        """Clear outbox rows (as ``outbox`` returned them) once the vector index agrees."""
        d = self.conn.dialect
        self.conn.executemany(
            f"DELETE FROM outbox WHERE fact_id = {d.arg} AND {self.conn.dialect.rowid} = {d.arg}",
            queued,
        )

    def log_vectors(self, ids: Sequence[str], states: Sequence[int] | None = None) -> int:
        last = _append_log(
            self.conn,
            "vector_log (seq, fact_id, state)",
            list(zip(ids, states if states is not None else [None] * len(ids), strict=True)),
            VECTOR_LOG_KEPT,
        )
        prune_graph_log(self.conn)  # the other log kept by writers, pruned as often
        return last

    def log_changes(self, changes: Sequence[tuple[str, str]], origin: str) -> None:
        if changes:
            rows = [(kind, item, self.now, origin) for kind, item in changes]
            _append_log(
                self.conn, "change_log (seq, kind, item, changed_at, origin)", rows, CHANGE_LOG_KEPT
            )

    def clear_outbox(self) -> None:
        self.conn.execute("DELETE FROM outbox")

    def cache_vectors(
        self, provider: str, model: str, dimensions: int, fresh: Sequence[tuple[str, Vectors]]
    ) -> None:
        """Keep newly computed embeddings by (provider, model, text hash)."""
        d = self.conn.dialect
        self.conn.executemany(
            d.upsert(
                "embedding_cache",
                "provider, model, text_hash, dims, vector, created_at",
                f"VALUES ({d.arg}, {d.arg}, {d.arg}, {d.arg}, {d.arg}, {d.arg})",
                ("provider", "model", "text_hash"),
            ),
            [
                (provider, model, h, dimensions, v.astype("<f4").tobytes(), self.now)
                for h, v in fresh
            ],
        )

    def claim_run(self, job: str, lease: float) -> int | None:
        return sql_maintenance.claim(self.conn, job, self.now, lease)

    def finish_run(
        self,
        run: int,
        status: RunStatus,
        changed: Mapping[str, int],
        requests: int,
        error: str | None,
    ) -> None:
        sql_maintenance.finish(self.conn, run, self.now, status, changed, requests, error)

    def set_meta(self, key: str, value: Mapping[str, Any]) -> None:
        d = self.conn.dialect
        self.conn.execute(
            d.upsert("meta", "key, value", f"VALUES ({d.arg}, {d.arg})", ("key",)),
            [key, json.dumps(value, sort_keys=True)],
        )

    def record_accesses(self, accesses: Mapping[str, tuple[int, float]]) -> None:
        """Add each fact's accesses (id -> (count, last time)); facts in a class refreshed on
        access have their TTL restarted from that time."""
        d = self.conn.dialect
        classes = sorted(REFRESH_ON_ACCESS)
        refreshed = f"decay_class IN ({','.join(map(repr, classes))}) AND expires_at IS NOT NULL"
        restart = " ".join(f"WHEN '{c}' THEN {d.param(c)}" for c in classes)
        at = d.param("at")
        self.conn.executemany(
            f"""UPDATE facts SET access_count = access_count + {d.param("count")},
                last_accessed_at = {at},
                last_confirmed_at = CASE WHEN {refreshed} THEN {at} ELSE last_confirmed_at END,
                expires_at = CASE WHEN {refreshed}
                    THEN CASE decay_class {restart} END ELSE expires_at END
                WHERE id = {d.param("id")}""",
            [
                {"id": i, "count": n, "at": at, **{c: expiry(c, at) for c in classes}}
                for i, (n, at) in accesses.items()
            ],
        )

    def soft_decay(self, rule: SoftDecay) -> int:
        """Lower the confidence of ageing facts (past ``rule.after`` of their TTL)."""
        d = self.conn.dialect
        return int(
            self.conn.execute(
                f"UPDATE facts SET confidence = confidence * {d.param('factor')}"
                f" WHERE {_ageing(d)}",
                _decay_args(self.now, rule),
            ).rowcount
        )

    def set_stated(
        self, changes: Sequence[tuple[float | None, float | None, str | None, str]]
    ) -> None:
        d = self.conn.dialect
        self.conn.executemany(
            f"UPDATE facts SET stated_start = {d.arg}, stated_end = {d.arg}, stated_text = {d.arg}"
            f" WHERE id = {d.arg}",
            changes,
        )

    def set_categories(self, changes: Sequence[tuple[str, str]]) -> None:
        d = self.conn.dialect
        self.conn.executemany(
            f"UPDATE facts SET category = {d.arg} WHERE id = {d.arg} AND category = 'other'",
            [(category, fact_id) for fact_id, category in changes],
        )

    def set_decay_classes(self, changes: Sequence[tuple[str, float | None, str]]) -> None:
        """(decay class, expiry, fact id) for each fact that moves to another class."""
        d = self.conn.dialect
        self.conn.executemany(
            f"UPDATE facts SET decay_class = {d.arg}, expires_at = {d.arg} WHERE id = {d.arg}",
            changes,
        )


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _on_reader(
    read: Callable[Concatenate[SQLConnection, _P], _R],
) -> Callable[Concatenate[SQLStore[Any], _P], _R]:
    """The store's method that is ``read`` (a read of this package, taking the connection
    first) run on this thread's read connection: its other parameters are the method's, which
    mypy checks against the role's."""

    def method(store: SQLStore[Any], /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        return read(store._read(), *args, **kwargs)

    return method


class SQLStore(Store, Generic[D]):
    """A namespace's facts, links, keyword index, outbox, embedding cache and meta, on the
    connections ``D`` of one engine. Subclasses give the clock (``now``), transaction time
    (``_stamp``) and keyword ranking (``keyword_matches``)."""

    def __init__(self, db: D, *, graph_in_memory: bool = True) -> None:
        self._db = db
        self._graph = GraphCopy(db.reader, enabled=graph_in_memory)

    @property
    def database(self) -> D:
        return self._db

    # ------------------------------------------------------------------------- lifecycle

    @property
    def closed(self) -> bool:
        return self._db.closed

    def close(self) -> None:
        self._graph.close()
        self._db.close()

    def now(self) -> float:
        """The store's clock (epoch seconds, to the microsecond)."""
        raise NotImplementedError

    def shared_vector_lock(self) -> Callable[[], AbstractContextManager[None]] | None:
        return None

    @contextmanager
    def transaction(self, *, durable: bool = True) -> Iterator[SQLTransaction]:
        """A write transaction: commits when the block ends, rolls back if it raises.
        ``durable=False`` skips the flush to disk (bookkeeping a crash may lose harmlessly)."""
        with self._db.write(durable=durable) as conn:
            yield self._transaction(conn)

    def try_transaction(
        self, *, durable: bool = True
    ) -> AbstractContextManager[SQLTransaction] | None:
        """``transaction``, or None at once if another write is under way."""
        held = self._db.try_write(durable=durable)
        return None if held is None else self._joined(held)

    def on_transaction(self, hook: Callable[[Transaction], None]) -> None:
        """Call ``hook`` at the start of every write transaction (to add pending bookkeeping)."""
        self._db.on_write = lambda conn: hook(self._transaction(conn))

    def snapshot(self) -> AbstractContextManager[object]:
        """Inside the block, this thread's reads all see one state of the store."""
        return self._db.snapshot()

    def time_limit(self, deadline: float | None) -> AbstractContextManager[None]:
        """Stop this thread's reads once ``time.monotonic()`` passes ``deadline``."""
        return self._db.time_limit(deadline)

    def unlimited(self) -> AbstractContextManager[None]:
        """No read deadline for this thread inside the block (see ``Connections.unlimited``)."""
        return self._db.unlimited()

    @property
    def deadline(self) -> float | None:
        return self._db.deadline

    def meta(self, key: str) -> dict[str, Any] | None:
        conn = self._read()
        row = conn.execute(
            f"SELECT value FROM meta WHERE key = {conn.dialect.arg}", [key]
        ).fetchone()
        return None if row is None else dict(json.loads(row[0]))

    # ------------------------------------------------------------------------- facts

    get = _on_reader(reads.get)

    def get_many(
        self, ids: Iterable[str], scope: TimeScope, *, include_superseded: bool = False
    ) -> dict[str, Fact]:
        return reads.get_many(self._read(), ids, scope, include_superseded=include_superseded)

    known_now = _on_reader(reads.known_now)
    purge_count = _on_reader(sql_erasure.count)
    erasures = _on_reader(sql_erasure.listing)
    maintenance_runs = _on_reader(sql_maintenance.runs)
    last_runs = _on_reader(sql_maintenance.last_runs)

    def scrub(self) -> bool:
        return self._db.scrub()

    def analyze(self) -> None:
        self._db.analyze()

    episode = _on_reader(sql_episodes.get)
    episodes = _on_reader(sql_episodes.listing)
    episode_facts = _on_reader(sql_episodes.facts)

    def documents(self, scopes: Sequence[str]) -> list[DocumentFile]:
        found: dict[str, DocumentFile] = {}
        conn = self._read()
        d = conn.dialect
        for scope in dict.fromkeys(scopes):
            folder = scope.rstrip("/")
            rows = conn.execute(
                f"SELECT {_FILE_COLUMNS} FROM files WHERE path = {d.arg}"
                f" OR (path > {d.arg} || '/' AND path < {d.arg} || '0')",
                [scope, folder, folder],
            )
            found.update((r[0], _document(r)) for r in rows)
        return [found[p] for p in sorted(found)]

    page = _on_reader(reads.page)

    lookup = _on_reader(reads.lookup)
    entity_facts = _on_reader(reads.entity_facts)
    latest = _on_reader(reads.latest)
    pinned = _on_reader(reads.pinned)

    def drawn_from(self, ids: Sequence[str]) -> dict[str, list[str]]:
        d = self._read().dialect
        if not ids:
            return {}
        rows = self._read().execute(
            f"SELECT source_id, target_id FROM links WHERE {d.in_list('source_id', d.param('ids'))}"
            f" AND origin = {d.param('origin')} AND retracted_at IS NULL",
            {"ids": id_list(ids), "origin": LinkOrigin.CAPTURE.value},
        )
        out: dict[str, list[str]] = {}
        for source, target in rows:
            out.setdefault(source, []).append(target)
        return out

    newest_keyed = _on_reader(reads.newest_keyed)
    recent = _on_reader(reads.recent)
    texts_by_hash = _on_reader(reads.texts_by_hash)
    history = _on_reader(reads.history)
    visible = _on_reader(reads.visible)

    def fact_ids(self) -> list[str]:
        """Every fact's id, whatever its state, in the order recorded."""
        return [r[0] for r in self._read().execute("SELECT id FROM facts ORDER BY seq")]

    # ------------------------------------------------------------------------- entities

    def entity_names(self) -> list[tuple[str, str, int, float]]:
        return sql_entities.names(self._read())

    def entity_names_added(self, after: int, upto: int) -> list[tuple[str, str, int, float]]:
        return sql_entities.names(self._read(), after=after, upto=upto)

    def entity_declarations(self) -> list[tuple[int, str, str, str, float, float | None]]:
        return sql_entities.aliases(self._read())

    def entity_signature(self) -> EntitySignature:
        return sql_entities.signature(self._read())

    profile_facts = _on_reader(sql_profiles.facts)
    profile_links = _on_reader(sql_profiles.links)
    profile_summary = _on_reader(sql_profiles.summary)

    # ------------------------------------------------------------------------- search

    def keyword_matches(
        self, query: str, scope: TimeScope, filters: Filters, n: int
    ) -> tuple[dict[str, float], dict[str, Record]]:
        """bm25 (higher is better) and ranking columns of the ``n`` best visible keyword
        matches."""
        raise NotImplementedError

    def candidates(self, ids: Sequence[str], scope: TimeScope, filters: Filters) -> list[Record]:
        """The ranking columns (:data:`graphmem.storage.sql.reads.CANDIDATE_COLUMNS`) of the visible facts
        among ``ids``."""
        return list(reads.candidates(self._read(), "id", ids, scope, filters))

    windows_holding = _on_reader(sql_windows.holding)

    def window_episodes(self) -> list[str]:
        return sql_windows.episodes(self._read())

    def sharing_vectors(self, owners: Iterable[str]) -> list[tuple[str, str]]:
        """(owner, fact) pairs for the facts that share an owner's vector (exact repeats)."""
        d = self._read().dialect
        return [
            (r[0], r[1])
            for r in self._read().execute(
                f"SELECT vector_of, id FROM facts WHERE {d.in_list('vector_of', d.param('ids'))}",
                {"ids": id_list(owners)},
            )
        ]

    # ------------------------------------------------------------------------- graph

    links_of = _on_reader(links.links_of)
    links_page = _on_reader(links.links_page)

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
    ) -> graph.Subgraph:
        with self._db.snapshot() as conn, self._graph.walking(conn) as adjacency:
            return traversal.traverse(
                conn,
                ids,
                scope,
                depth=depth,
                types=types,
                direction=direction,
                max_nodes=max_nodes,
                min_strength=min_strength,
                adjacency=adjacency,
            )

    def path(
        self,
        source_id: str,
        target_id: str,
        scope: TimeScope,
        *,
        types: Iterable[str] | None,
        direction: str,
        max_depth: int,
    ) -> graph.Path | None:
        with self._db.snapshot() as conn, self._graph.walking(conn) as adjacency:
            return traversal.path(
                conn,
                source_id,
                target_id,
                scope,
                types=types,
                direction=direction,
                max_depth=max_depth,
                adjacency=adjacency,
            )

    def preload_graph(self, wait: float) -> bool:
        return self._graph.wait(wait)

    def graph_loading(self) -> bool:
        return self._graph.loading

    def clusters(
        self, scope: TimeScope, *, types: Iterable[str] | None, min_size: int
    ) -> analytics.Clusters:
        with self._db.snapshot() as conn:
            return sql_analytics.clusters(conn, scope, types=types, min_size=min_size)

    def link_pairs(
        self,
        ids: list[str],
        scope: TimeScope,
        *,
        skip_origins: Sequence[str],
        touching: list[str] | None = None,
    ) -> list[tuple[str, str, float]]:
        """(source, target, strength) of every visible link of the default types among
        ``ids``, except the origins skipped; with ``touching``, only those with one end in it."""
        params = {
            "types": id_list(graph.DEFAULT_TYPES),
            "min_strength": 0.0,
            "skip_origins": id_list(skip_origins),
            **scope.params,
        }
        return links.link_pairs(self._read(), ids, scope, params, touching)

    def walk(self, scope: TimeScope, *, skip_origins: Sequence[str]) -> traversal.Walk:
        """A breadth-first walker over the visible links of the default types, both ways."""
        return traversal.Walk(
            self._read(), scope, graph.DEFAULT_TYPES, "BOTH", 0.0, tuple(skip_origins)
        )

    # ------------------------------------------------------------------------- vectors

    def vector_owners(self, ids: Iterable[str] | None = None) -> dict[str, bool]:
        """Facts that own a vector, each with its live flag: it, or a fact sharing its vector,
        is neither retracted nor superseded. All of them (in recorded order), or those in
        ``ids``."""
        d = self._read().dialect
        sql = """
            SELECT o.id, EXISTS (
                SELECT 1 FROM facts s WHERE (s.id = o.id OR s.vector_of = o.id)
                  AND s.retracted_at IS NULL AND s.superseded_by IS NULL
            ) FROM facts o WHERE o.vector_of IS NULL"""
        conn = self._read()
        if ids is None:
            return {r[0]: bool(r[1]) for r in conn.execute(sql + " ORDER BY o.seq")}
        rows = conn.execute(
            sql + f" AND {d.in_list('o.id', d.param('ids'))}", {"ids": id_list(ids)}
        )
        return {r[0]: bool(r[1]) for r in rows}

    def vector_sources(self, ids: Iterable[str]) -> dict[str, tuple[str, str | None]]:
        """Each known fact's text and the fact whose vector it shares (None: its own)."""
        rows = reads.rows_by_id(self._read(), ids, "id, text, vector_of")
        return {i: (r["text"], r["vector_of"]) for i, r in rows.items()}

    def outbox(self, ids: Iterable[str] | None = None) -> list[tuple[str, int]]:
        """Queued vector writes as (fact id, queue position): all, or those of ``ids``."""
        conn = self._read()
        d = conn.dialect
        if ids is None:
            return [(r[0], r[1]) for r in conn.execute(f"SELECT fact_id, {d.rowid} FROM outbox")]
        rows = conn.execute(
            f"SELECT fact_id, {d.rowid} FROM outbox WHERE {d.in_list('fact_id', d.param('ids'))}",
            {"ids": id_list(ids)},
        )
        return [(r[0], r[1]) for r in rows]

    def waiting(self, limit: int, *, queued_before: float | None = None) -> list[str]:
        d = self._read().dialect
        before = "" if queued_before is None else f" WHERE queued_at < {d.param('before')}"
        rows = self._read().execute(
            f"SELECT fact_id FROM outbox{before} ORDER BY {d.rowid} {d.limit(d.param('limit'))}",
            {"before": queued_before, "limit": limit},
        )
        return [r[0] for r in rows]

    def vector_log(self, after: int) -> list[tuple[int, str, int | None]]:
        conn = self._read()
        rows = conn.execute(
            f"SELECT seq, fact_id, state FROM vector_log WHERE seq > {conn.dialect.arg} ORDER BY"
            " seq",
            [after],
        )
        return [(r[0], r[1], r[2]) for r in rows]

    def vector_log_end(self) -> int:
        row = self._read().execute("SELECT coalesce(max(seq), 0) FROM vector_log").fetchone()
        return int(row[0])

    def change_log(
        self, after: int, limit: int
    ) -> tuple[list[tuple[int, str, str, float, str]], int]:
        reader = self._read()
        d = reader.dialect
        rows = reader.execute(
            f"SELECT seq, kind, item, changed_at, origin FROM change_log WHERE seq > {d.arg}"
            f" ORDER BY seq {d.limit(d.arg)}",
            [after, limit],
        ).fetchall()
        (end,) = reader.execute("SELECT coalesce(max(seq), 0) FROM change_log").fetchone()
        return [(r[0], r[1], r[2], r[3], r[4]) for r in rows], int(end)

    def cached_vectors(
        self, provider: str, model: str, dimensions: int, hashes: Sequence[str]
    ) -> dict[str, Vectors]:
        """Cached embeddings by text hash (of this provider, model and size)."""
        d = self._read().dialect
        rows = self._read().execute(
            f"SELECT text_hash, dims, vector FROM embedding_cache WHERE provider = {d.arg} AND"
            f" model = {d.arg}"
            f" AND {d.in_list('text_hash', d.arg)}",
            [provider, model, id_list(dict.fromkeys(hashes))],
        )
        return {h: np.frombuffer(blob, dtype="<f4") for h, dims, blob in rows if dims == dimensions}

    # ------------------------------------------------------------------------- decay, stats

    def expired(self, now: float) -> list[str]:
        """Facts whose expiry has passed."""
        conn = self._read()
        sql = (
            f"SELECT id FROM facts WHERE expires_at IS NOT NULL AND expires_at < {conn.dialect.arg}"
        )
        return [r[0] for r in conn.execute(sql, [now])]

    def faded(self, rule: SoftDecay) -> list[str]:
        """Facts whose confidence fell below ``rule.floor``."""
        conn = self._read()
        sql = f"SELECT id FROM facts WHERE confidence < {conn.dialect.arg}"
        return [r[0] for r in conn.execute(sql, [rule.floor])]

    def decay_forecast(self, now: float, rule: SoftDecay, *, soft: bool) -> tuple[int, int]:
        """What a prune at ``now`` would do after the hard prune: (facts soft-decayed, facts
        then below ``rule.floor``)."""
        conn, args = self._read(), _decay_args(now, rule)
        d = conn.dialect
        decayed = conn.execute(f"SELECT count(*) FROM facts WHERE {_ageing(d)}", args).fetchone()[0]
        faded = conn.execute(
            f"SELECT count(*) FROM facts WHERE (confidence < {d.param('floor')} OR ({_ageing(d)}"
            f" AND confidence * {d.param('factor')} < {d.param('floor')}))"
            + (
                ""
                if soft
                else f" AND NOT (expires_at IS NOT NULL AND expires_at < {d.param('now')})"
            ),
            args,
        ).fetchone()[0]
        return int(decayed), int(faded)

    def decay_inputs(self) -> Iterator[Record]:
        """Every fact's id, source, entity, key, value, text, decay_class, last_confirmed_at
        and recorded_at (what the decay heuristics read)."""
        yield from self._read().execute(
            "SELECT id, source, entity, key, value, text, decay_class, last_confirmed_at,"
            " recorded_at FROM facts"
        )

    def stated_inputs(self) -> Iterator[Record]:
        """Every fact's id, text, source_date, valid_from and stated time (what reading the
        time its text states needs)."""
        yield from self._read().execute(
            "SELECT id, text, source_date, valid_from, stated_start, stated_end, stated_text"
            " FROM facts ORDER BY seq"
        )

    def vector_owner_count(self) -> int:
        """How many facts own a vector (the vector index should hold as many rows). Counted as
        all facts less those lending another's vector: both counts read an index, where the
        direct count reads the whole table (2 GB at a million facts, on every open)."""
        sql = (
            "SELECT (SELECT count(*) FROM facts)"
            " - (SELECT count(*) FROM facts WHERE vector_of IS NOT NULL)"
        )
        return int(self._read().execute(sql).fetchone()[0])

    def counts(self, now: float) -> Counts:
        conn = self._read()
        d = conn.dialect
        scope = TimeScope(now, now)
        live = scope.fact_clause(param=d.param)

        def one(sql: str, *args: Any) -> int:
            return int(conn.execute(sql, args).fetchone()[0])

        def grouped(column: str) -> dict[str, int]:
            sql = f"SELECT {column}, count(*) FROM facts f WHERE {live} GROUP BY {column}"
            return {r[0]: r[1] for r in conn.execute(sql, scope.params)}

        return Counts(
            facts=one("SELECT count(*) FROM facts"),
            superseded=one("SELECT count(*) FROM facts WHERE superseded_by IS NOT NULL"),
            retracted=one("SELECT count(*) FROM facts WHERE retracted_at IS NOT NULL"),
            expired=one(
                f"SELECT count(*) FROM facts WHERE expires_at IS NOT NULL AND expires_at < {d.arg}",
                now,
            ),
            by_decay_class=grouped("decay_class"),
            by_category=grouped("category"),
            links=one("SELECT count(*) FROM links WHERE retracted_at IS NULL"),
            outbox=one("SELECT count(*) FROM outbox"),
        )

    def export(self, namespace: str, out: IO[str]) -> int:
        """Every fact and link as JSON Lines (:mod:`graphmem.storage.sql.transfer`); returns lines."""
        with self._db.snapshot() as conn:
            return transfer.write_export(conn, namespace, out)

    # ------------------------------------------------------------------------- helpers

    def _stamp(self, conn: SQLConnection) -> float:
        """Transaction time for a write that holds the writer (on ``conn``)."""
        raise NotImplementedError

    def _read(self) -> SQLConnection:
        conn: SQLConnection = self._db.reader()
        return conn

    @contextmanager
    def _joined(self, held: AbstractContextManager[SQLConnection]) -> Iterator[SQLTransaction]:
        with held as conn:
            yield self._transaction(conn)

    def _transaction(self, conn: SQLConnection) -> SQLTransaction:
        return SQLTransaction(conn, self._stamp, self._db.path)


def _decay_args(now: float, rule: SoftDecay) -> dict[str, float]:
    return {"now": now, "after": rule.after, "floor": rule.floor, "factor": rule.factor}


def _document(row: Sequence[Any]) -> DocumentFile:
    path, hash, mtime, size, chunks, synced_at, imported, inode = row
    return DocumentFile(path, hash, mtime, size, chunks, synced_at, bool(imported), inode)
