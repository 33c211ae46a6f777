"""The reference storage engine: one namespace in one SQLite file (WAL, FTS5).

``SQLiteStore`` is :class:`graphmem.storage.sql.store.SQLStore` over
:class:`graphmem.storage.sqlite.database.Database` (the write lock, per-thread readers, time
limits), with the process's clock and FTS5's bm25 (:mod:`graphmem.storage.sqlite.keyword`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

from ...temporal import TimeScope
from ..interface import Filters, Record
from ..sql import reads
from ..sql.connections import SQLConnection
from ..sql.params import id_list
from ..sql.store import SQLStore, SQLTransaction
from .database import Database, SQLiteConnection, storage_error
from .keyword import KeywordRanker

#: The file of a namespace's SQLite store, inside its directory.
SQLITE_FILE: Final = "graphmem.sqlite3"


class SQLiteTransaction(SQLTransaction):
    """A write transaction on SQLite; a savepoint's failure names the file."""

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        try:
            with super().savepoint():
                yield
        except sqlite3.OperationalError as exc:
            raise storage_error(exc, Path(self._path), "cannot write to") from exc

    def current_by_key(self, pairs: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
        """The facts live now with one of these (entity, key) pairs, ASCII lower-cased."""
        d = self.conn.dialect
        scope = TimeScope(self.now, self.now)
        # One index probe per pair: the CTE drives the join (CROSS JOIN keeps it outermost) into
        # the (lower(entity), lower(key)) index. Pairs are distinct, so no row comes twice.
        rows = self.conn.execute(
            "WITH wanted(entity, key) AS (SELECT json_extract(value, '$[0]'),"
            " json_extract(value, '$[1]') FROM json_each(:pairs)) SELECT f.* FROM wanted w"
            " CROSS JOIN facts f WHERE lower(f.entity) = w.entity AND lower(f.key) = w.key"
            f" AND {scope.fact_clause(param=d.param)}",
            {"pairs": id_list(pairs), **scope.params},
        )
        return [dict(r) for r in rows]


class SQLiteStore(SQLStore[Database]):
    """A namespace's facts, links, keyword index, outbox, embedding cache and meta in SQLite."""

    def __init__(
        self, path: Path, clock: Callable[[], float], *, graph_in_memory: bool = True
    ) -> None:
        super().__init__(Database(path), graph_in_memory=graph_in_memory)
        self._clock = clock
        self._keywords = KeywordRanker()
        self._last_stamp: float | None = None  # read on the first write, not at open

    def now(self) -> float:
        """The store's clock (epoch seconds, to the microsecond)."""
        return round(self._clock(), 6)

    def keyword_matches(
        self, query: str, scope: TimeScope, filters: Filters, n: int
    ) -> tuple[dict[str, float], dict[str, Record]]:
        """bm25 (higher is better) and ranking columns of the ``n`` best visible keyword
        matches. The ranked matches (:class:`~graphmem.storage.sqlite.keyword.KeywordRanker`) are read in
        growing slices, each filtered for visibility, until ``n`` are found or the matches run
        out: ranking happens once however many invisible versions rank above visible ones."""
        conn = self._read()
        ranked = self._keywords.ranked(conn, query, filters.period)
        scores: dict[str, float] = {}
        rows: dict[str, Record] = {}
        size = n
        while len(scores) < n:
            chunk = [hit for _, hit in zip(range(size), ranked, strict=False)]
            if not chunk:
                break
            by_seq = {
                r["seq"]: r
                for r in reads.candidates(conn, "seq", [seq for seq, _ in chunk], scope, filters)
            }
            for seq, rank in chunk:
                row = by_seq.get(seq)
                if row is not None and len(scores) < n:
                    rows[row["id"]] = row
                    scores[row["id"]] = -rank  # bm25: lower is better
            size *= 4
        ranked.close()
        return scores, rows

    def window_matches(self, query: str, n: int) -> dict[int, tuple[float, tuple[str, ...]]]:
        """The ``n`` best keyword matches among the windows: window -> (bm25, its facts)
        (:meth:`graphmem.storage.sqlite.keyword.KeywordRanker.windows`)."""
        return self._keywords.windows(self._read(), query, n)

    def _read(self) -> SQLiteConnection:
        return self._db.reader()

    def _stamp(self, conn: SQLConnection) -> float:
        """Transaction time for a write that holds the writer (on ``conn``): the clock, but
        never before an earlier write's (a clock stepped back must not reorder history)."""
        if self._last_stamp is None:  # the newest time already recorded (links: no index)
            self._last_stamp = float(
                conn.execute(
                    "SELECT max(coalesce((SELECT max(recorded_at) FROM facts), -1e300),"
                    " coalesce((SELECT max(recorded_at) FROM links), -1e300))"
                ).fetchone()[0]
            )
        self._last_stamp = max(self.now(), self._last_stamp)
        return self._last_stamp

    def _transaction(self, conn: SQLConnection) -> SQLiteTransaction:
        return SQLiteTransaction(conn, self._stamp, self._db.path)
