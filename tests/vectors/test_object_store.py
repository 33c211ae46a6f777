"""Vector indexes on an S3-compatible object store (moto on loopback): shared by processes that
have nothing else in common, refused clearly when unreachable, never removed for an outage."""

from __future__ import annotations

import logging
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from devtools.cluster import ObjectStore, Unavailable
from devtools.faults import FaultProxy
from graphmem import InvalidInput, Memory, Settings, StorageError
from graphmem.namespace import vector_location
from graphmem.vectors import index
from graphmem.vectors.outbox import DRAIN_AFTER_S

from ..support.graphql_clients import InProcess

#: The s3_timeout of the fault tests, and what a call may take beyond it.
TIMEOUT = 1.0
MARGIN = 1.5


@pytest.fixture
def s3(object_store: ObjectStore) -> dict[str, str]:
    return object_store.settings("v", bucket=object_store.new_bucket())


def test_two_data_directories_share_one_index_on_the_object_store(
    s3: dict[str, str], postgres_url: str, tmp_path: Path
) -> None:
    """Two "machines" (their own data directories) on one PostgreSQL store and one bucket: a
    fact written through one is found by vector search through the other at once, and the
    other's in-memory copy holds it within a second."""
    namespace = f"n{uuid.uuid4().hex[:12]}"
    settings = Settings(embedder="hash", store=postgres_url, **s3)
    with (
        Memory.open(tmp_path / "a", namespace=namespace, settings=settings) as a,
        Memory.open(tmp_path / "b", namespace=namespace, settings=settings) as b,
    ):
        assert b.search("deploy key", mode="vector") == []  # b has just looked at the log
        fact = a.store("The deploy key rotates every Monday", autolink=False).fact
        assert fact is not None
        # At once: b scores what the vector log holds beyond its copy from the embedding cache.
        hits = b.search("The deploy key rotates every Monday", mode="vector")
        assert hits and hits[0].fact.id == fact.id
        deadline = time.monotonic() + 1.0  # and its copy follows within a second
        while b._vectors.unseen():
            assert time.monotonic() < deadline, "the other replica's copy did not follow in 1 s"
            b.search("deploy key", mode="vector")
            time.sleep(0.05)
        assert b.check().ok
    assert not (tmp_path / "a" / namespace / "vectors").exists()  # nothing local


