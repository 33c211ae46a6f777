"""The object store down, then slow, under load: a ``graphmem serve`` on PostgreSQL with its
vectors on an S3-compatible server (moto) reached through a devtools.faults.FaultProxy.

Writers and searchers run through the service while the proxy refuses every connection for
``OBJECT_STORE_OUTAGE_SECONDS`` (default 6; ``make soak`` runs 30), then forwards each request
three times ``s3_timeout`` late for as long, then passes again. Asserted: no write and no
search fails, every search answers within ``s3_timeout`` plus a margin and says
``extensions.degraded`` while the vector index cannot be read or written, the outbox drains
after, and every acknowledged fact is found by vector search with ``check`` ok. The drain lag
is printed (bench/REPORT.md, "Object store outage").

With the object store hanging (accepting requests, answering none), what reads the vector index
outside a search answers within ``s3_timeout`` too: ``stats`` with the vector count unknown,
``check`` with the index unreadable, opening a namespace with a StorageError, and a replica
started meanwhile serves, refusing that namespace with a clean 503 until the store answers.
Skipped, saying why, without PostgreSQL or moto.
"""

from __future__ import annotations

import json
import os
import statistics
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from devtools.cluster import ObjectStore, Postgres, Replica, Unavailable
from devtools.faults import FaultProxy
from graphmem import Memory, Settings, StorageError
from graphmem.storage import open_keys
from graphmem.vectors.index import FOLLOW_EVERY

from ..support.graphql_clients import bearer
from . import soak

OUTAGE_SECONDS = float(os.environ.get("OBJECT_STORE_OUTAGE_SECONDS", "6"))
#: The replica's s3_timeout, and what a search may take beyond it on a shared machine.
S3_TIMEOUT = 2.0
MARGIN = 5.0
WRITERS = 2
SEARCHERS = 2
NAMESPACE = "outage"
STORE = "mutation($t: String!) { storeFact(input: {text: $t}) { fact { id } error { code } } }"
SEARCH = "query($q: String!) { search(query: $q, limit: 10) { fact { id } } }"
#: The settings the replica started during a hang needs (as GRAPHMEM_* variables).
ENV = (
    "store",
    "embedder",
    "s3_timeout",
    "vectors",
    "s3_endpoint",
    "s3_access_key_id",
    "s3_secret_access_key",
)


@pytest.fixture
def service(tmp_path: Path) -> Iterator[tuple[Replica, FaultProxy, Settings]]:
    try:
        postgres = Postgres()
        objects = ObjectStore(separate=True)
    except Unavailable as exc:
        pytest.skip(f"needs PostgreSQL and an S3-compatible server: {exc}")
    postgres.start()
    objects.start()
    proxy = FaultProxy(objects.port).start()
    settings = Settings(
        store=postgres.url, embedder="hash", s3_timeout=S3_TIMEOUT, **objects.settings("v")
    )
    env = {
        "GRAPHMEM_STORE": postgres.url,
        "GRAPHMEM_EMBEDDER": "hash",
        "GRAPHMEM_S3_TIMEOUT": str(S3_TIMEOUT),
        **{
            f"GRAPHMEM_{k.upper()}": v
            for k, v in objects.settings("v", endpoint=proxy.endpoint).items()
        },
    }
    replica = Replica("outage", env, tmp_path)
    try:
        replica.start().wait_ready()
        yield replica, proxy, settings
    finally:
        replica.stop()
        proxy.stop()
        objects.stop()
        postgres.remove()


def test_an_object_store_down_then_slow_costs_no_write_no_search_and_no_vector(
    service: tuple[Replica, FaultProxy, Settings], tmp_path: Path
) -> None:
    replica, proxy, settings = service
    keys = open_keys(settings)
    try:
        token, _ = keys.create([NAMESPACE])
    finally:
        keys.close()
    with httpx.Client(base_url=replica.url, headers=bearer(token), timeout=60) as client:
        _scenario(client, replica, proxy, settings, tmp_path)


