"""What windows of turns cost: ingest, search and disk, with and without them, in one run.

Synthetic facts (bench/synthetic.py) are stored in episodes of ``--episode`` facts, one
``store_many`` call per episode, as an agent stores conversations; then ``optimize`` and hybrid
searches of synthetic queries (query embedding included, default settings). Each size runs
twice on fresh stores in this process: as search runs (windows cut at write time, lent at
search time), and with windows off (``add_windows`` writing none, no window read and
``graphmem.windows.lend`` lending nothing), so that the ratio is of the same machine at the
same moment. Disk: the SQLite files of the namespace (the vectors' folder left out); on
PostgreSQL (``--store``), where every namespace shares the tables, disk is not measured.

    python -m bench.windows_speed [--sizes 10000 100000] [--embedder hash] [--episode 25]
        [--store sqlite|postgresql|URL]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Final

from graphmem import Memory, Settings, windows
from graphmem.storage.postgres.store import PostgresStore
from graphmem.storage.sql.store import SQLTransaction
from graphmem.storage.sqlite.store import SQLiteStore

from . import synthetic
from .common import (
    OUT_DIR,
    latency,
    lend_nothing,
    machine,
    markdown_table,
    patched,
    store,
    write_json,
)

WARMUP: Final = 10


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    results = []
    with store(args.store) as url:
        for size in args.sizes:
            for on in (True, False):
                print(f"{size:,} facts, windows {'on' if on else 'off'} ...", flush=True)
                results.append(measure(size, on, args, url))
                print(_line(results[-1]), flush=True)
    report = {
        "benchmark": "windows_speed",
        "machine": machine(),
        "args": {k: str(v) for k, v in vars(args).items()},
        "results": results,
    }
    print(summary_markdown(report))
    suffix = "" if args.store == "sqlite" else "-postgresql"
    write_json(args.out or OUT_DIR / f"windows-speed{suffix}.json", report)
    return 0


def measure(size: int, on: bool, args: argparse.Namespace, url: str | None) -> dict[str, Any]:
    """Ingest, search and disk for ``size`` facts in episodes, windows on or off, on SQLite
    (``url`` None) or the PostgreSQL database at ``url`` (a namespace of its own)."""
    pairs = synthetic.pairs(size)
    facts = list(synthetic.facts(pairs))
    queries = synthetic.queries(pairs, args.queries + WARMUP)
    with ExitStack() as off, tempfile.TemporaryDirectory(prefix="bench-windows-speed-") as tmp:
        if not on:
            off.enter_context(patched(SQLTransaction, "add_windows", lambda *_: 0))
            off.enter_context(patched(windows, "lend", lend_nothing))
            for engine in (SQLiteStore, PostgresStore):
                off.enter_context(patched(engine, "window_matches", lambda *_: {}))
        namespace = f"w{size}{'on' if on else 'off'}"
        settings = Settings(store=url)
        memory = Memory.open(tmp, namespace=namespace, embedder=args.embedder, settings=settings)
        try:
            began = time.perf_counter()
            for n, start in enumerate(range(0, len(facts), args.episode)):
                memory.store_many(facts[start : start + args.episode], episode={"id": f"e{n}"})
            write = time.perf_counter() - began
            memory.optimize()
            search = latency(lambda q: memory.search(q, limit=10), queries, WARMUP)
        finally:
            memory.close()
        files = (Path(tmp) / namespace).glob("graphmem.sqlite3*")
        disk = sum(p.stat().st_size for p in files if p.is_file()) if url is None else None
    return {
        "size": size,
        "windows": on,
        "facts_per_s": len(facts) / write,
        "search": search,
        "store_mb": None if disk is None else disk / 2**20,
    }


def _line(r: dict[str, Any]) -> str:
    return (
        f"  ingest {r['facts_per_s']:,.0f} facts/s, search p50 {r['search']['p50_ms']:.1f} ms,"
        f" p95 {r['search']['p95_ms']:.1f} ms, store {_mb(r['store_mb'])} MB"
    )


def summary_markdown(report: dict[str, Any]) -> str:
    rows = []
    by = {(r["size"], r["windows"]): r for r in report["results"]}
    for (size, on), r in by.items():
        base = by.get((size, False), r)
        rows.append(
            [
                f"{size:,}",
                "on" if on else "off",
                f"{r['facts_per_s']:,.0f}",
                f"{r['search']['p50_ms']:.1f} / {r['search']['p95_ms']:.1f}",
                _mb(r["store_mb"]),
                f"{base['facts_per_s'] / r['facts_per_s']:.2f} / "
                f"{r['search']['p50_ms'] / base['search']['p50_ms']:.2f} / "
                + ("—" if r["store_mb"] is None else f"{r['store_mb'] / base['store_mb']:.2f}"),
            ]
        )
    return markdown_table(
        [
            "facts",
            "windows",
            "ingest facts/s",
            "search p50 / p95 ms",
            "store MB",
            "ratio to off: ingest time / p50 / disk",
        ],
        rows,
    )


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.windows_speed", description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--embedder", choices=("hash", "local"), default="hash")
    parser.add_argument("--episode", type=int, default=25, help="facts per episode")
    parser.add_argument("--queries", type=int, default=200, help="timed searches")
    parser.add_argument(
        "--store",
        default="sqlite",
        help="sqlite (default), postgresql (a throwaway server on loopback) or a postgresql:// URL",
    )
    parser.add_argument("--out", type=Path, default=None, help="JSON output path")
    return parser.parse_args(argv)


def _mb(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"


if __name__ == "__main__":
    raise SystemExit(main())
