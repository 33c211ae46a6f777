"""The PostgreSQL store: one namespace of a database every replica shares.

``PostgresStore`` is the shared SQL store (:class:`graphmem.storage.sql.store.SQLStore`) on the
views of one namespace (:mod:`graphmem.storage.postgres.schema`), its statements spelled by
:class:`graphmem.storage.postgres.dialect.PostgresDialect`. What differs from SQLite is here:

1. **Transaction time** is the database's clock, after the namespace's last stamp: knownAt
   answers are the same from every replica, whatever their clocks say (``PostgresStore._stamp``).
2. **Keyword ranking** is bm25 computed by :mod:`graphmem.storage.postgres.keyword`.
3. **Connections**: one writer per namespace, and one reader per thread shared by every
   namespace the thread reads (``_SharedReaders``); one the server dropped is replaced on next use.
4. **Erasure**: PostgreSQL has no secure delete; ``scrub`` vacuums the namespace's tables.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any, ClassVar, Final

import psycopg

from ...errors import InvalidInput, StorageError
from ...temporal import TimeScope
from ..interface import Filters, Record
from ..sql import windows as sql_windows
from ..sql.connections import Connections
from ..sql.store import SQLStore, SQLTransaction
from . import is_postgres_url, redacted
from . import schema as pgschema
from .dialect import Connection, message
from .keyword import Bm25Ranker

#: Seconds a connection attempt waits for the server before the request fails.
CONNECT_TIMEOUT_S: Final = 5


def lock_key(namespace: str) -> int:
    """The namespace's advisory lock: a signed 64-bit hash of its name."""
    return int.from_bytes(hashlib.sha256(namespace.encode()).digest()[:8], "big", signed=True)


