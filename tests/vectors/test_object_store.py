"""Vector indexes on an S3-compatible object store (moto on loopback): shared by processes that
have nothing else in common, refused clearly when unreachable, never removed for an outage."""

from __future__ import annotations

import logging
import time
import uuid
from pathlib import Path

import pytest

from devtools.cluster import ObjectStore, Unavailable
from graphmem import InvalidInput, Memory, Settings, StorageError
from graphmem.namespace import vector_location
from graphmem.vectors.outbox import DRAIN_AFTER_S

from ..support.graphql_clients import InProcess


@pytest.fixture
def s3(object_store: ObjectStore) -> dict[str, str]:
    return object_store.settings(f"t{uuid.uuid4().hex}")


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
