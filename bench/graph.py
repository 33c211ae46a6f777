"""Graph speed at scale: traverse and path latency over many facts and links.

Stores N synthetic facts (hash embedder, no automatic links: the graph code does not embed;
bench/synthetic.py's up to its 186,480, else bench/scale.py's generator),
then makes L links of the four explicit types between random facts (each end drawn uniformly:
~2L/N links per fact, random strengths). Times, from random start facts: traverse at depth 1, 2
and 3 (BOTH directions, default types, default max_nodes), and shortest paths (at most 4 links)
between random pairs. Then gives one fact HUB_LINKS more links (half out, half in) and times
traverse from the hub and from the hub's neighbours at depth 1 and 2.

    python -m bench.graph [--facts 100000] [--links 500000] [--queries 300] [--data DIR] [--sql]

Walks use the in-memory copy of the graph (graphmem/storage/sql/graph_copy.py), timed after it has loaded
(its load time is reported); ``--sql`` walks in SQL instead. ``--data DIR`` keeps the store (facts and random links; the hub's links are removed after each
run) in DIR and reuses it when it is already there.
"""

from __future__ import annotations

import argparse
import itertools
import random
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Final

from graphmem import Memory, Settings

from . import scale, synthetic
from .common import OUT_DIR, machine, markdown_table, peak_rss_mb, percentile, write_json

