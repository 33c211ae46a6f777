"""Episodes in SQL: recorded once when a write first names them, listed, and their facts read
(:mod:`graphmem.episodes` holds the types and their validation).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

from ...episodes import DEFAULT_KIND, Episode, EpisodeInput
from ...errors import Conflict, InvalidInput, NotFound
from ...limits import MAX_LIMIT
from ...models import Fact, fact_columns
from ...temporal import TimeInput, TimeScope, parse_time, to_datetime
from .connections import SQLConnection
from .params import id_list


def resolve(conn: SQLConnection, now: float, given: EpisodeInput) -> Episode:
    """The episode ``given`` names, recorded at ``now`` if it is new. Conflict when it exists
    with another kind, source, time or metadata than ``given`` states."""
    d = conn.dialect
    found = get(conn, given.id)
    if found is None:
        conn.execute(
            "INSERT INTO episodes (id, kind, source, time, metadata, recorded_at)"
            f" VALUES ({d.arg}, {d.arg}, {d.arg}, {d.arg}, {d.arg}, {d.arg})",
            [
                given.id,
                given.kind or DEFAULT_KIND,
                given.source,
                now if given.time is None else given.time,
                json.dumps(given.metadata or {}, sort_keys=True),
                now,
            ],
        )
        made = get(conn, given.id)
        assert made is not None
        return made
    stated = {
        "kind": given.kind,
        "source": given.source,
        "time": None if given.time is None else to_datetime(given.time),
        "metadata": given.metadata,
    }
    for name, value in stated.items():
        if value is not None and value != getattr(found, name):
            raise Conflict(
                f"episode {given.id!r} was recorded with another {name} "
                f"({getattr(found, name)!r}); name it by its id alone to add facts to it"
            )
    return found


def chain(conn: SQLConnection, episode_id: str, fact_ids: Sequence[str]) -> list[tuple[str, str]]:
    """The (newer, older) pairs that link ``fact_ids`` (new facts of the episode, in order) to
    the fact before each: the episode's latest earlier fact not forgotten, then each other."""
    d = conn.dialect
    if not fact_ids:
        return []
    row = conn.execute(
        f"SELECT id FROM facts WHERE episode_id = {d.arg} AND retracted_at IS NULL"
        f" AND {d.in_list('id', d.arg, negated=True)} ORDER BY seq DESC LIMIT 1",
        [episode_id, id_list(fact_ids)],
    ).fetchone()
    order = ([row[0]] if row else []) + list(fact_ids)
    return list(zip(order[1:], order[:-1], strict=True))


def get(conn: SQLConnection, episode_id: str) -> Episode | None:
    d = conn.dialect
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM episodes WHERE id = {d.arg}", [episode_id]
    ).fetchone()
    return None if row is None else _episode(row)


def listing(
    conn: SQLConnection,
    *,
    source: str | None,
    after: TimeInput | None,
    before: TimeInput | None,
    limit: int,
) -> list[Episode]:
    """Episodes by time (oldest first), from ``source`` if given, with ``after <= time <
    before``."""
    d = conn.dialect
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"limit must be an integer from 1 to {MAX_LIMIT}", field="limit")
    where: list[str] = ["1 = 1"]
    params: dict[str, Any] = {"limit": limit}
    if source is not None:
        where.append(f"source = {d.param('source')}")
        params["source"] = source
    for name, op, value in (("after", ">=", after), ("before", "<", before)):
        moment = parse_time(value, field=name)
        if moment is not None:
            where.append(f"time {op} {d.param(name)}")
            params[name] = moment
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM episodes WHERE {' AND '.join(where)}"
        f" ORDER BY time, seq {d.limit(d.param('limit'))}",
        params,
    )
    return [_episode(r) for r in rows]


def facts(conn: SQLConnection, episode_id: str, scope: TimeScope) -> list[Fact]:
    """The episode's facts visible in ``scope`` (superseded versions included), in the order
    they were written. NotFound for an unknown episode."""
    d = conn.dialect
    if get(conn, episode_id) is None:
        raise NotFound(f"no episode with id {episode_id!r}")
    rows = conn.execute(
        f"SELECT {fact_columns('f', scope, param=d.param)} FROM facts f WHERE f.episode_id ="
        f" {d.param('episode')}"
        f" AND {scope.fact_clause(include_superseded=True, param=d.param)} ORDER BY f.seq",
        {"episode": episode_id, **scope.params},
    )
    return [Fact.from_values(r) for r in rows]


_COLUMNS: Final = "id, kind, source, time, metadata, recorded_at"


def _episode(row: Sequence[Any]) -> Episode:
    time, recorded = to_datetime(row[3]), to_datetime(row[5])
    assert time is not None
    return Episode(row[0], row[1], row[2], time, json.loads(row[4] or "{}"), recorded)
