"""Reliability scenarios against a real ``graphmem serve`` process on a loopback port: crashes
in the middle of a bulk ingest, and many concurrent writers and readers. The tests in
tests/system/test_reliability_crash_load.py run short versions; ``make soak`` runs long ones and
prints the figures that docs/operations.md quotes.

    python -m tests.system.soak [--kills 20] [--seconds 120] [--writers 16] [--readers 16]
                                [--embedder hash|local] [--scenario crash|load|all] [--workers 1]

**crash**: clients send ``storeFacts`` batches of unique facts while the server is SIGKILLed
at a random moment, again and again (a new server each round, on the same data). Afterwards
every acknowledged fact must be in SQLite exactly once and be the first hit of a vector search
for its own text (tied first with a near-duplicate whose vector it shares), no unacknowledged one may appear twice, and ``graphmem check`` must pass.

**load**: writers store single facts, batches (each batch's facts share an entity, so a reader
can count them) and new versions of a few single-valued facts, while readers search, look up
and page. Every read must see a batch whole or not at all and at most one current version of
each fact; no request may fail; afterwards every acknowledged write is there and ``check``
passes. All traffic goes to 127.0.0.1 and every loop is bounded in count and time.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import httpx

from devtools.cluster import Cluster
from graphmem import Memory, Settings
from graphmem.storage.sqlite.store import SQLITE_FILE

ROOT: Final = Path(__file__).resolve().parents[2]
STARTUP_TIMEOUT: Final = 120.0
STORE_MANY: Final = """mutation($inputs: [FactInput!]!) {
  storeFacts(inputs: $inputs) { results { action fact { id } } error { code message } }
}"""
STORE: Final = """mutation($input: FactInput!) {
  storeFact(input: $input) { action fact { id } targetIds error { code message } }
}"""
LOOKUP: Final = """query($e: String!) {
  lookup(entity: $e, limit: 1000) { id key supersededBy { id } }
}"""
SEARCH: Final = """query($q: String!) {
  search(query: $q, limit: 20) { fact { id entity key } }
}"""
PAGE: Final = """query($after: String) {
  facts(first: 100, after: $after) { edges { node { id } } pageInfo { endCursor hasNextPage } }
}"""
#: Entities whose single-valued key `city` writers keep replacing (supersession races).
MOVERS: Final = 4


# --------------------------------------------------------------------------------- the server


@contextmanager
def server(
    data: Path, embedder: str, log: Path, workers: int = 1
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``graphmem serve`` on a free loopback port (``workers`` processes): its URL and process
    (killed at the end if still running; with workers, stopped with SIGTERM so that they end
    too)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {
        **os.environ,
        "GRAPHMEM_EMBEDDER": embedder,
        "GRAPHMEM_DATA_DIR": str(data),
        "GRAPHMEM_PRUNE_INTERVAL": "0",
    }
    command = [
        sys.executable,
        "-c",
        "from graphmem.server.commands import main; main()",
        "serve",
        "--port",
        str(port),
        "--log-level",
        "warning",
        "--workers",
        str(workers),
    ]
    with log.open("ab") as sink:
        process = subprocess.Popen(
            command, stdout=sink, stderr=subprocess.STDOUT, env=env, cwd=ROOT
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the server exited ({process.returncode}):\n{log.read_text()}")
            try:
                if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"no /healthz in {STARTUP_TIMEOUT:.0f} s:\n{log.read_text()}")
            time.sleep(0.05)
        yield url, process
    finally:
        if process.poll() is None:
            if workers > 1:
                process.terminate()
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
            else:
                process.kill()
        process.wait()


def stop(process: subprocess.Popen[bytes]) -> None:
    """A graceful stop (SIGTERM: in-flight requests finish, stores close)."""
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=60)


def check_cli(
    data: Path, embedder: str, settings: Settings | None = None, namespace: str = "default"
) -> dict[str, Any]:
    """``graphmem check --json`` on ``data`` (or on the store and vectors of ``settings``) for
    ``namespace``: its report (exit status 1 when not ok)."""
    env = {**os.environ, "GRAPHMEM_EMBEDDER": embedder, **_engine_env(settings)}
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from graphmem.server.commands import main; main()",
            "--data-dir",
            str(data),
            "--namespace",
            namespace,
            "check",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=600,
        check=False,
    )
    report: dict[str, Any] = json.loads(done.stdout)
    assert (done.returncode == 0) == report["ok"], done.stderr
    return report


def _engine_env(settings: Settings | None) -> dict[str, str]:
    """The GRAPHMEM_* variables that point a command at the store and vectors of ``settings``."""
    if settings is None:
        return {}
    names = ("store", "vectors", "s3_endpoint", "s3_access_key_id", "s3_secret_access_key")
    return {
        f"GRAPHMEM_{n.upper()}": str(getattr(settings, n))
        for n in names
        if getattr(settings, n) is not None
    }


def _post(client: httpx.Client, query: str, variables: dict[str, Any]) -> dict[str, Any]:
    response = client.post("/graphql", json={"query": query, "variables": variables})
    body: dict[str, Any] = response.json()
    if response.status_code != 200 or body.get("errors"):
        codes = {(e.get("extensions") or {}).get("code") for e in body.get("errors") or []}
        raise Failure(f"HTTP {response.status_code}: {json.dumps(body)[:500]}", codes)
    data: dict[str, Any] = body["data"]
    return data


class Failure(Exception):
    """A request the service answered with an error (``codes``: its errors' codes)."""

    def __init__(self, message: str, codes: set[str | None] | None = None) -> None:
        super().__init__(message)
        self.codes = codes or set()


# --------------------------------------------------------------------------------- crash


@dataclass
class CrashResult:
    rounds: int
    acknowledged: int
    unacknowledged: int
    outbox_rows_replayed: int
    seconds: float
    problems: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rounds": self.rounds,
            "acknowledged_facts": self.acknowledged,
            "unacknowledged_facts": self.unacknowledged,
            "outbox_rows_replayed": self.outbox_rows_replayed,
            "seconds": round(self.seconds, 1),
            "problems": self.problems,
        }


