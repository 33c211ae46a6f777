"""Concurrent single-fact writers over HTTP: acknowledged writes per second and write latency.

Starts the real server (``graphmem serve`` on a free loopback port, an empty data directory,
default settings) and has C client threads, each with its own HTTP connection, store distinct
single facts with ``storeFact`` for S seconds (after a short warm-up), as a new user trying the
service would. Reports acknowledged writes/s in total and latency percentiles as the client
sees them; then checks from a fresh process that every acknowledged fact is stored exactly once
(exit status 1 if not, or if any request failed).

    python -m bench.writes [--clients 16] [--seconds 30] [--embedder hash|local] [--workers 1]
                           [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from graphmem import Memory, Settings

from .common import OUT_DIR, machine, markdown_table, percentile, write_json
from .http import NAMESPACE, Client, _server, _wait_for_quiet

STORE: Final = """mutation($input: FactInput!) {
  storeFact(input: $input) { action fact { id } error { code message } }
}"""
WARMUP_SECONDS: Final = 3.0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    out: dict[str, Any] = {
        "benchmark": "writes",
        "clients": args.clients,
        "workers": args.workers,
        "seconds": args.seconds,
        "embedder": args.embedder,
        "graphmem_env": {k: v for k, v in os.environ.items() if k.startswith("GRAPHMEM_")},
    }
    with tempfile.TemporaryDirectory(prefix="bench-writes-") as tmp:
        root = Path(tmp) / "data"
        _wait_for_quiet()
        out["load_average_before_timing"] = [round(x, 2) for x in os.getloadavg()]
        log = Path(tmp) / "server.log"
        with _server(root, args.embedder, log, args.workers) as (url, _, _):
            acked = _write(url, args, out)
        out["lost_or_doubled"] = _verify(root, args.embedder, acked)
    out["machine"] = machine()
    print(summary_markdown(out))
    write_json(args.out or OUT_DIR / "writes.json", out)
    return 1 if out["errors"] or out["lost_or_doubled"] else 0


def _write(url: str, args: argparse.Namespace, out: dict[str, Any]) -> dict[str, str]:
    """Run the clients; returns every acknowledged fact's id → text."""
    clients = [Client(url, STORE) for _ in range(args.clients)]
    acked: dict[str, str] = {}
    times: list[float] = []
    lock = threading.Lock()
    began = time.perf_counter()
    timed_from = began + WARMUP_SECONDS
    stop = timed_from + args.seconds

    def run(c: int) -> None:
        client, n = clients[c], 0
        while (now := time.perf_counter()) < stop:
            text = f"Client {c} noted item {n}: the {_WORDS[n % len(_WORDS)]} is {n * 7 + c}"
            response = client.http.post(
                "/graphql", json={"query": STORE, "variables": {"input": {"text": text}}}
            )
            elapsed = 1000 * (time.perf_counter() - now)
            body = response.json()
            result = (body.get("data") or {}).get("storeFact") or {}
            with lock:
                if result.get("fact") and not result.get("error"):
                    acked[result["fact"]["id"]] = text
                    if now >= timed_from:
                        times.append(elapsed)
                else:
                    client.errors.append(str(body)[:300])
            n += 1

    threads = [threading.Thread(target=run, args=(c,)) for c in range(args.clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - timed_from
    errors = [e for c in clients for e in c.errors]
    for client in clients:
        client.close()
    out.update(
        writes=len(times),
        writes_per_s=len(times) / wall,
        p50_ms=percentile(times, 50),
        p95_ms=percentile(times, 95),
        p99_ms=percentile(times, 99),
        errors=len(errors),
        error_samples=errors[:5],
        acknowledged=len(acked),
    )
    return acked


def _verify(root: Path, embedder: str, acked: dict[str, str]) -> int:
    """Acknowledged facts missing or wrong, plus texts stored more than once."""
    settings = Settings(embedder=embedder, data_dir=root)
    with Memory.open(root, namespace=NAMESPACE, settings=settings) as mem:
        facts = mem.get_many(list(acked))
        wrong = sum(1 for i, text in acked.items() if i not in facts or facts[i].text != text)
        stored = mem.get_many(mem.fact_ids())
        doubled = len(stored) - len({f.text for f in stored.values()})
    return wrong + doubled


_WORDS: Final = ("deadline", "budget", "owner", "release", "meeting", "ticket", "server", "plan")


def summary_markdown(r: dict[str, Any]) -> str:
    return markdown_table(
        [
            "clients",
            "server workers",
            "embedder",
            "writes",
            "writes/s",
            "p50 ms",
            "p95 ms",
            "p99 ms",
            "errors",
            "lost or doubled",
        ],
        [
            [
                r["clients"],
                r["workers"],
                r["embedder"],
                r["writes"],
                f"{r['writes_per_s']:.0f}",
                f"{r['p50_ms']:.0f}",
                f"{r['p95_ms']:.0f}",
                f"{r['p99_ms']:.0f}",
                r["errors"],
                r["lost_or_doubled"],
            ]
        ],
    )


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.writes", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--embedder", choices=("local", "hash"), default="hash")
    parser.add_argument("--workers", type=int, default=1, help="server processes")
    parser.add_argument("--out", type=Path, default=None, help="JSON output path")
    return parser.parse_args(argv)


if __name__ == "__main__":
    raise SystemExit(main())
