"""The scale-out topology measured live on loopback: write batches through haproxy, how long
vector writes wait in the outbox, and what a warm query asks of the object store.

Starts ``devtools.cluster.Cluster`` (PostgreSQL, moto's S3 server, three
``graphmem serve`` replicas, haproxy), loads each of NAMESPACES with ``--facts`` synthetic facts
(bench/synthetic.py) through haproxy, then for ``--seconds``:

- ``--writers`` clients each send ``storeFacts`` batches of ``--batch`` new facts through haproxy
  (the ``X-Graphmem-Namespace`` header routes them): batch latency as the client sees it;
- a sampler reads, every 50 ms and for every namespace, the age of the oldest outbox row (the
  database's clock minus its ``queued_at``; 0 when none waits): the outbox drain lag;
- after the writers stop, each namespace's owner (the replica whose /healthz lists it) answers
  ``--queries`` hybrid searches directly after a warm-up, while every request the S3 server
  receives is counted: object-store requests per warm query on the owner.

    python -m bench.scaleout [--facts 20000] [--seconds 60] [--writers 8] [--batch 100]
                             [--queries 200] [--embedder hash|local]

HTTP search and traversal with the PostgreSQL store against the embedded default are measured
by ``python -m bench.http --store postgresql`` beside ``python -m bench.http``.
"""

from __future__ import annotations

import argparse
import random
import threading
import time
from collections.abc import Sequence
from functools import partial
from typing import Any, Final

import httpx
import psycopg

from devtools.cluster import Cluster

from . import synthetic
from .common import OUT_DIR, latency, machine, markdown_table, percentile, write_json

NAMESPACES: Final = ("north", "south", "east", "west")
STORE_MANY: Final = """mutation($inputs: [FactInput!]!) {
  storeFacts(inputs: $inputs) { results { action } error { code message } }
}"""
SEARCH: Final = """query($q: String!) { search(query: $q, limit: 10) { score fact { id } } }"""
SAMPLE_EVERY: Final = 0.05
LOAD_BATCH: Final = 1_000


def _s3_requests(cluster: Cluster) -> int:
    """Requests the S3 server has answered so far (its log has a line for each)."""
    assert cluster.objects is not None and cluster.objects.log is not None
    text = cluster.objects.log.read_text(errors="replace")
    return sum(text.count(f'"{verb} ') for verb in ("GET", "PUT", "POST", "DELETE", "HEAD"))


def _post(client: httpx.Client, query: str, variables: dict[str, Any]) -> dict[str, Any]:
    response = client.post("/graphql", json={"query": query, "variables": variables})
    body: dict[str, Any] = response.json()
    if response.status_code != 200 or body.get("errors"):
        raise RuntimeError(f"HTTP {response.status_code}: {str(body)[:300]}")
    data: dict[str, Any] = body["data"]
    return data


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    out: dict[str, Any] = {"benchmark": "scaleout", **vars(args), "namespaces": len(NAMESPACES)}
    facts = list(synthetic.facts(synthetic.pairs(args.facts * len(NAMESPACES) * 2)))
    rng = random.Random(5)
    rng.shuffle(facts)
    with Cluster(replicas=3, embedder=args.embedder) as cluster:
        began = time.perf_counter()
        for n, ns in enumerate(NAMESPACES):
            part = facts[n * args.facts : (n + 1) * args.facts]
            with httpx.Client(
                base_url=cluster.url, timeout=600, headers={"X-Graphmem-Namespace": ns}
            ) as client:
                for start in range(0, len(part), LOAD_BATCH):
                    chunk = part[start : start + LOAD_BATCH]
                    _post(client, STORE_MANY, {"inputs": [_input(f) for f in chunk]})
        out["load_seconds"] = round(time.perf_counter() - began, 1)
        print(f"loaded {args.facts} facts into each of {len(NAMESPACES)} namespaces", flush=True)
        fresh = iter(facts[len(NAMESPACES) * args.facts :])
        out.update(_writes(cluster, args, fresh))
        out["warm_query"] = _warm_queries(cluster, args)
    out["machine"] = machine()
    print(summary_markdown(out))
    write_json(OUT_DIR / "scaleout.json", out)
    return 0


def _input(fact: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in fact.items() if k in ("text", "entity", "key", "value", "category")}


