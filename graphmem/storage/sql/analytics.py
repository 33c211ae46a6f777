"""Clusters of the graph: connected components of at most CLUSTER_MAX_LINKS visible links, read
strongest first (networkx on the bounded piece).
"""

from __future__ import annotations

from collections.abc import Iterable

import networkx as nx

from ... import graph
from ...analytics import Clusters
from ...limits import CLUSTER_MAX_LINKS
from ...temporal import TimeScope
from .connections import SQLConnection
from .params import id_list


def clusters(
    conn: SQLConnection,
    scope: TimeScope,
    *,
    types: Iterable[str] | None = None,
    min_size: int = 2,
) -> Clusters:
    """Connected components of the visible links of ``types`` (direction ignored)."""
    d = conn.dialect
    kinds = graph.check_types(types)
    history = "SUPERSEDES" in kinds
    ends = " AND ".join(
        scope.fact_clause(a, include_superseded=history, param=d.param) for a in ("s", "t")
    )
    rows = conn.execute(
        "SELECT l.source_id, l.target_id FROM links l"
        " JOIN facts s ON s.id = l.source_id JOIN facts t ON t.id = l.target_id"
        f" WHERE {d.in_list('l.type', d.param('types'))}"
        f" AND {scope.link_clause(param=d.param)} AND {ends}"
        f" ORDER BY l.strength DESC, l.seq {d.limit(d.param('limit'))}",
        {"types": id_list(kinds), "limit": CLUSTER_MAX_LINKS + 1, **scope.params},
    ).fetchall()
    g: nx.Graph[str] = nx.Graph()
    g.add_edges_from((r[0], r[1]) for r in rows[:CLUSTER_MAX_LINKS])
    groups = [sorted(c) for c in nx.connected_components(g) if len(c) >= min_size]
    groups.sort(key=lambda c: (-len(c), c[0]))
    return Clusters(groups, len(rows) > CLUSTER_MAX_LINKS)