class PostgresDatabase(Connections[Connection]):
    """A namespace's connections to a PostgreSQL database: the surface of
    :class:`graphmem.storage.sqlite.database.Database` (write, try_write, reader, snapshot,
    time_limit)."""

    def __init__(self, url: str, namespace: str) -> None:
        super().__init__()
        if not is_postgres_url(url):
            raise InvalidInput(f"not a PostgreSQL URL: {redacted(url)!r}")
        self.url = url
        self.path = redacted(url)
        self.namespace = namespace
        self._lock_key = lock_key(namespace)
        self._exclusive_lock = threading.Lock()
        self._locker: Connection | None = None
        #: The thread inside ``exclusive`` (its lock held on ``_locker``), or None.
        self._holder: int | None = None
        setup = self._connect(reader=False)
        try:
            pgschema.apply(setup.raw)
            setup.raw.execute(
                "INSERT INTO gm_namespaces (namespace) VALUES (%s) ON CONFLICT DO NOTHING",
                [namespace],
            )
        except psycopg.Error as exc:
            raise StorageError(f"cannot prepare {self.path}: {message(exc)}") from exc
        finally:
            setup.close()
        self._writer = self._connect(reader=False)
        self._shared = _SharedReaders.of(url)

    # ------------------------------------------------------------------------- connections

    def _connect(self, *, reader: bool) -> Connection:
        return Connection(
            self._open(self.namespace),
            reader=reader,
            deadline=(lambda: self.deadline) if reader else lambda: None,
            namespace=self.namespace,
            reopen=self._open,
        )

    def _open(self, namespace: str) -> psycopg.Connection[Any]:
        """A new server connection pointed at ``namespace``; StorageError when the server
        cannot be reached (a request that meets the server down fails with it)."""
        try:
            raw = server_connection(self.url)
        except psycopg.Error as exc:
            raise StorageError(f"cannot connect to {self.path}: {message(exc)}") from None
        try:
            raw.execute("SELECT set_config(%s, %s, false)", [pgschema.NAMESPACE_SETTING, namespace])
        except psycopg.Error as exc:
            raw.close()  # dropped as it was being set up: not left for the collector
            raise StorageError(f"cannot connect to {self.path}: {message(exc)}") from None
        return raw

    def _usable(self, conn: Connection | None, *, reader: bool) -> Connection:
        """``conn``, or a new connection if it is missing or the server dropped it."""
        if conn is not None and not conn.raw.closed and not conn.raw.broken:
            return conn
        if conn is not None:
            conn.close()
        return self._connect(reader=reader)

    # ------------------------------------------------------------------------- writes

    @contextmanager
    def write(self, *, durable: bool = True) -> Iterator[Connection]:
        """A write transaction holding the namespace's advisory lock (so a namespace's writes,
        from any replica, commit one after another): commits when the block ends, rolls back
        if it raises. ``durable=False`` commits without waiting for the server's flush
        (``synchronous_commit = off``)."""
        with self._write_lock:
            self._check_open()
            self._writer = self._usable(self._writer, reader=False)
            conn = self._writer
            if conn.in_transaction:  # nested use joins the outer transaction
                yield conn
                return
            conn.execute("BEGIN")
            try:
                conn.execute("SELECT pg_advisory_xact_lock(%s)", [self._lock_key])
                if self._holder == threading.get_ident():
                    self._check_held()
                if not durable:
                    conn.execute("SET LOCAL synchronous_commit = off")
                if self.on_write is not None:
                    self.on_write(conn)
                yield conn
                conn.execute("COMMIT")
            except StorageError as exc:
                if isinstance(exc.__cause__, psycopg.errors.ReadOnlySqlTransaction):
                    # A server that accepts no writes now (closing rolls back): the next
                    # write connects again, and target_session_attrs=read-write in the URL
                    # finds the one that does.
                    conn.raw.close()
                raise
            finally:
                if conn.in_transaction and not conn.raw.closed:
                    try:
                        conn.raw.execute("ROLLBACK")
                    except psycopg.Error:
                        conn.raw.close()  # replaced on next use

    @contextmanager
    def exclusive(self, key: int) -> Iterator[None]:
        """Hold the session advisory lock ``key`` for the block, on a connection of its own
        (a lock whose holder dies is released by the server).

        The lock lives as long as that connection: if the server goes away (a failover), it
        is gone, and another process may take it on the new primary while this block runs.
        So a write transaction the block opens first checks the connection still holds it,
        and is refused (StorageError) if not; the next ``exclusive`` takes the lock again on
        a new connection, on whichever server accepts writes then."""
        with self._exclusive_lock:
            self._check_open()
            self._locker = self._usable(self._locker, reader=False)
            self._locker.execute("SELECT pg_advisory_lock(%s)", [key])
            self._holder = threading.get_ident()
            try:
                yield
            finally:
                self._holder = None
                if not self._locker.raw.closed:
                    try:
                        self._locker.execute("SELECT pg_advisory_unlock(%s)", [key])
                    except StorageError:
                        self._locker.close()  # the server dropped it, and the lock with it

    def _check_held(self) -> None:
        """StorageError if the connection holding ``exclusive``'s lock is gone (and the lock
        with it)."""
        assert self._locker is not None
        try:
            self._locker.execute("SELECT 1")
        except StorageError as exc:
            self._locker.close()
            raise StorageError(
                f"{self.path}: the lock this write needs was lost with its connection "
                f"({exc.message}); the write is refused"
            ) from exc

    # ------------------------------------------------------------------------- reads

    def reader(self) -> Connection:
        """This thread's read connection (autocommit: each statement sees the latest commit).

        A thread reads every namespace of the database through one connection (see
        ``_SharedReaders``), pointed at this namespace; inside a transaction of another
        namespace it gets one of this namespace's own."""
        self._check_open()
        shared = self._shared.get(self)
        if shared is not None:
            return shared
        conn: Connection | None = getattr(self._local, "conn", None)
        fresh = self._usable(conn, reader=True)
        if fresh is not conn:
            self._local.conn = fresh
            with self._readers_lock:
                if self._closed:  # closed meanwhile: nothing would ever close this one
                    fresh.close()
                    self._check_open()
                self._readers = [c for c in self._readers if c is not conn] + [fresh]
        return fresh

    def _end_snapshot(self, conn: Connection) -> None:
        """Roll the read transaction back (a reader begins a repeatable-read one)."""
        if not conn.raw.closed:
            try:
                conn.raw.execute("ROLLBACK")
            except psycopg.Error:
                conn.raw.close()  # replaced on next use

    @contextmanager
    def time_limit(self, deadline: float | None) -> Iterator[None]:
        outer = self.deadline
        self._local.deadline = self._deadline_within(deadline)
        try:
            yield
        finally:
            self._local.deadline = outer

    def clock(self, conn: Connection | None = None) -> tuple[float, float]:
        """The namespace's last transaction time and the database's clock (epoch seconds),
        read on ``conn`` (default: this thread's reader)."""
        last, now = (
            (conn or self.reader())
            .execute(
                "SELECT last_recorded_at, extract(epoch FROM clock_timestamp()) FROM gm_namespaces"
                " WHERE namespace = current_setting('graphmem.namespace')"
            )
            .fetchone()
        )
        return float(last), float(now)

    def scrub(self) -> bool:
        """Reclaim the space of deleted rows (VACUUM); PostgreSQL has no secure delete. Old
        row versions may remain in the WAL and in backups until they are recycled
        (docs/scale-out.md says what to do)."""
        conn = self._connect(reader=False)
        try:
            for table in (
                "facts",
                "links",
                "embedding_cache",
                "episodes",
                "files",
                "outbox",
                "windows",
                "window_facts",
                "postings",
                "window_postings",
                "entity_names",
                "entity_aliases",
                "entity_removals",
                "profile_summaries",
                "profile_summary_facts",
            ):
                conn.execute(f"VACUUM gm_{table}")
        finally:
            conn.close()
        return True

    def analyze(self) -> None:
        """VACUUM ANALYZE the tables: fresh statistics for the planner (autovacuum takes them
        within about a minute of a bulk load anyway) and the visibility map that lets the
        keyword postings be read from their index alone."""
        conn = self._connect(reader=False)
        try:
            for table in (
                "facts",
                "postings",
                "links",
                "windows",
                "window_facts",
                "window_postings",
            ):
                conn.execute(f"VACUUM ANALYZE gm_{table}")
        finally:
            conn.close()

    def close(self) -> None:
        if not self.closed:
            self._shared.release()
        super().close()
        with self._exclusive_lock:
            if self._locker is not None:
                self._locker.close()


