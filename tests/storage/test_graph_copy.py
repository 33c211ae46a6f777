"""The in-memory copy of the graph (graphmem/storage/sql/graph_copy.py) walks exactly as SQL does: the same
nodes at the same depths with the same parents, the same edges, the same truncation, the same
paths — at any valid time and transaction time — and it follows writes (its own process's and
another's) through the graph log, reloading when rows were deleted."""

from __future__ import annotations

import contextlib
import random
import threading
import time
from typing import Any

import pytest

from graphmem import GraphmemError, Memory, Settings, graph
from graphmem.limits import FAN_OUT
from graphmem.storage.sql import graph_copy as adjacency
from graphmem.storage.sql import traversal
from graphmem.storage.sql.graph_copy import Adjacency
from graphmem.temporal import TimeScope

from ..support.clock import Clock
from ..support.graphql_clients import InProcess

pytestmark = pytest.mark.engines

TYPES = ("RELATED_TO", "DEPENDS_ON", "PART_OF", "CAUSED_BY")


def build_history(mem: Memory, clock: Clock, rng: random.Random, facts: int = 40) -> list[float]:
    """Facts and links written over time — supersessions, forgets, expiries, validity ends,
    retracted and re-strengthened links, parallel links of equal strength — and the moments
    worth asking about (each write's time, and between writes)."""
    moments = [clock()]
    ids: list[str] = []
    for n in range(facts):
        clock.advance(60)
        extra: dict[str, Any] = {}
        if n % 7 == 3:
            extra["expires_at"] = clock() + 600
        if n % 5 == 1:
            extra["valid_from"] = clock() - 3600
        if ids and n % 6 == 5:
            extra["supersedes"] = rng.choice(ids)
        try:
            fact = mem.store(f"fact number {n} of the walk", autolink=False, **extra).fact
        except GraphmemError:  # superseding a version no longer live: store it plainly
            fact = mem.store(f"fact number {n} of the walk", autolink=False).fact
        assert fact is not None
        ids.append(fact.id)
        moments.append(clock())
    links = []
    for _ in range(4 * facts):
        clock.advance(30)
        a, b = rng.sample(ids, 2)
        extra = {}
        if rng.random() < 0.2:
            extra["valid_until"] = clock() + rng.choice([-100, 300, 900])
        try:
            links.append(
                mem.link(a, b, rng.choice(TYPES), strength=rng.choice([0.25, 0.5, 1.0]), **extra)
            )
        except GraphmemError:  # a link that cannot be made (a retracted end): skip it
            continue
        moments.append(clock())
        if rng.random() < 0.1:
            clock.advance(30)
            with contextlib.suppress(GraphmemError):  # removed already
                mem.unlink(rng.choice(links).id)
        if rng.random() < 0.1:  # the same pair again: its strength changes
            link = rng.choice(links)
            clock.advance(30)
            with contextlib.suppress(GraphmemError):  # the pair's link was removed
                mem.link(link.source_id, link.target_id, link.type, strength=0.75)
        if rng.random() < 0.05:
            clock.advance(30)
            with contextlib.suppress(GraphmemError):  # forgotten already
                mem.forget(rng.choice(ids))
    moments.append(clock())
    return moments


def subgraph(sub: graph.Subgraph) -> tuple[Any, ...]:
    nodes = [(n.fact.id, n.depth, n.parent_ids) for n in sub.nodes]
    return nodes, [e.id for e in sub.edges], sub.truncated_by