def crash(
    data: Path,
    *,
    kills: int,
    clients: int = 4,
    batch: int = 50,
    embedder: str = "hash",
    max_wait: float = 3.0,
    seed: int = 0,
) -> CrashResult:
    """Kill the server ``kills`` times in the middle of a bulk ingest, then verify."""
    rng = random.Random(seed)
    data.parent.mkdir(parents=True, exist_ok=True)
    acknowledged: set[str] = set()
    sent: set[str] = set()
    replayed = 0
    started = time.monotonic()
    log = data.parent / "crash-server.log"
    for round_ in range(kills):
        with server(data, embedder, log) as (url, process):
            stop_sending = threading.Event()

            def ingest(
                client_no: int,
                round_: int = round_,
                url: str = url,
                stop_sending: threading.Event = stop_sending,
            ) -> None:
                with httpx.Client(base_url=url, timeout=60) as client:
                    for n in range(10_000):
                        if stop_sending.is_set():
                            return
                        texts = [
                            f"Round {round_} client {client_no} batch {n} item {i}: "
                            + _words(rng_for(round_, client_no, n, i))
                            for i in range(batch)
                        ]
                        sent.update(texts)
                        try:
                            _post(client, STORE_MANY, {"inputs": [{"text": t} for t in texts]})
                        except (httpx.HTTPError, Failure, ValueError):
                            return  # the server died under this request
                        acknowledged.update(texts)

            threads = [threading.Thread(target=ingest, args=(c,)) for c in range(clients)]
            for t in threads:
                t.start()
            time.sleep(rng.uniform(0.2, max_wait))
            process.kill()  # SIGKILL: no cleanup of any kind
            process.wait()
            stop_sending.set()
            for t in threads:
                t.join(timeout=120)
        replayed += _outbox_rows(data)
    # The restart: `graphmem check` opens the namespace as the server does, replaying the outbox.
    problems = _verify(data, embedder, acknowledged, sent)
    return CrashResult(
        kills,
        len(acknowledged),
        len(sent - acknowledged),
        replayed,
        time.monotonic() - started,
        problems,
    )


def rng_for(*parts: int) -> random.Random:
    return random.Random(hash(parts))


def _words(rng: random.Random, n: int = 12) -> str:
    return " ".join(
        f"{rng.choice('bcdfghklmnprstvz')}{rng.choice('aeiou')}{rng.randrange(10**6)}"
        for _ in range(n)
    )