class _SharedReaders:
    """The read connections of one database URL in this process: one per thread, shared by
    every namespace the thread reads, so a replica holds as many readers as it has threads
    however many namespaces it serves. A connection is pointed at a namespace (the setting
    the views and row-level security read) when a thread moves to another one, and never in
    the middle of a transaction. Closed when the last namespace using them closes."""

    _registry: ClassVar[dict[str, _SharedReaders]] = {}
    _registry_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, url: str) -> None:
        self.url = url
        self._local = threading.local()
        self._all: list[Connection] = []
        self._lock = threading.Lock()
        self._users = 0
        self._released = False

    @classmethod
    def of(cls, url: str) -> _SharedReaders:
        with cls._registry_lock:
            shared = cls._registry.get(url)
            if shared is None:
                shared = cls._registry[url] = cls(url)
            shared._users += 1
            return shared

    def release(self) -> None:
        with self._registry_lock:
            self._users -= 1
            if self._users > 0:
                return
            del self._registry[self.url]
        with self._lock:
            self._released = True
            for conn in self._all:
                conn.close()
            self._all.clear()

    def get(self, db: PostgresDatabase) -> Connection | None:
        """This thread's reader pointed at ``db``'s namespace; None while it is inside a
        transaction of another namespace."""
        conn: Connection | None = getattr(self._local, "conn", None)
        namespace: str | None = getattr(self._local, "namespace", None)
        if conn is not None and namespace != db.namespace and conn.in_transaction:
            return None
        fresh = db._usable(conn, reader=True)  # a new one is set to db's namespace
        if fresh is not conn:
            self._local.conn = fresh
            with self._lock:
                if self._released:  # the last namespace closed meanwhile: close it too
                    fresh.close()
                    raise StorageError("this memory has been closed")
                self._all = [c for c in self._all if c is not conn] + [fresh]
        fresh.deadline = lambda: db.deadline
        if fresh is conn and namespace != db.namespace:
            fresh.point(db.namespace)
        self._local.namespace = db.namespace
        return fresh