def _scenario(
    client: httpx.Client, replica: Replica, proxy: FaultProxy, settings: Settings, tmp_path: Path
) -> None:
    acknowledged: dict[str, float] = {}  # text -> when it was acknowledged
    failures: list[str] = []
    searches: list[tuple[float, float, bool]] = []  # (started, seconds, degraded)
    stop = threading.Event()
    lock = threading.Lock()

    def post(query: str, variables: dict[str, Any]) -> dict[str, Any]:
        response = client.post("/graphql", json={"query": query, "variables": variables})
        body: dict[str, Any] = response.json()
        if response.status_code != 200 or body.get("errors"):
            raise AssertionError(f"{response.status_code}: {json.dumps(body)[:300]}")
        return body

    def write(n: int) -> None:
        i = 0
        while not stop.is_set():
            text = f"Writer {n} note {i}: {soak._words(soak.rng_for(n, i))}"
            try:
                post(STORE, {"t": text})
                with lock:
                    acknowledged[text] = time.monotonic()
            except Exception as exc:
                failures.append(f"write: {exc}")
            i += 1
            time.sleep(0.05)

    def search(n: int) -> None:
        i = 0
        while not stop.is_set():
            with lock:
                texts = list(acknowledged)
            query = texts[(n * 7919 + i) % len(texts)] if texts else "note"
            started = time.monotonic()
            try:
                body = post(SEARCH, {"q": query})
                searches.append(
                    (started, time.monotonic() - started, "degraded" in body.get("extensions", {}))
                )
            except Exception as exc:
                failures.append(f"search: {exc}")
            i += 1

    threads = [threading.Thread(target=write, args=(n,)) for n in range(WRITERS)]
    threads += [threading.Thread(target=search, args=(n,)) for n in range(SEARCHERS)]
    for thread in threads:
        thread.start()
    try:
        time.sleep(2)
        outage = time.monotonic()
        proxy.down()
        time.sleep(OUTAGE_SECONDS)
        proxy.slow(3 * S3_TIMEOUT)
        time.sleep(OUTAGE_SECONDS)
        proxy.passing()
        recovered = time.monotonic()
        during = {t for t, at in acknowledged.items() if outage <= at < recovered}
        drained = None
        while time.monotonic() - recovered < 120:
            stats = post("{ stats { data } }", {})["data"]["stats"]["data"]
            if stats["outbox_pending"] == 0:
                drained = time.monotonic()
                break
            time.sleep(0.25)
        time.sleep(2)  # writes after recovery
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=120)
    assert not failures, failures[:5]
    assert drained is not None, "the outbox did not drain within 2 minutes of recovery"
    assert during, "no write was acknowledged during the outage"
    slowest = max(seconds for _, seconds, _ in searches)
    assert slowest < S3_TIMEOUT + MARGIN, f"a search took {slowest:.1f} s"
    assert any(degraded for started, _, degraded in searches if outage <= started < recovered)
    lags = sorted(drained - acknowledged[t] for t in during)
    figures = {
        "outage_s": OUTAGE_SECONDS,
        "slow_s": OUTAGE_SECONDS,
        "writes_acknowledged": len(acknowledged),
        "writes_in_outage": len(during),
        "searches": len(searches),
        "searches_degraded": sum(d for _, _, d in searches),
        "search_p99_s": round(sorted(s for _, s, _ in searches)[int(len(searches) * 0.99)], 2),
        "search_max_s": round(slowest, 2),
        "backlog_drained_after_recovery_s": round(drained - recovered, 2),
        "lag_p95_s": round(lags[int(len(lags) * 0.95)], 2),
        "lag_median_s": round(statistics.median(lags), 2),
    }
    print(json.dumps({"object_store_outage": figures}))
    replica.stop()
    with Memory.open(tmp_path / "check", namespace=NAMESPACE, settings=settings) as mem:
        assert mem.stats().outbox_pending == 0 and mem.check().ok
        unfound = [t for t in acknowledged if not soak._found_by_vector(mem, t)]
        assert not unfound, f"{len(unfound)} acknowledged facts not found by vector search"


