"""Two server processes on one data directory: how soon a fact written through one is found by
vector search through the other, and how soon a ``memoryChanged`` subscriber of the other
hears of it.

Starts two ``graphmem serve`` processes on the same data directory (hash embedder, free
loopback ports), each with a subscriber (a thread noting when each FACT_STORED arrives). Each
round stores a distinct fact through one server (alternating), then asks the other, every 10
ms, for a vector search (limit 1) on the fact's own text until the fact is the hit; the time
from the write's answer to that search's answer is the round's delay. The subscriber's delay
is from the write's answer to the change's arrival at the other server's subscriber (it can be
negative: the other server may tell it before the writer has answered).

    python -m bench.processes [--rounds 50] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

import httpx
from websockets.sync.client import connect
from websockets.typing import Subprotocol

from .common import OUT_DIR, machine, markdown_table, percentile, write_json
from .http import _server, _wait_for_quiet

STORE: Final = "mutation($t: String!) { storeFact(input: {text: $t}) { fact { id } } }"
SEARCH: Final = "query($q: String!) { search(query: $q, mode: VECTOR, limit: 1) { fact { id } } }"
SUBSCRIBE: Final = "subscription { memoryChanged(kinds: [FACT_STORED]) { id } }"
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
            _subscriber(http, one) as heard_by_one,
            _subscriber(http, two) as heard_by_two,
        ):
            rounds = [
                _round(http, *((one, two) if n % 2 == 0 else (two, one)), n)
                for n in range(args.rounds)
            ]
            time.sleep(GIVE_UP_SECONDS / 10)  # the last change on its way
            heard: list[float | None] = []
            for n, (fact_id, written, _) in enumerate(rounds):
                by = heard_by_two if n % 2 == 0 else heard_by_one  # the reader's subscriber
                heard.append(1000 * (by[fact_id] - written) if fact_id in by else None)
    delays = [d for _, _, d in rounds]
    found = [d for d in delays if d is not None]
    told = [d for d in heard if d is not None]
    out: dict[str, Any] = {
        "benchmark": "processes",
        "rounds": args.rounds,
        "never_found": len(delays) - len(found),
        "p50_ms": percentile(found, 50),
        "p95_ms": percentile(found, 95),
        "max_ms": max(found),
        "never_heard": len(heard) - len(told),
        "heard_p50_ms": percentile(told, 50),
        "heard_p95_ms": percentile(told, 95),
        "heard_max_ms": max(told),
        "machine": machine(),
    }
    print(
        markdown_table(
            [
                "rounds",
                "found by the other process: p50 ms",
                "p95 ms",
                "max ms",
                "never found",
                "heard by its subscriber: p50 ms",
                "p95 ms",
                "max ms",
                "never heard",
            ],
            [
                [
                    out["rounds"],
                    *(f"{out[k]:.0f}" for k in ("p50_ms", "p95_ms", "max_ms")),
                    out["never_found"],
                    *(f"{out[k]:.0f}" for k in ("heard_p50_ms", "heard_p95_ms", "heard_max_ms")),
                    out["never_heard"],
                ]
            ],
        )
    )
    write_json(args.out or OUT_DIR / "processes.json", out)
    return 1 if out["never_found"] or out["never_heard"] else 0


def _round(http: httpx.Client, writer: str, reader: str, n: int) -> tuple[str, float, float | None]:
    """The fact written, when the write was answered (``time.perf_counter``), and the
    milliseconds from then until ``reader`` finds it (None: never)."""
    text = f"Round {n}: the courier left parcel {n * 37} at gate {n % 9} of depot {n * 11}"
    body = _post(http, writer, STORE, {"t": text})
    fact_id = body["data"]["storeFact"]["fact"]["id"]
    written = time.perf_counter()
    while time.perf_counter() - written < GIVE_UP_SECONDS:
        hits = _post(http, reader, SEARCH, {"q": text})["data"]["search"]
        if hits and hits[0]["fact"]["id"] == fact_id:
            return fact_id, written, 1000 * (time.perf_counter() - written)
        time.sleep(POLL_SECONDS)
    return fact_id, written, None


@contextmanager
def _subscriber(http: httpx.Client, url: str) -> Iterator[dict[str, float]]:
    """A ``memoryChanged`` subscriber of the server at ``url``, in a thread, for the block:
    when (``time.perf_counter``) each stored fact's change arrived, by fact id."""
    heard: dict[str, float] = {}
    stop = threading.Event()
    with connect(
        url.replace("http://", "ws://") + "/graphql",
        subprotocols=[Subprotocol("graphql-transport-ws")],
    ) as ws:
        ws.send(json.dumps({"type": "connection_init"}))
        ws.recv(timeout=30)
        ws.send(json.dumps({"type": "subscribe", "id": "1", "payload": {"query": SUBSCRIBE}}))
        counted = re.compile(r"^graphmem_subscribers\{.*\} 1\.0$", re.MULTILINE)
        while not counted.search(http.get(url + "/metrics").text):
            time.sleep(0.02)  # until the server counts it: then it hears what follows

        def listen() -> None:
            while not stop.is_set():
                try:
                    message = json.loads(ws.recv(timeout=0.1))
                except TimeoutError:
                    continue
                if message["type"] == "next":
                    heard[message["payload"]["data"]["memoryChanged"]["id"]] = time.perf_counter()

        thread = threading.Thread(target=listen, daemon=True)
        thread.start()
        try:
            yield heard
        finally:
            stop.set()
            thread.join()


def _post(http: httpx.Client, url: str, query: str, variables: dict[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = http.post(
        url + "/graphql", json={"query": query, "variables": variables}
    ).json()
    if body.get("errors"):
        raise RuntimeError(f"{url}: {body['errors']}")
    return body


if __name__ == "__main__":
    raise SystemExit(main())
