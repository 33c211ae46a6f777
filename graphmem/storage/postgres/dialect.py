"""The shared SQL of :mod:`graphmem.storage.sql`, spoken to PostgreSQL.

That SQL (:mod:`graphmem.storage.sql.reads`, :mod:`graphmem.storage.sql.traversal`, …) is written
for SQLite. Here its tables are views of one namespace (:mod:`graphmem.storage.postgres.schema`),
so it needs no namespace filter, and:

1. :class:`Connection` gives it a psycopg connection with ``sqlite3``'s surface (``execute``,
   ``executemany``, ``cursor``, rows read by index or by name, ``in_transaction``);
2. :func:`translate` rewrites each statement once (then cached) from the closed set of SQLite
   constructs it uses; anything else passes through as written.

The conformance suite (tests/storage/test_conformance.py) and the Memory-level suites run every
statement the store issues against a real PostgreSQL.
"""

from __future__ import annotations

import contextlib
import functools
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Final, cast

import psycopg
from psycopg import pq
from psycopg.rows import RowMaker, tuple_row

from ...errors import QueryTimeout, StorageError
from ..sql.params import IdList
from .schema import COMPUTED, NAMESPACE_SETTING

#: For ``INSERT OR REPLACE``: the key of each table it is used on, and the columns a replaced
#: row takes anew (SQLite's REPLACE deletes the row and inserts a new one: a new rowid).
_REPLACE_KEYS: Final[dict[str, tuple[tuple[str, ...], tuple[str, ...]]]] = {
    "outbox": (("fact_id",), ("seq = nextval(pg_get_serial_sequence('gm_outbox', 'seq'))",)),
    "embedding_cache": (("provider", "model", "text_hash"), ()),
    "meta": (("key",), ()),
    "files": (("path",), ()),
}

_IN_LIST = re.compile(
    r"([\w.]+|\))(\s+NOT)?\s+IN\s+\(SELECT value FROM json_each\(([^()]+)\)\)", re.IGNORECASE
)
#: The views' columns that the shared SQL does not know: the namespace, the computed ones.
HIDDEN: Final = ("namespace", *COMPUTED)
_LIST_TABLE = re.compile(r"json_each\(([^()]+)\)\s+(\w+)\b", re.IGNORECASE)
_INSERT_OR = re.compile(r"INSERT OR (IGNORE|REPLACE) INTO (\w+)\s*\(([^)]*)\)", re.IGNORECASE)
_CONFLICT = re.compile(r"ON CONFLICT \(", re.IGNORECASE)
_PRAGMA_TABLE = re.compile(r"PRAGMA table_info\((\w+)\)", re.IGNORECASE)
_HINTS = re.compile(r"INDEXED BY \w+|(?<=[\s(])\+(?=[a-z_])", re.IGNORECASE)
_ROWID = re.compile(r"\browid\b")
_LIKE = re.compile(r"\bLIKE\b")
_LIMIT = re.compile(r"LIMIT (:\w+|\?)")
_PICKED = re.compile(
    r"JOIN (\w+) (\w+) ON \2\.rowid IN \(\s*SELECT \2\.rowid FROM (.*?LIMIT :\w+)\)", re.DOTALL
)


def _on_alias(expression: str) -> re.Pattern[str]:
    """``expression`` (a function of columns, as schema.COMPUTED writes it) on the columns of
    any one table alias: ``lower(entity)`` matches ``lower(f.entity)``, the alias captured."""
    function, arguments = expression.removesuffix(")").split("(", 1)
    columns = [re.escape(c.strip()) for c in arguments.split(",")]
    on_alias = [rf"(\w+)\.{columns[0]}", *(rf"\1\.{c}" for c in columns[1:])]
    return re.compile(rf"\b{function}\({', '.join(on_alias)}\)", re.IGNORECASE)


#: The expressions on a fact alias that ``gm_facts`` keeps as columns, and those columns.
_COMPUTED: Final = {_on_alias(expression): name for name, (expression, _) in COMPUTED.items()}