def test_opening_stats_and_check_answer_within_the_time_limit_while_the_object_store_hangs(
    postgres_url: str, object_store: ObjectStore, tmp_path: Path
) -> None:
    prefix = f"hang{time.monotonic_ns()}"
    direct = Settings(
        store=postgres_url, embedder="hash", s3_timeout=S3_TIMEOUT, **object_store.settings(prefix)
    )
    proxy = FaultProxy(object_store.port).start()
    proxied = direct.model_copy(update={"s3_endpoint": proxy.endpoint})
    keys = open_keys(direct)
    try:
        token, _ = keys.create([NAMESPACE])
    finally:
        keys.close()
    env = {f"GRAPHMEM_{k.upper()}": str(v) for k, v in proxied.model_dump().items() if k in ENV}
    late = Replica("late", {**env, "GRAPHMEM_NAMESPACE": NAMESPACE}, tmp_path)
    try:
        with (
            Memory.open(tmp_path / "a", namespace=NAMESPACE, settings=proxied) as mem,
            Memory.open(tmp_path / "b", namespace=NAMESPACE, settings=direct) as other,
            Memory.open(tmp_path / "c", namespace=NAMESPACE, settings=proxied) as checker,
        ):
            mem.store("Written before the outage", autolink=False)
            # Another replica's writes: reading them needs the object store.
            other.store_many([{"text": f"Written elsewhere {n}"} for n in range(3)])
            proxy.black_hole()
            time.sleep(FOLLOW_EVERY)  # past it, a read follows the vector log: a request
            taken: dict[str, float] = {}  # seconds each answer took
            began = time.monotonic()
            stats = mem.stats()
            taken["stats_s"] = time.monotonic() - began
            assert stats.vectors is None and stats.facts == 4
            assert mem.degraded is not None and "cannot be read" in mem.degraded
            began = time.monotonic()
            report = checker.check()  # a process of its own: its own wait
            taken["check_s"] = time.monotonic() - began
            assert not report.ok and report.vectors is None and report.facts == 4
            assert report.unreadable and "cannot be read" in report.unreadable
            began = time.monotonic()
            with pytest.raises(StorageError, match="did not answer within"):
                Memory.open(tmp_path / "d", namespace=NAMESPACE, settings=proxied)
            taken["open_s"] = time.monotonic() - began
            late.start().wait_ready(timeout=60)  # it serves, though its namespace cannot open
            with httpx.Client(base_url=late.url, headers=bearer(token), timeout=60) as client:
                began = time.monotonic()
                refused = client.post("/graphql", json={"query": SEARCH, "variables": {"q": "x"}})
                taken["refused_by_a_replica_started_meanwhile_s"] = time.monotonic() - began
                assert refused.status_code == 503, refused.text
                assert refused.json()["errors"][0]["extensions"]["code"] == "STORAGE_ERROR"
                proxy.passing()
                deadline = time.monotonic() + 30
                while True:  # the namespace opens at a request once the store answers
                    answer = client.post(
                        "/graphql", json={"query": SEARCH, "variables": {"q": "written"}}
                    )
                    if answer.status_code == 200 or time.monotonic() > deadline:
                        break
                    time.sleep(0.5)
                assert answer.status_code == 200 and len(answer.json()["data"]["search"]) == 4
            assert mem.stats().vectors == 4 and mem.check().ok
    finally:
        late.stop()
        proxy.stop()
    print(json.dumps({"object_store_hanging": {k: round(v, 2) for k, v in taken.items()}}))
    assert max(taken.values()) < S3_TIMEOUT + MARGIN, taken
