"""One tenant against another: the cost of the heaviest document the service accepts, how long
another namespace's trivial query waits while it runs in a loop, what the service does with
the attack document that used to stall it, and how soon a revoked key loses its open socket.

Starts ``graphmem serve`` (hash embedder, a free loopback port, ``rate_limit_per_minute`` 0 so
that the loop is never turned away) on a data directory holding 60 facts with every pair
linked (1,770 links) in one namespace and one fact in ``other``, with one API key for each.

1. The attack: ``fact { links(first: 1000) { edges { neighbour { links(first: 1000) ...`` three
   deep under 30 aliases: the answer's status, code and time.
2. The heaviest accepted document: the same nesting with ``first: 78`` once (its cost of
   the 500,000 budget is 480,714; about 216,000 items here): its time and size; then posted in a loop by
   one client for ``--seconds`` while another client asks ``{ namespace }`` of ``other`` every
   20 ms, and the same trivial query alone before, for comparison.
3. Revocation: ``--revocations`` times, a key opens a graphql-transport-ws socket, is revoked
   (``KeyStore.revoke``, as ``graphmem revoke-key`` does) at a random moment, and the socket's
   close code and the delay until it closed are noted; the socket sends nothing meanwhile.

    python -m bench.tenancy [--seconds 30] [--revocations 20] [--out FILE]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import httpx
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect
from websockets.typing import Subprotocol

from graphmem import KeyStore, Memory, Settings
from graphmem.storage.sqlite.keys import KeyFile

from .common import OUT_DIR, machine, markdown_table, percentile, write_json
from .http import NAMESPACE, _server, _wait_for_quiet

FACTS: Final = 60
TRIVIAL: Final = "{ namespace }"
TRIVIAL_EVERY_S: Final = 0.02


def nested(first: int, aliases: int = 1) -> str:
    """Three levels of ``first``-link pages under ``aliases`` aliases."""
    inner = (
        f"fact(id: $id) {{ links(first: {first}) {{ edges {{ neighbour {{ links(first: {first}) "
        f"{{ edges {{ neighbour {{ links(first: {first}) {{ edges {{ neighbourId }} }} }} }} }} "
        "} } } }"
    )
    return "query($id: ID!) { " + " ".join(f"a{n}: {inner}" for n in range(aliases)) + " }"


ATTACK: Final = nested(1000, 30)
HEAVIEST: Final = nested(78)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.tenancy", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--revocations", type=int, default=20)
    parser.add_argument("--out", type=Path, default=None, help="JSON output path")
    args = parser.parse_args(argv)
    _wait_for_quiet()
    with tempfile.TemporaryDirectory(prefix="bench-tenancy-") as tmp:
        root = Path(tmp) / "data"
        fact_id = _fill(root)
        keys = KeyFile(root)
        mine, _ = keys.create([NAMESPACE])
        theirs, _ = keys.create(["other"])
        os.environ["GRAPHMEM_RATE_LIMIT_PER_MINUTE"] = "0"
        with _server(root, "hash", Path(tmp) / "server.log") as (url, _, _):
            attack = _timed(url, mine, ATTACK, fact_id)
            heaviest = _timed(url, mine, HEAVIEST, fact_id)
            alone = _trivial_waits(url, theirs, seconds=min(5.0, args.seconds))
            loaded, completed = _under_load(url, mine, theirs, fact_id, args.seconds)
            revoked = [_revocation(url, keys) for _ in range(args.revocations)]
    delays = [d for _, d in revoked]
    out: dict[str, Any] = {
        "benchmark": "tenancy",
        "attack": attack,
        "heaviest": heaviest,
        "trivial_alone_ms": _summary(alone),
        "trivial_under_load_ms": _summary(loaded),
        "heaviest_completed_in_loop": completed,
        "loop_seconds": args.seconds,
        "revocations": len(revoked),
        "revocation_close_codes": sorted({c for c, _ in revoked}, key=str),
        "revocation_delay_ms": _summary(delays),
        "machine": machine(),
    }
    print(
        markdown_table(
            ["document", "status", "code", "cost", "ms", "answer bytes"],
            [
                [name, d["status"], d["code"] or "", d["cost"] or "", f"{d['ms']:.0f}", d["bytes"]]
                for name, d in (("attack", attack), ("heaviest accepted", heaviest))
            ],
        )
    )
    print()
    print(
        markdown_table(
            ["another tenant's `{ namespace }`", "n", "p50 ms", "p95 ms", "p99 ms", "max ms"],
            [
                [name, s["n"], *(f"{s[k]:.1f}" for k in ("p50", "p95", "p99", "max"))]
                for name, s in (
                    ("alone", out["trivial_alone_ms"]),
                    (
                        f"while the heaviest runs in a loop ({completed} runs)",
                        out["trivial_under_load_ms"],
                    ),
                )
            ],
        )
    )
    print()
    revocation = out["revocation_delay_ms"]
    print(
        f"revoked key's socket closed with {out['revocation_close_codes']} after "
        f"p50 {revocation['p50']:.0f} ms, max {revocation['max']:.0f} ms ({len(revoked)} keys)"
    )
    write_json(args.out or OUT_DIR / "tenancy.json", out)
    refused = attack["code"] == "TOO_COSTLY" and heaviest["code"] is None
    return 0 if refused and out["revocation_close_codes"] == [4403] else 1


def _fill(root: Path) -> str:
    settings = Settings(embedder="hash", data_dir=root)
    with Memory.open(root, namespace=NAMESPACE, settings=settings) as mem:
        ids = [
            r.fact.id  # type: ignore[union-attr]
            for r in mem.store_many(
                [{"text": f"Fact {n} about topic {n % 7}", "dedup": False} for n in range(FACTS)]
            )
        ]
        for a, b in itertools.combinations(ids, 2):
            mem.link(a, b, "RELATED_TO")
    with Memory.open(root, namespace="other", settings=settings) as mem:
        mem.store("The other tenant's only fact")
    return ids[0]


def _timed(url: str, token: str, query: str, fact_id: str) -> dict[str, Any]:
    began = time.perf_counter()
    response = httpx.post(
        f"{url}/graphql",
        json={"query": query, "variables": {"id": fact_id}},
        headers={"Authorization": f"Bearer {token}"},
        timeout=600,
    )
    ms = 1000 * (time.perf_counter() - began)
    body = response.json()
    errors = body.get("errors") or []
    return {
        "status": response.status_code,
        "code": errors[0]["extensions"]["code"] if errors else None,
        "message": errors[0]["message"] if errors else None,
        "cost": (body.get("extensions") or {}).get("cost", {}).get("requested"),
        "ms": ms,
        "bytes": len(response.content),
    }


def _trivial_waits(
    url: str, token: str, seconds: float, stop: threading.Event | None = None
) -> list[float]:
    """Milliseconds each ``{ namespace }`` of ``other`` took, one every TRIVIAL_EVERY_S."""
    waits = []
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url, timeout=60, headers=headers) as client:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not (stop and stop.is_set()):
            began = time.perf_counter()
            answer = client.post("/graphql", json={"query": TRIVIAL}).json()
            waits.append(1000 * (time.perf_counter() - began))
            assert answer["data"] == {"namespace": "other"}, answer
            time.sleep(TRIVIAL_EVERY_S)
    return waits


def _under_load(
    url: str, mine: str, theirs: str, fact_id: str, seconds: float
) -> tuple[list[float], int]:
    """The trivial query's waits while the heaviest document runs in a loop, and how many
    times it completed meanwhile."""
    stop = threading.Event()
    completed = 0

    def loop() -> None:
        nonlocal completed
        headers = {"Authorization": f"Bearer {mine}"}
        body = {"query": HEAVIEST, "variables": {"id": fact_id}}
        with httpx.Client(base_url=url, timeout=600, headers=headers) as client:
            while not stop.is_set():
                client.post("/graphql", json=body).raise_for_status()
                completed += 1

    worker = threading.Thread(target=loop)
    worker.start()
    try:
        time.sleep(1.0)  # the loop's first answer is under way
        waits = _trivial_waits(url, theirs, seconds)
    finally:
        stop.set()
        worker.join()
    return waits, completed


def _revocation(url: str, keys: KeyStore) -> tuple[int | None, float]:
    """A fresh key's socket, acknowledged, then the key revoked: (close code, ms to close)."""
    token, key = keys.create([NAMESPACE])
    with connect(
        url.replace("http://", "ws://") + "/graphql",
        subprotocols=[Subprotocol("graphql-transport-ws")],
    ) as ws:
        ws.send(
            json.dumps({"type": "connection_init", "payload": {"Authorization": f"Bearer {token}"}})
        )
        assert json.loads(ws.recv(timeout=30))["type"] == "connection_ack"
        # At a random moment of the server's 0.5 s round of looks at its sockets' keys: one
        # trial right after another would otherwise always revoke just after a look.
        time.sleep(random.uniform(0, 0.5))
        revoked = time.perf_counter()
        keys.revoke(key.id)
        try:
            while True:
                ws.recv(timeout=30)
        except ConnectionClosed as closed:
            code = closed.rcvd.code if closed.rcvd else None
        except TimeoutError:
            code = None
        return code, 1000 * (time.perf_counter() - revoked)


def _summary(values: Sequence[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "p99": percentile(values, 99),
        "max": max(values),
    }


if __name__ == "__main__":
    raise SystemExit(main())
