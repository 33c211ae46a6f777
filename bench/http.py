"""GraphQL over HTTP: search and traverse latency, throughput and memory of ``graphmem serve``.

Stores N synthetic facts (bench/synthetic.py) with store_many in batches of 1,000 and
``autolink=False`` (automatic similarity links would make a 100k build several times slower;
the graph here is made of explicit links instead), then L links of the four explicit types
between uniformly random facts with random strengths (as bench/graph.py), then ``optimize``.
Then starts the real server as a subprocess (``graphmem serve`` on a free loopback port,
default settings: access tracking on) and times, from httpx clients in threads of this
process, GraphQL ``search`` (limit 10, hybrid, query embedding included) and ``traverse``
(depth 2 from a random fact, BOTH directions) with 1 client and with 16 concurrent clients:
latency per request as the client sees it (JSON, HTTP, uvicorn and GraphQL included),
requests/s, and the server's memory (RSS, heap and PSS; see _rss) after each phase. Then, the
server stopped, the same single-client inputs as calls to ``Memory`` in this process: what
HTTP and GraphQL add; and, in process only, lookups by entity and searches whose query ends
with time words (a day, a month, a month of any year, "last week"). A response
with ``errors`` is counted and reported (exit status 1).

    python -m bench.http [--facts 100000] [--links 500000] [--embedder local|hash] [--data DIR]
                         [--requests 300] [--per-client 100] [--store sqlite|postgresql|URL]
                         [--in-process-only]

``--data DIR`` keeps the store in DIR and reuses it when it is already there. ``--store
postgresql`` runs everything on the PostgreSQL store of a throwaway server on loopback (the
server process and the in-process calls alike; docs/scale-out.md).
"""

from __future__ import annotations

import argparse
import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Final

import httpx

from graphmem import Memory, Settings

from . import synthetic
from .common import (
    OUT_DIR,
    ROOT,
    latency,
    machine,
    markdown_table,
    percentile,
    process_memory_mb,
    write_json,
)
from .common import store as bench_store

NAMESPACE: Final = "http"
TYPES: Final = ("RELATED_TO", "DEPENDS_ON", "PART_OF", "CAUSED_BY")
BATCH: Final = 1_000
CLIENTS: Final = 16
#: Untimed requests before the single-client phase, and per client before the concurrent one.
WARMUP: Final = 20
CONCURRENT_WARMUP: Final = 2
STARTUP_TIMEOUT: Final = 300.0
SEARCH: Final = """query Search($q: String!) {
  search(query: $q, limit: 10) { score fact { id text } }
}"""
#: The operations timed over HTTP (and in process, for what HTTP adds).
OPERATIONS: Final = ("search", "traverse")
TRAVERSE: Final = """query Traverse($id: ID!) {
  traverse(from: [$id], depth: 2) { nodes { depth fact { id } } edges { id } truncated }
}"""


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    out: dict[str, Any] = {
        "benchmark": "http",
        "facts": args.facts,
        "links": args.links,
        "embedder": args.embedder,
        "clients": CLIENTS,
        "requests_single": args.requests,
        "requests_per_client": args.per_client,
        "graphmem_env": {k: v for k, v in os.environ.items() if k.startswith("GRAPHMEM_")},
    }
    with (
        bench_store(args.store) as args.store_url,
        tempfile.TemporaryDirectory(prefix="bench-http-") as tmp,
    ):
        out["store"] = "sqlite" if args.store_url is None else "postgresql"
        root = args.data or Path(tmp)
        ids = _prepare(root, args, out)
        rng = random.Random(21)
        needed = WARMUP + args.requests + CLIENTS * (CONCURRENT_WARMUP + args.per_client)
        questions = synthetic.queries(synthetic.pairs(args.facts), needed)
        starts = [rng.choice(ids) for _ in range(needed)]
        _wait_for_quiet()
        out["load_average_before_timing"] = [round(x, 2) for x in os.getloadavg()]
        if not args.in_process_only:
            with _server(root, args.embedder, Path(tmp) / "server.log", store=args.store_url) as (
                url,
                pid,
                startup,
            ):
                out["server_startup_seconds"] = startup
                out["rss_idle"] = process_memory_mb(pid)
                for name, query, inputs in (
                    ("search", SEARCH, [{"q": q} for q in questions]),
                    ("traverse", TRAVERSE, [{"id": i} for i in starts]),
                ):
                    out[f"{name}_single"] = _single(url, query, inputs, args.requests)
                    out[f"{name}_single"]["rss"] = process_memory_mb(pid)
                    out[f"{name}_concurrent"] = _concurrent(url, query, inputs, args.per_client)
                    out[f"{name}_concurrent"]["rss"] = process_memory_mb(pid)
                    print(_one_line(name, out), flush=True)
        out["in_process"] = _in_process(root, args, questions, starts)
        out["other_benches_after_timing"] = _other_benches()
    out["machine"] = machine()
    print(summary_markdown(out))
    suffix = "" if out["store"] == "sqlite" else "-postgresql"
    write_json(args.out or OUT_DIR / f"http{suffix}.json", out)
    errors = sum(
        out[f"{n}_{p}"]["errors"]
        for n in OPERATIONS
        for p in ("single", "concurrent")
        if f"{n}_{p}" in out
    )
    return 1 if errors else 0