@functools.lru_cache(maxsize=4096)
def translate(sql: str) -> str:
    """``sql`` as PostgreSQL and psycopg take it:

    * parameters ``:name`` and ``?`` become psycopg's ``%(name)s`` and ``%s``;
    * an id list (``x IN (SELECT value FROM json_each(:ids))``, ``json_each(:ids) fr``) becomes
      an array, typed by the column it is compared with (``seq``: bigint, else text):
      ``x = ANY(array)`` (``<> ALL`` for NOT IN), or ``unnest`` with its ``key`` (the
      position) when read as a table;
    * the scalar ``max(a, b)`` and ``min(a, b)`` become ``GREATEST`` and ``LEAST``; ``rowid``
      becomes ``seq``; SQLite's planner hints (``INDEXED BY``, a unary ``+``) are dropped;
    * ``INSERT OR IGNORE`` / ``INSERT OR REPLACE`` become ``ON CONFLICT`` clauses on the
      table's key, and every conflict target gains the ``namespace`` column that leads every key;
    * a join on the rows a correlated subquery picks (``JOIN links l ON l.rowid IN (SELECT
      l.rowid FROM … LIMIT :cap)``, a traversal's strongest links per frontier fact) becomes a
      ``LATERAL`` join (PostgreSQL would otherwise run the subquery once per row of the table);
    * ``lower(f.entity)``, ``lower(f.key)`` and ``COALESCE(f.source_date, f.valid_from)``
      become the columns ``gm_facts`` keeps them in (``schema.COMPUTED``: its indexes serve them);
    * ``LIKE`` becomes ``ILIKE`` (SQLite's LIKE ignores ASCII case), a negative ``LIMIT`` no
      limit, the month of an epoch is read with ``to_char``, ``PRAGMA table_info`` from the
      information schema; rows leave out the views' ``namespace`` and computed columns.
    """
    sql = _PICKED.sub(r"CROSS JOIN LATERAL (SELECT \2.* FROM \3) \2", sql)
    for expression, column in _COMPUTED.items():
        sql = expression.sub(rf"\1.{column}", sql)
    sql = _PRAGMA_TABLE.sub(
        r"SELECT ordinal_position, column_name::text FROM information_schema.columns"
        r" WHERE table_name = '\1' AND table_schema = current_schema()"
        f" AND column_name NOT IN ({', '.join(repr(c) for c in HIDDEN)})"
        r" ORDER BY ordinal_position",
        sql,
    )
    sql = _IN_LIST.sub(_in_list, sql)
    sql = _LIST_TABLE.sub(
        lambda m: f"unnest(CAST({m[1]} AS text[])) WITH ORDINALITY AS {m[2]}(value, key)", sql
    )
    sql = _HINTS.sub("", sql)
    sql = _ROWID.sub("seq", sql)
    sql = _LIKE.sub("ILIKE", sql)
    sql = _functions(sql)
    sql = _aliased(sql)
    sql = _LIMIT.sub(r"LIMIT NULLIF(GREATEST(\1, -1), -1)", sql)
    sql = _CONFLICT.sub("ON CONFLICT (namespace, ", sql)
    insert = _INSERT_OR.search(sql)
    if insert is not None:
        sql = _insert_or(sql, insert)
    return _parameters(sql)


def _in_list(m: re.Match[str]) -> str:
    column, negated, param = m[1], m[2], m[3]
    kind = "bigint" if column.split(".")[-1] in ("seq", "rowid") else "text"
    # = ANY: an index probe per value whatever the planner's estimates (IN over unnest becomes
    # a semi-join that a table without statistics plans as a nested loop).
    return f"{column} {'<> ALL' if negated else '= ANY'}(CAST({param} AS {kind}[]))"


def _insert_or(sql: str, m: re.Match[str]) -> str:
    action, table, columns = m[1].upper(), m[2], [c.strip() for c in m[3].split(",")]
    sql = sql[: m.start()] + f"INSERT INTO {table} ({m[3]})" + sql[m.end() :]
    if action == "IGNORE":
        return sql + " ON CONFLICT DO NOTHING"
    key, renewed = _REPLACE_KEYS[table]
    updates = [f"{c} = excluded.{c}" for c in columns if c not in key]
    updates += list(renewed)
    return sql + f" ON CONFLICT (namespace, {', '.join(key)}) DO UPDATE SET {', '.join(updates)}"


