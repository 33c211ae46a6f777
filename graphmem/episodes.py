"""Episodes: the units facts come from — a conversation session, a document.

An episode is recorded once (id, kind, source, time, metadata) when a write first names it. Each
fact written with it carries its ``episode_id``; a fact keeps the episode it was first written
with (a duplicate written later with another episode stays where it is). Consecutive facts of an
episode are linked: each new fact RELATED_TO the fact before it in the episode (origin
``episode``, strength 1), so graph-aware search can let neighbouring turns lend each other
evidence without the caller making links.

Functions of a connection, like :mod:`graphmem.graph`; the write path calls them through the
storage interface's transaction.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, Final

from .errors import Conflict, InvalidInput, NotFound
from .graph import check_metadata
from .limits import MAX_FIELD_LENGTH, MAX_LIMIT
from .models import Fact, LinkOrigin, fact_columns
from .storage.sqlite.database import id_list
from .temporal import TimeInput, TimeScope, parse_time, to_datetime, to_iso

#: What an episode can be. Conversations are what ``capture`` and ``store_many`` usually record.
EPISODE_KINDS: Final = ("conversation", "document", "other")
#: The kind of an episode named by its id alone.
DEFAULT_KIND: Final = "conversation"


@dataclass(frozen=True, slots=True)
class Episode:
    """A unit facts came from: when memory learnt of it (``recorded_at``) and the time it
    happened or was written (``time``; default: when it was recorded)."""

    id: str
    kind: str
    source: str | None
    time: datetime
    metadata: dict[str, Any] = field(default_factory=dict)
    recorded_at: datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields: times as ISO-8601 UTC text."""
        out = asdict(self)
        out["time"] = to_iso(self.time.timestamp())
        out["recorded_at"] = (
            None if self.recorded_at is None else to_iso(self.recorded_at.timestamp())
        )
        return out


@dataclass(frozen=True, slots=True)
class EpisodeInput:
    """An episode as a write names it: the id, and the attributes given (None: not given)."""

    id: str
    kind: str | None = None
    source: str | None = None
    time: float | None = None
    metadata: dict[str, Any] | None = None

    @classmethod
    def parse(cls, value: str | Mapping[str, Any]) -> EpisodeInput:
        """An episode id, or a mapping with ``id`` and optionally ``kind``, ``source``,
        ``time`` and ``metadata``. InvalidInput (field ``episode``) for anything else."""
        if isinstance(value, str):
            return cls(_check_id(value))
        if not isinstance(value, Mapping):
            raise InvalidInput(
                "episode must be an id or an object with id, kind, source, time, metadata",
                field="episode",
            )
        unknown = set(value) - {"id", "kind", "source", "time", "metadata"}
        if unknown:
            raise InvalidInput(f"unknown episode fields: {sorted(unknown)}", field="episode")
        kind = value.get("kind")
        if kind is not None and kind not in EPISODE_KINDS:
            raise InvalidInput(
                f"unknown episode kind {kind!r}; use one of {', '.join(EPISODE_KINDS)}",
                field="episode.kind",
            )
        source = value.get("source")
        if source is not None and (not isinstance(source, str) or len(source) > MAX_FIELD_LENGTH):
            raise InvalidInput(
                f"episode source must be text of at most {MAX_FIELD_LENGTH} characters",
                field="episode.source",
            )
        return cls(
            _check_id(value.get("id")),
            kind,
            source or None,
            parse_time(value.get("time"), field="episode.time"),
            _as_stored(check_metadata(value.get("metadata"), "episode.metadata")),
        )


def resolve(conn: sqlite3.Connection, now: float, given: EpisodeInput) -> Episode:
    """The episode ``given`` names, recorded at ``now`` if it is new. Conflict when it exists
    with another kind, source, time or metadata than ``given`` states."""
    found = get(conn, given.id)
    if found is None:
        conn.execute(
            "INSERT INTO episodes (id, kind, source, time, metadata, recorded_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
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


def chain(
    conn: sqlite3.Connection, episode_id: str, fact_ids: Sequence[str]
) -> list[tuple[str, str]]:
    """The (newer, older) pairs that link ``fact_ids`` (new facts of the episode, in order) to
    the fact before each: the episode's latest earlier fact not forgotten, then each other."""
    if not fact_ids:
        return []
    row = conn.execute(
        "SELECT id FROM facts WHERE episode_id = ? AND retracted_at IS NULL"
        f" AND id NOT IN {_IN_IDS} ORDER BY seq DESC LIMIT 1",
        [episode_id, id_list(fact_ids)],
    ).fetchone()
    order = ([row[0]] if row else []) + list(fact_ids)
    return list(zip(order[1:], order[:-1], strict=True))


def get(conn: sqlite3.Connection, episode_id: str) -> Episode | None:
    row = conn.execute(f"SELECT {_COLUMNS} FROM episodes WHERE id = ?", [episode_id]).fetchone()
    return None if row is None else _episode(row)


def listing(
    conn: sqlite3.Connection,
    *,
    source: str | None,
    after: TimeInput | None,
    before: TimeInput | None,
    limit: int,
) -> list[Episode]:
    """Episodes by time (oldest first), from ``source`` if given, with ``after <= time <
    before``."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"limit must be an integer from 1 to {MAX_LIMIT}", field="limit")
    where: list[str] = ["1 = 1"]
    params: dict[str, Any] = {"limit": limit}
    if source is not None:
        where.append("source = :source")
        params["source"] = source
    for name, op, value in (("after", ">=", after), ("before", "<", before)):
        moment = parse_time(value, field=name)
        if moment is not None:
            where.append(f"time {op} :{name}")
            params[name] = moment
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM episodes WHERE {' AND '.join(where)}"
        " ORDER BY time, seq LIMIT :limit",
        params,
    )
    return [_episode(r) for r in rows]


def facts(conn: sqlite3.Connection, episode_id: str, scope: TimeScope) -> list[Fact]:
    """The episode's facts visible in ``scope`` (superseded versions included), in the order
    they were written. NotFound for an unknown episode."""
    if get(conn, episode_id) is None:
        raise NotFound(f"no episode with id {episode_id!r}")
    rows = conn.execute(
        f"SELECT {fact_columns('f', scope)} FROM facts f WHERE f.episode_id = :episode"
        f" AND {scope.fact_clause(include_superseded=True)} ORDER BY f.seq",
        {"episode": episode_id, **scope.params},
    )
    return [Fact.from_values(r) for r in rows]


#: The origin of the links between consecutive facts of an episode, and their strength.
ORIGIN: Final = LinkOrigin.EPISODE
STRENGTH: Final = 1.0

_COLUMNS: Final = "id, kind, source, time, metadata, recorded_at"
_IN_IDS: Final = "(SELECT value FROM json_each(?))"


def _episode(row: Sequence[Any]) -> Episode:
    time, recorded = to_datetime(row[3]), to_datetime(row[5])
    assert time is not None
    return Episode(row[0], row[1], row[2], time, json.loads(row[4] or "{}"), recorded)


def _check_id(value: Any) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_FIELD_LENGTH:
        raise InvalidInput(
            f"an episode id is non-empty text of at most {MAX_FIELD_LENGTH} characters",
            field="episode",
        )
    if any(not c.isprintable() for c in value):
        raise InvalidInput("an episode id must be printable text", field="episode")
    return value.strip()


def _as_stored(metadata: dict[str, Any] | None) -> dict[str, Any] | None:
    """Metadata as it reads back from the store (JSON round trip), to compare with it."""
    return None if metadata is None else dict(json.loads(json.dumps(metadata, sort_keys=True)))
