"""Entities in SQL: the names the facts give their entities, and the aliases declared on them
(:mod:`graphmem.entities` groups them into entities and resolves names).

1. ``entity_names`` holds each entity name the facts carry, as their index compares it
   (``lower(entity)``), with one spelling, how many facts carry it and when memory first
   recorded one. It is derived from the facts, like the vector index: counted up as facts are
   written, counted again for the names a purge touches (a name no fact carries any more is
   deleted), rebuilt after an import and by :func:`rebuild`.
2. ``entity_aliases`` holds what callers declared, with transaction time: an alias (``name``
   is another name of the entity named ``target``), a merge (the entity ``name`` is the
   entity ``target``) or a split (``name`` stands on its own). Declaring again for the same
   name retracts the row before (``retracted_at``), so a read as known at an earlier moment
   sees the declarations as they were. A purge deletes every row, retracted or not, whose
   target no fact names any more, or whose name only the purged facts carried; a purge of an
   entity also every row named one of the entity's names (:func:`forget`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..interface import EntitySignature
from .connections import SQLConnection
from .params import id_list

#: Beyond every position a row can have (both engines' positions are 64-bit).
_LAST_POSITION = 2**63 - 1


def count_in(conn: SQLConnection, inserts: Iterable[Mapping[str, Any]], now: float) -> None:
    """Count the entity names of newly written fact rows in: one upsert per distinct name."""
    d = conn.dialect
    named = Counter(e for row in inserts if (e := row.get("entity")))
    if not named:
        return
    conn.executemany(
        "INSERT INTO entity_names (name, spelling, fact_count, first_recorded_at)"
        f" VALUES (lower({d.arg}), {d.arg}, {d.arg}, {d.arg}) {d.on_conflict('name')}"
        " DO UPDATE SET fact_count = entity_names.fact_count + excluded.fact_count",
        [(name, name, n, now) for name, n in named.items()],
    )


def names_of(conn: SQLConnection, ids: Sequence[str]) -> list[str]:
    """The entity names (as compared) the facts ``ids`` carry."""
    d = conn.dialect
    rows = conn.execute(
        f"SELECT DISTINCT {d.lower_entity('f')} FROM facts f"
        f" WHERE {d.in_list('f.id', d.param('ids'))} AND f.entity IS NOT NULL",
        {"ids": id_list(ids)},
    )
    return [r[0] for r in rows]


def recount(conn: SQLConnection, names: Sequence[str]) -> None:
    """After a purge: count ``names`` again from the facts left, delete those no fact carries,
    and delete the declarations that named an entity or a name now gone."""
    d = conn.dialect
    if not names:
        return
    param = {"names": id_list(names)}
    conn.execute(
        "UPDATE entity_names SET fact_count = (SELECT count(*) FROM facts f"
        f" WHERE {d.lower_entity('f')} = entity_names.name)"
        f" WHERE {d.in_list('name', d.param('names'))}",
        param,
    )
    conn.execute(
        f"DELETE FROM entity_names WHERE {d.in_list('name', d.param('names'))} AND fact_count = 0",
        param,
    )
    conn.execute(
        "DELETE FROM entity_aliases WHERE target NOT IN (SELECT name FROM entity_names)"
        f" OR ({d.in_list('lower(name)', d.param('names'))}"
        " AND lower(name) NOT IN (SELECT name FROM entity_names))",
        param,
    )
    _removed(conn)


def forget(conn: SQLConnection, declared: Sequence[str], *, unless: Sequence[str]) -> None:
    """After a purge of an entity: delete every declaration, in any state, named one of
    ``declared``, unless a fact still carries one of the entity's names ``unless``."""
    d = conn.dialect
    if not declared:
        return
    still = conn.execute(
        f"SELECT 1 FROM entity_names WHERE {d.in_list('name', d.arg)}", [id_list(unless)]
    ).fetchone()
    if still is None:
        conn.execute(
            f"DELETE FROM entity_aliases WHERE {d.in_list('name', d.arg)}", [id_list(declared)]
        )
        _removed(conn)