# --------------------------------------------------------------------------------- the store


def _prepare(root: Path, args: argparse.Namespace, out: dict[str, Any]) -> list[str]:
    """Build the store unless ``root`` already holds it; the ids of its facts."""
    settings = Settings(
        embedder=args.embedder, autolink=False, track_access=False, store=args.store_url
    )
    mem = Memory.open(root, namespace=NAMESPACE, settings=settings)
    try:
        if _count(mem, "facts") < args.facts:
            print(f"storing {args.facts} facts ({args.embedder} embedder) ...", flush=True)
            facts = list(synthetic.facts(synthetic.pairs(args.facts)))
            began = time.perf_counter()
            for start in range(0, len(facts), BATCH):
                mem.store_many(facts[start : start + BATCH], autolink=False)
            out["store_seconds"] = time.perf_counter() - began
        ids = mem.fact_ids()
        if _count(mem, "links") == 0:
            print(f"making {args.links} links ...", flush=True)
            rng = random.Random(11)
            began = time.perf_counter()
            _link(mem, _pairs(ids, args.links, rng), rng)
            out["link_seconds"] = time.perf_counter() - began
        out["optimize_seconds"] = _timed(mem.optimize)
        stats = mem.stats()
        out["counts"] = {"facts": stats.facts, "links": stats.links}
    finally:
        mem.close()
    out["disk_mb"] = (
        sum(p.stat().st_size for p in (root / NAMESPACE).rglob("*") if p.is_file()) / 2**20
    )
    return ids


def _count(mem: Memory, what: str) -> int:
    return int(getattr(mem.stats(), what))


def _pairs(ids: list[str], n: int, rng: random.Random) -> list[tuple[str, str]]:
    """``n`` distinct (source, target) pairs of different facts, uniformly at random."""
    pairs: set[tuple[str, str]] = set()
    while len(pairs) < n:
        source, target = rng.choice(ids), rng.choice(ids)
        if source != target:
            pairs.add((source, target))
    return sorted(pairs)


def _link(mem: Memory, pairs: list[tuple[str, str]], rng: random.Random) -> None:
    """A link for each pair (a random type and strength), in transactions of 10,000."""
    for start in range(0, len(pairs), 10_000):
        mem.link_many(
            {"source_id": s, "target_id": t, "type": rng.choice(TYPES), "strength": rng.random()}
            for s, t in pairs[start : start + 10_000]
        )


# --------------------------------------------------------------------------------- the server


