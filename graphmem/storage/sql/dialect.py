"""What the shared SQL says differently in each engine, said by a :class:`Dialect`.

Every statement of :mod:`graphmem.storage.sql` is written where it is used, with the constructs
the two engines spell differently taken from the connection's dialect (``conn.dialect``): id
lists, upserts on a key, ``INSERT OR IGNORE``, the scalar greatest/least of two values, the month
of an epoch, the rows a correlated subquery picks (top-per-row), planner hints, case-blind
``LIKE``, the columns of a table, a ``LIMIT`` that may be negative. :class:`SQLiteDialect` is
SQLite's; PostgreSQL's is :class:`graphmem.storage.postgres.dialect.PostgresDialect`.

Parameters too are the dialect's (``d.param("ids")``, ``d.arg``), each in its driver's own style
(sqlite3's ``:name`` and ``?``, psycopg's ``%(name)s`` and ``%s``), so no statement is rewritten
on its way to the server.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Literal

#: The type of an id list's values: text ids, or integer seqs.
Kind = Literal["text", "bigint"]


class Dialect:
    """The constructs the shared SQL spells per engine; SQLite's spelling here."""

    #: The name of the engine, for messages.
    name: str = "sqlite"
    #: The column a row's insertion order is read from (SQLite's ``rowid``).
    rowid: str = "rowid"
    #: ``LIKE`` that ignores ASCII case (SQLite's LIKE does).
    like: str = "LIKE"
    #: A parameter given by position (sqlite3's ``?``).
    arg: str = "?"

    def param(self, name: str) -> str:
        """The parameter ``name``, given by name (sqlite3's ``:name``)."""
        return f":{name}"

    def in_list(
        self, column: str, param: str, *, negated: bool = False, kind: Kind = "text"
    ) -> str:
        """``column`` is (``negated``: is not) one of the id list ``param`` (made by
        :func:`graphmem.storage.sql.params.id_list`)."""
        return f"{column} {'NOT IN' if negated else 'IN'} (SELECT value FROM json_each({param}))"

    def list_table(self, param: str, alias: str) -> str:
        """The id list ``param`` as a table ``alias`` of ``value`` (and ``key``, the position)."""
        return f"json_each({param}) {alias}"

    def greatest(self, *values: str) -> str:
        """The greatest of two or more values (not an aggregate)."""
        return f"max({', '.join(values)})"

    def least(self, *values: str) -> str:
        """The least of two or more values (not an aggregate)."""
        return f"min({', '.join(values)})"

    def month(self, moment: str) -> str:
        """The month (1 to 12, UTC) of the epoch seconds ``moment``, as an integer."""
        return f"CAST(strftime('%m', {moment}, 'unixepoch') AS INTEGER)"

    def limit(self, param: str) -> str:
        """``LIMIT param``, where a negative value means no limit."""
        return f"LIMIT {param}"

    def insert_ignoring(self, table: str, columns: str, rows: str) -> str:
        """Insert ``rows`` (``VALUES …`` or a ``SELECT``) into ``columns`` of ``table``, leaving
        out those whose key (any unique one) is taken."""
        return f"INSERT OR IGNORE INTO {table} ({columns}) {rows}"

    def upsert(
        self, table: str, columns: str, rows: str, key: Sequence[str], *, renumber: bool = False
    ) -> str:
        """Insert ``rows`` into ``columns`` of ``table``, replacing the row of the same ``key``
        (``renumber``: a replaced row takes a new ``rowid``, as new rows do)."""
        return f"INSERT OR REPLACE INTO {table} ({columns}) {rows}"

    def on_conflict(self, key: str) -> str:
        """``ON CONFLICT (key)`` on a table of the namespace."""
        return f"ON CONFLICT ({key})"

    def picked(self, table: str, alias: str, rest: str) -> str:
        """A join on the rows of ``table`` (as ``alias``) that a correlated subquery picks:
        ``rest`` is that subquery after ``SELECT alias.* FROM`` (with its ORDER BY, LIMIT)."""
        return f"JOIN {table} {alias} ON {alias}.rowid IN (SELECT {alias}.rowid FROM {rest})"

    def indexed_by(self, index: str) -> str:
        """A hint to SQLite's planner to read through ``index`` (appended to a table)."""
        return f" INDEXED BY {index}"

    def unindexed(self, expression: str) -> str:
        """``expression``, with SQLite's planner told not to use an index for it."""
        return f"+{expression}"

    def lower_entity(self, alias: str) -> str:
        """``lower(alias.entity)``, as the fact table's indexes serve it."""
        return f"lower({alias}.entity)"

    def lower_key(self, alias: str) -> str:
        """``lower(alias.key)``, as the fact table's indexes serve it."""
        return f"lower({alias}.key)"

    def dated(self, alias: str) -> str:
        """When the fact ``alias`` happened: its stated date, else when it became true."""
        return f"COALESCE({alias}.source_date, {alias}.valid_from)"

    def columns_of(self, table: str) -> str:
        """A query of the columns of ``table``, in order: their names in the second column."""
        return f"PRAGMA table_info({table})"


class SQLiteDialect(Dialect):
    """SQLite's spelling (the base class's)."""


#: The one SQLite dialect.
SQLITE: Final = SQLiteDialect()
