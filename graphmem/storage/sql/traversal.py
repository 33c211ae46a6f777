"""Walks of the graph in SQL: breadth-first traversal and shortest paths.

1. A traversal reads one level per query over the adjacency indexes
   ``links(source_id, strength DESC, target_id)`` and ``links(target_id, strength DESC)``: the
   frontier goes in as one JSON array, the time scope filters links and facts alike.
2. Each frontier fact's links are read strongest first and cut after FAN_OUT, so a hub costs no
   more than any fact.
3. A path is searched from both ends at once, a whole level per round on the smaller side.

The in-memory copy of the graph (:mod:`.graph_copy`) walks the same steps without SQL when it is
loaded; ``Walk`` is the SQL walk it stands in for.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

from ...errors import NotFound
from ...graph import (
    DEFAULT_MAX_NODES,
    Node,
    Path,
    Subgraph,
    _check_count,
    _check_ids,
    check_direction,
    check_strength,
    check_types,
)
from ...limits import (
    FAN_OUT,
    MAX_DEPTH,
    MAX_NODES,
    PATH_MAX_VISITED,
)
from ...models import Fact, Link, fact_columns, link_columns
from ...temporal import TimeScope
from ..interface import Step
from .connections import SQLConnection
from .graph_copy import Adjacency, IndexWalk
from .links import _tuples, links_among
from .params import id_list


def traverse(
    conn: SQLConnection,
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
    min_strength = check_strength(min_strength, "min_strength")
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
    conn: SQLConnection,
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
        conn: SQLConnection,
        scope: TimeScope,
        types: tuple[str, ...],
        direction: str,
        min_strength: float,
        skip_origins: Sequence[str] = (),
    ) -> None:
        d = conn.dialect
        self.conn = conn
        self.scope = scope
        self.params = {
            "types": id_list(types),
            "min_strength": min_strength,
            "skip_origins": id_list(skip_origins),
            **scope.params,
        }
        self.fact_clause = scope.fact_clause(
            include_superseded="SUPERSEDES" in types, param=d.param
        )
        self.direction = direction
        link_filter = (
            f"{d.in_list('l.type', d.param('types'))} AND l.strength >= {d.param('min_strength')}"
            f" AND {d.in_list('l.origin', d.param('skip_origins'), negated=True)}"
            f" AND {scope.link_clause(param=d.param)} AND {self.fact_clause}"
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
                f" FROM {d.list_table(d.param('frontier'), 'fr')} "
                + d.picked(
                    "links",
                    "l",
                    f"links l JOIN facts f ON f.id = l.{far}"
                    f" WHERE l.{near} = fr.value AND {link_filter}"
                    f" ORDER BY l.strength DESC, l.seq {d.limit(d.param('cap'))}",
                )
            )
        self._level = " UNION ALL ".join(sides)
        self._beyond = " UNION ALL ".join(
            f"SELECT 1 FROM {d.list_table(d.param('frontier'), 'fr')} JOIN links l ON l.{near} ="
            " fr.value"
            f" JOIN facts f ON f.id = l.{far} WHERE {link_filter}"
            f" AND {d.in_list(f'l.{far}', d.param('reached'), negated=True)}"
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
        d = self.conn.dialect
        rows = self.conn.execute(
            f"SELECT f.id FROM facts f WHERE {d.in_list('f.id', d.param('ids'))} AND"
            f" {self.fact_clause}",
            {**self.scope.params, "ids": id_list(ids)},
        )
        return {r[0] for r in rows}

    def edges_among(self, ids: list[str]) -> list[Link]:
        return links_among(self.conn, ids, self.scope, self.params)


def _walk(
    conn: SQLConnection,
    adjacency: Adjacency | None,
    scope: TimeScope,
    types: tuple[str, ...],
    direction: str,
    min_strength: float,
) -> Walk | IndexWalk:
    if adjacency is None:
        return Walk(conn, scope, types, direction, min_strength)
    return IndexWalk(adjacency, conn, scope, types, direction, min_strength)


def _require_known(conn: SQLConnection, ids: list[str], adjacency: Adjacency | None = None) -> None:
    d = conn.dialect
    if adjacency is not None:
        missing = adjacency.unknown(ids)
        if missing:
            raise NotFound(f"no fact with id {missing[0]!r}")
        return
    known = {
        r[0]
        for r in conn.execute(
            f"SELECT id FROM facts WHERE {d.in_list('id', d.arg)}", [id_list(ids)]
        )
    }
    missing = [i for i in ids if i not in known]
    if missing:
        raise NotFound(f"no fact with id {missing[0]!r}")


def _facts(
    conn: SQLConnection,
    ids: list[str],
    scope: TimeScope,
    adjacency: Adjacency | None = None,
) -> dict[str, Fact]:
    """The facts among ``ids`` (visible ones: the walk checked), as known at the scope (read
    by their seqs when ``adjacency`` knows them: one lookup each instead of two)."""
    d = conn.dialect
    if adjacency is None:
        where, values = f"{d.in_list('f.id', d.param('ids'))}", id_list(ids)
    else:
        where, values = f"{d.in_list('f.seq', d.param('ids'), kind='bigint')}", adjacency.seqs(ids)
    rows = _tuples(conn).execute(
        f"SELECT {fact_columns('f', scope, param=d.param)} FROM facts f WHERE {where}",
        {"ids": values, **scope.params},
    )
    return {r[0]: Fact.from_values(r) for r in rows}


def _links(conn: SQLConnection, ids: list[str], scope: TimeScope) -> list[Link]:
    """The links among ``ids`` (visible ones: the walk checked), as known at the scope."""
    d = conn.dialect
    rows = _tuples(conn).execute(
        f"SELECT {link_columns('l', scope, param=d.param)} FROM links l WHERE"
        f" {d.in_list('l.id', d.param('ids'))}",
        {"ids": id_list(ids), **scope.params},
    )
    return [Link.from_values(r) for r in rows]
