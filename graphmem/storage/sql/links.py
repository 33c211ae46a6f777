"""Links in SQL: made or updated in batches, retracted, and read — a fact's links, pages of them,
the links among a set of facts.

Links are directed and bi-temporal like facts (``TimeScope.link_clause`` is their visibility
rule). At most one live link joins a (source, target, type); linking again updates its strength.
A batch reads the facts and live links it names in three statements and writes in one.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from ...errors import Conflict, InvalidInput, NotFound
from ...graph import (
    LinkPosition,
    _check_count,
    _link_fields,
    check_direction,
    check_metadata,
    check_strength,
    check_types,
)
from ...ids import new_id
from ...limits import (
    MAX_LIMIT,
)
from ...models import LINK_COLUMNS, LINK_TYPES, Link, LinkOrigin, link_columns
from ...temporal import TimeInput, TimeScope, parse_time, to_iso
from .connections import SQLConnection, SQLCursor
from .dialect import Dialect
from .params import id_list


def link_many(conn: SQLConnection, now: float, items: Sequence[Mapping[str, Any]]) -> list[Link]:
    """Make or update a link for each item (its fields as :meth:`_LinkBatch.link` takes them)
    in order, in ``conn``'s open write transaction: the first item that fails raises. The facts
    and live links the items name are read in three statements and the links written in one
    (plus one per live link changed), whatever their number: a bulk load of links costs a few
    round trips per batch on a client-server database rather than five per link."""
    batch = _LinkBatch(conn, items)
    made = [batch.link(now, **_link_fields(i, item)) for i, item in enumerate(items)]
    batch.write()
    return made


class _LinkBatch:
    """The facts and live links a batch of links names, and the rows it writes."""

    def __init__(self, conn: SQLConnection, items: Sequence[Mapping[str, Any]]) -> None:
        d = conn.dialect
        self.conn = conn
        given = [i for i in items if isinstance(i, Mapping)]
        sources = {i.get("source_id") for i in given} - {None}
        targets = {i.get("target_id") for i in given} - {None}
        named = [x for x in sources | targets if isinstance(x, str)]
        self.facts: dict[str, tuple[float | None, float]] = {
            r[0]: (r[1], r[2])
            for r in conn.execute(
                f"SELECT id, retracted_at, valid_from FROM facts WHERE {d.in_list('id', d.arg)}",
                [id_list(named)],
            )
        }
        #: Live links by (source, target, type), as column -> value.
        self.live: dict[tuple[str, str, str], dict[str, Any]] = {}
        # The live links from the batch's sources, kept when they go to that source's target
        # in the batch; the rows of those read whole. (A condition on the sources and on the
        # targets looked every source-target combination up: 100 million lookups for a
        # batch of 10,000 links.)
        pairs = {(i.get("source_id"), i.get("target_id")) for i in given}
        kept = [
            seq
            for seq, source, target in conn.execute(
                f"SELECT {d.rowid}, source_id, target_id FROM links"
                f" WHERE {d.in_list('source_id', d.arg)} AND retracted_at IS NULL",
                [id_list(s for s in sources if isinstance(s, str))],
            )
            if (source, target) in pairs
        ]
        rows = conn.execute(
            f"SELECT * FROM links WHERE {d.in_list(d.rowid, d.arg, kind='bigint')}", [id_list(kept)]
        )
        for row in rows:
            values = {name: row[name] for name in _LINK_ROW}
            self.live[(values["source_id"], values["target_id"], values["type"])] = values
        self.new: list[dict[str, Any]] = []
        self.made: set[str] = set()
        self.changed: dict[str, dict[str, Any]] = {}

    def link(
        self,
        now: float,
        source_id: str,
        target_id: str,
        type: str,
        strength: float = 1.0,
        *,
        valid_from: TimeInput | None = None,
        valid_until: TimeInput | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Link:
        """Create the live link, or update its strength (and metadata) if it exists (written
        when the batch is).

        Without ``valid_from`` a new link holds from when both of its facts hold (the later of
        their ``valid_from``), not from the moment it is made; ``valid_until`` ends it. Relinking
        with a validity other than the live link's replaces that link (it is retracted now and a
        new one made), so a read at an earlier ``known_at`` still sees the validity known then.
        """
        (kind,) = check_types(type)
        if kind == "SUPERSEDES":
            raise InvalidInput(
                "supersession is made by storing the new version with "
                "supersedes=<old id>, not by a link",
                field="type",
            )
        strength = check_strength(strength, "strength")
        if source_id == target_id:
            raise InvalidInput("a fact cannot be linked to itself", field="target_id")
        meta = check_metadata(metadata)
        given_from = parse_time(valid_from, field="valid_from")
        given_until = parse_time(valid_until, field="valid_until")
        starts = []
        for fact_id, name in ((source_id, "source_id"), (target_id, "target_id")):
            fact = self.facts.get(fact_id) if isinstance(fact_id, str) else None
            if fact is None:
                raise NotFound(f"no fact with id {fact_id!r} ({name})")
            if fact[0] is not None:
                raise Conflict(f"fact {fact_id} ({name}) was forgotten; it cannot be linked")
            starts.append(fact[1])
        key = (source_id, target_id, kind)
        live = self.live.get(key)
        if live is None:
            start, until = max(starts) if given_from is None else given_from, given_until
        else:
            start = live["valid_from"] if given_from is None else given_from
            until = live["valid_until"] if given_until is None else given_until
        if until is not None and until <= start:
            raise InvalidInput(
                f"valid_until ({to_iso(until)}) must be later than valid_from ({to_iso(start)})",
                field="valid_until",
            )
        if live is not None:
            merged = {**json.loads(live["metadata"] or "{}"), **(meta or {})}
            self._change(live)
            if (start, until) == (live["valid_from"], live["valid_until"]):
                live["strength"] = strength
                live["metadata"] = json.dumps(merged, sort_keys=True)
                return _link_of(live)
            live["retracted_at"] = now
            meta = merged
        link_id = new_id()
        made = {
            "id": link_id,
            "source_id": source_id,
            "target_id": target_id,
            "type": kind,
            "strength": strength,
            "origin": LinkOrigin.EXPLICIT.value,
            "recorded_at": now,
            "valid_from": start,
            "valid_until": until,
            "retracted_at": None,
            "valid_until_recorded_at": None if until is None else now,
            "metadata": json.dumps(meta or {}, sort_keys=True),
        }
        self.new.append(made)
        self.made.add(link_id)
        self.live[key] = made
        return _link_of(made)

    def _change(self, live: dict[str, Any]) -> None:
        """Note that ``live`` changes: a stored row is updated when the batch is written (a
        row the batch makes is written as it is then)."""
        if live["id"] not in self.made:
            self.changed[live["id"]] = live

    def write(self) -> None:
        d = self.conn.dialect
        for row in self.changed.values():
            self.conn.execute(
                f"UPDATE links SET strength = {d.arg}, metadata = {d.arg}, retracted_at = {d.arg}"
                f" WHERE id = {d.arg}",
                [row["strength"], row["metadata"], row["retracted_at"], row["id"]],
            )
        if self.new:
            self.conn.executemany(
                f"INSERT INTO links ({', '.join(_LINK_ROW)})"
                f" VALUES ({', '.join(d.arg for _ in _LINK_ROW)})",
                [[row[name] for name in _LINK_ROW] for row in self.new],
            )


#: The ``links`` columns a link batch reads and writes.
_LINK_ROW: Final = (
    "id", "source_id", "target_id", "type", "strength", "origin", "recorded_at",
    "valid_from", "valid_until", "retracted_at", "valid_until_recorded_at", "metadata",
)  # fmt: skip


def _link_of(row: dict[str, Any]) -> Link:
    return Link.from_values([row[name] for name in LINK_COLUMNS])


def unlink(conn: SQLConnection, now: float, link_id: str) -> Link:
    """Retract a link (history keeps it). NotFound if unknown, Conflict if already retracted;
    supersession links belong to their facts and cannot be unlinked."""
    d = conn.dialect
    row = conn.execute(f"SELECT * FROM links WHERE id = {d.arg}", [link_id]).fetchone()
    if row is None:
        raise NotFound(f"no link with id {link_id!r}")
    if row["retracted_at"] is not None:
        raise Conflict(f"link {link_id} was already removed")
    if row["type"] == "SUPERSEDES":
        raise Conflict(
            "a supersession link is part of the facts' history; forget the newer fact instead"
        )
    conn.execute(f"UPDATE links SET retracted_at = {d.arg} WHERE id = {d.arg}", [now, link_id])
    return Link.from_row(row)


def links_of(
    conn: SQLConnection,
    fact_id: str,
    scope: TimeScope,
    *,
    direction: str = "BOTH",
    types: Iterable[str] | None = None,
) -> list[Link]:
    """The links of a fact visible in ``scope``, strongest first (all types unless named)."""
    d = conn.dialect
    direction = check_direction(direction)
    kinds = check_types(types, default=LINK_TYPES)
    if conn.execute(f"SELECT 1 FROM facts WHERE id = {d.arg}", [fact_id]).fetchone() is None:
        raise NotFound(f"no fact with id {fact_id!r}")
    ends = {"OUT": ["source_id"], "IN": ["target_id"], "BOTH": ["source_id", "target_id"]}
    rows: list[tuple[Any, ...]] = []
    for end in ends[direction]:
        rows.extend(
            _tuples(conn).execute(
                f"SELECT l.seq, {link_columns('l', scope, param=d.param)} FROM links l WHERE"
                f" l.{end} = {d.param('id')}"
                f" AND {d.in_list('l.type', d.param('types'))} AND "
                + scope.link_clause(param=d.param),
                {"id": fact_id, "types": id_list(kinds), **scope.params},
            )
        )
    links = [(seq, Link.from_values(values)) for seq, *values in rows]
    links.sort(key=lambda pair: (-pair[1].strength, pair[0]))
    return [link for _, link in links]


def links_page(
    conn: SQLConnection,
    fact_ids: Sequence[str],
    scope: TimeScope,
    *,
    direction: str = "BOTH",
    types: Iterable[str] | None = None,
    first: int = 50,
    after: LinkPosition | None = None,
) -> dict[str, tuple[list[tuple[LinkPosition, Link]], bool]]:
    """For each of ``fact_ids``: up to ``first`` of its visible links after ``after``, strongest
    first, each with its position, and whether more follow. One statement for all the facts
    (unknown ids get an empty page), so a list of facts with their links costs one query."""
    d = conn.dialect
    direction = check_direction(direction)
    kinds = check_types(types, default=LINK_TYPES)
    first = _check_count(first, "first", 0, MAX_LIMIT)
    ends = {"OUT": ["source_id"], "IN": ["target_id"], "BOTH": ["source_id", "target_id"]}
    sides = " UNION ALL ".join(
        f"SELECT fr.value AS owner, l.seq AS pos, {link_columns('l', scope, param=d.param)}"
        f" FROM {d.list_table(d.param('ids'), 'fr')} JOIN links l ON l.{end} = fr.value"
        f" WHERE {d.in_list('l.type', d.param('types'))}"
        f" AND (CAST({d.param('after_seq')} AS INTEGER) IS NULL OR l.strength <"
        f" {d.param('after_strength')}"
        f"      OR (l.strength = {d.param('after_strength')} AND l.seq > {d.param('after_seq')}))"
        f" AND {scope.link_clause(param=d.param)}"
        for end in ends[direction]
    )
    rows = _tuples(conn).execute(
        f"SELECT * FROM (SELECT *, row_number() OVER"
        f" (PARTITION BY owner ORDER BY strength DESC, pos) AS rank FROM ({sides}) AS sides)"
        f" AS ranked WHERE rank <= {d.param('first')} + 1 ORDER BY owner, rank",
        {
            "ids": id_list(dict.fromkeys(fact_ids)),
            "types": id_list(kinds),
            "after_strength": after.strength if after else None,
            "after_seq": after.seq if after else None,
            "first": first,
            **scope.params,
        },
    )
    pages: dict[str, tuple[list[tuple[LinkPosition, Link]], bool]] = {
        i: ([], False) for i in fact_ids
    }
    for owner, seq, *values, rank in rows:
        items, _ = pages[owner]
        if rank > first:
            pages[owner] = (items, True)
            continue
        link = Link.from_values(values)
        items.append((LinkPosition(link.strength, seq), link))
    return pages


def links_among(
    conn: SQLConnection, ids: list[str], scope: TimeScope, params: dict[str, Any]
) -> list[Link]:
    """Every visible link among ``ids`` of the types in ``params`` (``:types`` as JSON,
    ``:min_strength``, and ``:skip_origins``, a JSON list of origins left out). The pairs are
    found in the (source, strength, target) index alone, so a hub costs a scan of its index
    entries; only the links found are read."""
    d = conn.dialect
    rows = _among(conn, link_columns("k", scope, param=d.param), ids, scope, params)
    return [Link.from_values(r) for r in rows]


def link_pairs(
    conn: SQLConnection,
    ids: list[str],
    scope: TimeScope,
    params: dict[str, Any],
    touching: list[str] | None = None,
) -> list[tuple[str, str, float]]:
    """(source, target, strength) of the links :func:`links_among` finds: what graph evidence
    reads on every search, without building a Link of each. With ``touching`` (a few of
    ``ids``), only the links with one end among those: found from their side by both indexes
    (a hub among them costs a scan of its links), the other end checked here."""
    d = conn.dialect
    if touching is None:
        rows = _among(conn, "k.source_id, k.target_id, k.strength", ids, scope, params)
        return [(r[0], r[1], r[2]) for r in rows]
    if len(ids) < 2 or not touching:
        return []
    found = _tuples(conn).execute(
        f"SELECT k.source_id, k.target_id, k.strength FROM links k WHERE k.{d.rowid} IN ("
        f"  SELECT l.{d.rowid} FROM {d.list_table(d.param('from'), 'fr')}"
        f"  JOIN links l{d.indexed_by('links_source_strength')} ON l.source_id = fr.value"
        f"  UNION ALL SELECT l.{d.rowid} FROM {d.list_table(d.param('from'), 'fr')}"
        f"  JOIN links l{d.indexed_by('links_target_strength')} ON l.target_id = fr.value)"
        f" AND {_kept_links(d)} AND {scope.link_clause('k', param=d.param)} ORDER BY k.seq",
        {**params, "from": id_list(touching)},
    )
    among = set(ids)
    return [(r[0], r[1], r[2]) for r in found if r[0] in among and r[1] in among]


def _kept_links(d: Dialect) -> str:
    """The links of the types, strength and origins a graph read's parameters ask for."""
    return (
        f"{d.in_list('k.type', d.param('types'))} AND k.strength >= {d.param('min_strength')}"
        f" AND {d.in_list('k.origin', d.param('skip_origins'), negated=True)}"
    )


def _among(
    conn: SQLConnection, columns: str, ids: list[str], scope: TimeScope, params: dict[str, Any]
) -> list[tuple[Any, ...]]:
    d = conn.dialect
    if len(ids) < 2:
        return []
    return (
        _tuples(conn)
        .execute(
            f"SELECT {columns} FROM links k WHERE k.{d.rowid} IN ("
            f"  SELECT l.{d.rowid} FROM {d.list_table(d.param('ids'), 'fr')}"
            f"  JOIN links l{d.indexed_by('links_source_strength')} ON l.source_id = fr.value"
            f"  WHERE {d.in_list(d.unindexed('l.target_id'), d.param('ids'))})"
            f" AND {_kept_links(d)} AND {scope.link_clause('k', param=d.param)} ORDER BY k.seq",
            {**params, "ids": id_list(ids)},
        )
        .fetchall()
    )


def _tuples(conn: SQLConnection) -> SQLCursor:
    """A cursor on ``conn`` that returns plain tuples (faster to read than sqlite3.Row)."""
    cursor = conn.cursor()
    cursor.row_factory = None
    return cursor