@contextmanager
def _server(
    root: Path, embedder: str, log: Path, workers: int = 1, store: str | None = None
) -> Iterator[tuple[str, int, float]]:
    """``graphmem serve`` on a free port (with ``workers`` processes; on the PostgreSQL
    ``store``, if given): (its URL, its pid, seconds until /healthz answered with nothing
    loading)."""
    port = _free_port()
    command = [
        str(Path(sys.executable).parent / "graphmem"),
        "--data-dir",
        str(root),
        "--namespace",
        NAMESPACE,
        "--embedder",
        embedder,
        "serve",
        "--port",
        str(port),
        "--log-level",
        "warning",
        "--workers",
        str(workers),
    ]
    url = f"http://127.0.0.1:{port}"
    with log.open("wb") as sink:
        began = time.perf_counter()
        env = {**os.environ, **({"GRAPHMEM_STORE": store} if store else {})}
        process = subprocess.Popen(
            command, stdout=sink, stderr=subprocess.STDOUT, cwd=ROOT, env=env
        )
        try:
            _wait_healthy(url, process, log)
            yield url, process.pid, time.perf_counter() - began
        finally:
            stop(process)


def stop(process: subprocess.Popen[bytes]) -> None:
    """Stop a server process: terminate, then kill if it has not ended within 30 s."""
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _wait_healthy(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited ({process.returncode}):\n{log.read_text()}")
        try:
            health = httpx.get(url + "/healthz", timeout=2)
            # Up, and done loading its in-memory graph (which would share the CPU with the
            # timed requests; the in-process calls wait for it too).
            if health.status_code == 200 and not health.json()["loading"]:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"the server did not answer /healthz in {STARTUP_TIMEOUT:.0f} s")


def _other_benches(waiting: bool = False) -> list[str]:
    """Command lines of other ``python -m bench.*`` processes (not this one or its parents);
    ``waiting`` leaves out runs of this bench started later (they wait for this one)."""
    ps = subprocess.run(
        ["ps", "-eo", "pid=,ppid=,etimes=,args="], capture_output=True, text=True, check=True
    )
    rows = [line.split(None, 3) for line in ps.stdout.splitlines()]
    parent = {int(r[0]): int(r[1]) for r in rows}
    age = {int(r[0]): int(r[2]) for r in rows}
    mine, pid = set(), os.getpid()
    while pid > 1:
        mine.add(pid)
        pid = parent.get(pid, 1)
    return [
        r[3]
        for r in rows
        if len(r) == 4
        and "-m bench." in r[3]
        and int(r[0]) not in mine
        and not (waiting and "-m bench.http" in r[3] and age[int(r[0])] <= age[os.getpid()])
    ]


def _wait_for_quiet() -> None:
    """Wait until no other ``python -m bench.*`` runs, so that they do not share the CPU."""
    while others := _other_benches(waiting=True):
        print(f"waiting for other benches to finish: {others}", flush=True)
        time.sleep(60)


# --------------------------------------------------------------------------------- clients


class Client:
    """One HTTP connection posting GraphQL; counts answers with errors."""

    def __init__(self, url: str, query: str) -> None:
        self.http = httpx.Client(base_url=url, timeout=120)
        self.query = query
        self.errors: list[str] = []

    def post(self, variables: dict[str, Any]) -> float:
        """Milliseconds to send one request and read its whole answer."""
        began = time.perf_counter()
        response = self.http.post("/graphql", json={"query": self.query, "variables": variables})
        body = response.json()
        elapsed = 1000 * (time.perf_counter() - began)
        if response.status_code != 200 or body.get("errors") or not body.get("data"):
            self.errors.append(f"{response.status_code}: {str(body)[:300]}")
        return elapsed

    def close(self) -> None:
        self.http.close()


def _single(url: str, query: str, inputs: list[dict[str, Any]], n: int) -> dict[str, Any]:
    client = Client(url, query)
    try:
        for variables in inputs[:WARMUP]:
            client.post(variables)
        client.errors.clear()
        began = time.perf_counter()
        times = [client.post(v) for v in inputs[WARMUP : WARMUP + n]]
        wall = time.perf_counter() - began
    finally:
        client.close()
    return _summary(times, wall, client.errors)


