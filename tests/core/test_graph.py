"""The graph: typed links, bi-temporal; traversal and shortest paths."""

from __future__ import annotations

import itertools
import random
import sqlite3
from pathlib import Path
from typing import Any

import networkx as nx
import pytest

from graphmem import (
    Conflict,
    FactInput,
    InvalidInput,
    LinkType,
    Memory,
    NotFound,
    Settings,
    dedup,
    expansion,
    graph,
)
from graphmem.limits import MAX_DEPTH
from graphmem.storage.sql import traversal
from graphmem.storage.sqlite.store import SQLiteStore

from ..support.clock import Clock

pytestmark = [pytest.mark.engines, pytest.mark.client_api]


def facts(mem: Memory, *names: str) -> dict[str, str]:
    """Store one fact per name, with no automatic links; name -> fact id."""
    results = mem.store_many(
        [{"text": f"Component {n} of the platform ({n * 3})"} for n in names], autolink=False
    )
    ids = {}
    for name, r in zip(names, results, strict=True):
        assert r.action == "ADD" and r.fact is not None
        ids[name] = r.fact.id
    return ids


def reached(sub: graph.Subgraph, ids: dict[str, str]) -> dict[str, int]:
    names = {v: k for k, v in ids.items()}
    return {names[n.fact.id]: n.depth for n in sub.nodes}


# ------------------------------------------------------------------------------------ links


def test_each_link_type_points_from_source_to_target(mem: Memory) -> None:
    f = facts(mem, "api", "db", "outage", "cause", "wheel", "car", "a", "b")
    pairs = {
        "DEPENDS_ON": ("api", "db"),
        "CAUSED_BY": ("outage", "cause"),
        "PART_OF": ("wheel", "car"),
        "RELATED_TO": ("a", "b"),
    }
    for kind, (source, target) in pairs.items():
        link = mem.link(f[source], f[target], kind.lower(), strength=0.8)
        assert (link.type, link.source_id, link.target_id) == (kind, f[source], f[target])
        assert link.origin == "explicit" and link.strength == 0.8
        out = mem.traverse(f[source], depth=1, direction="OUT")
        assert reached(out, f) == {source: 0, target: 1}
        assert reached(mem.traverse(f[target], depth=1, direction="OUT"), f) == {target: 0}
        assert reached(mem.traverse(f[target], depth=1, direction="IN"), f) == {
            target: 0,
            source: 1,
        }
        assert [k.id for k in mem.links(f[source], direction="OUT")] == [link.id]
        assert mem.links(f[source], direction="IN") == []


def test_types_are_accepted_as_the_enum_or_any_case_of_their_names(mem: Memory) -> None:
    f = facts(mem, "a", "b", "c")
    assert mem.link(f["a"], f["b"], LinkType.CAUSED_BY).type == "CAUSED_BY"
    assert mem.link(f["b"], f["c"], "part_of").type == LinkType.PART_OF
    walk = mem.traverse(f["a"], depth=2, types=[LinkType.CAUSED_BY, "PART_OF"], direction="out")
    assert reached(walk, f) == {"a": 0, "b": 1, "c": 2}
    assert [k.type for k in mem.links(f["b"], types=[LinkType.PART_OF])] == ["PART_OF"]


def test_relinking_updates_the_strength_of_the_one_live_link(mem: Memory) -> None:
    f = facts(mem, "api", "db")
    first = mem.link(f["api"], f["db"], "DEPENDS_ON", strength=0.4, metadata={"why": "reads"})
    again = mem.link(f["api"], f["db"], "DEPENDS_ON", strength=0.9, metadata={"note": "writes too"})
    assert again.id == first.id and again.strength == 0.9
    assert again.metadata == {"why": "reads", "note": "writes too"}
    assert len(mem.links(f["api"])) == 1
    other = mem.link(f["api"], f["db"], "RELATED_TO", strength=0.5)  # another type is another link
    assert other.id != first.id and len(mem.links(f["api"])) == 2


