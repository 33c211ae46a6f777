"""New facts into the keyword index: SQLite's FTS5 table filled once per write, in its
transaction (PostgreSQL's index is a generated column and needs nothing)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

from .connections import SQLConnection

#: The facts columns in the keyword index, in its column order (the FTS5 table's, in
#: graphmem.storage.sqlite.migrations).
FTS_COLUMNS: Final = "text, category, entity, key, value, tags, context, date_terms"


@contextmanager
def indexing(conn: SQLConnection) -> Iterator[None]:
    """Facts inserted into ``facts`` inside the block join the keyword index when it ends.

    Every writer that inserts facts wraps its inserts in it, in the same transaction and before
    anything updates those facts (the update and delete triggers keep the index in step from
    then on). One statement for the block: an insert trigger made FTS5 work per row, about
    85 ms more per 1,000 facts. Nothing is indexed if the block raises (its transaction is
    rolled back). A connection whose engine keeps the keyword index itself
    (``indexes_keywords``: PostgreSQL's generated column) needs nothing.
    """
    if getattr(conn, "indexes_keywords", False):
        yield
        return
    before = _last_seq(conn)
    yield
    conn.execute(
        f"INSERT INTO facts_fts(rowid, {FTS_COLUMNS}) SELECT seq, {FTS_COLUMNS} FROM facts"
        " WHERE seq > ?",
        [before],
    )


def _last_seq(conn: SQLConnection) -> int:
    """The position of the newest fact (0 for none): facts inserted next come after it."""
    return int(conn.execute("SELECT coalesce(max(seq), 0) FROM facts").fetchone()[0])