def _functions(sql: str) -> str:
    """Scalar max/min of several arguments, and the month of an epoch (strftime)."""
    out: list[str] = []
    i = 0
    pattern = re.compile(r"\b(max|min|strftime)\(", re.IGNORECASE)
    while (m := pattern.search(sql, i)) is not None:
        start, open_at = m.start(), m.end() - 1
        close_at, args = _arguments(sql, open_at)
        name = m[1].lower()
        inner = ", ".join(_functions(a).strip() for a in args)
        out.append(sql[i:start])
        if name == "strftime":
            if args[0].strip() != "'%m'" or args[-1].strip() != "'unixepoch'":
                raise ValueError(f"strftime form not translated: {sql[start : close_at + 1]}")
            moment = _functions(args[1]).strip()
            out.append(f"to_char(to_timestamp({moment}) AT TIME ZONE 'UTC', 'MM')")
        elif len(args) > 1:
            out.append(f"{'GREATEST' if name == 'max' else 'LEAST'}({inner})")
        else:
            out.append(f"{m[1]}({inner})")
        i = close_at + 1
    out.append(sql[i:])
    return "".join(out)


_SUBQUERY = re.compile(r"\b(FROM|JOIN)\s*\(\s*SELECT\b", re.IGNORECASE)
_ALIAS = re.compile(
    r"\s*(AS\s+)?(?!(WHERE|ORDER|GROUP|LIMIT|UNION|ON|JOIN|LEFT|CROSS|INNER)\b)[a-z_]\w*", re.I
)


def _aliased(sql: str) -> str:
    """Every subquery in FROM or JOIN with an alias (PostgreSQL before 16 requires one)."""
    out: list[str] = []
    i = n = 0
    while (m := _SUBQUERY.search(sql, i)) is not None:
        open_at = sql.index("(", m.start())
        close_at, _ = _arguments(sql, open_at)
        out.append(sql[i : open_at + 1] + _aliased(sql[open_at + 1 : close_at]) + ")")
        i = close_at + 1
        if _ALIAS.match(sql, i) is None:
            n += 1
            out.append(f" AS _q{n}")
    out.append(sql[i:])
    return "".join(out)


def _arguments(sql: str, open_at: int) -> tuple[int, list[str]]:
    """The index of the parenthesis closing the one at ``open_at``, and the top-level
    arguments between them."""
    depth, quoted, start = 0, False, open_at + 1
    args: list[str] = []
    for i in range(open_at, len(sql)):
        c = sql[i]
        if c == "'":
            quoted = not quoted
        elif quoted:
            continue
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                args.append(sql[start:i])
                return i, args
        elif c == "," and depth == 1:
            args.append(sql[start:i])
            start = i + 1
    raise ValueError(f"unbalanced parentheses in {sql!r}")


_PARAM = re.compile(r"'[^']*'|::|:(\w+)|\?|%")


def _parameters(sql: str) -> str:
    def one(m: re.Match[str]) -> str:
        text = m[0]
        if text.startswith("'"):
            return text.replace("%", "%%")
        if text == "::":
            return text
        if text == "?":
            return "%s"
        if text == "%":
            return "%%"
        return f"%({m[1]})s"

    return _PARAM.sub(one, sql)


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
    """A cursor with sqlite3's surface; ``row_factory = None`` reads plain tuples."""

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
            self.raw.cursor().executemany(translate(sql), batch)

    def close(self) -> None:
        with self._replacing:
            self._closed = True
            self.raw.close()

    def point(self, namespace: str) -> None:
        """Point the connection at ``namespace`` (outside a transaction)."""
        self.execute("SELECT set_config(?, ?, false)", [NAMESPACE_SETTING, namespace])
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
            cursor.execute(translate(sql), _params(params) if params else None)
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


def message(exc: BaseException) -> str:
    """A psycopg error's text on one line (libpq's spans several)."""
    return " ".join(str(exc).split()) or type(exc).__name__