def _outbox_rows(data: Path) -> int:
    """Vector writes a kill left pending (committed to SQLite, not yet to LanceDB)."""
    conn = sqlite3.connect(f"file:{data / 'default' / SQLITE_FILE}?mode=ro", uri=True)
    try:
        return int(conn.execute("SELECT count(*) FROM outbox").fetchone()[0])
    finally:
        conn.close()


def _verify(
    data: Path,
    embedder: str,
    acknowledged: set[str],
    sent: set[str],
    settings: Settings | None = None,
    namespace: str = "default",
) -> list[str]:
    """What is wrong with ``namespace`` (in ``data``, or on the engines of ``settings``) after
    the scenario (empty when nothing is)."""
    problems = []
    report = check_cli(data, embedder, settings, namespace)
    if not report["ok"]:
        problems.append(f"{namespace}: graphmem check: {json.dumps(report)[:1000]}")
    settings = (settings or Settings()).model_copy(
        update={"embedder": embedder, "track_access": False}
    )
    with Memory.open(data, namespace=namespace, settings=settings) as mem:
        counts: dict[str, int] = {}
        after = None
        while True:
            page = mem.facts(first=1000, after=after, include_superseded=True)
            for _, fact in page.items:
                counts[fact.text] = counts.get(fact.text, 0) + 1
            if not page.has_more:
                break
            after = page.items[-1][0]
        lost = acknowledged - counts.keys()
        twice = [t for t, n in counts.items() if n > 1]
        strangers = counts.keys() - sent
        if lost:
            problems.append(
                f"{namespace}: {len(lost)} acknowledged facts lost, e.g. {sorted(lost)[:3]}"
            )
        if twice:
            problems.append(f"{namespace}: {len(twice)} facts stored twice, e.g. {twice[:3]}")
        if strangers:
            problems.append(f"{namespace}: {len(strangers)} facts nobody sent")
        unfound = [t for t in acknowledged if not _found_by_vector(mem, t)]
        if unfound:
            problems.append(
                f"{namespace}: {len(unfound)} acknowledged facts not found by vector search"
            )
    return problems


def _found_by_vector(mem: Memory, text: str) -> bool:
    """Whether a vector search for ``text`` ranks its fact first (or tied first: a near-duplicate
    shares its twin's vector, so both score the same)."""
    hits = mem.search(text, mode="vector", limit=20, include_superseded=True)
    return any(h.fact.text == text and h.score >= hits[0].score - 1e-6 for h in hits)


# --------------------------------------------------------------------------------- load


@dataclass
class LoadResult:
    writers: int
    readers: int
    seconds: float
    writes: int
    reads: int
    facts_written: int
    latencies_ms: dict[str, list[float]]
    failures: list[str] = field(default_factory=list)
    anomalies: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    #: Reads the service stopped at their time limit (``TIMEOUT``): not failures, a load past
    #: what the machine serves within ``sql_time_limit``; callers bound their share.
    read_timeouts: int = 0

    def to_dict(self) -> dict[str, Any]:
        every = [ms for kind in self.latencies_ms.values() for ms in kind]
        return {
            "writers": self.writers,
            "readers": self.readers,
            "seconds": round(self.seconds, 1),
            "operations": self.writes + self.reads,
            "writes": self.writes,
            "reads": self.reads,
            "facts_written": self.facts_written,
            "ops_per_s": round((self.writes + self.reads) / max(self.seconds, 1e-9), 1),
            "latency_ms": {
                kind: _percentiles(ms)
                for kind, ms in sorted({**self.latencies_ms, "all": every}.items())
            },
            "failures": self.failures[:10],
            "failure_count": len(self.failures),
            "read_timeouts": self.read_timeouts,
            "anomalies": self.anomalies[:10],
            "anomaly_count": len(self.anomalies),
            "problems": self.problems,
        }


def _percentiles(ms: list[float]) -> dict[str, float | int]:
    ms = sorted(ms) or [0.0]
    return {
        "n": len(ms),
        "p50": round(statistics.median(ms), 1),
        "p99": round(ms[min(len(ms) - 1, int(len(ms) * 0.99))], 1),
    }