class PostgresTransaction(SQLTransaction):
    """A write transaction on PostgreSQL (``SQLTransaction``'s SQL in PostgreSQL's dialect)."""

    def current_by_key(self, pairs: Any) -> list[dict[str, Any]]:
        d = self.conn.dialect
        scope = TimeScope(self.now, self.now)
        rows = self.conn.execute(
            "SELECT f.* FROM unnest(CAST(%(entities)s AS text[]), CAST(%(keys)s AS text[]))"
            f" AS w(entity, key) JOIN facts f ON {d.lower_entity('f')} = w.entity"
            f" AND {d.lower_key('f')} = w.key WHERE {scope.fact_clause(param=d.param)}",
            {"entities": [p[0] for p in pairs], "keys": [p[1] for p in pairs], **scope.params},
        )
        return [dict(r) for r in rows]


class PostgresStore(SQLStore["PostgresDatabase"]):
    """One namespace's facts, links, keyword index, outbox, embedding cache and meta in a
    PostgreSQL database (see the module's docstring)."""

    def __init__(
        self,
        url: str,
        namespace: str,
        clock: Callable[[], float] | None = None,
        *,
        graph_in_memory: bool = True,
    ) -> None:
        super().__init__(PostgresDatabase(url, namespace), graph_in_memory=graph_in_memory)
        self._given_clock = clock
        self._keywords = Bm25Ranker()

    def now(self) -> float:
        """The time of a read now: the database's clock, but never before the namespace's
        last transaction time, whichever replica stamped it — a write acknowledged anywhere
        is seen by the next read everywhere (one round trip). With a clock given (tests, a
        replayed history): that clock, as the SQLite store reads it."""
        if self._given_clock is not None:
            return round(self._given_clock(), 6)
        last, database = self.database.clock()
        return max(round(database, 6), last)

    def _stamp(self, conn: Any) -> float:
        """Transaction time, under the namespace's advisory lock: the database's clock, but
        strictly after the namespace's last stamp (kept in ``gm_namespaces``), whichever
        replica wrote it. With a clock given: that clock, never before the last stamp (as the
        SQLite store stamps)."""
        last, database = self.database.clock(conn)
        if self._given_clock is None:
            stamp = round(max(database, last + 1e-6), 6)
        else:
            stamp = max(round(self._given_clock(), 6), last)
        conn.execute(
            "UPDATE gm_namespaces SET last_recorded_at = %s"
            " WHERE namespace = current_setting('graphmem.namespace')",
            [stamp],
        )
        return stamp

    def shared_vector_lock(self) -> Callable[[], AbstractContextManager[None]]:
        return self.vector_lock

    def vector_lock(self) -> AbstractContextManager[None]:
        """The lock one writer of the namespace's vector index holds at a time, across every
        process and machine sharing the database."""
        return self.database.exclusive(lock_key(f"{self.database.namespace}/vectors"))

    def _transaction(self, conn: Any) -> SQLTransaction:
        return PostgresTransaction(conn, self._stamp, self.database.path)

    def keyword_matches(
        self, query: str, scope: TimeScope, filters: Filters, n: int
    ) -> tuple[dict[str, float], dict[str, Record]]:
        """bm25 (higher is better) and ranking columns of the ``n`` best visible keyword
        matches (:class:`graphmem.storage.postgres.keyword.Bm25Ranker`)."""
        return self._keywords.best(self._read(), query, scope, filters, n)

    def window_matches(self, query: str, n: int) -> dict[int, tuple[float, tuple[str, ...]]]:
        """The ``n`` best keyword matches among the windows: window -> (bm25, its facts)
        (:meth:`graphmem.storage.postgres.keyword.Bm25Ranker.windows`)."""
        conn = self._read()
        scores = self._keywords.windows(conn, query, n)
        held = sql_windows.members(conn, list(scores))
        return {w: (score, held[w]) for w, score in scores.items() if w in held}


def server_connection(url: str) -> psycopg.Connection[Any]:
    """A new autocommit connection to the database at ``url`` (psycopg's errors raised).
    Parameters are bound by the server, and a statement run five times on a connection is
    prepared there (psycopg's default)."""
    return psycopg.connect(
        url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S, application_name="graphmem"
    )
