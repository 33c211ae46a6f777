"""What a namespace's connections share in either engine: one writer at a time, a reader per
thread, per-thread read deadlines, closing; and the connection surface the shared SQL uses."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Generic, Protocol, TypeVar

from ...errors import StorageError
from .dialect import Dialect


class _Connection(Protocol):
    @property
    def in_transaction(self) -> bool: ...

    def execute(self, sql: str, /) -> object: ...

    def close(self) -> None: ...


#: A connection of either engine (sqlite3's, or graphmem.storage.postgres.dialect's).
C = TypeVar("C", bound=_Connection)


class SQLCursor(Protocol):
    """A cursor of either engine: rows read by position or by column name."""

    #: None: rows are plain tuples.
    row_factory: Any

    def execute(self, sql: str, params: Any = ..., /) -> SQLCursor: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def fetchmany(self, size: int = ..., /) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...

    @property
    def rowcount(self) -> int: ...


class SQLConnection(Protocol):
    """The connection the shared SQL is written for, in either engine: SQLite's
    (:class:`graphmem.storage.sqlite.database.SQLiteConnection`) or PostgreSQL's
    (:class:`graphmem.storage.postgres.dialect.Connection`). Its :attr:`dialect` spells what
    the engines spell differently; parameters are written ``:name`` or ``?``."""

    @property
    def dialect(self) -> Dialect: ...

    @property
    def in_transaction(self) -> bool: ...

    def execute(self, sql: str, params: Any = ..., /) -> SQLCursor: ...

    def executemany(self, sql: str, params: Iterable[Any], /) -> Any: ...

    def cursor(self) -> SQLCursor: ...


class Connections(Generic[C]):
    """What a namespace's connections to either engine share: one writer at a time (the write
    lock around the writer connection), a reader per thread, read deadlines per thread, and
    closing them all. The engine's class opens the connections and runs transactions
    (``write``)."""

    _writer: C
    #: Where the namespace is, for messages (a file, or a URL without its password).
    path: Any

    def __init__(self) -> None:
        self._write_lock = threading.RLock()
        self._local = threading.local()
        self._readers: list[C] = []
        self._readers_lock = threading.Lock()
        #: Called with the connection at the start of every write transaction (to add pending
        #: bookkeeping to it).
        self.on_write: Callable[[C], None] | None = None
        self._closed = False

    def write(self, *, durable: bool = True) -> AbstractContextManager[C]:
        raise NotImplementedError

    def reader(self) -> C:
        """This thread's read connection."""
        raise NotImplementedError

    @contextmanager
    def snapshot(self) -> Iterator[C]:
        """Inside the block, this thread's reads all see one state of the namespace: its read
        connection inside one transaction (the one it is in already, if any)."""
        conn = self.reader()
        if conn.in_transaction:
            yield conn
            return
        conn.execute("BEGIN")
        try:
            yield conn
        finally:
            self._end_snapshot(conn)

    def _end_snapshot(self, conn: C) -> None:
        """End the read transaction ``snapshot`` began on ``conn``."""
        raise NotImplementedError

    def time_limit(self, deadline: float | None) -> AbstractContextManager[None]:
        """This thread's reads inside the block stop at ``deadline`` (QueryTimeout)."""
        raise NotImplementedError

    def scrub(self) -> bool:
        """Reclaim deleted rows' space; whether the engine overwrites what was deleted."""
        raise NotImplementedError

    def analyze(self) -> None:
        """Refresh the query planner's statistics."""
        raise NotImplementedError

    def try_write(self, *, durable: bool = True) -> AbstractContextManager[C] | None:
        """:meth:`write`, or None at once if another thread is writing. Enter it right away:
        the writer is held from this call until the block ends."""
        if not self._write_lock.acquire(blocking=False):
            return None
        return self._held(durable)

    @contextmanager
    def _held(self, durable: bool) -> Iterator[C]:
        try:
            with self.write(durable=durable) as conn:
                yield conn
        finally:
            self._write_lock.release()

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def deadline(self) -> float | None:
        """The deadline of this thread's reads (see ``time_limit``), if any."""
        deadline: float | None = getattr(self._local, "deadline", None)
        return deadline

    @contextmanager
    def unlimited(self) -> Iterator[None]:
        """Lift this thread's read deadline inside the block, whatever encloses it: the leader
        of a group commit writes other callers' requests, which its own request's time limit
        must not stop (writes are bounded by their size, not by a deadline)."""
        outer = self.deadline
        self._local.deadline = None
        try:
            yield
        finally:
            self._local.deadline = outer

    def _deadline_within(self, deadline: float | None) -> float | None:
        """``deadline``, or an enclosing earlier one of this thread (None: no limit)."""
        outer = self.deadline
        if deadline is None or (outer is not None and outer < deadline):
            return outer
        return deadline

    def close(self) -> None:
        with self._write_lock:
            if self._closed:
                return
            self._closed = True
            with self._readers_lock:
                for conn in self._readers:
                    conn.close()
                self._readers.clear()
            self._writer.close()

    def _check_open(self) -> None:
        if self._closed:
            raise StorageError("this memory has been closed")
