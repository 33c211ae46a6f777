"""Plain reads of the SQLite store: one fact, a set of facts, a page, a lookup, a history.

Functions of a connection and a time scope, like :mod:`graphmem.graph`: each read sees exactly
the facts the time rule (:class:`~graphmem.temporal.TimeScope`) makes visible, narrowed by the
``Filters`` a caller gives. The search pipeline reads its candidates here too.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

from ...errors import InvalidInput, NotFound
from ...models import FACT_COLUMNS, TURN_SOURCE, Fact, check_limit, fact_columns
from ...temporal import TimeScope
from ...timehints import TimeHint
from ..interface import FactPage, Filters
from .connections import SQLConnection
from .dialect import Dialect, Kind
from .params import id_list

#: The columns of a fact that ranking reads (see :mod:`graphmem.search`).
CANDIDATE_COLUMNS: Final = (
    "f.id, f.seq, f.importance, f.confidence, f.expires_at, f.last_confirmed_at, f.decay_class,"
    " f.source_date, f.valid_from, f.episode_id, f.stated_start, f.stated_end, f.entity"
)


def filter_clause(d: Dialect, filters: Filters, scope: TimeScope) -> tuple[str, dict[str, Any]]:
    """The SQL condition on ``facts f`` that keeps what ``filters`` keep in ``scope``, and its
    parameters."""
    params: dict[str, Any] = dict(scope.params)
    where = [scope.fact_clause(include_superseded=filters.include_superseded, param=d.param)]
    if filters.category is not None:
        where.append(f"f.category = {d.param('category')}")
        params["category"] = filters.category.lower()
    if filters.entity_names:
        where.append(d.in_list(d.lower_entity("f"), d.param("entity_names")))
        params["entity_names"] = id_list(filters.entity_names)
    elif filters.entity is not None:
        where.append(f"{d.lower_entity('f')} = lower({d.param('entity')})")
        params["entity"] = filters.entity
    if filters.source is not None:
        where.append(f"f.source = {d.param('source')}")
        params["source"] = filters.source
    if filters.tag is not None:
        where.append(_tag_clause(d, filters.tag, params))
    if filters.period is not None:
        where.append(period_clause(d, filters.period, params))
    return " AND ".join(where), params


def period_clause(d: Dialect, period: TimeHint, params: dict[str, Any]) -> str:
    """The SQL condition that a fact ``f`` is dated in ``period``, or that the time its text
    states overlaps it (not for a month of any year); its parameters go to ``params``. A
    fact's date for time words is ``Dialect.dated`` (indexed: the ``facts_dated`` index of
    both stores is on this very expression)."""
    dated_at = d.dated("f")
    if period.month is not None:
        params["month"] = period.month
        return f"{d.month(dated_at)} = {d.param('month')}"
    dated, stated = [], ["f.stated_start IS NOT NULL"]
    if period.start is not None:
        dated.append(f"{dated_at} >= {d.param('period_start')}")
        stated.append(f"f.stated_end > {d.param('period_start')}")
        params["period_start"] = period.start
    if period.end is not None:
        dated.append(f"{dated_at} < {d.param('period_end')}")
        stated.append(f"f.stated_start < {d.param('period_end')}")
        params["period_end"] = period.end
    return f"(({' AND '.join(dated)}) OR ({' AND '.join(stated)}))"


def dated_in(
    conn: SQLConnection, period: TimeHint, cap: int
) -> tuple[str, dict[str, Any], int] | None:
    """A query for the positions (``seq``) of the facts dated in ``period``, whatever their
    state, its parameters and the number of those facts — when the period holds at most
    ``cap`` facts; else None. Counting reads the date index, at most ``cap`` entries of it (a
    month of any year: that month of each year the facts' dates span, as ranges of the
    index)."""
    d = conn.dialect
    params: dict[str, Any] = {"cap": cap}
    clause = (
        period_clause(d, period, params)
        if period.month is None
        else _months(conn, period.month, params)
    )
    if clause is None:
        return None
    limit = d.limit(d.param("cap"))
    count = f"SELECT count(*) FROM (SELECT 1 FROM facts f WHERE {clause} {limit} + 1) c"
    held = int(conn.execute(count, params).fetchone()[0])
    if held > cap:
        return None
    return f"SELECT f.seq FROM facts f WHERE {clause}", params, held


#: A month of any year is read from the date index as that month of each year from the oldest
#: fact's date to the newest's, when they span at most this many years.
MONTH_YEARS_MAX: Final = 200


def _months(conn: SQLConnection, month: int, params: dict[str, Any]) -> str | None:
    """The condition that a fact is dated in ``month`` of a year its facts span, as ranges of
    dates (parameters into ``params``); None when no fact is dated or they span too many years."""
    d = conn.dialect
    dated_at = conn.dialect.dated("f")
    oldest, newest = conn.execute(  # each read from an end of the date index
        f"SELECT (SELECT min({dated_at}) FROM facts f), (SELECT max({dated_at}) FROM facts f)"
    ).fetchone()
    try:
        first = datetime.fromtimestamp(oldest, tz=UTC).year
        last = datetime.fromtimestamp(newest, tz=UTC).year
        if last - first >= MONTH_YEARS_MAX:
            return None
        spans = [
            (
                datetime(year, month, 1, tzinfo=UTC).timestamp(),
                datetime(year + month // 12, month % 12 + 1, 1, tzinfo=UTC).timestamp(),
            )
            for year in range(first, last + 1)
        ]
    except (TypeError, ValueError, OverflowError, OSError):  # no facts, or dates past datetime's
        return None
    ranges = []
    for i, (start, end) in enumerate(spans):
        params[f"month_start_{i}"], params[f"month_end_{i}"] = start, end
        ranges.append(
            f"({dated_at} >= {d.param(f'month_start_{i}')} AND {dated_at} <"
            f" {d.param(f'month_end_{i}')})"
        )
    return "(" + " OR ".join(ranges) + ")"


def get(conn: SQLConnection, fact_id: str, scope: TimeScope) -> Fact | None:
    """The fact if it is visible in ``scope``, else None (also for unknown ids)."""
    d = conn.dialect
    found = conn.execute(
        f"SELECT {fact_columns('f', scope, param=d.param)} FROM facts f WHERE f.id ="
        f" {d.param('id')}"
        f" AND {scope.fact_clause(param=d.param)}",
        {"id": fact_id, **scope.params},
    ).fetchone()
    return None if found is None else Fact.from_values(found)


def get_many(
    conn: SQLConnection, ids: Iterable[str], scope: TimeScope, *, include_superseded: bool
) -> dict[str, Fact]:
    """The facts among ``ids`` visible in ``scope``, by id, in one query."""
    d = conn.dialect
    rows = conn.execute(
        f"SELECT {fact_columns('f', scope, param=d.param)} FROM facts f WHERE"
        f" {d.in_list('f.id', d.param('ids'))}"
        f" AND {scope.fact_clause(include_superseded=include_superseded, param=d.param)}",
        {"ids": id_list(ids), **scope.params},
    )
    return {r[0]: Fact.from_values(r) for r in rows}


def known_now(conn: SQLConnection, ids: Iterable[str]) -> dict[str, Fact]:
    """The facts among ``ids`` whatever their state, every field as it is now, by id."""
    d = conn.dialect
    rows = conn.execute(
        f"SELECT {fact_columns('f')} FROM facts f WHERE {d.in_list('f.id', d.param('ids'))}",
        {"ids": id_list(ids)},
    )
    return {r[0]: Fact.from_values(r) for r in rows}


def page(
    conn: SQLConnection, scope: TimeScope, filters: Filters, *, first: int, after: int | None
) -> FactPage:
    """Visible facts in the order they were recorded, ``first`` after position ``after``."""
    d = conn.dialect
    check_limit(first, "first")
    if after is not None and (isinstance(after, bool) or not isinstance(after, int)):
        raise InvalidInput("after must be a position from a previous page", field="after")
    visible, params = filter_clause(d, filters, scope)
    rows = conn.execute(
        f"SELECT f.seq, {fact_columns('f', scope, param=d.param)} FROM facts f WHERE f.seq >"
        f" {d.param('after')}"
        f" AND {visible}"
        f" ORDER BY f.seq {d.limit(d.param('first'))}",
        {**params, "after": after or 0, "first": first + 1},
    ).fetchall()
    items = [(r[0], Fact.from_values(r[1:])) for r in rows[:first]]
    return FactPage(items, has_more=len(rows) > first)


def lookup(
    conn: SQLConnection,
    entity: str,
    scope: TimeScope,
    *,
    key: str | None = None,
    tag: str | None = None,
    include_superseded: bool = False,
    limit: int = 100,
    names: Sequence[str] = (),
) -> list[Fact]:
    """Facts about ``entity`` (and ``key``), case-insensitive, or (``names`` given) about any
    of the entity's ``names`` as the facts' index compares them: the most confident first,
    then the newest effective date."""
    d = conn.dialect
    if not isinstance(entity, str) or not entity.strip():
        raise InvalidInput("entity must be a non-empty string", field="entity")
    check_limit(limit)
    where = [
        d.in_list(d.lower_entity("f"), d.param("names"))
        if names
        else f"{d.lower_entity('f')} = lower({d.param('entity')})",
        scope.fact_clause(include_superseded=include_superseded, param=d.param),
    ]
    params: dict[str, Any] = {"entity": entity.strip(), **scope.params, "limit": limit}
    if names:
        params["names"] = id_list(names)
    if key is not None:
        where.append(f"{d.lower_key('f')} = lower({d.param('key')})")
        params["key"] = key.strip()
    if tag is not None:
        where.append(_tag_clause(d, tag, params))
    rows = conn.execute(
        f"SELECT {fact_columns('f', scope, param=d.param)} FROM facts f WHERE {' AND '.join(where)}"
        f" ORDER BY f.confidence DESC, {d.dated('f')} DESC, f.seq DESC"
        f" {d.limit(d.param('limit'))}",
        params,
    )
    return [Fact.from_values(r) for r in rows]


def latest(
    conn: SQLConnection,
    entity: str,
    key: str,
    scope: TimeScope,
    *,
    limit: int,
    names: Sequence[str] = (),
) -> list[Fact]:
    """The visible facts with this entity (or, ``names`` given, any of the entity's names as
    the facts' index compares them) and key, case-insensitive, latest valid first."""
    d = conn.dialect
    named = (
        d.in_list(d.lower_entity("f"), d.param("names"))
        if names
        else f"{d.lower_entity('f')} = lower({d.param('entity')})"
    )
    rows = conn.execute(
        f"SELECT {fact_columns('f', scope, param=d.param)} FROM facts f"
        f" WHERE {named} AND {d.lower_key('f')} = lower({d.param('key')})"
        f" AND {scope.fact_clause(param=d.param)} ORDER BY f.valid_from DESC"
        f" {d.limit(d.param('n'))}",
        {"entity": entity, "names": id_list(names), "key": key, "n": limit, **scope.params},
    )
    return [Fact.from_values(r) for r in rows]


def pinned(conn: SQLConnection, scope: TimeScope, *, limit: int) -> list[Fact]:
    """The visible pinned facts (pinned by ``:known_at``), the earliest pinned first."""
    d = conn.dialect
    rows = conn.execute(
        f"SELECT {fact_columns('f', scope, param=d.param)} FROM facts f"
        f" WHERE f.pinned_at IS NOT NULL AND f.pinned_at <= {d.param('known_at')}"
        f" AND {scope.fact_clause(param=d.param)} ORDER BY f.pinned_at, f.seq"
        f" {d.limit(d.param('n'))}",
        {"n": limit, **scope.params},
    )
    return [Fact.from_values(r) for r in rows]


def newest_keyed(
    conn: SQLConnection,
    entity: str,
    prefix: str,
    scope: TimeScope,
    *,
    unexpired_at: float,
    limit: int,
) -> list[Fact]:
    """The visible facts of ``entity`` (case-insensitive) whose key starts with ``prefix`` and
    that have not expired at ``unexpired_at``, the newest written first (a key that sorts high
    cannot put an old fact first)."""
    d = conn.dialect
    rows = conn.execute(
        f"SELECT {fact_columns('f', scope, param=d.param)} FROM facts f"
        f" WHERE {d.lower_entity('f')} = lower({d.param('entity')}) AND f.key >= {d.param('low')}"
        f" AND f.key < {d.param('high')}"
        f" AND (f.expires_at IS NULL OR f.expires_at > {d.param('now')})"
        f" AND {scope.fact_clause(param=d.param)} ORDER BY f.recorded_at DESC, f.seq DESC"
        f" {d.limit(d.param('n'))}",
        {
            "entity": entity,
            "low": prefix,
            "high": prefix[:-1] + chr(ord(prefix[-1]) + 1),
            "now": unexpired_at,
            "n": limit,
            **scope.params,
        },
    )
    return [Fact.from_values(r) for r in rows]


def recent(
    conn: SQLConnection,
    scope: TimeScope,
    *,
    since: float,
    per_category: int,
    skip_categories: Sequence[str],
    skip_entity: str,
) -> list[Fact]:
    """The visible facts recorded since ``since``: the newest ``per_category`` of each category
    (those of ``skip_categories`` and of entity ``skip_entity`` left out), oldest first."""
    d = conn.dialect
    rows = conn.execute(
        f"""SELECT {FACT_LIST} FROM (
            SELECT {fact_columns("f", scope, param=d.param)}, f.seq AS seq, row_number() OVER (
                PARTITION BY f.category ORDER BY f.recorded_at DESC, f.seq DESC) AS n
            FROM facts f WHERE f.recorded_at >= {d.param("since")}
            AND {d.in_list("f.category", d.param("values"), negated=True)}
            AND lower(COALESCE(f.entity, '')) <> lower({d.param("entity")})
            AND {scope.fact_clause(param=d.param)}
        ) AS ranked WHERE n <= {d.param("per")} ORDER BY seq""",
        {
            "since": since,
            "values": id_list(skip_categories),
            "entity": skip_entity,
            "per": per_category,
            **scope.params,
        },
    )
    return [Fact.from_values(r) for r in rows]


def texts_by_hash(
    conn: SQLConnection, hashes: Sequence[str], scope: TimeScope
) -> dict[str, set[str]]:
    """The texts of the visible facts with each normalised hash, turns left out (a fact is no
    repeat of what was said in a conversation: see graphmem.models.FactKind)."""
    d = conn.dialect
    out: dict[str, set[str]] = {}
    for h, text in conn.execute(
        "SELECT normalized_hash, text FROM facts f WHERE"
        f" {d.in_list('normalized_hash', d.param('values'))}"
        f" AND {scope.fact_clause(param=d.param)}"
        f" AND (f.source IS NULL OR substr(f.source, 1, {d.param('turn_length')}) <>"
        f" {d.param('turn_source')})",
        {
            "values": id_list(hashes),
            "turn_length": len(TURN_SOURCE),
            "turn_source": TURN_SOURCE,
            **scope.params,
        },
    ):
        out.setdefault(h, set()).add(text)
    return out


def entity_facts(
    conn: SQLConnection, names: Sequence[str], scope: TimeScope, *, per_entity: int
) -> list[Fact]:
    """The visible facts of each entity named (lower-case names): up to ``per_entity`` each,
    most confident and newest first, in one query."""
    d = conn.dialect
    rows = conn.execute(
        f"""SELECT {FACT_LIST} FROM (
            SELECT {fact_columns("f", scope, param=d.param)}, f.seq AS seq, row_number() OVER (
                PARTITION BY {d.lower_entity("f")} ORDER BY f.confidence DESC,
                {d.dated("f")} DESC, f.seq DESC) AS n
            FROM facts f WHERE {d.in_list(d.lower_entity("f"), d.param("names"))}
            AND {scope.fact_clause(param=d.param)}
        ) AS ranked WHERE n <= {d.param("per_entity")} ORDER BY n, seq""",
        {"names": id_list(names), "per_entity": per_entity, **scope.params},
    )
    return [Fact.from_values(r) for r in rows]


def history(conn: SQLConnection, fact_id: str, scope: TimeScope) -> list[Fact]:
    """Every version in ``fact_id``'s supersession chain visible in ``scope``, oldest first.
    NotFound if the id is unknown."""
    d = conn.dialect
    if row(conn, fact_id) is None:
        raise NotFound(f"no fact with id {fact_id!r}")
    rows = conn.execute(
        f"""
        WITH RECURSIVE chain(id) AS (
            SELECT id FROM facts WHERE id = {d.param("id")}
            UNION
            SELECT CASE WHEN l.source_id = chain.id THEN l.target_id ELSE l.source_id END
            FROM links l JOIN chain ON l.source_id = chain.id OR l.target_id = chain.id
            WHERE l.type = 'SUPERSEDES'
        )
        SELECT {fact_columns("f", scope, param=d.param)} FROM facts f JOIN chain ON f.id = chain.id
        WHERE f.recorded_at <= {d.param("known_at")}
          AND (f.retracted_at IS NULL OR f.retracted_at > {d.param("known_at")})
          AND f.valid_from <= {d.param("as_of")}
        ORDER BY f.valid_from, f.recorded_at, f.seq
        """,
        {"id": fact_id, **scope.params},
    )
    return [Fact.from_values(r) for r in rows]


def visible(
    conn: SQLConnection, ids: Sequence[str], scope: TimeScope, filters: Filters
) -> dict[str, Fact]:
    """The facts among ``ids`` that ``filters`` keep in ``scope``, by id."""
    d = conn.dialect
    if not ids:
        return {}
    where, params = filter_clause(d, filters, scope)
    rows = conn.execute(
        f"SELECT {fact_columns('f', scope, param=d.param)} FROM facts f WHERE"
        f" {d.in_list('f.id', d.param('ids'))} AND {where}",
        {**params, "ids": id_list(ids)},
    )
    return {r[0]: Fact.from_values(r) for r in rows}


def candidates(
    conn: SQLConnection,
    column: str,
    values: Sequence[Any],
    scope: TimeScope,
    filters: Filters,
) -> list[sqlite3.Row]:
    """The ranking columns (CANDIDATE_COLUMNS) of the visible facts whose ``column`` (id or
    seq) is among ``values``."""
    d = conn.dialect
    if not values:
        return []
    where, params = filter_clause(d, filters, scope)
    return conn.execute(
        f"SELECT {CANDIDATE_COLUMNS} FROM facts f WHERE"
        f" {d.in_list(f'f.{column}', d.param('values'), kind=_kind(column))} AND {where}",
        {**params, "values": id_list(values)},
    ).fetchall()


def row(conn: SQLConnection, fact_id: str) -> sqlite3.Row | None:
    """Every column of a fact, whatever its state; None for an unknown id."""
    d = conn.dialect
    found: sqlite3.Row | None = conn.execute(
        f"SELECT * FROM facts WHERE id = {d.arg}", [fact_id]
    ).fetchone()
    return found


def rows_by_id(
    conn: SQLConnection, ids: Iterable[str], columns: str = "*"
) -> dict[str, Mapping[str, Any]]:
    """``columns`` (which must include id) of the facts among ``ids``, whatever their state."""
    d = conn.dialect
    rows = conn.execute(
        f"SELECT {columns} FROM facts WHERE {d.in_list('id', d.param('ids'))}",
        {"ids": id_list(ids)},
    )
    return {r["id"]: r for r in rows}


#: FACT_COLUMNS unprefixed, to select a Fact's fields from a subquery.
FACT_LIST: Final = ", ".join(FACT_COLUMNS)


def _kind(column: str) -> Kind:
    """The type of the values of an id list compared with the fact column ``column``."""
    return "bigint" if column == "seq" else "text"


def _tag_clause(d: Dialect, tag: str, params: dict[str, Any]) -> str:
    params["tag_pattern"] = "%," + tag.strip().lower().replace("%", "").replace("_", "\\_") + ",%"
    return f"(',' || f.tags || ',') {d.like} {d.param('tag_pattern')} ESCAPE '\\'"