def _in_process(
    root: Path, args: argparse.Namespace, questions: list[str], starts: list[str]
) -> dict[str, Any]:
    """The single client's search and traversal inputs as calls in this process (the server
    stopped; the same settings as it: default, access tracking on), for the difference HTTP
    and GraphQL make."""
    settings = Settings(embedder=args.embedder, store=args.store_url)
    mem = Memory.open(root, namespace=NAMESPACE, settings=settings)
    try:
        mem.preload_graph(wait=3600)
        n = WARMUP + args.requests
        out = {
            "search": latency(lambda q: mem.search(q, limit=10), questions[:n], WARMUP),
            "traverse": latency(lambda i: mem.traverse([i], depth=2), starts[:n], WARMUP),
        }
        entities = [p.entity for p in synthetic.pairs(args.facts)[:n]]
        out["lookup"] = latency(lambda e: mem.lookup(e, limit=10), entities, WARMUP)
        # Time words: a day and a month of the facts' dates (2020-2023), a month of any year,
        # and a week with none.
        rng = random.Random(5)
        days = [datetime(2020, 1, 1) + timedelta(days=rng.randrange(4 * 365)) for _ in range(n)]
        for name, words in (
            ("search_day", [f" on {d.day} {d:%B %Y}" for d in days]),
            ("search_month", [f" in {d:%B %Y}" for d in days]),
            ("search_any_month", [f" in {d:%B}" for d in days]),
            ("search_last_week", [" last week"] * n),
        ):
            dated = [q + w for q, w in zip(questions, words, strict=False)]
            out[name] = latency(lambda q: mem.search(q, limit=10), dated, WARMUP)
    finally:
        mem.close()
    return out


def _concurrent(url: str, query: str, inputs: list[dict[str, Any]], n: int) -> dict[str, Any]:
    """CLIENTS threads, each with its own connection, ``n`` timed requests each, started
    together after their warm-up."""
    offset = len(inputs) - CLIENTS * (CONCURRENT_WARMUP + n)  # after the single client's
    clients = [Client(url, query) for _ in range(CLIENTS)]
    times: list[list[float]] = [[] for _ in clients]
    ready = threading.Barrier(CLIENTS + 1)
    done = threading.Barrier(CLIENTS + 1)

    def run(i: int) -> None:
        mine = inputs[offset + i * (CONCURRENT_WARMUP + n) :][: CONCURRENT_WARMUP + n]
        try:
            for variables in mine[:CONCURRENT_WARMUP]:
                clients[i].post(variables)
            clients[i].errors.clear()
        finally:
            ready.wait()
        try:
            times[i] = [clients[i].post(v) for v in mine[CONCURRENT_WARMUP:]]
        finally:
            done.wait()

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(CLIENTS)]
    for thread in threads:
        thread.start()
    ready.wait()
    began = time.perf_counter()
    done.wait()
    wall = time.perf_counter() - began
    for thread in threads:
        thread.join()
    for client in clients:
        client.close()
    return _summary([t for ts in times for t in ts], wall, [e for c in clients for e in c.errors])


def _summary(times: list[float], wall: float, errors: list[str]) -> dict[str, Any]:
    return {
        "n": len(times),
        "p50_ms": percentile(times, 50),
        "p95_ms": percentile(times, 95),
        "p99_ms": percentile(times, 99),
        "mean_ms": sum(times) / len(times),
        "requests_per_s": len(times) / wall,
        "seconds": wall,
        "errors": len(errors),
        "error_samples": errors[:5],
    }


def _timed(call: Callable[[], Any]) -> float:
    began = time.perf_counter()
    call()
    return time.perf_counter() - began


# --------------------------------------------------------------------------------- report


def _one_line(name: str, out: dict[str, Any]) -> str:
    single, many = out[f"{name}_single"], out[f"{name}_concurrent"]
    return (
        f"  {name}: 1 client p50 {single['p50_ms']:.1f} ms; {CLIENTS} clients p50 "
        f"{many['p50_ms']:.1f} ms, {many['requests_per_s']:.1f} req/s; server PSS "
        f"{many['rss']['Pss']:.0f} MiB"
    )


