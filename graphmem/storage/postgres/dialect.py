"""The shared SQL of :mod:`graphmem.storage.sql`, spoken to PostgreSQL.

That SQL (:mod:`graphmem.storage.sql.reads`, :mod:`graphmem.storage.sql.traversal`, …) writes
what the engines spell differently through the connection's dialect
(:mod:`graphmem.storage.sql.dialect`). Here its tables are views of one namespace
(:mod:`graphmem.storage.postgres.schema`), so it needs no namespace filter, and:

1. :class:`PostgresDialect` spells its constructs for PostgreSQL (arrays for id lists,
   ``ON CONFLICT`` on keys that lead with the namespace, ``GREATEST``, ``LATERAL``, …);
2. :class:`Connection` gives it a psycopg connection with the surface it is written for
   (:class:`graphmem.storage.sql.connections.SQLConnection`: ``execute``, ``executemany``,
   ``cursor``, rows read by index or by name, ``in_transaction``, ``dialect``); its statements
   reach psycopg as they are written, their parameters in psycopg's style (``%(name)s``,
   ``%s``: :meth:`PostgresDialect.param`, :attr:`PostgresDialect.arg`).

The conformance suite (tests/storage/test_conformance.py) and the Memory-level suites run every
statement the store issues against a real PostgreSQL.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Final, cast

import psycopg
from psycopg import pq
from psycopg.rows import RowMaker, tuple_row

from ...errors import QueryTimeout, StorageError
from ..sql.dialect import Dialect, Kind
from ..sql.params import IdList
from .schema import COMPUTED, NAMESPACE_SETTING

#: The views' columns that the shared SQL does not know: the namespace, the computed ones.
HIDDEN: Final = ("namespace", *COMPUTED)


class PostgresDialect(Dialect):
    """PostgreSQL's spelling of the shared SQL's constructs, on the views of one namespace
    (:mod:`graphmem.storage.postgres.schema`): every key leads with ``namespace``."""

    name = "postgresql"
    rowid = "seq"
    # SQLite's LIKE ignores ASCII case.
    like = "ILIKE"
    arg = "%s"

    def param(self, name: str) -> str:
        return f"%({name})s"

    def in_list(
        self, column: str, param: str, *, negated: bool = False, kind: Kind = "text"
    ) -> str:
        # = ANY: an index probe per value whatever the planner's estimates (IN over unnest
        # becomes a semi-join that a table without statistics plans as a nested loop).
        return f"{column} {'<> ALL' if negated else '= ANY'}(CAST({param} AS {kind}[]))"

    def list_table(self, param: str, alias: str) -> str:
        return f"unnest(CAST({param} AS text[])) WITH ORDINALITY AS {alias}(value, key)"

    def greatest(self, *values: str) -> str:
        return f"GREATEST({', '.join(values)})"

    def least(self, *values: str) -> str:
        return f"LEAST({', '.join(values)})"

    def month(self, moment: str) -> str:
        return f"CAST(to_char(to_timestamp({moment}) AT TIME ZONE 'UTC', 'MM') AS INTEGER)"

    def limit(self, param: str) -> str:
        return f"LIMIT NULLIF(GREATEST({param}, -1), -1)"

    def insert_ignoring(self, table: str, columns: str, rows: str) -> str:
        return f"INSERT INTO {table} ({columns}) {rows} ON CONFLICT DO NOTHING"

    def upsert(
        self, table: str, columns: str, rows: str, key: Sequence[str], *, renumber: bool = False
    ) -> str:
        names = [c.strip() for c in columns.split(",")]
        updates = [f"{c} = excluded.{c}" for c in names if c not in key]
        if renumber:  # SQLite's REPLACE deletes the row and inserts a new one: a new rowid
            updates.append(f"seq = nextval(pg_get_serial_sequence('gm_{table}', 'seq'))")
        return (
            f"INSERT INTO {table} ({columns}) {rows}"
            f" {self.on_conflict(', '.join(key))} DO UPDATE SET {', '.join(updates)}"
        )

    def on_conflict(self, key: str) -> str:
        return f"ON CONFLICT (namespace, {key})"

    def picked(self, table: str, alias: str, rest: str) -> str:
        # LATERAL: PostgreSQL would otherwise run the subquery once per row of the table.
        return f"CROSS JOIN LATERAL (SELECT {alias}.* FROM {rest}) {alias}"

    def indexed_by(self, index: str) -> str:
        return ""

    def unindexed(self, expression: str) -> str:
        return expression

    # gm_facts keeps these expressions as columns (schema.COMPUTED): its indexes serve them.
    def lower_entity(self, alias: str) -> str:
        return f"{alias}.lower_entity"

    def lower_key(self, alias: str) -> str:
        return f"{alias}.lower_key"

    def dated(self, alias: str) -> str:
        return f"{alias}.dated"

    def columns_of(self, table: str) -> str:
        hidden = ", ".join(repr(c) for c in HIDDEN)
        return (
            "SELECT ordinal_position, column_name::text FROM information_schema.columns"
            f" WHERE table_name = '{table}' AND table_schema = current_schema()"
            f" AND column_name NOT IN ({hidden}) ORDER BY ordinal_position"
        )


#: The one PostgreSQL dialect.
POSTGRES: Final = PostgresDialect()


def _params(params: Any) -> Any:
    """Parameters as psycopg binds them: id lists (JSON text made by ``storage.id_list``)
    become Python lists."""
    if isinstance(params, Mapping):
        return {k: _value(v) for k, v in params.items()}
    return [_value(v) for v in params]


def _value(value: Any) -> Any:
    if isinstance(value, IdList):
        return value.values
    if isinstance(value, memoryview):
        return bytes(value)
    return value


class Row(tuple[Any, ...]):
    """A row read by position or by column name, like ``sqlite3.Row``."""

    _names: dict[str, int]

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return tuple.__getitem__(self, self._names[key])
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._names)


def _row_factory(cursor: psycopg.Cursor[Any]) -> RowMaker[Any]:
    description = cursor.description
    if description is None:
        return tuple_row(cursor)
    # The views' last columns are no columns of the shared SQL's tables.
    names = {c.name: i for i, c in enumerate(description) if c.name not in HIDDEN}
    kind = type("Row", (Row,), {"_names": names})
    return cast(RowMaker[Any], kind)


class Cursor:
    """A cursor with the surface the shared SQL uses (``SQLCursor``, sqlite3's);
    ``row_factory = None`` reads plain tuples."""

    def __init__(self, owner: Connection) -> None:
        self._owner = owner
        self.row_factory: object = _row_factory
        self._cursor: psycopg.Cursor[Any] | None = None

    def execute(self, sql: str, params: Any = ()) -> Cursor:
        self._cursor = self._owner._run(sql, params, tuples=self.row_factory is None)
        return self

    def executemany(self, sql: str, seq: Iterable[Any]) -> Cursor:
        self._owner.executemany(sql, seq)
        return self

    def fetchone(self) -> Any:
        return None if self._cursor is None else self._cursor.fetchone()

    def fetchall(self) -> list[Any]:
        return [] if self._cursor is None else self._cursor.fetchall()

    def fetchmany(self, size: int) -> list[Any]:
        return [] if self._cursor is None else self._cursor.fetchmany(size)

    def __iter__(self) -> Iterator[Any]:
        return iter(()) if self._cursor is None else iter(self._cursor)

    @property
    def rowcount(self) -> int:
        return -1 if self._cursor is None else self._cursor.rowcount

    def close(self) -> None:
        if self._cursor is not None:
            self._cursor.close()


class Connection:
    """A psycopg connection (autocommit; transactions by BEGIN/COMMIT statements, as with
    ``sqlite3`` in autocommit mode) that runs the shared SQL (:mod:`graphmem.storage.sql`)."""

    dialect: Final = POSTGRES
    #: The keyword index is a generated column: writers need not index their facts
    #: (graphmem.storage.sql.keyword_index.indexing).
    indexes_keywords: Final = True

    def __init__(
        self,
        raw: psycopg.Connection[Any],
        *,
        reader: bool,
        deadline: Callable[[], float | None] = lambda: None,
        namespace: str | None = None,
        reopen: Callable[[str], psycopg.Connection[Any]] | None = None,
    ) -> None:
        self.raw = raw
        self.reader = reader
        #: The time.monotonic() deadline of the statement about to run (None: no limit).
        self.deadline = deadline
        #: The namespace the connection is pointed at (the views and row-level security read it).
        self.namespace = namespace
        #: A new raw connection pointed at a namespace: used once when the server dropped this
        #: one while it was idle (see ``_run``).
        self._reopen = reopen
        self._limited: float | None = None  # the deadline the server's timeout was set for
        #: Set by ``close``, which another thread may call (the last namespace sharing this
        #: reader closing) while this one replaces a dropped connection.
        self._closed = False
        self._replacing = threading.Lock()

    @property
    def in_transaction(self) -> bool:
        return self.raw.info.transaction_status != pq.TransactionStatus.IDLE

    def cursor(self) -> Cursor:
        return Cursor(self)

    def execute(self, sql: str, params: Any = ()) -> Any:
        return self._run(sql, params, tuples=False)

    def executemany(self, sql: str, seq: Iterable[Any]) -> None:
        batch = [_params(p) for p in seq]
        if not batch:
            return
        with self._errors():
            self.raw.cursor().executemany(sql, batch)

    def close(self) -> None:
        with self._replacing:
            self._closed = True
            self.raw.close()

    def point(self, namespace: str) -> None:
        """Point the connection at ``namespace`` (outside a transaction)."""
        self.execute("SELECT set_config(%s, %s, false)", [NAMESPACE_SETTING, namespace])
        self.namespace = namespace

    def _run(self, sql: str, params: Any, *, tuples: bool) -> psycopg.Cursor[Any]:
        if sql in ("BEGIN", "BEGIN IMMEDIATE"):
            sql = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY" if self.reader else "BEGIN"
        # A statement that starts no work it could repeat twice: a read outside a transaction,
        # or a transaction's BEGIN. If the server dropped the connection while it sat idle (a
        # restart, a failover), the statement never ran: it runs once more on a new connection
        # instead of failing the first request after the server is back.
        repeatable = (
            self._reopen is not None
            and not self.in_transaction
            and (self.reader or sql.startswith("BEGIN"))
        )
        try:
            return self._statement(sql, params, tuples=tuples)
        except StorageError:
            if not (repeatable and (self.raw.closed or self.raw.broken)):
                raise
        self._replace()
        return self._statement(sql, params, tuples=tuples)

    def _replace(self) -> None:
        """A new raw connection in place of the one the server dropped (StorageError, and this
        one left as it was, if the server cannot be reached)."""
        assert self._reopen is not None and self.namespace is not None
        if self._closed:  # closed on purpose, not dropped by the server
            raise StorageError("this memory has been closed")
        raw = self._reopen(self.namespace)
        with self._replacing:
            if self._closed:  # closed while the new one was being opened: nothing keeps it
                raw.close()
                raise StorageError("this memory has been closed")
            with contextlib.suppress(psycopg.Error):
                self.raw.close()
            self.raw = raw
        self._limited = None

    def _statement(self, sql: str, params: Any, *, tuples: bool) -> psycopg.Cursor[Any]:
        if sql not in ("COMMIT", "ROLLBACK"):
            self._limit()
        with self._errors():  # a closed connection refuses the cursor already
            cursor = self.raw.cursor(row_factory=tuple_row if tuples else _row_factory)
            cursor.execute(sql, _params(params) if params else None)
        return cursor

    def _limit(self) -> None:
        """Give the server this connection's deadline as its statement timeout: set once per
        deadline (not before every statement: a round trip each), so a later statement under
        the same deadline may run past it by at most the time since it was set."""
        deadline = self.deadline()
        if deadline is not None and deadline <= time.monotonic():
            # Spent: no statement is sent (a prepared one would finish inside any timeout).
            raise QueryTimeout("the query ran past its time limit and was stopped")
        if deadline == self._limited:
            return
        wanted = 0 if deadline is None else max(1, int((deadline - time.monotonic()) * 1000))
        with self._errors():
            # One statement's text whatever the value (statements run often are prepared).
            self.raw.execute("SELECT set_config('statement_timeout', %s, false)", [str(wanted)])
        self._limited = deadline

    def _errors(self) -> AbstractContextManager[None]:
        return _errors(self)


@contextmanager
def _errors(owner: Connection) -> Iterator[None]:
    """psycopg's errors as graphmem's: a statement past its deadline is QueryTimeout; a
    server that cannot be reached, or that failed, StorageError (a broken transaction is
    rolled back by the caller)."""
    try:
        yield
    except psycopg.errors.QueryCanceled:
        if owner.deadline() is None:
            raise
        raise QueryTimeout("the query ran past its time limit and was stopped") from None
    except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
        raise StorageError(f"PostgreSQL: {message(exc)}") from exc
    except psycopg.errors.ReadOnlySqlTransaction as exc:
        # A standby, or a primary made read-only before a switchover: the server's state,
        # not a fault of graphmem's (the writer then connects again: PostgresDatabase.write).
        raise StorageError(f"PostgreSQL accepts no writes here: {message(exc)}") from exc


def message(exc: BaseException) -> str:
    """A psycopg error's text on one line (libpq's spans several)."""
    return " ".join(str(exc).split()) or type(exc).__name__