def compare(mem: Memory, moments: list[float], rng: random.Random, queries: int = 120) -> int:
    """Ask the same walks of SQL and of a copy loaded in the same snapshot; returns how many
    answers had nodes beyond the start."""
    with mem._store._db.snapshot() as conn:  # type: ignore[attr-defined]
        copy = Adjacency.load(conn)
        assert copy.current(conn)
        ids = [r[0] for r in conn.execute("SELECT id FROM facts ORDER BY seq")]
        nonempty = 0
        for _ in range(queries):
            scope = TimeScope.resolve(
                moments[-1], rng.choice(moments) + rng.choice([0, 15]), rng.choice(moments)
            )
            kwargs: dict[str, Any] = {
                "depth": rng.choice([1, 2, 3]),
                "types": rng.choice([None, ["DEPENDS_ON", "PART_OF"], [*TYPES, "SUPERSEDES"]]),
                "direction": rng.choice(["OUT", "IN", "BOTH"]),
                "max_nodes": rng.choice([3, 10, 200]),
                "min_strength": rng.choice([0.0, 0.5]),
            }
            starts = rng.sample(ids, rng.choice([1, 2]))
            plain = traversal.traverse(conn, starts, scope, **kwargs)
            copied = traversal.traverse(conn, starts, scope, adjacency=copy, **kwargs)
            assert subgraph(copied) == subgraph(plain), (starts, scope, kwargs)
            nonempty += len(plain.nodes) > len(starts)
            a, b = rng.sample(ids, 2)
            path_args: dict[str, Any] = {"types": kwargs["types"], "direction": kwargs["direction"]}
            plain_path = traversal.path(conn, a, b, scope, **path_args)
            copied_path = traversal.path(conn, a, b, scope, adjacency=copy, **path_args)
            assert (plain_path is None) == (copied_path is None)
            if plain_path is not None and copied_path is not None:
                assert [f.id for f in copied_path] == [f.id for f in plain_path]
                assert [k.id for k in copied_path.links] == [k.id for k in plain_path.links]
        return nonempty


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_copy_walks_as_sql_does_at_any_time(mem: Memory, clock: Clock, seed: int) -> None:
    rng = random.Random(seed)
    moments = build_history(mem, clock, rng)
    assert compare(mem, moments, rng) > 30  # the walks went somewhere


def test_a_hub_is_cut_at_the_same_links(mem: Memory, clock: Clock) -> None:
    hub = mem.store("the hub", autolink=False).fact
    assert hub is not None
    rows = [{"text": f"spoke {n}"} for n in range(FAN_OUT + 20)]
    spokes = [r.fact.id for r in mem.store_many(rows, autolink=False) if r.fact is not None]
    for n, spoke in enumerate(spokes):
        clock.advance(1)
        mem.link(hub.id, spoke, "PART_OF", strength=[0.25, 0.5][n % 2])
        if n % 3 == 0:
            mem.link(spoke, hub.id, "DEPENDS_ON", strength=0.5)
    moments = [clock()]
    with mem._store._db.snapshot() as conn:  # type: ignore[attr-defined]
        copy = Adjacency.load(conn)
        scope = TimeScope.resolve(moments[0])
        for direction in ("OUT", "IN", "BOTH"):
            plain = traversal.traverse(conn, [hub.id], scope, direction=direction, max_nodes=500)
            copied = traversal.traverse(
                conn, [hub.id], scope, direction=direction, max_nodes=500, adjacency=copy
            )
            assert subgraph(copied) == subgraph(plain)
        assert "fan_out" in plain.truncated_by


def test_the_copy_follows_writes_and_reloads_after_a_deletion(mem: Memory, clock: Clock) -> None:
    rng = random.Random(7)
    moments = build_history(mem, clock, rng, facts=20)
    db = mem._store._db  # type: ignore[attr-defined]
    with db.snapshot() as conn:
        copy = Adjacency.load(conn)
    more = build_history(mem, clock, rng, facts=10)  # new rows, updates of old ones
    with db.snapshot() as conn:
        assert not copy.current(conn)
        assert copy.catch_up(conn)
        assert copy.current(conn)
        ids = [r[0] for r in conn.execute("SELECT id FROM facts")]
        scope = TimeScope.resolve(clock())
        for start in ids:
            plain = traversal.traverse(conn, [start], scope, depth=3)
            assert subgraph(traversal.traverse(conn, [start], scope, depth=3, adjacency=copy)) == (
                subgraph(plain)
            )
    assert moments and more
    mem.purge(ids[0])
    with db.snapshot() as conn:
        assert not copy.catch_up(conn)  # a deleted row: the copy is loaded afresh