def test_a_table_lost_from_the_bucket_is_rebuilt_from_the_store(
    s3: dict[str, str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = Settings(embedder="hash", **s3)
    with Memory.open(tmp_path, settings=settings) as mem:
        mem.store_many([{"text": f"Service {n} runs in Frankfurt"} for n in range(5)])
        before = [h.fact.id for h in mem.search("service in Frankfurt", mode="vector")]
    vector_location(tmp_path / "default", "default", settings).remove()
    with (
        caplog.at_level(logging.WARNING, "graphmem"),
        Memory.open(tmp_path, settings=settings) as mem,
    ):
        assert "missing: rebuilding it from the store" in caplog.text
        assert mem.stats().vectors == 5 and mem.check().ok
        assert [h.fact.id for h in mem.search("service in Frankfurt", mode="vector")] == before


def test_an_unreachable_object_store_is_refused_at_open_and_nothing_is_removed(
    s3: dict[str, str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = Settings(embedder="hash", **s3)
    with Memory.open(tmp_path, settings=settings) as mem:
        mem.store("Kept through the outage")
    down = settings.model_copy(update={"s3_endpoint": "http://127.0.0.1:1"})
    with pytest.raises(StorageError, match="cannot reach the vector store at s3://"):
        Memory.open(tmp_path, settings=down)
    with (
        caplog.at_level(logging.WARNING, "graphmem"),
        Memory.open(tmp_path, settings=settings) as mem,
    ):
        assert mem.check().ok and mem.search("outage", mode="vector")
    assert "rebuilding" not in caplog.text


@pytest.mark.parametrize("vectors", ["/var/vectors", "s3://", "gs://bucket/prefix"])
def test_a_vectors_setting_that_is_not_an_s3_url_is_refused(vectors: str, tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="s3://bucket/prefix"):
        Memory.open(tmp_path, settings=Settings(embedder="hash", vectors=vectors))


def test_an_outage_of_the_object_store_loses_no_write_and_the_outbox_drains_after(
    tmp_path: Path,
) -> None:
    try:
        server = ObjectStore().start()  # its own: this test stops it
    except Unavailable as exc:
        pytest.skip(f"needs an S3-compatible server: {exc}")
    try:
        mem_settings = Settings(embedder="hash", data_dir=tmp_path, **server.settings("o"))
        with Memory.open(tmp_path, settings=mem_settings) as mem:
            mem.store("Before the outage the deploy ran fine", autolink=False)
            server.stop()
            during = mem.store("During the outage a deploy was made", autolink=False).fact
            assert during is not None and mem.get(during.id) is not None  # committed
            assert mem.stats().outbox_pending == 1  # its vector waits in the outbox
            assert mem.degraded is not None and "vector index" in mem.degraded
            texts = {h.fact.text for h in mem.search("deploy outage")}
            assert texts == {
                "Before the outage the deploy ran fine",
                "During the outage a deploy was made",
            }
            # The waiting write is scored exactly: found by meaning alone, first.
            hits = mem.search("During the outage a deploy was made", mode="vector")
            assert hits[0].fact.id == during.id
            server.start()
            time.sleep(DRAIN_AFTER_S)  # younger rows may be a write still on its way
            assert mem.drain_outbox() == 1  # what the service does every second
            assert mem.stats().outbox_pending == 0 and mem.check().ok and mem.degraded is None
            assert any(h.fact.id == during.id for h in mem.search("deploy made", mode="vector"))
            mem.store("After the outage", autolink=False)
            assert mem.stats().outbox_pending == 0
    finally:
        server.stop()


def test_a_degraded_namespace_says_so_in_every_graphql_answer(
    service: InProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    healthy = service.post('{ search(query: "deploy") { fact { id } } }')[1]
    assert "degraded" not in healthy["extensions"]
    why = "the vector index cannot be written"
    monkeypatch.setattr(Memory, "degraded", property(lambda self: why))
    status, body = service.post('{ search(query: "deploy") { fact { id } } }')
    assert status == 200 and body["data"] == {"search": []}
    assert body["extensions"]["degraded"] == why


@pytest.fixture
def proxy(object_store: ObjectStore) -> Iterator[FaultProxy]:
    """The session's S3-compatible server behind a proxy the test makes slow or down."""
    running = FaultProxy(object_store.port).start()
    try:
        yield running
    finally:
        running.stop()


def _faulty(object_store: ObjectStore, proxy: FaultProxy, tmp_path: Path) -> Settings:
    return Settings(
        embedder="hash",
        data_dir=tmp_path,
        s3_timeout=TIMEOUT,
        **object_store.settings("v", endpoint=proxy.endpoint, bucket=object_store.new_bucket()),
    )


def _open_faulty(object_store: ObjectStore, proxy: FaultProxy, tmp_path: Path) -> Memory:
    """A Memory on the proxied object store, opened while it is healthy: on a busy machine its
    first answer can take longer than TIMEOUT, which refuses the open as unreachable (as it
    should), so the open is tried up to three times before the faults start."""
    for _ in range(2):
        try:
            return Memory.open(tmp_path, settings=_faulty(object_store, proxy, tmp_path))
        except StorageError as exc:
            if not exc.unreachable:
                raise
    return Memory.open(tmp_path, settings=_faulty(object_store, proxy, tmp_path))


def _drained(mem: Memory) -> None:
    """Drain as the service does, every DRAIN_AFTER_S, until the outbox is empty."""
    deadline = time.monotonic() + 60
    while mem.stats().outbox_pending:
        assert time.monotonic() < deadline, "the outbox did not drain in 60 s"
        mem.drain_outbox()
        time.sleep(0.2)


def test_the_fault_proxy_passes_refuses_delays_and_holds_requests(
    object_store: ObjectStore, proxy: FaultProxy
) -> None:
    url = f"{proxy.endpoint}/{object_store.bucket}"

    def get(timeout: float = 10) -> float:
        started = time.monotonic()
        with urllib.request.urlopen(url, timeout=timeout) as answer:
            assert answer.status == 200
        return time.monotonic() - started

    assert get() < 1
    proxy.down()
    with pytest.raises(urllib.error.URLError, match="refused"):
        get()
    proxy.slow(0.5)
    assert 0.5 <= get() < 2
    proxy.black_hole()
    with pytest.raises(TimeoutError):
        get(timeout=0.5)
    proxy.passing()
    assert get() < 1


def test_a_write_to_an_object_store_that_never_answers_is_acknowledged_in_its_timeout(
    object_store: ObjectStore, proxy: FaultProxy, tmp_path: Path
) -> None:
    """A store that accepts connections and never answers held a write for minutes; now the
    write waits s3_timeout once, the next ones not at all, searches answer at once from the
    process's copy of the index and the writes waiting (saying the index cannot be written:
    they do not wait for the write that hangs), and the outbox drains after."""
    with _open_faulty(object_store, proxy, tmp_path) as mem:
        before = mem.store("Before the hang the deploy ran fine", autolink=False).fact
        proxy.black_hole()
        started = time.monotonic()
        first = mem.store("During the hang a deploy was made", autolink=False).fact
        assert time.monotonic() - started < TIMEOUT + MARGIN
        started = time.monotonic()
        second = mem.store("During the hang a rollback was made", autolink=False).fact
        assert time.monotonic() - started < MARGIN  # the index is known not to answer
        assert before and first and second and mem.get(second.id) is not None
        started = time.monotonic()
        hits = mem.search("During the hang a rollback was made", mode="vector")
        assert time.monotonic() - started < MARGIN
        assert {h.fact.id for h in hits} >= {before.id, first.id, second.id}
        assert mem.degraded is not None and "cannot be written" in mem.degraded
        proxy.passing()
        _drained(mem)
        mem.search("deploy", mode="vector")  # a read that answers clears the read's latch
        assert mem.degraded is None and mem.check().ok
        found = {h.fact.id for h in mem.search("a deploy was made", mode="vector")}
        assert {before.id, first.id} <= found


@pytest.mark.parametrize("fault", ["down", "black_hole"])
def test_a_table_beyond_the_in_memory_copy_answers_searches_in_an_outage(
    fault: str,
    object_store: ObjectStore,
    proxy: FaultProxy,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Searches of a table too large to hold in memory read LanceDB on the object store: in an
    outage they answer from the keyword leg and the writes waiting, within s3_timeout, never an
    error, and name the vector leg as degraded until the index answers again."""
    monkeypatch.setattr(index, "IN_MEMORY_MAX_ROWS", 0)  # every search reads LanceDB
    with _open_faulty(object_store, proxy, tmp_path) as mem:
        indexed = mem.store("The billing service runs in Frankfurt", autolink=False).fact
        assert indexed is not None and mem._vectors._mirror is None
        assert mem.search("billing Frankfurt", mode="vector")[0].fact.id == indexed.id
        getattr(proxy, fault)()
        waiting = mem.store("The search service runs in Dublin", autolink=False).fact
        assert waiting is not None
        for query, mode in [("billing Frankfurt", "hybrid"), ("service Dublin", "vector")]:
            started = time.monotonic()
            hits = mem.search(query, mode=mode)
            assert time.monotonic() - started < TIMEOUT + MARGIN
            assert hits, (query, mode)
        assert hits[0].fact.id == waiting.id  # the waiting write, scored exactly
        assert mem.degraded is not None and "vector leg" in mem.degraded
        proxy.passing()
        _drained(mem)
        deadline = time.monotonic() + 30
        while mem.degraded is not None:  # the read still running ends, the next one answers
            assert time.monotonic() < deadline, mem.degraded
            mem.search("billing Frankfurt", mode="vector")
            time.sleep(0.2)
        assert mem.check().ok
        found = [h.fact.id for h in mem.search("service runs in", mode="vector")]
        assert {indexed.id, waiting.id} <= set(found)