def rebuild(conn: SQLConnection) -> int:
    """Count every entity name again from the facts (after an import, or to rebuild); returns
    how many names there are. Declarations whose target no fact names are deleted."""
    conn.execute("DELETE FROM entity_names")
    conn.execute(
        "INSERT INTO entity_names (name, spelling, fact_count, first_recorded_at)"
        f" SELECT {conn.dialect.lower_entity('f')}, min(f.entity), count(*), min(f.recorded_at)"
        " FROM facts f WHERE f.entity IS NOT NULL"
        f" GROUP BY {conn.dialect.lower_entity('f')}"
    )
    conn.execute("DELETE FROM entity_aliases WHERE target NOT IN (SELECT name FROM entity_names)")
    _removed(conn)
    (count,) = conn.execute("SELECT count(*) FROM entity_names").fetchone()
    return int(count)


def _removed(conn: SQLConnection) -> None:
    """Count a statement that may have removed names or declarations: a reader's index of the
    entities is out of date when the count moves (an added name moves the newest position)."""
    conn.execute(
        f"INSERT INTO entity_removals (id, removals) VALUES (0, 1) {conn.dialect.on_conflict('id')}"
        " DO UPDATE SET removals = entity_removals.removals + 1"
    )


def names(
    conn: SQLConnection, *, after: int = 0, upto: int | None = None
) -> list[tuple[str, str, int, float]]:
    """Every entity name (or those at a position after ``after``, up to ``upto``), oldest
    first: (name as compared, a spelling, facts carrying it, first recorded)."""
    d = conn.dialect
    rows = conn.execute(
        "SELECT name, spelling, fact_count, first_recorded_at FROM entity_names"
        f" WHERE seq > {d.arg} AND seq <= {d.arg} ORDER BY seq",
        [after, _LAST_POSITION if upto is None else upto],
    )
    return [(r[0], r[1], int(r[2]), float(r[3])) for r in rows]


def aliases(conn: SQLConnection) -> list[tuple[int, str, str, str, float, float | None]]:
    """Every declaration, retracted or not, oldest first: (seq, kind, name, target, recorded_at,
    retracted_at)."""
    rows = conn.execute(
        "SELECT seq, kind, name, target, recorded_at, retracted_at FROM entity_aliases ORDER BY seq"
    )
    return [(int(r[0]), r[1], r[2], r[3], float(r[4]), r[5]) for r in rows]


def signature(conn: SQLConnection) -> EntitySignature:
    """What changes whenever a name comes or goes or a declaration is made or retracted.

    Asked by every read and write of the entities, so each part of it about the names is read
    from an index (a count of the names, or one query computing all of them, scans every
    name). A name comes with a newer position (writes of a namespace commit one at a time)."""
    removals, name_seq, named_at = conn.execute(
        "SELECT (SELECT max(removals) FROM entity_removals), (SELECT max(seq) FROM entity_names),"
        " (SELECT max(first_recorded_at) FROM entity_names)"
    ).fetchone()
    declarations, declared_seq, declared_at, retracted_at = conn.execute(
        "SELECT count(*), max(seq), max(recorded_at), max(retracted_at) FROM entity_aliases"
    ).fetchone()
    return EntitySignature(
        int(removals or 0),
        name_seq,
        int(declarations),
        declared_seq,
        named_at,
        declared_at,
        retracted_at,
    )


def declare(
    conn: SQLConnection,
    kind: str | None,
    name: str,
    target: str,
    now: float,
    *,
    retract: Sequence[int] = (),
) -> None:
    """Record a declaration at ``now`` (``kind`` None: none), retracting the live rows
    ``retract`` (the declarations it replaces)."""
    d = conn.dialect
    if retract:
        conn.execute(
            f"UPDATE entity_aliases SET retracted_at = {d.param('now')}"
            f" WHERE {d.in_list('seq', d.param('seqs'), kind='bigint')}"
            " AND retracted_at IS NULL",
            {"now": now, "seqs": id_list(retract)},
        )
    if kind is not None:
        conn.execute(
            "INSERT INTO entity_aliases (kind, name, target, recorded_at)"
            f" VALUES ({d.arg}, {d.arg}, {d.arg}, {d.arg})",
            [kind, name, target, now],
        )
