"""Two server processes on one data directory: how soon a fact written through one is found by
vector search through the other.

Starts two ``graphmem serve`` processes on the same data directory (hash embedder, free
loopback ports). Each round stores a distinct fact through one server (alternating), then asks
the other, every 10 ms, for a vector search (limit 1) on the fact's own text until the fact is
the hit; the time from the write's answer to that search's answer is the round's delay.

    python -m bench.processes [--rounds 50] [--out FILE]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import httpx

from .common import OUT_DIR, machine, markdown_table, percentile, write_json
from .http import _server, _wait_for_quiet

STORE: Final = "mutation($t: String!) { storeFact(input: {text: $t}) { fact { id } } }"
SEARCH: Final = "query($q: String!) { search(query: $q, mode: VECTOR, limit: 1) { fact { id } } }"
POLL_SECONDS: Final = 0.01
GIVE_UP_SECONDS: Final = 10.0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.processes", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--out", type=Path, default=None, help="JSON output path")
    args = parser.parse_args(argv)
    _wait_for_quiet()
    with tempfile.TemporaryDirectory(prefix="bench-processes-") as tmp:
        root = Path(tmp) / "data"
        with (
            _server(root, "hash", Path(tmp) / "one.log") as (one, _, _),
            _server(root, "hash", Path(tmp) / "two.log") as (two, _, _),
            httpx.Client(timeout=30) as http,
        ):
            delays = [
                _round(http, *((one, two) if n % 2 == 0 else (two, one)), n)
                for n in range(args.rounds)
            ]
    found = [d for d in delays if d is not None]
    out: dict[str, Any] = {
        "benchmark": "processes",
        "rounds": args.rounds,
        "never_found": len(delays) - len(found),
        "p50_ms": percentile(found, 50),
        "p95_ms": percentile(found, 95),
        "max_ms": max(found),
        "machine": machine(),
    }
    print(
        markdown_table(
            ["rounds", "found by the other process: p50 ms", "p95 ms", "max ms", "never found"],
            [
                [
                    out["rounds"],
                    f"{out['p50_ms']:.0f}",
                    f"{out['p95_ms']:.0f}",
                    f"{out['max_ms']:.0f}",
                    out["never_found"],
                ]
            ],
        )
    )
    write_json(args.out or OUT_DIR / "processes.json", out)
    return 1 if out["never_found"] else 0


def _round(http: httpx.Client, writer: str, reader: str, n: int) -> float | None:
    """Milliseconds from the write's answer until ``reader`` finds the fact (None: never)."""
    text = f"Round {n}: the courier left parcel {n * 37} at gate {n % 9} of depot {n * 11}"
    body = _post(http, writer, STORE, {"t": text})
    fact_id = body["data"]["storeFact"]["fact"]["id"]
    written = time.perf_counter()
    while time.perf_counter() - written < GIVE_UP_SECONDS:
        hits = _post(http, reader, SEARCH, {"q": text})["data"]["search"]
        if hits and hits[0]["fact"]["id"] == fact_id:
            return 1000 * (time.perf_counter() - written)
        time.sleep(POLL_SECONDS)
    return None


def _post(http: httpx.Client, url: str, query: str, variables: dict[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = http.post(
        url + "/graphql", json={"query": query, "variables": variables}
    ).json()
    if body.get("errors"):
        raise RuntimeError(f"{url}: {body['errors']}")
    return body


if __name__ == "__main__":
    raise SystemExit(main())