def summary_markdown(r: dict[str, Any]) -> str:
    if "server_startup_seconds" not in r:  # --in-process-only
        return _in_process_markdown(r)
    rows = [
        [
            IN_PROCESS[op],
            clients,
            r[key]["n"],
            f"{r[key]['p50_ms']:.1f}",
            f"{r[key]['p95_ms']:.1f}",
            f"{r[key]['requests_per_s']:.1f}",
            r[key]["errors"],
            f"{r[key]['rss']['Pss']:.0f} / {r[key]['rss']['Anonymous']:.0f}"
            f" / {r[key]['rss']['VmRSS']:.0f}",
        ]
        for op in OPERATIONS
        for clients, key in ((1, f"{op}_single"), (CLIENTS, f"{op}_concurrent"))
    ]
    local = r["in_process"]
    rows += [
        [
            f"{op} in process (no HTTP, no GraphQL)",
            1,
            r["requests_single"],
            f"{local[op]['p50_ms']:.1f}",
            f"{local[op]['p95_ms']:.1f}",
            "",
            "",
            f"HTTP adds {r[op + '_single']['p50_ms'] - local[op]['p50_ms']:.1f} ms at p50",
        ]
        for op in OPERATIONS
    ]
    rows += _in_process_rows(r["in_process"], [op for op in IN_PROCESS if op not in OPERATIONS])
    head = (
        f"{r['counts']['facts']} facts, {r['counts']['links']} links, {r['embedder']} embedder, {r['store']} store;"
        f" server up, its graph loaded, in {r['server_startup_seconds']:.1f} s, idle RSS"
        f" {r['rss_idle']['VmRSS']:.0f} MiB (PSS {r['rss_idle']['Pss']:.0f} MiB)\n\n"
    )
    return head + markdown_table(
        [
            "query",
            "clients",
            "requests",
            "p50 ms",
            "p95 ms",
            "requests/s",
            "errors",
            "server PSS / heap / RSS MiB",
        ],
        rows,
    )


#: The in-process calls, by key: what the report calls them.
IN_PROCESS: Final = {
    "search": "search (limit 10)",
    "traverse": "traverse depth 2",
    "lookup": "lookup (limit 10)",
    "search_day": 'search with a day ("on 26 August 2021")',
    "search_month": 'search with a month ("in August 2021")',
    "search_any_month": 'search with a month of any year ("in August")',
    "search_last_week": 'search with "last week" (no facts then)',
}


def _in_process_rows(local: dict[str, Any], ops: Sequence[str]) -> list[list[Any]]:
    return [
        [
            f"{IN_PROCESS[op]} in process",
            1,
            local[op]["n"],
            f"{local[op]['p50_ms']:.1f}",
            f"{local[op]['p95_ms']:.1f}",
            "",
            "",
            "",
        ]
        for op in ops
        if op in local
    ]


def _in_process_markdown(r: dict[str, Any]) -> str:
    head = (
        f"{r['counts']['facts']} facts, {r['counts']['links']} links, {r['embedder']} embedder,"
        f" {r['store']} store; no server (--in-process-only)\n\n"
    )
    rows = [row[:5] for row in _in_process_rows(r["in_process"], list(IN_PROCESS))]
    return head + markdown_table(["call", "clients", "calls", "p50 ms", "p95 ms"], rows)


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.http", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--facts", type=int, default=100_000)
    parser.add_argument("--links", type=int, default=500_000)
    parser.add_argument("--embedder", choices=("local", "hash"), default="local")
    parser.add_argument("--data", type=Path, default=None, help="keep (and reuse) the store here")
    parser.add_argument("--requests", type=int, default=300, help="timed requests, 1 client")
    parser.add_argument(
        "--in-process-only", action="store_true", help="no server: the calls in this process only"
    )
    parser.add_argument(
        "--per-client", type=int, default=100, help=f"timed requests per client, {CLIENTS} clients"
    )
    parser.add_argument(
        "--store", default="sqlite", help="sqlite, postgresql (a throwaway server) or a URL"
    )
    parser.add_argument("--out", type=Path, default=None, help="JSON output path")
    return parser.parse_args(argv)


if __name__ == "__main__":
    raise SystemExit(main())