def test_an_older_snapshot_walks_in_sql(mem: Memory, clock: Clock) -> None:
    a, b = (mem.store(f"end {n}", autolink=False).fact for n in "ab")
    assert a is not None and b is not None
    db = mem._store._db  # type: ignore[attr-defined]
    with db.snapshot() as conn:
        copy = Adjacency.load(conn)
    reader: list[Any] = []  # another thread's read connection, used from here
    thread = threading.Thread(target=lambda: reader.append(db.reader()))
    thread.start()
    thread.join()
    old = reader[0]
    old.execute("BEGIN")
    try:
        old.execute("SELECT count(*) FROM facts").fetchone()  # the snapshot starts here
        mem.link(a.id, b.id, "DEPENDS_ON")
        with db.snapshot() as new:
            assert copy.catch_up(new) and copy.current(new)
        assert copy.catch_up(old)
        assert not copy.current(old)  # the copy knows a link this snapshot does not
    finally:
        old.execute("ROLLBACK")


def test_traversals_use_the_copy_once_loaded_and_see_other_writers(
    data_dir: Any, clock: Clock, settings: Settings
) -> None:
    first = Memory.open(data_dir, settings=settings, clock=clock)
    second = Memory.open(data_dir, settings=settings, clock=clock)
    try:
        a, b, c = (first.store(f"node {n}", autolink=False).fact for n in "abc")
        assert a is not None and b is not None and c is not None
        first.link(a.id, b.id, "DEPENDS_ON")
        copy = first._store._graph  # type: ignore[attr-defined]
        assert [n.fact.id for n in first.traverse(a.id).nodes] == [a.id, b.id]  # starts loading
        assert first.preload_graph(wait=10)
        second.link(b.id, c.id, "PART_OF")  # another writer
        assert [n.fact.id for n in first.traverse(a.id).nodes] == [a.id, b.id, c.id]
        assert copy._state is not None and copy._state.link_seq == 2  # read from the copy
        link = second.traverse(a.id).edges[0]
        second.unlink(link.id)
        assert [n.fact.id for n in first.traverse(a.id).nodes] == [a.id]
        assert first.path(a.id, c.id) is None
    finally:
        first.close()
        second.close()


def test_a_copy_behind_the_kept_log_loads_afresh(
    mem: Memory, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b, c = (mem.store(f"kept {n}", autolink=False).fact for n in "abc")
    assert a is not None and b is not None and c is not None
    links = [mem.link(a.id, b.id, "DEPENDS_ON"), mem.link(b.id, c.id, "PART_OF")]
    db = mem._store._db  # type: ignore[attr-defined]
    with db.snapshot() as conn:
        copy = Adjacency.load(conn)
    monkeypatch.setattr(adjacency, "GRAPH_LOG_KEPT", 1)
    for link in links:
        mem.unlink(link.id)  # two log entries
    mem.store("a write that logs vectors, pruning the graph log too", autolink=False)
    with db.snapshot() as conn:
        assert conn.execute("SELECT count(*) FROM graph_log").fetchone()[0] == 1
        assert not copy.catch_up(conn)


def test_graph_in_memory_off_keeps_every_walk_in_sql(
    data_dir: Any, clock: Clock, settings: Settings
) -> None:
    mem = Memory.open(
        data_dir, settings=settings.model_copy(update={"graph_in_memory": False}), clock=clock
    )
    try:
        a, b = (mem.store(f"plain {n}", autolink=False).fact for n in "ab")
        assert a is not None and b is not None
        mem.link(a.id, b.id, "DEPENDS_ON")
        assert [n.fact.id for n in mem.traverse(a.id).nodes] == [a.id, b.id]
        assert not mem.preload_graph(wait=1)
        assert mem._store._graph._state is None  # type: ignore[attr-defined]
    finally:
        mem.close()


def test_a_loading_copy_is_said_and_health_lists_its_namespace(
    app: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    released = threading.Event()
    load = Adjacency.load

    def slow(conn: Any, closed: Any = None) -> Adjacency:
        released.wait(30)
        return load(conn, closed)

    monkeypatch.setattr(Adjacency, "load", staticmethod(slow))
    with InProcess(app) as api:  # opens the default namespace and starts loading its copy
        health = api.request("GET", "/healthz").json()
        assert health["loading"] == ["default"] and health["namespaces"] == ["default"]
        released.set()
        for _ in range(100):
            if not api.request("GET", "/healthz").json()["loading"]:
                break
            time.sleep(0.05)
        assert api.request("GET", "/healthz").json()["loading"] == []