@pytest.mark.in_process("link_many is not in the GraphQL API")
def test_a_batch_of_links_behaves_as_its_links_made_one_after_another(
    mem: Memory, clock: Clock
) -> None:
    f = facts(mem, "api", "db", "cache")
    old = mem.link(f["api"], f["db"], "DEPENDS_ON", strength=0.2, metadata={"why": "reads"})
    clock.advance(60)
    made = mem.link_many(
        [
            {"source_id": f["api"], "target_id": f["db"], "type": "DEPENDS_ON", "strength": 0.5},
            {"source_id": f["api"], "target_id": f["db"], "type": "depends_on", "strength": 0.7},
            {"source_id": f["api"], "target_id": f["cache"], "type": "RELATED_TO"},
            {"source_id": f["api"], "target_id": f["cache"], "type": "RELATED_TO",
             "strength": 0.3, "metadata": {"n": 1}},
            {"source_id": f["cache"], "target_id": f["db"], "type": "RELATED_TO",
             "valid_from": "2020-01-01"},
            {"source_id": f["cache"], "target_id": f["db"], "type": "RELATED_TO",
             "valid_from": "2021-01-01", "metadata": {"moved": True}},
        ]
    )  # fmt: skip
    # each answer is the link as that item left it
    assert [k.strength for k in made] == [0.5, 0.7, 1.0, 0.3, 1.0, 1.0]
    assert made[0].id == made[1].id == old.id and made[1].metadata == {"why": "reads"}
    assert made[2].id == made[3].id and made[3].metadata == {"n": 1}
    # another validity replaces the live link, even one made earlier in the batch
    assert made[4].id != made[5].id and made[5].metadata == {"moved": True}
    live = {(k.source_id, k.target_id): k for k in mem.links(f["cache"], direction="OUT")}
    assert list(live) == [(f["cache"], f["db"])]
    assert live[(f["cache"], f["db"])].id == made[5].id
    assert live[(f["cache"], f["db"])].valid_from.year == 2021
    stored = {k.id: k for k in mem.links(f["api"], direction="OUT")}
    assert stored[old.id].strength == 0.7 and stored[made[3].id].strength == 0.3
    assert len(stored) == 2
    # a read known before the batch sees none of the links it made
    assert [k.id for k in mem.links(f["api"], known_at=clock.now - 30)] == [old.id]
    # the first item that fails fails the batch, and nothing of it is written
    with pytest.raises(NotFound, match="no-such-fact"):
        mem.link_many(
            [
                {"source_id": f["db"], "target_id": f["api"], "type": "RELATED_TO"},
                {"source_id": f["db"], "target_id": "no-such-fact", "type": "RELATED_TO"},
                {"source_id": f["db"], "type": "RELATED_TO"},
            ]
        )
    with pytest.raises(InvalidInput, match="link 1"):
        mem.link_many([{"source_id": f["db"], "target_id": f["api"], "type": "RELATED_TO"}, 7])  # type: ignore[list-item]
    assert mem.links(f["db"], direction="OUT") == []


