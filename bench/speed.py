"""Speed at scale: write throughput, search and lookup latency, as-of search, peak memory.

For each embedder and size, a child process (so that peak RSS belongs to one configuration)
stores that many synthetic facts (bench/synthetic.py) with store_many in batches of 1,000,
runs ``optimize``, then times hybrid search (query embedding included, default settings, so
access tracking is on as for any user; also with it off, and each leg alone) and lookup; then
supersedes half the facts (same entity and key, a new value: the rule classifier's UPDATE) and
times as-of searches at a moment when the superseded versions were still valid. Search quality
at that size: the share of questions about an entity's attribute ("Where does Elena B. Santos
live?") whose answer, the fact of that entity and key, is in the top 10.

    python -m bench.speed [--sizes 10000 100000] [--embedder hash local] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

from graphmem import Memory, Settings

from . import synthetic
from .common import (
    OUT_DIR,
    latency,
    machine,
    markdown_table,
    peak_rss_mb,
    profile_text,
    write_json,
)

BATCH: Final = 1_000
WARMUP: Final = 10
#: Valid-time instant of the as-of searches: before any update (all in 2024) took effect.
AS_OF: Final = "2023-12-31T00:00:00Z"


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    if args.child:
        embedder, size = args.child[0], int(args.child[1])
        result = measure(embedder, size, args.queries, args.profile)
        Path(args.child_out).write_text(json.dumps(result), encoding="utf-8")
        return 0
    results = []
    for embedder in args.embedder:
        for size in args.sizes:
            print(f"{embedder} embedder, {size} facts ...", flush=True)
            results.append(_run_child(embedder, size, args))
            print(_one_line(results[-1]), flush=True)
    report = {
        "benchmark": "speed",
        "machine": machine(),
        "batch": BATCH,
        "queries": args.queries,
        "results": results,
    }
    print(summary_markdown(report))
    write_json(args.out or OUT_DIR / "speed.json", report)
    return 0


def measure(embedder: str, size: int, n_queries: int, profile: bool) -> dict[str, Any]:
    """Everything for one (embedder, size) configuration, in this process."""
    pairs = synthetic.pairs(size)
    originals = list(synthetic.facts(pairs))
    questions = synthetic.queries(pairs, n_queries + WARMUP)
    rng = random.Random(5)
    lookups = [rng.choice(pairs) for _ in range(n_queries + WARMUP)]
    profiles: dict[str, str] = {}
    out: dict[str, Any] = {"embedder": embedder, "size": size}
    settings = Settings()
    with tempfile.TemporaryDirectory(prefix="bench-speed-") as tmp:
        memory = Memory.open(tmp, namespace="speed", embedder=embedder, settings=settings)
        try:
            last = (size - 1) // BATCH * BATCH
            out["store"] = _store(memory, originals, profiles if profile else None, last)
            out["optimize_seconds"] = _timed(memory.optimize)
            out["search_hybrid"] = _latency(lambda q: memory.search(q, limit=10), questions)
            if profile:
                profiles["search_hybrid"] = _profile(
                    lambda: [memory.search(q, limit=10) for q in questions[:100]]
                )
            memory.settings = settings.model_copy(update={"track_access": False})
            out["search_hybrid_untracked"] = _latency(
                lambda q: memory.search(q, limit=10), questions
            )
            out["search_fts"] = _latency(
                lambda q: memory.search(q, limit=10, mode="fts"), questions
            )
            out["search_vector"] = _latency(
                lambda q: memory.search(q, limit=10, mode="vector"), questions
            )
            out["search_success_at_10"] = _success(memory, synthetic.questions(pairs, n_queries))
            memory.settings = settings
            out["lookup"] = _latency(lambda p: memory.lookup(p.entity, key=p.key), lookups)

            half = pairs[::2]
            old_values = [f["value"] for f in originals[::2]]
            changes = list(synthetic.updates(half, old_values))
            out["supersede"] = _store(memory, changes, None, -1)
            out["optimize_after_supersede_seconds"] = _timed(memory.optimize)
            out["search_as_of"] = _latency(
                lambda q: memory.search(q, limit=10, as_of=AS_OF), questions
            )
            if profile:
                profiles["search_as_of"] = _profile(
                    lambda: [memory.search(q, limit=10, as_of=AS_OF) for q in questions[:100]]
                )
            out["search_current_after_supersede"] = _latency(
                lambda q: memory.search(q, limit=10), questions
            )
            out["facts_total"] = memory.stats().facts
        finally:
            memory.close()
        out["disk_mb"] = sum(p.stat().st_size for p in Path(tmp).rglob("*") if p.is_file()) / 2**20
    out["peak_rss_mb"] = peak_rss_mb()
    if profile:
        path = OUT_DIR / f"speed-profile-{embedder}-{size}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n\n".join(f"=== {k}\n{v}" for k, v in profiles.items()))
        out["profile_file"] = str(path)
    return out


def _store(
    memory: Memory,
    items: list[dict[str, Any]],
    profiles: dict[str, str] | None,
    profiled_batch: int,
) -> dict[str, Any]:
    """store_many in batches; facts/s overall, for the first and for the last ten batches."""
    seconds: list[float] = []
    actions: Counter[str] = Counter()
    for start in range(0, len(items), BATCH):
        batch = items[start : start + BATCH]
        began = time.perf_counter()
        if profiles is not None and start == profiled_batch:
            profiler = cProfile.Profile()
            results = profiler.runcall(memory.store_many, batch)
            profiles["store_many_last_batch"] = profile_text(profiler, 25)
        else:
            results = memory.store_many(batch)
        seconds.append(time.perf_counter() - began)
        actions.update(r.action for r in results)
    tail = seconds[-10:]
    tail_facts = sum(min(BATCH, len(items) - s) for s in range(0, len(items), BATCH)[-10:])
    return {
        "facts": len(items),
        "seconds": sum(seconds),
        "facts_per_s": len(items) / sum(seconds),
        "first_batch_facts_per_s": min(BATCH, len(items)) / seconds[0],
        "last_10_batches_facts_per_s": tail_facts / sum(tail),
        "actions": dict(actions),
        "profiled": profiles is not None,
    }


def _latency(call: Callable[[Any], Any], inputs: Sequence[Any]) -> dict[str, float]:
    """p50/p95/mean in ms after WARMUP untimed calls."""
    return latency(call, inputs, WARMUP)


def _success(memory: Memory, asked: list[tuple[str, synthetic.Pair]]) -> dict[str, float]:
    """Share of questions about an entity's attribute whose answer (the fact of that entity and
    key) is in the top 10, per search mode: search quality at this size."""
    answers = [{f.id for f in memory.lookup(p.entity, key=p.key)} for _, p in asked]
    return {
        mode: sum(
            bool(want & {h.fact.id for h in memory.search(q, limit=10, mode=mode)})
            for (q, _), want in zip(asked, answers, strict=True)
        )
        / len(asked)
        for mode in ("hybrid", "fts", "vector")
    }


def _timed(call: Callable[[], Any]) -> float:
    began = time.perf_counter()
    call()
    return time.perf_counter() - began


def _profile(call: Callable[[], Any]) -> str:
    profiler = cProfile.Profile()
    profiler.runcall(call)
    return profile_text(profiler, 25)


def _run_child(embedder: str, size: int, args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as handle:
        child_out = Path(handle.name)
    command = [
        sys.executable,
        "-m",
        "bench.speed",
        "--child",
        embedder,
        str(size),
        "--child-out",
        str(child_out),
        "--queries",
        str(args.queries),
    ]
    if args.profile:
        command.append("--profile")
    try:
        subprocess.run(command, check=True)
        result: dict[str, Any] = json.loads(child_out.read_text(encoding="utf-8"))
    finally:
        child_out.unlink(missing_ok=True)
    return result


# --------------------------------------------------------------------------------- report


def _one_line(r: dict[str, Any]) -> str:
    return (
        f"  store {r['store']['facts_per_s']:.0f} facts/s, hybrid p50 "
        f"{r['search_hybrid']['p50_ms']:.1f} ms, as-of p50 {r['search_as_of']['p50_ms']:.1f} ms, "
        f"peak RSS {r['peak_rss_mb']:.0f} MiB"
    )


def summary_markdown(report: dict[str, Any]) -> str:
    results: list[dict[str, Any]] = report["results"]
    write = markdown_table(
        [
            "embedder",
            "facts",
            "store facts/s",
            "first batch",
            "last 10 batches",
            "supersede facts/s",
            "optimize s",
            "peak RSS MiB",
            "disk MiB",
        ],
        [
            [
                r["embedder"],
                r["size"],
                f"{r['store']['facts_per_s']:.0f}",
                f"{r['store']['first_batch_facts_per_s']:.0f}",
                f"{r['store']['last_10_batches_facts_per_s']:.0f}",
                f"{r['supersede']['facts_per_s']:.0f}",
                f"{r['optimize_seconds']:.1f}",
                f"{r['peak_rss_mb']:.0f}",
                f"{r['disk_mb']:.0f}",
            ]
            for r in results
        ],
    )
    reads = [
        ("search_hybrid", "hybrid"),
        ("search_hybrid_untracked", "hybrid, no access tracking"),
        ("search_fts", "fts only"),
        ("search_vector", "vector only"),
        ("lookup", "lookup"),
        ("search_as_of", "hybrid as-of (half superseded)"),
        ("search_current_after_supersede", "hybrid current (half superseded)"),
    ]
    latency = markdown_table(
        ["embedder", "facts", "operation", "p50 ms", "p95 ms"],
        [
            [r["embedder"], r["size"], label, f"{r[key]['p50_ms']:.1f}", f"{r[key]['p95_ms']:.1f}"]
            for r in results
            for key, label in reads
        ],
    )
    quality = markdown_table(
        ["embedder", "facts", "hybrid", "fts only", "vector only", "questions"],
        [
            [
                r["embedder"],
                r["size"],
                *(f"{r['search_success_at_10'][m]:.3f}" for m in ("hybrid", "fts", "vector")),
                report["queries"],
            ]
            for r in results
        ],
    )
    return write + "\n\n" + latency + "\n\nAnswer in the top 10 (success@10):\n\n" + quality


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.speed", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument(
        "--embedder", nargs="+", choices=("hash", "local"), default=["hash", "local"]
    )
    parser.add_argument("--queries", type=int, default=200, help="timed calls per operation")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="cProfile the last store batch and 100 searches (bench/out/*.txt)",
    )
    parser.add_argument("--out", type=Path, default=None, help="JSON output path")
    parser.add_argument("--child", nargs=2, metavar=("EMBEDDER", "SIZE"), help=argparse.SUPPRESS)
    parser.add_argument("--child-out", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


if __name__ == "__main__":
    raise SystemExit(main())