def _writes(cluster: Cluster, args: argparse.Namespace, fresh: Any) -> dict[str, Any]:
    """Writers through haproxy and the outbox sampler, for ``args.seconds``."""
    lock = threading.Lock()
    latencies: list[float] = []
    errors: list[str] = []
    ages: list[float] = []
    stop = threading.Event()

    def writer(w: int) -> None:
        ns = NAMESPACES[w % len(NAMESPACES)]
        with httpx.Client(
            base_url=cluster.url, timeout=120, headers={"X-Graphmem-Namespace": ns}
        ) as client:
            while not stop.is_set():
                with lock:
                    chunk = [next(fresh) for _ in range(args.batch)]
                began = time.perf_counter()
                try:
                    _post(client, STORE_MANY, {"inputs": [_input(f) for f in chunk]})
                except (httpx.HTTPError, RuntimeError) as exc:
                    with lock:
                        errors.append(str(exc))
                    continue
                with lock:
                    latencies.append((time.perf_counter() - began) * 1000)

    def sampler() -> None:
        assert cluster.postgres is not None
        with psycopg.connect(cluster.postgres.url, autocommit=True) as conn:
            while not stop.is_set():
                for ns in NAMESPACES:
                    conn.execute("SELECT set_config('graphmem.namespace', %s, false)", [ns])
                    row = conn.execute(
                        "SELECT coalesce(extract(epoch FROM clock_timestamp()) - min(queued_at),"
                        " 0) FROM outbox"
                    ).fetchone()
                    ages.append(float(row[0]) if row else 0.0)
                time.sleep(SAMPLE_EVERY)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(args.writers)]
    threads.append(threading.Thread(target=sampler))
    began = time.perf_counter()
    for t in threads:
        t.start()
    time.sleep(args.seconds)
    stop.set()
    for t in threads:
        t.join(timeout=300)
    wall = time.perf_counter() - began
    return {
        "write_batches": {
            "n": len(latencies),
            "facts_per_s": round(len(latencies) * args.batch / wall, 1),
            "p50_ms": round(percentile(latencies, 50), 1),
            "p95_ms": round(percentile(latencies, 95), 1),
            "p99_ms": round(percentile(latencies, 99), 1),
            "errors": len(errors),
            "first_errors": errors[:3],
        },
        "outbox_age_s": {
            "samples": len(ages),
            "waiting_share": round(sum(1 for a in ages if a > 0) / max(len(ages), 1), 3),
            "p50": round(percentile(ages, 50), 3),
            "p95": round(percentile(ages, 95), 3),
            "max": round(max(ages, default=0.0), 3),
        },
    }


def _warm_queries(cluster: Cluster, args: argparse.Namespace) -> dict[str, Any]:
    """Hybrid searches on each namespace's owner, after a warm-up: latency, and the requests
    the S3 server received meanwhile."""
    owners = {
        ns: r
        for r in cluster.replicas
        for ns in httpx.get(f"{r.url}/healthz", timeout=10).json()["namespaces"]
        if ns in NAMESPACES
    }
    questions = synthetic.queries(synthetic.pairs(args.facts), args.queries + 20)
    result: dict[str, Any] = {}
    for ns, owner in owners.items():
        with httpx.Client(
            base_url=owner.url, timeout=60, headers={"X-Graphmem-Namespace": ns}
        ) as client:
            for q in questions[:20]:  # warm-up
                _post(client, SEARCH, {"q": q})
            before = _s3_requests(cluster)
            timing = latency(partial(_post, client, SEARCH), [{"q": q} for q in questions[20:]], 0)
            result[ns] = {
                "owner": owner.name,
                **timing,
                "s3_requests_per_query": round((_s3_requests(cluster) - before) / timing["n"], 3),
            }
    return result


def summary_markdown(r: dict[str, Any]) -> str:
    writes, ages = r["write_batches"], r["outbox_age_s"]
    lines = [
        f"{r['facts']} facts in each of {r['namespaces']} namespaces, {r['embedder']} embedder, "
        f"3 replicas behind haproxy, PostgreSQL, vectors on moto's S3 server; loaded in "
        f"{r['load_seconds']} s.\n",
        markdown_table(
            ["write batches", "facts/s", "p50 ms", "p95 ms", "p99 ms", "errors"],
            [
                [
                    f"{writes['n']} of {r['batch']} ({r['writers']} writers, {r['seconds']} s)",
                    writes["facts_per_s"],
                    writes["p50_ms"],
                    writes["p95_ms"],
                    writes["p99_ms"],
                    writes["errors"],
                ]
            ],
        ),
        "",
        markdown_table(
            ["outbox age (sampled every 50 ms)", "waiting", "p50 s", "p95 s", "max s"],
            [
                [
                    f"{ages['samples']} samples",
                    f"{ages['waiting_share']:.1%}",
                    ages["p50"],
                    ages["p95"],
                    ages["max"],
                ]
            ],
        ),
        "",
        markdown_table(
            ["namespace", "owner", "search p50 ms", "p95 ms", "S3 requests per query"],
            [
                [ns, q["owner"], q["p50_ms"], q["p95_ms"], q["s3_requests_per_query"]]
                for ns, q in r["warm_query"].items()
            ],
        ),
    ]
    return "\n".join(lines)


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.scaleout", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--facts", type=int, default=20_000, help="facts per namespace")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--embedder", choices=("hash", "local"), default="hash")
    return parser.parse_args(argv)


if __name__ == "__main__":
    raise SystemExit(main())