TYPES: Final = ("RELATED_TO", "DEPENDS_ON", "PART_OF", "CAUSED_BY")
HUB_LINKS: Final = 10_000
NAMESPACE: Final = "graph"


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    out: dict[str, Any] = {
        "benchmark": "graph",
        "machine": machine(),
        "facts": args.facts,
        "links": args.links,
        "hub_links": min(HUB_LINKS, args.facts - 1),
    }
    with tempfile.TemporaryDirectory(prefix="bench-graph-") as tmp:
        root = args.data or Path(tmp)
        settings = Settings(
            embedder="hash", autolink=False, track_access=False, graph_in_memory=not args.sql
        )
        mem = Memory.open(root, namespace=NAMESPACE, settings=settings)
        try:
            out.update(_build(mem, args, random.Random(11)))
            ids = _ids(mem)
            out["walks"] = "sql" if args.sql else "in-memory copy"
            if not args.sql:  # time the copy's load, then walk it
                began = time.perf_counter()
                assert mem.preload_graph(wait=3600)
                out["copy_load_seconds"] = time.perf_counter() - began
            hub = ids[0]
            rng = random.Random(12)
            starts = [ids[rng.randrange(1, len(ids))] for _ in range(args.queries)]  # not the hub
            for depth in (1, 2, 3):
                out[f"traverse_depth_{depth}"] = _traversals(mem, starts, depth)
            pairs = [(rng.choice(ids), rng.choice(ids)) for _ in range(args.queries // 3)]
            found: list[bool] = []
            out["path"] = _latency(
                lambda p: found.append(mem.path(p[0], p[1], max_depth=4) is not None), pairs
            )
            out["path"]["found_share"] = sum(found) / len(found)
            _add_hub(mem, hub, ids, random.Random(13))
            try:
                near_hub = [k.target_id for k in mem.links(hub, direction="out")[: args.queries]]
                for depth in (1, 2):
                    out[f"hub_depth_{depth}"] = _traversals(mem, [hub] * 30, depth)
                    out[f"near_hub_depth_{depth}"] = _traversals(mem, near_hub, depth)
            finally:  # back to random links only, for the next run on this store
                for k in mem.links(hub):
                    mem.unlink(k.id)
        finally:
            mem.close()
    out["peak_rss_mb"] = peak_rss_mb()
    print(summary_markdown(out))
    write_json(args.out or OUT_DIR / "graph.json", out)
    return 0


def _ids(mem: Memory) -> list[str]:
    return mem.fact_ids()


def _build(mem: Memory, args: argparse.Namespace, rng: random.Random) -> dict[str, float]:
    """Store the facts and make the random links, unless a kept store already has them."""
    out = {}
    if len(_ids(mem)) < args.facts:
        began = time.perf_counter()
        facts = _facts(args.facts)
        while batch := list(itertools.islice(facts, 1000)):
            mem.store_many(batch)
        out["store_seconds"] = time.perf_counter() - began
    if mem.stats().links < args.links:
        ids = _ids(mem)
        others = ids[1:]  # ids[0] is kept for the hub
        began = time.perf_counter()
        _link(mem, [(rng.choice(others), rng.choice(others)) for _ in range(args.links)], rng)
        out["link_seconds"] = time.perf_counter() - began
    return out


def _facts(n: int) -> Iterator[dict[str, Any]]:
    """``n`` distinct facts: bench/synthetic.py's (entity, key) facts while it has enough, else
    bench/scale.py's generator (a person doing something, any number)."""
    try:
        chosen = synthetic.pairs(n)
    except ValueError:
        return scale.facts(n)
    return synthetic.facts(chosen)


def _add_hub(mem: Memory, hub: str, ids: list[str], rng: random.Random) -> None:
    others = rng.sample(ids[1:], min(HUB_LINKS, len(ids) - 1))
    _link(mem, [(hub, o) if i % 2 else (o, hub) for i, o in enumerate(others)], rng)


def _link(mem: Memory, pairs: list[tuple[str, str]], rng: random.Random) -> None:
    """A link for each pair (a random type and strength), in transactions of 10,000."""
    for start in range(0, len(pairs), 10_000):
        mem.link_many(
            {"source_id": s, "target_id": t, "type": rng.choice(TYPES), "strength": rng.random()}
            for s, t in pairs[start : start + 10_000]
            if s != t
        )


def _traversals(mem: Memory, starts: Sequence[str], depth: int) -> dict[str, float]:
    sizes: list[int] = []
    result = _latency(lambda s: sizes.append(len(mem.traverse(s, depth=depth).nodes)), starts)
    result["mean_nodes"] = sum(sizes) / len(sizes)
    return result


def _latency(call: Callable[[Any], Any], inputs: Sequence[Any]) -> dict[str, float]:
    for item in inputs[:10]:
        call(item)
    times = []
    for item in inputs:
        began = time.perf_counter()
        call(item)
        times.append(1000 * (time.perf_counter() - began))
    return {"p50_ms": percentile(times, 50), "p95_ms": percentile(times, 95), "n": len(times)}


def summary_markdown(r: dict[str, Any]) -> str:
    rows = [
        [
            name,
            f"{r[key]['p50_ms']:.2f}",
            f"{r[key]['p95_ms']:.2f}",
            f"{r[key]['mean_nodes']:.0f} facts"
            if "mean_nodes" in r[key]
            else f"{r[key]['found_share']:.0%} found",
        ]
        for name, key in (
            ("traverse depth 1", "traverse_depth_1"),
            ("traverse depth 2", "traverse_depth_2"),
            ("traverse depth 3", "traverse_depth_3"),
            ("path (at most 4 links)", "path"),
            ("hub, depth 1", "hub_depth_1"),
            ("hub, depth 2", "hub_depth_2"),
            ("hub's neighbour, depth 1", "near_hub_depth_1"),
            ("hub's neighbour, depth 2", "near_hub_depth_2"),
        )
        if key in r
    ]
    head = (
        f"{r['facts']} facts, {r['links']} random links + a hub of {r['hub_links']} links;"
        f" peak RSS {r['peak_rss_mb']:.0f} MiB; walks: {r['walks']}"
        + (f" (loaded in {r['copy_load_seconds']:.1f} s)" if "copy_load_seconds" in r else "")
        + "\n\n"
    )
    return head + markdown_table(["traversal", "p50 ms", "p95 ms", "mean result"], rows)


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.graph", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--facts", type=int, default=100_000)
    parser.add_argument("--links", type=int, default=500_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--data", type=Path, default=None)
    parser.add_argument("--sql", action="store_true", help="walk in SQL (graph_in_memory = false)")
    parser.add_argument("--out", type=Path, default=None)
    return parser.parse_args(argv)


if __name__ == "__main__":
    raise SystemExit(main())
