"""Graph analytics with networkx on bounded subgraphs.

Each function loads a bounded piece of the graph (a traversal, or at most CLUSTER_MAX_LINKS
links) visible at a time scope, and says when the bound cut it short.
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx

from . import graph
from .jsonform import JSONForm
from .limits import MAX_CYCLES


@dataclass(frozen=True, slots=True)
class Clusters(JSONForm):
    """Connected groups of facts (ids, largest group first)."""

    groups: list[list[str]]
    truncated: bool


@dataclass(frozen=True, slots=True)
class DependencyOrder(JSONForm):
    """The facts a fact depends on, directly or not, each after everything it depends on.

    ``cycles`` lists dependency cycles (their members are ordered as one block).
    """

    order: list[str]
    cycles: list[list[str]]
    truncated_by: tuple[str, ...]


def centrality(sub: graph.Subgraph) -> list[tuple[str, float, float]]:
    """(fact id, degree centrality, betweenness) for a traversal's facts, most central first."""
    g: nx.Graph[str] = nx.Graph()
    g.add_nodes_from(n.fact.id for n in sub.nodes)
    g.add_edges_from((e.source_id, e.target_id) for e in sub.edges)
    degree = nx.degree_centrality(g) if len(g) > 1 else dict.fromkeys(g, 0.0)
    between = nx.betweenness_centrality(g)
    return sorted(((i, degree[i], between[i]) for i in g), key=lambda x: (-x[1], -x[2], x[0]))


def dependency_order(sub: graph.Subgraph) -> DependencyOrder:
    """Order a DEPENDS_ON traversal (outward from a fact): dependencies before dependants."""
    g: nx.DiGraph[str] = nx.DiGraph()
    g.add_nodes_from(n.fact.id for n in sub.nodes)
    g.add_edges_from((e.source_id, e.target_id) for e in sub.edges if e.type == "DEPENDS_ON")
    cycles = []
    for cycle in nx.simple_cycles(g):
        cycles.append(cycle)
        if len(cycles) >= MAX_CYCLES:
            break
    condensed = nx.condensation(g)
    order: list[str] = []
    for block in reversed(list(nx.topological_sort(condensed))):
        order.extend(sorted(condensed.nodes[block]["members"]))
    return DependencyOrder(order, cycles, sub.truncated_by)
