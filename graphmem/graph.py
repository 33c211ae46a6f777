"""The graph: typed links between facts, breadth-first traversal and shortest paths.

Links are directed and bi-temporal like facts (``TimeScope.link_clause`` is their visibility
rule): ``A -[DEPENDS_ON]-> B`` means A requires B; a link has a validity start (``valid_from``),
is recorded at a moment and can be retracted (unlink) without being lost: reads known at an
earlier time still see it. At most one live link joins a (source, target, type); linking again
updates its strength.

Traversal is breadth-first with one SQL query per level over the adjacency indexes
``links(source_id, strength DESC, target_id)`` and ``links(target_id, strength DESC)``: the
frontier goes in as one JSON array, the time scope filters links and facts alike, and each
frontier fact's links are read strongest first and cut after FAN_OUT, so a hub costs no more
than any fact. Paths are searched from both ends at once.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final, NamedTuple

from .errors import Conflict, InvalidInput, NotFound
from .ids import new_id
from .limits import (
    FAN_OUT,
    MAX_DEPTH,
    MAX_LIMIT,
    MAX_METADATA_BYTES,
    MAX_NODES,
    PATH_MAX_VISITED,
)
from .models import LINK_COLUMNS, Fact, Link, LinkOrigin, fact_columns, link_columns
from .storage.sql.graph_copy import Adjacency, IndexWalk, Step
from .storage.sqlite.database import id_list
from .temporal import TimeInput, TimeScope, parse_time, to_iso


class LinkType(StrEnum):
    """The five link types; every API taking a type accepts these or their names as strings."""

    SUPERSEDES = "SUPERSEDES"
    CAUSED_BY = "CAUSED_BY"
    PART_OF = "PART_OF"
    RELATED_TO = "RELATED_TO"
    DEPENDS_ON = "DEPENDS_ON"


LINK_TYPES: Final = tuple(t.value for t in LinkType)
#: Followed when a traversal names no types: supersession is history, not a relationship.
DEFAULT_TYPES: Final = tuple(t for t in LINK_TYPES if t != "SUPERSEDES")
DIRECTIONS: Final = ("OUT", "IN", "BOTH")
#: Most facts one traversal returns when the caller does not say.
DEFAULT_MAX_NODES: Final = 200


@dataclass(frozen=True, slots=True)
class Node:
    """A fact reached by a traversal: its shortest depth and the facts it was reached from."""

    fact: Fact
    depth: int
    parent_ids: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "fact": self.fact.to_dict(),
            "depth": self.depth,
            "parent_ids": list(self.parent_ids),
        }


@dataclass(frozen=True, slots=True)
class Subgraph:
    """What a traversal found: each fact once, every visible link among them, and whether
    (and why) it stopped early: ``depth`` (more lay beyond), ``max_nodes``, ``fan_out``."""

    nodes: list[Node]
    edges: list[Link]
    truncated_by: tuple[str, ...] = ()

    @property
    def truncated(self) -> bool:
        return bool(self.truncated_by)

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodes": [n.to_dict() for n in self.nodes],
            "edges": [e.to_dict() for e in self.edges],
            "truncated": self.truncated,
            "truncated_by": list(self.truncated_by),
        }


class Path(list[Fact]):
    """A shortest path: the list of its facts in order (as the contract's ``path`` returns),
    with ``links``, the link joining each fact to the next."""

    def __init__(self, facts: Iterable[Fact], links: Iterable[Link]) -> None:
        super().__init__(facts)
        self.links = list(links)

    @property
    def facts(self) -> list[Fact]:
        return list(self)

    def to_dict(self) -> dict[str, Any]:
        return {
            "facts": [f.to_dict() for f in self.facts],
            "links": [k.to_dict() for k in self.links],
        }


# ------------------------------------------------------------------------------------ checks


def check_types(
    types: Iterable[str] | str | None, *, default: Sequence[str] = DEFAULT_TYPES
) -> tuple[str, ...]:
    """Link types, upper-cased and validated; ``default`` when None."""
    if types is None:
        return tuple(default)
    if isinstance(types, str):
        types = [types]
    out = []
    for t in types:
        name = str(t).strip().upper()
        if name not in LINK_TYPES:
            raise InvalidInput(
                f"unknown link type {t!r}; use one of {', '.join(LINK_TYPES)}", field="types"
            )
        out.append(name)
    if not out:
        raise InvalidInput("types must name at least one link type", field="types")
    return tuple(dict.fromkeys(out))


def check_direction(direction: str) -> str:
    name = str(direction).strip().upper()
    if name not in DIRECTIONS:
        raise InvalidInput(
            f"unknown direction {direction!r}; use OUT, IN or BOTH", field="direction"
        )
    return name


def _check_strength(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidInput(f"{name} must be a number from 0 to 1", field=name)
    if not 0.0 <= float(value) <= 1.0:
        raise InvalidInput(f"{name} must be from 0 to 1, got {value}", field=name)
    return float(value)


def _check_count(value: Any, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidInput(f"{name} must be an integer from {low} to {high}", field=name)
    return value


def _check_ids(ids: Iterable[str] | str, name: str = "ids") -> list[str]:
    if isinstance(ids, str):
        ids = [ids]
    out = list(dict.fromkeys(ids))
    if not out or not all(isinstance(i, str) and i for i in out):
        raise InvalidInput(f"{name} must be one or more fact ids", field=name)
    if len(out) > MAX_NODES:
        raise InvalidInput(f"at most {MAX_NODES} start ids", field=name)
    return out


# ------------------------------------------------------------------------------------ writes


def link_many(
    conn: sqlite3.Connection, now: float, items: Sequence[Mapping[str, Any]]
) -> list[Link]:
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

    def __init__(self, conn: sqlite3.Connection, items: Sequence[Mapping[str, Any]]) -> None:
        self.conn = conn
        given = [i for i in items if isinstance(i, Mapping)]
        sources = {i.get("source_id") for i in given} - {None}
        targets = {i.get("target_id") for i in given} - {None}
        named = [x for x in sources | targets if isinstance(x, str)]
        self.facts: dict[str, tuple[float | None, float]] = {
            r[0]: (r[1], r[2])
            for r in conn.execute(
                "SELECT id, retracted_at, valid_from FROM facts"
                " WHERE id IN (SELECT value FROM json_each(?))",
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
                "SELECT rowid, source_id, target_id FROM links"
                " WHERE source_id IN (SELECT value FROM json_each(?)) AND retracted_at IS NULL",
                [id_list(s for s in sources if isinstance(s, str))],
            )
            if (source, target) in pairs
        ]
        rows = conn.execute(
            "SELECT * FROM links WHERE rowid IN (SELECT value FROM json_each(?))", [id_list(kept)]
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
        strength = _check_strength(strength, "strength")
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
        for row in self.changed.values():
            self.conn.execute(
                "UPDATE links SET strength = ?, metadata = ?, retracted_at = ? WHERE id = ?",
                [row["strength"], row["metadata"], row["retracted_at"], row["id"]],
            )
        if self.new:
            self.conn.executemany(
                f"INSERT INTO links ({', '.join(_LINK_ROW)})"
                f" VALUES ({', '.join('?' for _ in _LINK_ROW)})",
                [[row[name] for name in _LINK_ROW] for row in self.new],
            )


_LINK_FIELDS = frozenset(
    {"source_id", "target_id", "type", "strength", "valid_from", "valid_until", "metadata"}
)


def _link_fields(i: int, item: object) -> dict[str, Any]:
    """The link's arguments from item ``i`` of ``link_many``'s list (InvalidInput naming the item
    if it is not an object with the link's fields)."""
    if not isinstance(item, Mapping):
        raise InvalidInput(f"link {i}: expected an object", field=f"links[{i}]")
    unknown = set(item) - _LINK_FIELDS
    if unknown or not {"source_id", "target_id", "type"} <= set(item):
        raise InvalidInput(
            f"link {i}: source_id, target_id and type are required; "
            f"unknown fields: {sorted(unknown)}",
            field=f"links[{i}]",
        )
    return {"strength": 1.0, **item}


#: The ``links`` columns a link batch reads and writes.
_LINK_ROW: Final = (
    "id", "source_id", "target_id", "type", "strength", "origin", "recorded_at",
    "valid_from", "valid_until", "retracted_at", "valid_until_recorded_at", "metadata",
)  # fmt: skip


def _link_of(row: dict[str, Any]) -> Link:
    return Link.from_values([row[name] for name in LINK_COLUMNS])


def unlink(conn: sqlite3.Connection, now: float, link_id: str) -> Link:
    """Retract a link (history keeps it). NotFound if unknown, Conflict if already retracted;
    supersession links belong to their facts and cannot be unlinked."""
    row = conn.execute("SELECT * FROM links WHERE id = ?", [link_id]).fetchone()
    if row is None:
        raise NotFound(f"no link with id {link_id!r}")
    if row["retracted_at"] is not None:
        raise Conflict(f"link {link_id} was already removed")
    if row["type"] == "SUPERSEDES":
        raise Conflict(
            "a supersession link is part of the facts' history; forget the newer fact instead"
        )
    conn.execute("UPDATE links SET retracted_at = ? WHERE id = ?", [now, link_id])
    return Link.from_row(row)


def check_metadata(metadata: Any, field: str = "metadata") -> dict[str, Any] | None:
    """``metadata`` if it is None or a JSON object of at most MAX_METADATA_BYTES; InvalidInput
    (naming ``field``) otherwise. Links and episodes keep one."""
    if metadata is None:
        return None
    if not isinstance(metadata, dict):
        raise InvalidInput(f"{field} must be a JSON object", field=field)
    try:
        text = json.dumps(metadata, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"{field} is not JSON: {exc}", field=field) from exc
    if len(text.encode()) > MAX_METADATA_BYTES:
        raise InvalidInput(f"{field} larger than {MAX_METADATA_BYTES} bytes", field=field)
    return metadata


# ------------------------------------------------------------------------------------ reads


def links_of(
    conn: sqlite3.Connection,
    fact_id: str,
    scope: TimeScope,
    *,
    direction: str = "BOTH",
    types: Iterable[str] | None = None,
) -> list[Link]:
    """The links of a fact visible in ``scope``, strongest first (all types unless named)."""
    direction = check_direction(direction)
    kinds = check_types(types, default=LINK_TYPES)
    if conn.execute("SELECT 1 FROM facts WHERE id = ?", [fact_id]).fetchone() is None:
        raise NotFound(f"no fact with id {fact_id!r}")
    ends = {"OUT": ["source_id"], "IN": ["target_id"], "BOTH": ["source_id", "target_id"]}
    rows: list[tuple[Any, ...]] = []
    for end in ends[direction]:
        rows.extend(
            _tuples(conn).execute(
                f"SELECT l.seq, {link_columns('l', scope)} FROM links l WHERE l.{end} = :id"
                " AND l.type IN (SELECT value FROM json_each(:types)) AND " + scope.link_clause(),
                {"id": fact_id, "types": id_list(kinds), **scope.params},
            )
        )
    links = [(seq, Link.from_values(values)) for seq, *values in rows]
    links.sort(key=lambda pair: (-pair[1].strength, pair[0]))
    return [link for _, link in links]


class LinkPosition(NamedTuple):
    """Where a link sits in a fact's links, strongest first: the keyset of ``links_page``."""

    strength: float
    seq: int


def links_page(
    conn: sqlite3.Connection,
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
    direction = check_direction(direction)
    kinds = check_types(types, default=LINK_TYPES)
    first = _check_count(first, "first", 0, MAX_LIMIT)
    ends = {"OUT": ["source_id"], "IN": ["target_id"], "BOTH": ["source_id", "target_id"]}
    sides = " UNION ALL ".join(
        f"SELECT fr.value AS owner, l.seq AS pos, {link_columns('l', scope)}"
        f" FROM json_each(:ids) fr JOIN links l ON l.{end} = fr.value"
        " WHERE l.type IN (SELECT value FROM json_each(:types))"
        " AND (CAST(:after_seq AS INTEGER) IS NULL OR l.strength < :after_strength"
        "      OR (l.strength = :after_strength AND l.seq > :after_seq))"
        f" AND {scope.link_clause()}"
        for end in ends[direction]
    )
    rows = _tuples(conn).execute(
        f"SELECT * FROM (SELECT *, row_number() OVER"
        f" (PARTITION BY owner ORDER BY strength DESC, pos) AS rank FROM ({sides}))"
        " WHERE rank <= :first + 1 ORDER BY owner, rank",
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


def traverse(
    conn: sqlite3.Connection,
    ids: Iterable[str] | str,
    scope: TimeScope,
    *,
    depth: int = 2,
    types: Iterable[str] | None = None,
    direction: str = "BOTH",
    max_nodes: int = DEFAULT_MAX_NODES,
    min_strength: float = 0.0,
    adjacency: Adjacency | None = None,
) -> Subgraph:
    """Breadth-first from ``ids``: each visible fact once, at its shortest depth, with the facts
    it was reached from at that depth; then every visible link of ``types`` among them.

    Start facts not visible in ``scope`` are left out (NotFound only for unknown ids).
    SUPERSEDES links are followed only when named in ``types`` (and then superseded versions
    are visible, being what such a walk is for). ``adjacency``: the in-memory copy of the graph
    as of ``conn``'s snapshot, to walk instead of SQL (the same answer).
    """
    starts = _check_ids(ids)
    depth = _check_count(depth, "depth", 0, MAX_DEPTH)
    max_nodes = _check_count(max_nodes, "max_nodes", 1, MAX_NODES)
    min_strength = _check_strength(min_strength, "min_strength")
    walk = _walk(
        conn, adjacency, scope, check_types(types), check_direction(direction), min_strength
    )
    _require_known(conn, starts, adjacency)
    visible = walk.visible(starts)
    order = [i for i in starts if i in visible][:max_nodes]
    reached: dict[str, tuple[int, list[str]]] = {i: (0, []) for i in order}
    truncated: set[str] = set()
    if len(visible) > max_nodes:
        truncated.add("max_nodes")
    frontier = list(order)
    for level in range(1, depth + 1):
        if not frontier:
            break
        found: dict[str, list[str]] = {}
        for via, step, _, rank, _ in walk.level(frontier, need_link_ids=False):
            if rank > FAN_OUT:
                truncated.add("fan_out")
            elif step in found:
                found[step].append(via)
            elif step not in reached:
                if len(reached) + len(found) >= max_nodes:
                    truncated.add("max_nodes")
                    continue
                found[step] = [via]
        for step, parents in found.items():
            reached[step] = (level, parents)
            order.append(step)
        frontier = list(found)
    if (
        frontier
        and depth > 0
        and "max_nodes" not in truncated
        and walk.leads_beyond(frontier, reached)
    ):
        truncated.add("depth")
    facts = _facts(conn, order, scope, adjacency)
    nodes = [Node(facts[i], reached[i][0], tuple(dict.fromkeys(reached[i][1]))) for i in order]
    edges = walk.edges_among(order)
    return Subgraph(nodes, edges, tuple(sorted(truncated)))


def path(
    conn: sqlite3.Connection,
    source_id: str,
    target_id: str,
    scope: TimeScope,
    *,
    types: Iterable[str] | None = None,
    direction: str = "BOTH",
    max_depth: int = MAX_DEPTH,
    adjacency: Adjacency | None = None,
) -> Path | None:
    """A shortest path from ``source_id`` to ``target_id`` over visible links: None if there is
    none within ``max_depth`` links (or PATH_MAX_VISITED facts). Ties go to stronger links.
    ``adjacency`` as for ``traverse``."""
    max_depth = _check_count(max_depth, "max_depth", 1, MAX_DEPTH)
    walk = _walk(conn, adjacency, scope, check_types(types), check_direction(direction), 0.0)
    _require_known(conn, [source_id, target_id], adjacency)
    if not walk.visible([source_id, target_id]) >= {source_id, target_id}:
        return None
    if source_id == target_id:
        return Path(list(_facts(conn, [source_id], scope).values()), [])
    # Bidirectional breadth-first search: each round expands, by one whole level, the side
    # whose frontier is smaller (the target side follows links backwards), so a path of n links
    # costs about two searches of n/2 links instead of one of n.
    backward = _walk(conn, adjacency, scope, check_types(types), _REVERSED[walk.direction], 0.0)
    sides = [_Side(walk, source_id), _Side(backward, target_id)]
    meeting: str | None = None
    while meeting is None:
        if sides[0].depth + sides[1].depth >= max_depth:
            return None
        near, far = sorted(sides, key=lambda side: len(side.frontier))
        found = near.expand()
        if not found or len(sides[0].parent) + len(sides[1].parent) > PATH_MAX_VISITED:
            return None
        met = [f for f in found if f in far.parent]
        if met:  # the one closest to the other end; ties to the strongest link found first
            meeting = min(met, key=lambda f: far.distance[f])
    chain, link_ids = sides[0].chain(meeting)
    tail, tail_links = sides[1].chain(meeting)
    chain += tail[::-1][1:]
    link_ids += tail_links[::-1]
    facts = _facts(conn, chain, scope)
    links = {k.id: k for k in _links(conn, link_ids, scope)}
    return Path([facts[i] for i in chain], [links[i] for i in link_ids])


# ------------------------------------------------------------------------------------ internals


_REVERSED: Final = {"OUT": "IN", "IN": "OUT", "BOTH": "BOTH"}


class _Side:
    """One end of a bidirectional path search: what it reached, how, and at what distance."""

    def __init__(self, walk: Walk | IndexWalk, start: str) -> None:
        self.walk = walk
        self.parent: dict[str, tuple[str, str] | None] = {start: None}
        self.distance = {start: 0}
        self.frontier = [start]
        self.depth = 0

    def expand(self) -> list[str]:
        self.depth += 1
        found: list[str] = []
        for via, step, link_id, _, _ in self.walk.level(self.frontier, unbounded=True):
            if step not in self.parent:
                self.parent[step] = (via, link_id)
                self.distance[step] = self.depth
                found.append(step)
        self.frontier = found
        return found

    def chain(self, end: str) -> tuple[list[str], list[str]]:
        """Facts from this side's start to ``end``, and the links between them."""
        facts, links = [end], []
        while (back := self.parent[facts[-1]]) is not None:
            facts.append(back[0])
            links.append(back[1])
        return facts[::-1], links[::-1]


class Walk:
    """One traversal's SQL: a level of neighbours, visibility, and the links among a set."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        scope: TimeScope,
        types: tuple[str, ...],
        direction: str,
        min_strength: float,
        skip_origins: Sequence[str] = (),
    ) -> None:
        self.conn = conn
        self.scope = scope
        self.params = {
            "types": id_list(types),
            "min_strength": min_strength,
            "skip_origins": id_list(skip_origins),
            **scope.params,
        }
        self.fact_clause = scope.fact_clause(include_superseded="SUPERSEDES" in types)
        self.direction = direction
        link_filter = (
            "l.type IN (SELECT value FROM json_each(:types)) AND l.strength >= :min_strength"
            " AND l.origin NOT IN (SELECT value FROM json_each(:skip_origins))"
            f" AND {scope.link_clause()} AND {self.fact_clause}"
        )
        # Per frontier fact, its links strongest first, cut after :cap rows: the index on
        # (end, strength) makes that a short range scan however many links a hub has.
        # Each row also says its side, its frontier fact's position and its link's seq, so that
        # ties are broken the same way whatever order the engine returns rows in.
        sides = []
        for side, (near, far) in enumerate(
            (("source_id", "target_id"), ("target_id", "source_id"))
        ):
            if direction == ("IN" if near == "source_id" else "OUT"):
                continue
            sides.append(
                f"SELECT fr.value AS via, l.{far} AS step, l.id AS link_id, l.strength,"
                f" {side} AS side, fr.key AS position, l.seq"
                " FROM json_each(:frontier) fr JOIN links l ON l.rowid IN ("
                f"  SELECT l.rowid FROM links l JOIN facts f ON f.id = l.{far}"
                f"  WHERE l.{near} = fr.value AND {link_filter}"
                "  ORDER BY l.strength DESC, l.seq LIMIT :cap)"
            )
        self._level = " UNION ALL ".join(sides)
        self._beyond = " UNION ALL ".join(
            f"SELECT 1 FROM json_each(:frontier) fr JOIN links l ON l.{near} = fr.value"
            f" JOIN facts f ON f.id = l.{far} WHERE {link_filter}"
            f" AND l.{far} NOT IN (SELECT value FROM json_each(:reached))"
            for near, far in (("source_id", "target_id"), ("target_id", "source_id"))
            if direction != ("IN" if near == "source_id" else "OUT")
        )

    def level(
        self, frontier: list[str], *, unbounded: bool = False, need_link_ids: bool = True
    ) -> list[Step]:
        """The frontier's visible links, strongest first, each with its rank among its
        frontier fact's; at most FAN_OUT + 1 per fact and direction unless ``unbounded``.
        (``need_link_ids``: whether the caller reads the steps' link ids; SQL has them.)"""
        cap = -1 if unbounded else FAN_OUT + 1
        args = {**self.params, "frontier": id_list(frontier), "cap": cap}
        rows = sorted(
            self.conn.execute(self._level, args), key=lambda r: (-r[3], r[1], r[4], r[5], r[6])
        )
        seen: dict[str, int] = {}
        out = []
        for via, step, link_id, strength, *_ in rows:
            seen[via] = seen.get(via, 0) + 1
            out.append(Step(via, step, link_id, seen[via], strength))
        return out

    def leads_beyond(self, frontier: list[str], reached: Iterable[str]) -> bool:
        """Whether a visible link leads from the frontier to a fact not in ``reached``."""
        args = {
            **self.params,
            "frontier": id_list(frontier),
            "reached": id_list(reached),
        }
        (exists,) = self.conn.execute(f"SELECT EXISTS ({self._beyond})", args).fetchone()
        return bool(exists)

    def visible(self, ids: list[str]) -> set[str]:
        rows = self.conn.execute(
            "SELECT f.id FROM facts f WHERE f.id IN (SELECT value FROM json_each(:ids))"
            f" AND {self.fact_clause}",
            {**self.scope.params, "ids": id_list(ids)},
        )
        return {r[0] for r in rows}

    def edges_among(self, ids: list[str]) -> list[Link]:
        return links_among(self.conn, ids, self.scope, self.params)


def links_among(
    conn: sqlite3.Connection, ids: list[str], scope: TimeScope, params: dict[str, Any]
) -> list[Link]:
    """Every visible link among ``ids`` of the types in ``params`` (``:types`` as JSON,
    ``:min_strength``, and ``:skip_origins``, a JSON list of origins left out). The pairs are
    found in the (source, strength, target) index alone, so a hub costs a scan of its index
    entries; only the links found are read."""
    rows = _among(conn, link_columns("k", scope), ids, scope, params)
    return [Link.from_values(r) for r in rows]


def link_pairs(
    conn: sqlite3.Connection,
    ids: list[str],
    scope: TimeScope,
    params: dict[str, Any],
    touching: list[str] | None = None,
) -> list[tuple[str, str, float]]:
    """(source, target, strength) of the links :func:`links_among` finds: what graph evidence
    reads on every search, without building a Link of each. With ``touching`` (a few of
    ``ids``), only the links with one end among those: found from their side by both indexes
    (a hub among them costs a scan of its links), the other end checked here."""
    if touching is None:
        rows = _among(conn, "k.source_id, k.target_id, k.strength", ids, scope, params)
        return [(r[0], r[1], r[2]) for r in rows]
    if len(ids) < 2 or not touching:
        return []
    found = _tuples(conn).execute(
        "SELECT k.source_id, k.target_id, k.strength FROM links k WHERE k.rowid IN ("
        "  SELECT l.rowid FROM json_each(:from) fr"
        "  JOIN links l INDEXED BY links_source_strength ON l.source_id = fr.value"
        "  UNION ALL SELECT l.rowid FROM json_each(:from) fr"
        "  JOIN links l INDEXED BY links_target_strength ON l.target_id = fr.value)"
        f" AND {_KEPT_LINKS} AND {scope.link_clause('k')} ORDER BY k.seq",
        {**params, "from": id_list(touching)},
    )
    among = set(ids)
    return [(r[0], r[1], r[2]) for r in found if r[0] in among and r[1] in among]


#: The links of the types, strength and origins a graph read's parameters ask for.
_KEPT_LINKS: Final = (
    "k.type IN (SELECT value FROM json_each(:types)) AND k.strength >= :min_strength"
    " AND k.origin NOT IN (SELECT value FROM json_each(:skip_origins))"
)


def _among(
    conn: sqlite3.Connection, columns: str, ids: list[str], scope: TimeScope, params: dict[str, Any]
) -> list[tuple[Any, ...]]:
    if len(ids) < 2:
        return []
    return (
        _tuples(conn)
        .execute(
            f"SELECT {columns} FROM links k WHERE k.rowid IN ("
            "  SELECT l.rowid FROM json_each(:ids) fr"
            "  JOIN links l INDEXED BY links_source_strength ON l.source_id = fr.value"
            "  WHERE +l.target_id IN (SELECT value FROM json_each(:ids)))"
            f" AND {_KEPT_LINKS} AND {scope.link_clause('k')} ORDER BY k.seq",
            {**params, "ids": id_list(ids)},
        )
        .fetchall()
    )


def _walk(
    conn: sqlite3.Connection,
    adjacency: Adjacency | None,
    scope: TimeScope,
    types: tuple[str, ...],
    direction: str,
    min_strength: float,
) -> Walk | IndexWalk:
    if adjacency is None:
        return Walk(conn, scope, types, direction, min_strength)
    return IndexWalk(adjacency, conn, scope, types, direction, min_strength)


def _require_known(
    conn: sqlite3.Connection, ids: list[str], adjacency: Adjacency | None = None
) -> None:
    if adjacency is not None:
        missing = adjacency.unknown(ids)
        if missing:
            raise NotFound(f"no fact with id {missing[0]!r}")
        return
    known = {
        r[0]
        for r in conn.execute(
            "SELECT id FROM facts WHERE id IN (SELECT value FROM json_each(?))", [id_list(ids)]
        )
    }
    missing = [i for i in ids if i not in known]
    if missing:
        raise NotFound(f"no fact with id {missing[0]!r}")


def _facts(
    conn: sqlite3.Connection,
    ids: list[str],
    scope: TimeScope,
    adjacency: Adjacency | None = None,
) -> dict[str, Fact]:
    """The facts among ``ids`` (visible ones: the walk checked), as known at the scope (read
    by their seqs when ``adjacency`` knows them: one lookup each instead of two)."""
    if adjacency is None:
        where, values = "f.id IN (SELECT value FROM json_each(:ids))", id_list(ids)
    else:
        where, values = "f.seq IN (SELECT value FROM json_each(:ids))", adjacency.seqs(ids)
    rows = _tuples(conn).execute(
        f"SELECT {fact_columns('f', scope)} FROM facts f WHERE {where}",
        {"ids": values, **scope.params},
    )
    return {r[0]: Fact.from_values(r) for r in rows}


def _tuples(conn: sqlite3.Connection) -> sqlite3.Cursor:
    """A cursor on ``conn`` that returns plain tuples (faster to read than sqlite3.Row)."""
    cursor = conn.cursor()
    cursor.row_factory = None
    return cursor


def _links(conn: sqlite3.Connection, ids: list[str], scope: TimeScope) -> list[Link]:
    """The links among ``ids`` (visible ones: the walk checked), as known at the scope."""
    rows = _tuples(conn).execute(
        f"SELECT {link_columns('l', scope)} FROM links l"
        " WHERE l.id IN (SELECT value FROM json_each(:ids))",
        {"ids": id_list(ids), **scope.params},
    )
    return [Link.from_values(r) for r in rows]
