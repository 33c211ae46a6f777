"""The keyword leg's ranking budget at scale: speed and answers found, per budget.

On a store of synthetic facts made by ``bench.http`` (``--data DIR``; 100k facts there), asks
questions about an entity's attribute ("Where does Elena B. Santos live?") and counts how often
the answer, the fact of that entity and key, is in the top 10, with keyword search alone and
hybrid, for each ``graphmem.storage.sql.keyword.RANKING_BUDGET`` given (a budget larger than the store
ranks the full OR query). The budget rounds run one after another in the same process.

    python -m bench.keyword_budget --data DIR [--budgets 1000000 5000 2500] [--questions 300]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from graphmem import Memory, Settings
from graphmem.storage.sql import keyword

from . import synthetic
from .common import OUT_DIR, machine, markdown_table, percentile, write_json
from .http import NAMESPACE


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    settings = Settings(embedder="local", track_access=False)
    rows: list[dict[str, Any]] = []
    with Memory.open(args.data, namespace=NAMESPACE, settings=settings) as memory:
        size = memory.stats().facts
        asked = synthetic.questions(synthetic.pairs(size), args.questions)
        answers = [{f.id for f in memory.lookup(p.entity, key=p.key)} for _, p in asked]
        for question, _ in asked[:20]:  # warm caches
            memory.search(question, limit=10)
        for budget in args.budgets:
            keyword.RANKING_BUDGET = budget  # type: ignore[misc]  # sweeps a Final
            for mode in ("fts", "hybrid"):
                found = 0
                times = []
                for (question, _), want in zip(asked, answers, strict=True):
                    began = time.perf_counter()
                    hits = memory.search(question, limit=10, mode=mode)
                    times.append(1000 * (time.perf_counter() - began))
                    found += bool(want & {h.fact.id for h in hits})
                rows.append(
                    {
                        "budget": budget,
                        "mode": mode,
                        "success_at_10": found / len(asked),
                        "p50_ms": percentile(times, 50),
                        "p95_ms": percentile(times, 95),
                    }
                )
                print(rows[-1], flush=True)
    report = {
        "benchmark": "keyword_budget",
        "machine": machine(),
        "facts": size,
        "questions": args.questions,
        "results": rows,
    }
    print(
        markdown_table(
            ["budget", "mode", "success@10", "p50 ms", "p95 ms"],
            [
                [
                    r["budget"],
                    r["mode"],
                    f"{r['success_at_10']:.3f}",
                    f"{r['p50_ms']:.1f}",
                    f"{r['p95_ms']:.1f}",
                ]
                for r in rows
            ],
        )
    )
    write_json(args.out or OUT_DIR / "keyword-budget.json", report)
    return 0


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.keyword_budget", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--data", type=Path, required=True, help="a store made by bench.http")
    parser.add_argument("--budgets", type=int, nargs="+", default=[1_000_000, 5_000, 2_500])
    parser.add_argument("--questions", type=int, default=300)
    parser.add_argument("--out", type=Path, default=None)
    return parser.parse_args(argv)


if __name__ == "__main__":
    raise SystemExit(main())
