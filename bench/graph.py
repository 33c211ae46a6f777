"""Graph speed at scale: traverse and path latency over many facts and links.

Stores N synthetic facts (hash embedder: the graph code does not embed), then links them with
L random links of the four explicit types (each fact's links drawn with a skew, so some facts
are hubs, as real memories have), and times traverse at depth 1 and 2 (BOTH directions, default
types) from random facts, and shortest paths between random pairs.

    python -m bench.graph [--facts 100000] [--links 500000] [--queries 300]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from graphmem import Memory, graph

from . import synthetic
from .common import OUT_DIR, machine, markdown_table, peak_rss_mb, percentile, write_json

TYPES: Final = ("RELATED_TO", "DEPENDS_ON", "PART_OF", "CAUSED_BY")


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    rng = random.Random(11)
    facts = list(synthetic.facts(synthetic.pairs(args.facts)))
    out: dict[str, Any] = {"benchmark": "graph", "machine": machine(),
                           "facts": args.facts, "links": args.links}  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="bench-graph-") as tmp:
        mem = Memory.open(tmp, namespace="graph", embedder="hash")
        try:
            began = time.perf_counter()
            ids = []
            for start in range(0, len(facts), 1000):
                ids += [r.fact.id for r in mem.store_many(facts[start : start + 1000]) if r.fact]
            out["store_seconds"] = time.perf_counter() - began
            ids = list(dict.fromkeys(ids))
            began = time.perf_counter()
            made = _link(mem, ids, args.links, rng)
            out["link_seconds"] = time.perf_counter() - began
            out["links_made"] = made
            starts = [rng.choice(ids) for _ in range(args.queries)]
            for depth in (1, 2):
                sizes: list[int] = []
                out[f"traverse_depth_{depth}"] = _latency(
                    lambda s, d=depth, n=sizes: n.append(len(mem.traverse(s, depth=d).nodes)),
                    starts,
                )
                out[f"traverse_depth_{depth}"]["mean_nodes"] = sum(sizes) / len(sizes)
            pairs = [(rng.choice(ids), rng.choice(ids)) for _ in range(args.queries // 3)]
            found: list[bool] = []
            out["path"] = _latency(
                lambda p: found.append(mem.path(p[0], p[1], max_depth=4) is not None), pairs
            )
            out["path"]["found_share"] = sum(found) / len(found)
        finally:
            mem.close()
    out["peak_rss_mb"] = peak_rss_mb()
    print(summary_markdown(out))
    write_json(args.out or OUT_DIR / "graph.json", out)
    return 0


def _link(mem: Memory, ids: list[str], n: int, rng: random.Random) -> int:
    """``n`` links between distinct random facts, in transactions of 10,000; sources are drawn
    with a Pareto skew (a few hubs), targets uniformly."""
    now = time.time()
    made = 0
    while made < n:
        with mem._db.write() as conn:
            for _ in range(min(10_000, n - made)):
                source = ids[min(len(ids) - 1, int(rng.paretovariate(1.2)) * 7 % len(ids))]
                source = source if rng.random() < 0.3 else rng.choice(ids)
                target = rng.choice(ids)
                if source == target:
                    continue
                graph.link(conn, now, source, target, rng.choice(TYPES), round(rng.random(), 3))
                made += 1
    return made


def _latency(call: Any, inputs: Sequence[Any]) -> dict[str, float]:
    for item in inputs[:10]:
        call(item)
    times = []
    for item in inputs[10:]:
        began = time.perf_counter()
        call(item)
        times.append(1000 * (time.perf_counter() - began))
    return {"p50_ms": percentile(times, 50), "p95_ms": percentile(times, 95), "n": len(times)}


def summary_markdown(r: dict[str, Any]) -> str:
    rows = [[name, f"{r[key]['p50_ms']:.2f}", f"{r[key]['p95_ms']:.2f}", extra]
            for name, key, extra in (
                ("traverse depth 1", "traverse_depth_1",
                 f"{r['traverse_depth_1']['mean_nodes']:.0f} facts on average"),
                ("traverse depth 2", "traverse_depth_2",
                 f"{r['traverse_depth_2']['mean_nodes']:.0f} facts on average"),
                ("path (max 4 links)", "path", f"{r['path']['found_share']:.0%} found"))]  # fmt: skip
    head = (f"{r['facts']} facts, {r['links_made']} links (linking took {r['link_seconds']:.0f} s),"
            f" peak RSS {r['peak_rss_mb']:.0f} MiB\n\n")  # fmt: skip
    return head + markdown_table(["operation", "p50 ms", "p95 ms", "result size"], rows)


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.graph",
                                     description=__doc__.split("\n")[0])  # fmt: skip
    parser.add_argument("--facts", type=int, default=100_000)
    parser.add_argument("--links", type=int, default=500_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--out", type=Path, default=None)
    return parser.parse_args(argv)


if __name__ == "__main__":
    raise SystemExit(main())