def load(
    data: Path,
    *,
    writers: int = 16,
    readers: int = 16,
    seconds: float = 30.0,
    operations: int = 100_000,
    batch: int = 20,
    embedder: str = "hash",
    seed: int = 0,
    workers: int = 1,
    cluster: Cluster | None = None,
    namespaces: Sequence[str] = ("default",),
) -> LoadResult:
    """``writers`` and ``readers`` concurrent HTTP clients for ``seconds`` (or until
    ``operations`` requests), then verify. The clients spread over ``namespaces`` (the
    ``X-Graphmem-Namespace`` header); the server is a new ``graphmem serve`` on ``data`` (stopped
    before the check), or ``cluster``'s router."""
    data.parent.mkdir(parents=True, exist_ok=True)
    lock = threading.Lock()
    acknowledged: dict[str, set[str]] = {ns: set() for ns in namespaces}
    sent: dict[str, set[str]] = {ns: set() for ns in namespaces}
    # namespace -> entity -> facts in its batch (sent: maybe in flight)
    batches: dict[str, dict[str, int]] = {ns: {} for ns in namespaces}
    result = LoadResult(writers, readers, 0.0, 0, 0, 0, {})
    budget = threading.Semaphore(operations)
    log = data.parent / "load-server.log"
    with _serving(data, embedder, log, workers, cluster) as (url, stop_serving, settings):
        deadline = time.monotonic() + seconds

        def timed(
            kind: str, client: httpx.Client, query: str, variables: dict[str, Any]
        ) -> dict[str, Any]:
            start = time.perf_counter()
            out = _post(client, query, variables)
            with lock:
                result.latencies_ms.setdefault(kind, []).append(
                    (time.perf_counter() - start) * 1000
                )
            return out

        def writer(w: int) -> None:
            rng = random.Random(seed * 1000 + w)
            ns = namespaces[w % len(namespaces)]
            headers = {"X-Graphmem-Namespace": ns}
            with httpx.Client(base_url=url, timeout=60, headers=headers) as client:
                n = 0
                while time.monotonic() < deadline and budget.acquire(blocking=False):
                    n += 1
                    kind = rng.random()
                    try:
                        if kind < 0.4:
                            text = f"Writer {w} note {n}: {_words(rng)}"
                            with lock:
                                sent[ns].add(text)
                            timed("store fact", client, STORE, {"input": {"text": text}})
                            texts = [text]
                        elif kind < 0.7:
                            entity = f"batch-{w}-{n}"
                            texts = [
                                f"Writer {w} batch {n} part {i}: {_words(rng)}"
                                for i in range(batch)
                            ]
                            with lock:
                                sent[ns].update(texts)
                                batches[ns][entity] = batch
                            timed(
                                f"store batch of {batch}",
                                client,
                                STORE_MANY,
                                {
                                    "inputs": [
                                        {
                                            "text": t,
                                            "entity": entity,
                                            "key": f"part{i}",
                                            "value": str(i),
                                        }
                                        for i, t in enumerate(texts)
                                    ]
                                },
                            )
                        else:
                            mover = f"mover{rng.randrange(MOVERS)}"
                            city = f"city{rng.randrange(10**6)}"
                            text = f"{mover} lives in {city}"
                            with lock:
                                sent[ns].add(text)
                            timed(
                                "supersede",
                                client,
                                STORE,
                                {
                                    "input": {
                                        "text": text,
                                        "entity": mover,
                                        "key": "city",
                                        "value": city,
                                    }
                                },
                            )
                            texts = [text]
                    except (Failure, httpx.HTTPError) as exc:
                        with lock:
                            result.failures.append(f"writer {w}: {exc}")
                        continue
                    with lock:
                        result.writes += 1
                        acknowledged[ns].update(texts)

        def reader(r: int) -> None:
            rng = random.Random(seed * 1000 + 500 + r)
            ns = namespaces[r % len(namespaces)]
            headers = {"X-Graphmem-Namespace": ns}
            with httpx.Client(base_url=url, timeout=60, headers=headers) as client:
                while time.monotonic() < deadline and budget.acquire(blocking=False):
                    kind = rng.random()
                    try:
                        if kind < 0.35:
                            with lock:
                                entity, size = (
                                    rng.choice(list(batches[ns].items()))
                                    if batches[ns]
                                    else ("batch-none", 0)
                                )
                            got = timed("lookup batch", client, LOOKUP, {"e": entity})["lookup"]
                            if len(got) not in (0, size):
                                with lock:
                                    result.anomalies.append(
                                        f"half a batch: {len(got)} of {size} facts of {entity}"
                                    )
                        elif kind < 0.7:
                            mover = f"mover{rng.randrange(MOVERS)}"
                            query = LOOKUP if rng.random() < 0.5 else SEARCH
                            variables = (
                                {"e": mover} if query is LOOKUP else {"q": f"{mover} lives in"}
                            )
                            got = timed(
                                "search" if query is SEARCH else "lookup", client, query, variables
                            )
                            facts = (
                                got["lookup"]
                                if query is LOOKUP
                                else [
                                    h["fact"] for h in got["search"] if h["fact"]["entity"] == mover
                                ]
                            )
                            current = [f for f in facts if f["key"] == "city"]
                            if len(current) > 1:
                                with lock:
                                    result.anomalies.append(
                                        f"{len(current)} current versions of {mover}.city: "
                                        f"{[f['id'] for f in current]}"
                                    )
                        else:
                            after = None
                            for _ in range(3):
                                page = timed("page of 100", client, PAGE, {"after": after})["facts"]
                                after = page["pageInfo"]["endCursor"]
                                if not page["pageInfo"]["hasNextPage"]:
                                    break
                    except (Failure, httpx.HTTPError) as exc:
                        with lock:
                            if isinstance(exc, Failure) and exc.codes == {"TIMEOUT"}:
                                result.read_timeouts += 1  # past sql_time_limit: shed, counted
                            else:
                                result.failures.append(f"reader {r}: {exc}")
                        continue
                    with lock:
                        result.reads += 1

        started = time.monotonic()
        threads = [threading.Thread(target=writer, args=(w,)) for w in range(writers)]
        threads += [threading.Thread(target=reader, args=(r,)) for r in range(readers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=seconds + 300)
        result.seconds = time.monotonic() - started
        stop_serving()
        result.facts_written = sum(len(texts) for texts in acknowledged.values())
        for ns in namespaces:
            result.problems += _verify(data, embedder, acknowledged[ns], sent[ns], settings, ns)
    return result


@contextmanager
def _serving(
    data: Path, embedder: str, log: Path, workers: int, cluster: Cluster | None
) -> Iterator[tuple[str, Callable[[], None], Settings | None]]:
    """The URL to load, how to stop serving it gracefully, and the engines' settings (None:
    SQLite and LanceDB in ``data``)."""
    if cluster is not None:  # its replicas keep serving: the check runs beside them
        yield cluster.url, lambda: None, Settings(**cluster.settings())
        return
    with server(data, embedder, log, workers) as (url, process):
        yield url, lambda: stop(process), None


# --------------------------------------------------------------------------------- figures


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.system.soak", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--scenario", choices=["crash", "load", "all"], default="all")
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--writers", type=int, default=16)
    parser.add_argument("--readers", type=int, default=16)
    parser.add_argument("--embedder", choices=["hash", "local"], default="hash")
    parser.add_argument("--workers", type=int, default=1, help="server processes (load only)")
    args = parser.parse_args(argv)
    ok = True
    with tempfile.TemporaryDirectory(prefix="graphmem-soak-") as tmp:
        if args.scenario in ("crash", "all"):
            crashed = crash(Path(tmp) / "crash" / "data", kills=args.kills, embedder=args.embedder)
            print(json.dumps({"crash": crashed.to_dict()}, indent=2), flush=True)
            ok &= not crashed.problems
        if args.scenario in ("load", "all"):
            loaded = load(
                Path(tmp) / "load" / "data",
                writers=args.writers,
                readers=args.readers,
                seconds=args.seconds,
                embedder=args.embedder,
                workers=args.workers,
            )
            figures = loaded.to_dict()
            print(json.dumps({"load": figures}, indent=2), flush=True)
            ok &= not (loaded.problems or loaded.failures or loaded.anomalies)
            ok &= not loaded.read_timeouts  # one process on the machine: none expected
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())


def stored_texts(settings: Settings, namespace: str, data: Path) -> list[str]:
    """Every fact's text in ``namespace``, superseded ones included, read page by page."""
    texts: list[str] = []
    with Memory.open(data, namespace=namespace, settings=settings) as mem:
        after = None
        while True:
            page = mem.facts(first=1000, after=after, include_superseded=True)
            texts += [fact.text for _, fact in page.items]
            if not page.has_more:
                return texts
            after = page.items[-1][0]