def test_bad_links_are_rejected_and_nothing_is_written(mem: Memory) -> None:
    f = facts(mem, "api", "db")
    with pytest.raises(InvalidInput):
        mem.link(f["api"], f["db"], "LIKES")
    with pytest.raises(InvalidInput):
        mem.link(f["api"], f["db"], "SUPERSEDES")
    with pytest.raises(InvalidInput):
        mem.link(f["api"], f["api"], "RELATED_TO")
    for bad in (1.5, -0.1, float("nan"), "high", True):
        with pytest.raises(InvalidInput):
            mem.link(f["api"], f["db"], "RELATED_TO", strength=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        mem.link(f["api"], f["db"], "RELATED_TO", metadata={"x": object()})
    with pytest.raises(NotFound):
        mem.link(f["api"], "no-such-fact", "RELATED_TO")
    mem.forget(f["db"])
    with pytest.raises(Conflict):
        mem.link(f["api"], f["db"], "RELATED_TO")
    assert mem.links(f["api"]) == []


def test_unlink_retracts_but_history_keeps_the_link(mem: Memory, clock: Clock) -> None:
    f = facts(mem, "api", "db")
    link = mem.link(f["api"], f["db"], "DEPENDS_ON")
    clock.advance(60)
    before = clock.now
    clock.advance(60)
    removed = mem.unlink(link.id)
    assert removed.id == link.id
    assert mem.links(f["api"]) == []
    assert reached(mem.traverse(f["api"]), f) == {"api": 0}
    assert [k.id for k in mem.links(f["api"], known_at=before)] == [link.id]
    assert reached(mem.traverse(f["api"], known_at=before), f) == {"api": 0, "db": 1}
    with pytest.raises(Conflict):
        mem.unlink(link.id)
    with pytest.raises(NotFound):
        mem.unlink("no-such-link")
    relinked = mem.link(f["api"], f["db"], "DEPENDS_ON")  # a new live link after the removal
    assert relinked.id != link.id


def test_links_are_bi_temporal(mem: Memory, clock: Clock) -> None:
    f = facts(mem, "api", "db")
    k = clock.now
    clock.advance(3600)
    mem.link(f["api"], f["db"], "DEPENDS_ON", valid_from="2030-01-01")
    # recorded after K: invisible to what memory knew at K
    assert mem.links(f["api"], known_at=k) == []
    # valid only from 2030: invisible as of 2029, visible as of 2031 and later
    assert mem.links(f["api"], as_of="2029-06-01") == []
    assert reached(mem.traverse(f["api"], as_of="2029-06-01"), f) == {"api": 0}
    assert reached(mem.traverse(f["api"], as_of="2031-01-01"), f) == {"api": 0, "db": 1}


def test_purging_a_fact_removes_its_links(mem: Memory) -> None:
    f = facts(mem, "api", "db")
    mem.link(f["api"], f["db"], "DEPENDS_ON")
    mem.purge(f["db"])
    assert mem.links(f["api"], known_at="2100-01-01") == []


def test_supersession_makes_a_supersedes_link_that_history_follows(mem: Memory) -> None:
    old = mem.store("Alice lives in Berlin", entity="alice", key="city", value="Berlin").fact
    new = mem.store("Alice lives in Paris", entity="alice", key="city", value="Paris").fact
    assert old is not None and new is not None
    (link,) = mem.links(new.id, direction="OUT", types=["SUPERSEDES"])
    assert (link.source_id, link.target_id, link.origin) == (new.id, old.id, "supersession")
    with pytest.raises(Conflict):
        mem.unlink(link.id)
    # not followed unless asked for; when asked, the superseded version is reached
    assert [n.fact.id for n in mem.traverse(new.id).nodes] == [new.id]
    walk = mem.traverse(new.id, types=["SUPERSEDES"], direction="OUT")
    assert [(n.fact.id, n.depth) for n in walk.nodes] == [(new.id, 0), (old.id, 1)]
    assert [f.id for f in mem.history(new.id)] == [old.id, new.id]


# ------------------------------------------------------------------------------------ traversal


@pytest.fixture
def chain(mem: Memory) -> dict[str, str]:
    """a -> b -> c -> d -> e (DEPENDS_ON), a -> x (RELATED_TO 0.2), e -> a closes a cycle."""
    f = facts(mem, "a", "b", "c", "d", "e", "x")
    for s, t in ("ab", "bc", "cd", "de", "ea"):
        mem.link(f[s], f[t], "DEPENDS_ON", strength=0.9)
    mem.link(f["a"], f["x"], "RELATED_TO", strength=0.2)
    return f


def test_depth_bounds_the_walk_and_reports_truncation(mem: Memory, chain: dict[str, str]) -> None:
    one = mem.traverse(chain["a"], depth=1, direction="OUT")
    assert reached(one, chain) == {"a": 0, "b": 1, "x": 1}
    assert one.truncated_by == ("depth",)
    two = mem.traverse(chain["a"], depth=2, direction="OUT")
    assert reached(two, chain) == {"a": 0, "b": 1, "x": 1, "c": 2}
    full = mem.traverse(chain["a"], depth=6, direction="OUT")
    assert reached(full, chain) == {"a": 0, "b": 1, "x": 1, "c": 2, "d": 3, "e": 4}
    assert not full.truncated  # the cycle back to a ends the walk
    assert mem.traverse(chain["a"], depth=0).nodes[0].fact.id == chain["a"]


def test_direction_and_type_filters(mem: Memory, chain: dict[str, str]) -> None:
    into = mem.traverse(chain["c"], depth=2, direction="IN")
    assert reached(into, chain) == {"c": 0, "b": 1, "a": 2}
    both = mem.traverse(chain["c"], depth=1, direction="BOTH")
    assert reached(both, chain) == {"c": 0, "b": 1, "d": 1}
    related = mem.traverse(chain["a"], depth=3, types=["RELATED_TO"])
    assert reached(related, chain) == {"a": 0, "x": 1}
    deps = mem.traverse(chain["a"], depth=1, types="depends_on", direction="OUT")
    assert reached(deps, chain) == {"a": 0, "b": 1}


def test_min_strength_skips_weak_links(mem: Memory, chain: dict[str, str]) -> None:
    sub = mem.traverse(chain["a"], depth=1, direction="OUT", min_strength=0.5)
    assert reached(sub, chain) == {"a": 0, "b": 1}
    assert all(e.strength >= 0.5 for e in sub.edges)


def test_cycles_and_diamonds_give_each_fact_once_at_its_shortest_depth(mem: Memory) -> None:
    f = facts(mem, "top", "left", "right", "bottom", "deep")
    for s, t in (
        ("top", "left"),
        ("top", "right"),
        ("left", "bottom"),
        ("right", "bottom"),
        ("bottom", "deep"),
        ("deep", "top"),
    ):
        mem.link(f[s], f[t], "DEPENDS_ON")
    sub = mem.traverse(f["top"], depth=5, direction="OUT")
    assert reached(sub, f) == {"top": 0, "left": 1, "right": 1, "bottom": 2, "deep": 3}
    bottom = next(n for n in sub.nodes if n.fact.id == f["bottom"])
    assert set(bottom.parent_ids) == {f["left"], f["right"]}
    assert len(sub.edges) == 6  # every link among the returned facts, the cycle's too
    assert [n.depth for n in sub.nodes] == sorted(n.depth for n in sub.nodes)


def test_max_nodes_truncates(mem: Memory, chain: dict[str, str]) -> None:
    sub = mem.traverse(chain["a"], depth=6, direction="OUT", max_nodes=3)
    assert len(sub.nodes) == 3 and sub.truncated_by == ("max_nodes",)
    assert reached(sub, chain) == {"a": 0, "b": 1, "x": 1}  # breadth first
    # within a level the strongest links are followed first
    assert reached(mem.traverse(chain["a"], direction="OUT", max_nodes=2), chain) == {
        "a": 0,
        "b": 1,
    }


def test_a_hub_is_bounded_by_fan_out(mem: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(traversal, "FAN_OUT", 5)
    names = ["hub", *(f"leaf{i}" for i in range(12))]
    f = facts(mem, *names)
    for i in range(12):
        mem.link(f["hub"], f[f"leaf{i}"], "RELATED_TO", strength=round(0.1 + i * 0.05, 2))
    sub = mem.traverse(f["hub"], depth=1)
    assert "fan_out" in sub.truncated_by
    assert {n for n in reached(sub, f) if n != "hub"} == {f"leaf{i}" for i in range(7, 12)}
    assert len(sub.edges) == 5  # the links to the returned leaves


def test_time_scope_applies_to_facts_and_links(mem: Memory, chain: dict[str, str]) -> None:
    mem.forget(chain["c"])
    assert reached(mem.traverse(chain["a"], depth=6, direction="OUT"), chain) == {
        "a": 0,
        "b": 1,
        "x": 1,
    }
    sub = mem.traverse([chain["c"], chain["a"]], depth=0)
    assert reached(sub, chain) == {"a": 0}  # a forgotten start fact is left out


def test_traversal_arguments_are_checked(mem: Memory, chain: dict[str, str]) -> None:
    kwargs: dict[str, Any]
    for kwargs in (
        {"depth": 7},
        {"depth": -1},
        {"max_nodes": 0},
        {"max_nodes": 10_001},
        {"direction": "UP"},
        {"types": ["FRIEND"]},
        {"types": []},
        {"min_strength": 2},
    ):
        with pytest.raises(InvalidInput):
            mem.traverse(chain["a"], **kwargs)
    with pytest.raises(NotFound):
        mem.traverse([chain["a"], "no-such-fact"])
    with pytest.raises(InvalidInput):
        mem.traverse([])


# ------------------------------------------------------------------------------------ paths


def test_path_finds_a_shortest_route(mem: Memory, chain: dict[str, str]) -> None:
    route = mem.path(chain["b"], chain["e"], direction="OUT")
    assert route is not None
    assert [f.id for f in route.facts] == [chain[n] for n in "bcde"]
    assert [f.id for f in route] == [chain[n] for n in "bcde"] and len(route) == 4  # a list
    assert [(k.source_id, k.target_id) for k in route.links] == [
        (chain[s], chain[t]) for s, t in ("bc", "cd", "de")
    ]
    both = mem.path(chain["b"], chain["e"])  # BOTH: b <- a <- e is shorter
    assert both is not None and [f.id for f in both.facts] == [chain[n] for n in "bae"]
    assert mem.path(chain["x"], chain["b"], direction="OUT") is None
    assert mem.path(chain["b"], chain["e"], direction="OUT", max_depth=2) is None
    same = mem.path(chain["b"], chain["b"])
    assert same is not None and len(same.facts) == 1 and same.links == []
    with pytest.raises(NotFound):
        mem.path(chain["b"], "no-such-fact")


def test_path_lengths_agree_with_networkx_on_a_random_graph(mem: Memory) -> None:
    rng = random.Random(4)
    f = facts(mem, *[f"n{i}" for i in range(60)])
    ids = list(f.values())
    directed = nx.DiGraph()
    directed.add_nodes_from(ids)
    for _ in range(90):
        s, t = rng.sample(ids, 2)
        mem.link(s, t, rng.choice(["DEPENDS_ON", "RELATED_TO"]), strength=round(rng.random(), 2))
        directed.add_edge(s, t)
    for direction, g in (("OUT", directed), ("BOTH", directed.to_undirected())):
        for _ in range(40):
            a, b = rng.sample(ids, 2)
            route = mem.path(a, b, direction=direction)
            try:
                expected = nx.shortest_path_length(g, a, b)
            except nx.NetworkXNoPath:
                expected = None
            if expected is None or expected > MAX_DEPTH:
                assert route is None
                continue
            assert route is not None and len(route.links) == expected
            assert route.facts[0].id == a and route.facts[-1].id == b
            for k, (x, y) in zip(route.links, itertools.pairwise(route.facts), strict=True):
                assert {k.source_id, k.target_id} == {x.id, y.id}
                if direction == "OUT":
                    assert (k.source_id, k.target_id) == (x.id, y.id)


# ------------------------------------------------------------------------------------ analytics


@pytest.mark.in_process("clusters is not in the GraphQL API")
def test_clusters_are_connected_groups(mem: Memory, chain: dict[str, str]) -> None:
    f = facts(mem, "p", "q", "lonely")
    mem.link(f["p"], f["q"], "PART_OF")
    groups = mem.clusters().groups
    assert [set(g) for g in groups] == [{chain[n] for n in "abcdex"}, {f["p"], f["q"]}]
    assert mem.clusters(types=["PART_OF"]).groups == [sorted([f["p"], f["q"]])]
    mem.forget(f["q"])
    assert [len(g) for g in mem.clusters().groups] == [6]


@pytest.mark.in_process("dependency_order is not in the GraphQL API")
def test_dependency_order_puts_dependencies_first_and_reports_cycles(mem: Memory) -> None:
    f = facts(mem, "app", "api", "db", "disk", "auth", "tokens")
    for s, t in (("app", "api"), ("api", "db"), ("db", "disk"), ("app", "auth")):
        mem.link(f[s], f[t], "DEPENDS_ON")
    order = mem.dependency_order(f["app"])
    names = {v: k for k, v in f.items()}
    ranked = [names[i] for i in order.order]
    assert set(ranked) == {"app", "api", "db", "disk", "auth"} and order.cycles == []
    for s, t in (("app", "api"), ("api", "db"), ("db", "disk"), ("app", "auth")):
        assert ranked.index(t) < ranked.index(s)
    mem.link(f["auth"], f["tokens"], "DEPENDS_ON")
    mem.link(f["tokens"], f["auth"], "DEPENDS_ON")
    cyclic = mem.dependency_order(f["app"])
    assert [sorted(names[i] for i in c) for c in cyclic.cycles] == [["auth", "tokens"]]
    ranked = [names[i] for i in cyclic.order]
    assert ranked[-1] == "app" and len(ranked) == 6


@pytest.mark.in_process("causes and parts are not in the GraphQL API")
def test_cause_chain_and_part_trees(mem: Memory) -> None:
    f = facts(mem, "outage", "deploy", "config", "wheel", "axle", "car")
    mem.link(f["outage"], f["deploy"], "CAUSED_BY")
    mem.link(f["deploy"], f["config"], "CAUSED_BY")
    assert reached(mem.causes(f["outage"]), f) == {"outage": 0, "deploy": 1, "config": 2}
    mem.link(f["wheel"], f["axle"], "PART_OF")
    mem.link(f["axle"], f["car"], "PART_OF")
    assert reached(mem.parts(f["car"]), f) == {"car": 0, "axle": 1, "wheel": 2}
    assert reached(mem.parts(f["wheel"], above=True), f) == {"wheel": 0, "axle": 1, "car": 2}


@pytest.mark.in_process("centrality is not in the GraphQL API")
def test_centrality_ranks_the_hub_first(mem: Memory) -> None:
    f = facts(mem, "hub", "s1", "s2", "s3", "far")
    for n in ("s1", "s2", "s3"):
        mem.link(f["hub"], f[n], "RELATED_TO")
    mem.link(f["s3"], f["far"], "RELATED_TO")
    ranked = mem.centrality(f["s1"], depth=3)
    assert ranked[0][0] == f["hub"] and ranked[0][2] > 0
    assert {i for i, _, _ in ranked} == set(f.values())


# ------------------------------------------------------------------------------------ search


def test_graph_depth_adds_neighbours_below_the_hit_that_reached_them(mem: Memory) -> None:
    hit = mem.store("The payments service is written in Rust").fact
    near = mem.store("Its on-call rotation changes every Monday").fact
    far = mem.store("The rotation schedule lives in PagerDuty").fact
    assert hit and near and far
    mem.link(near.id, hit.id, "PART_OF", strength=0.8)
    mem.link(far.id, near.id, "RELATED_TO", strength=0.5)
    plain = mem.search("payments service rust", mode="fts", limit=5)
    assert [h.fact.id for h in plain] == [hit.id]
    one = mem.search("payments service rust", mode="fts", limit=5, graph_depth=1)
    assert [(h.fact.id, h.depth, h.via) for h in one] == [(hit.id, 0, None), (near.id, 1, hit.id)]
    assert one[1].score == pytest.approx(one[0].score * expansion.HOP_FACTOR * 0.8)
    two = mem.search("payments service rust", mode="fts", limit=5, graph_depth=2)
    assert [(h.fact.id, h.depth, h.via) for h in two][2] == (far.id, 2, near.id)
    assert two[2].score < two[1].score < two[0].score
    # filters and the time scope apply to neighbours too
    assert [
        h.fact.id
        for h in mem.search("payments service rust", mode="fts", graph_depth=2, category="decision")
    ] == []
    mem.forget(near.id)
    assert [h.fact.id for h in mem.search("payments rust", mode="fts", graph_depth=2)] == [hit.id]


def test_graph_expansion_never_demotes_a_stronger_direct_hit(mem: Memory) -> None:
    texts = [f"Deploy note {i}: the canary for region {i} is healthy" for i in range(8)]
    ids = [
        r.fact.id  # type: ignore[union-attr]
        for r in mem.store_many([{"text": t} for t in texts], autolink=False)
    ]
    extra = [
        r.fact.id  # type: ignore[union-attr]
        for r in mem.store_many(
            [{"text": f"Unrelated remark number {i} about lunch"} for i in range(8)], autolink=False
        )
    ]
    for source, target in zip(ids, extra, strict=True):
        mem.link(source, target, "RELATED_TO", strength=1.0)
    plain = mem.search("deploy canary region healthy", limit=5)
    expanded = mem.search("deploy canary region healthy", limit=5, graph_depth=1)
    kept = {h.fact.id for h in expanded}
    for n in (h for h in expanded if h.depth):
        via = next(h for h in plain if h.fact.id == n.via)
        assert n.score < via.score
        assert all(h.fact.id in kept for h in plain if h.score >= via.score)


def test_linked_candidates_lend_each_other_evidence(mem: Memory) -> None:
    strong = mem.store("Falcon launch checklist: fuel, weather, range safety").fact
    linked = mem.store("Falcon pad crew briefing").fact
    alone = mem.store("Falcon hangar door repaired").fact
    assert strong and linked and alone
    mem.store_many([{"text": f"Quarterly budget line {n} approved"} for n in range(6)])
    before = {h.fact.id: h.score for h in mem.search("falcon launch checklist", mode="fts")}
    assert before[linked.id] == pytest.approx(before[alone.id], abs=1e-9)
    mem.link(linked.id, strong.id, "PART_OF", strength=1.0)
    after = {
        h.fact.id: h.score for h in mem.search("falcon launch checklist", mode="fts", graph_depth=1)
    }
    assert after[linked.id] > after[alone.id] and after[linked.id] > before[linked.id]
    assert after[strong.id] >= before[strong.id]


@pytest.mark.in_process("reads the store's vectors")
def test_of_a_hits_neighbours_the_one_nearest_the_query_inherits_most(mem: Memory) -> None:
    f = facts(mem, "hit", "a", "b", "c")
    for n in "abc":
        mem.link(f["hit"], f[n], "RELATED_TO")
    near = {f["a"]: 0.9, f["b"]: 0.1, f["c"]: 0.2}
    found = expansion.neighbours(
        mem._store,
        [(f["hit"], 1.0)],
        1,
        mem._scope(None, None),
        set,
        {},
        lambda ids: {i: near[i] for i in ids},
    )
    score = {i: v for i, (v, _, _) in found.items()}
    assert score[f["a"]] > score[f["c"]] > score[f["b"]]
    assert score[f["b"]] == pytest.approx(expansion.HOP_FACTOR)
    assert score[f["a"]] == pytest.approx(
        min(expansion.HOP_FACTOR + expansion.CLOSENESS_BONUS, expansion.MAX_SHARE)
    )
    plain = expansion.neighbours(mem._store, [(f["hit"], 1.0)], 1, mem._scope(None, None), set, {})
    assert [v for v, _, _ in plain.values()] == [pytest.approx(expansion.HOP_FACTOR)] * 3


@pytest.mark.in_process("reads the store's vectors")
def test_a_fact_takes_the_best_score_a_link_offers_even_a_direct_hit(mem: Memory) -> None:
    f = facts(mem, "strong", "other", "weak", "leaf")
    mem.link(f["weak"], f["strong"], "RELATED_TO")
    mem.link(f["leaf"], f["weak"], "RELATED_TO")
    hits = [(f["strong"], 1.0), (f["other"], 0.6), (f["weak"], 0.3)]
    found = expansion.neighbours(mem._store, hits, 2, mem._scope(None, None), set, dict(hits))
    assert set(found) == {f["weak"], f["leaf"]}
    weak, depth, via = found[f["weak"]]
    assert (depth, via) == (1, f["strong"]) and 0.6 < weak < 1.0
    assert weak == pytest.approx(min(0.3 + expansion.HOP_FACTOR, expansion.MAX_SHARE))
    # the leaf is scored from the raised hit, not from its search score
    leaf = (pytest.approx(weak * expansion.HOP_FACTOR), 2, f["weak"])
    assert found[f["leaf"]] == leaf  # type: ignore[comparison-overlap]  # approx equals a float


def test_search_expansion_does_not_follow_similarity_links(tmp_path: Path, clock: Clock) -> None:
    settings = Settings(embedder="hash", autolink_threshold=0.5)
    with Memory.open(tmp_path / "d", settings=settings, clock=clock) as mem:
        hit = mem.store("The orbital launch window opens at dawn").fact
        twin = mem.store("The orbital launch window closes at dusk").fact
        assert hit and twin and [k.origin for k in mem.links(twin.id)] == ["auto_similarity"]
        found = mem.search("dawn", mode="fts", graph_depth=1)
        assert [h.fact.id for h in found] == [hit.id]
        assert {n.fact.id for n in mem.traverse(hit.id).nodes} == {hit.id, twin.id}
        mem.link(twin.id, hit.id, "PART_OF")
        found = mem.search("dawn", mode="fts", graph_depth=1)
        assert [(h.fact.id, h.depth) for h in found] == [(hit.id, 0), (twin.id, 1)]


def test_graph_depth_is_checked(mem: Memory) -> None:
    for bad in (-1, 7, 1.5, True):
        with pytest.raises(InvalidInput):
            mem.search("anything", graph_depth=bad)  # type: ignore[arg-type]


def test_a_batch_of_links_costs_work_in_proportion_to_its_size(
    tmp_path: Path, clock: Clock
) -> None:
    # The live links a batch names were read with a condition on its sources and on its
    # targets, which SQLite answered by looking every combination up: a batch 8 times larger
    # cost 64 times more (100 million lookups for 10,000 links).
    store = SQLiteStore(tmp_path / "store.sqlite3", clock)
    try:
        inputs = [FactInput.parse({"text": f"node {n}"}) for n in range(2000)]
        with store.transaction() as tx:
            results, _ = dedup.write_batch(
                tx, inputs, [None] * len(inputs), Settings(embedder="hash")
            )
        ids = [r.fact.id for r in results if r.fact is not None]
        rng = random.Random(5)

        def work(links: int) -> int:
            """SQLite's virtual machine steps (in thousands) to make ``links`` random links."""
            steps = [0]

            def tick() -> int:
                steps[0] += 1
                return 0

            pairs = (rng.sample(ids, 2) for _ in range(links))
            items = [{"source_id": s, "target_id": t, "type": "RELATED_TO"} for s, t in pairs]
            with store.transaction() as tx:
                assert isinstance(tx.conn, sqlite3.Connection)
                tx.conn.set_progress_handler(tick, 1000)
                tx.link_many(items)
                tx.conn.set_progress_handler(None, 0)
            return steps[0]

        small, large = work(200), work(1600)
        assert large < 16 * small, (small, large)
    finally:
        store.close()
