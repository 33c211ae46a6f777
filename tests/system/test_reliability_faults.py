"""Faults of the disk and of the vector index: a full disk, a read-only data directory, a lost or
damaged LanceDB directory, a vector write that fails after SQLite committed, and reads that run
past their time limit. Each must end in a clear error or a repair, never in lost or half-written
data."""

from __future__ import annotations

import logging
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from graphmem.server import create_app

from graphmem import Memory, QueryTimeout, Settings, StorageError
from graphmem.files import VECTOR_DIR
from graphmem.storage.sqlite.store import SQLITE_FILE

from ..support.clock import Clock
from ..support.connections import read_connection
from ..support.graphql_clients import InProcess

SETTINGS = Settings(embedder="hash")
STORE = "mutation($t: String!) { storeFact(input: {text: $t}) { fact { id } error { code } } }"


def _mount(target: Path, options: str) -> bool:
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(target)],
        capture_output=True,
        check=False,
    )
    return done.returncode == 0


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs (root only: mounting is how a full disk is made for real)."""
    target = tmp_path / "disk"
    target.mkdir()
    if os.geteuid() != 0 or not _mount(target, "size=4m"):
        pytest.skip("a full disk is simulated with a small tmpfs, which needs root to mount")
    yield target
    subprocess.run(["umount", "-l", str(target)], check=False)


def _remount(target: Path, options: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{options}", str(target)], check=True)


def _integrity(directory: Path) -> str:
    conn = sqlite3.connect(directory / "default" / SQLITE_FILE)
    try:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        conn.close()


def _texts(mem: Memory) -> list[str]:
    return [f.text for _, f in mem.facts(first=1000).items]


def test_a_full_disk_fails_writes_clearly_and_loses_no_acknowledged_one(
    small_disk: Path, clock: Clock
) -> None:
    acknowledged: list[str] = []
    failure: StorageError | None = None
    with Memory.open(small_disk, settings=SETTINGS, clock=clock) as mem:
        for batch in range(300):
            texts = [
                f"Batch {batch} note {n}: " + " ".join(f"w{batch}x{n}x{k}" for k in range(300))
                for n in range(5)
            ]
            try:
                mem.store_many([{"text": t, "classify": False} for t in texts])
            except StorageError as exc:
                failure = exc
                break
            acknowledged += texts
            clock.advance(1)
        assert failure is not None, "the disk never filled"
        assert "disk is full" in failure.message and "nothing was written" in failure.message
        assert sorted(_texts(mem)) == sorted(acknowledged)  # the failed batch left nothing
        _remount(small_disk, "size=64m")  # space freed: the same process writes again
        mem.store("Written once the disk had room again")
    assert _integrity(small_disk) == "ok"
    with Memory.open(small_disk, settings=SETTINGS, clock=clock) as mem:
        assert sorted(_texts(mem)) == sorted(
            [*acknowledged, "Written once the disk had room again"]
        )
        assert mem.check().ok
        hits = mem.search(acknowledged[0], mode="vector", limit=1)
        assert [h.fact.text for h in hits] == [acknowledged[0]]


def test_the_server_answers_a_full_disk_with_a_storage_error(
    small_disk: Path, clock: Clock
) -> None:
    settings = Settings(embedder="hash", data_dir=small_disk, max_body_bytes=10_485_760)
    with InProcess(create_app(settings, clock=clock)) as client:
        codes = set()
        for n in range(300):
            status, body = client.post(STORE, {"t": f"Report {n}:" + " quarterly figures" * 500})
            assert status == 200, body  # never a 500
            if body.get("errors"):
                codes.add(body["errors"][0]["extensions"]["code"])
                assert "disk is full" in body["errors"][0]["message"]
                break
        assert codes == {"STORAGE_ERROR"}
        assert client.data("{ namespace }") == {"namespace": "default"}  # reads still work


def test_a_read_only_data_directory_is_refused_with_a_clear_error(
    tmp_path: Path, clock: Clock
) -> None:
    with Memory.open(tmp_path, settings=SETTINGS, clock=clock) as mem:
        mem.store("Stored while the disk could be written")
    read_only = _read_only(tmp_path)
    try:
        with pytest.raises(StorageError, match="read-only"):
            Memory.open(tmp_path, settings=SETTINGS, clock=clock)
        with pytest.raises(StorageError, match="cannot create the namespace directory"):
            Memory.open(tmp_path, namespace="another", settings=SETTINGS, clock=clock)
        app = create_app(Settings(embedder="hash", data_dir=tmp_path), clock=clock)
        with pytest.raises(StorageError, match="read-only"), InProcess(app):
            pass  # the server does not start on storage it cannot write
    finally:
        read_only.undo()
    with Memory.open(tmp_path, settings=SETTINGS, clock=clock) as mem:
        assert _texts(mem) == ["Stored while the disk could be written"]
        assert mem.check().ok


def test_a_damaged_namespace_is_answered_with_503_and_the_others_keep_working(
    tmp_path: Path, clock: Clock
) -> None:
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / SQLITE_FILE).write_bytes(b"this is not a database" * 200)
    with InProcess(create_app(Settings(embedder="hash", data_dir=tmp_path), clock=clock)) as client:
        status, body = client.post("{ namespace }", None, {"X-Graphmem-Namespace": "broken"})
        assert status == 503 and body["errors"][0]["extensions"]["code"] == "STORAGE_ERROR"
        assert "damaged" in body["errors"][0]["message"]
        assert client.data("{ namespace }") == {"namespace": "default"}


class _ReadOnly:
    """A directory made read-only: a read-only bind mount as root (root ignores permissions),
    else its permission bits."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.mounted = os.geteuid() == 0
        if self.mounted:
            subprocess.run(["mount", "--bind", str(path), str(path)], check=True)
            subprocess.run(["mount", "-o", "remount,bind,ro", str(path)], check=True)
        else:
            self.modes = {p: p.stat().st_mode for p in [path, *path.rglob("*")] if p.is_dir()}
            for p in self.modes:
                p.chmod(0o555)

    def undo(self) -> None:
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.path)], check=True)
        else:
            for p, mode in self.modes.items():
                p.chmod(mode)


def _read_only(path: Path) -> _ReadOnly:
    return _ReadOnly(path)


# ------------------------------------------------------------------------------------ vector index


def _indexed(tmp_path: Path, clock: Clock) -> list[tuple[str, float]]:
    """A namespace of a few facts; returns a vector search's (id, score) list."""
    with Memory.open(tmp_path, settings=SETTINGS, clock=clock) as mem:
        mem.store_many(
            [
                {"text": f"Ticket {n}: the {w} queue is slow after deploys"}
                for n, w in enumerate(["mail", "billing", "search", "auth", "upload"])
            ]
        )
        return _vector_hits(mem)


def _vector_hits(mem: Memory) -> list[tuple[str, float]]:
    return [(h.fact.id, round(h.score, 6)) for h in mem.search("billing queue", mode="vector")]


@pytest.mark.parametrize(
    "damage",
    [
        "delete the directory",
        "delete the data files",
        "garble every file",
        "truncate the manifests",
    ],
)
def test_a_lost_or_damaged_vector_index_is_detected_and_rebuilt_to_the_same_results(
    tmp_path: Path, clock: Clock, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    before = _indexed(tmp_path, clock)
    vectors = tmp_path / "default" / VECTOR_DIR
    files = [p for p in vectors.rglob("*") if p.is_file()]
    if damage == "delete the directory":
        shutil.rmtree(vectors)
    elif damage == "delete the data files":
        for p in files:
            if p.suffix == ".lance":
                p.unlink()
    elif damage == "garble every file":
        for p in files:
            p.write_bytes(b"garbage" * 10)
    else:
        for p in files:
            if p.suffix == ".manifest":
                p.write_bytes(p.read_bytes()[:20])
    with caplog.at_level(logging.WARNING, logger="graphmem"):
        mem = Memory.open(tmp_path, settings=SETTINGS, clock=clock)
    with mem:
        assert "rebuilding it from the store" in caplog.text  # the service says so
        assert mem.check().ok
        assert _vector_hits(mem) == before


def test_an_index_missing_rows_is_reported_on_open_and_reindex_restores_the_same_results(
    tmp_path: Path, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    before = _indexed(tmp_path, clock)
    with Memory.open(tmp_path, settings=SETTINGS, clock=clock) as mem:
        mem._vectors.delete([before[0][0]])  # as a stale copy of the index would lack it
    with caplog.at_level(logging.WARNING, logger="graphmem"):
        mem = Memory.open(tmp_path, settings=SETTINGS, clock=clock)
    with mem:
        assert "holds 4 vectors where the store has 5" in caplog.text
        assert "graphmem reindex" in caplog.text
        report = mem.check()
        assert report.missing_vectors == [before[0][0]] and not report.ok
        assert _vector_hits(mem) != before
        mem.reindex()
        assert mem.check().ok
        assert _vector_hits(mem) == before


def test_a_failed_vector_write_keeps_the_committed_fact_and_heals_on_the_next_write(
    mem: Memory, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patch:
        patch.setattr(mem._vectors, "upsert", broken)
        with caplog.at_level(logging.ERROR, logger="graphmem"):
            result = mem.store("Committed while LanceDB could not be written")
    assert result.action == "ADD" and "could not be written" in caplog.text
    assert mem.stats().outbox_pending == 1
    assert [h.fact.text for h in mem.search("committed LanceDB", mode="fts")] == [
        "Committed while LanceDB could not be written"
    ]
    mem.store("The next write, once the index can be written again")
    report = mem.check()
    assert report.ok and report.pending_outbox == 0
    hits = mem.search("Committed while LanceDB could not be written", mode="vector", limit=1)
    assert [h.fact.text for h in hits] == ["Committed while LanceDB could not be written"]


def test_replaying_the_outbox_applies_vector_writes_left_pending(
    mem: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patch:
        patch.setattr(mem._vectors, "upsert", broken)
        mem.store("Stored while the index was full")
    assert mem.check().pending_outbox == 1
    assert mem.replay_outbox() == 1  # once the disk has room again, without another write
    assert mem.check().ok
    hits = mem.search("Stored while the index was full", mode="vector", limit=1)
    assert [h.fact.text for h in hits] == ["Stored while the index was full"]


def test_a_retried_vector_write_never_duplicates_a_row(
    mem: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = mem._vectors._table
    real = type(table).merge_insert

    def failing_merge(self: object, on: str) -> object:
        raise RuntimeError("lance error: simulated failure after the append committed")

    with monkeypatch.context() as patch:
        patch.setattr(type(table), "merge_insert", failing_merge)
        first = mem.store("Appended, then the merge of the other row failed")
        assert first.fact is not None
        # A supersession touches the new row (appended) and the old one (merged): merge fails.
        mem.store("Ana lives in Rome", entity="Ana", key="city", value="Rome")
        mem.store("Ana lives in Oslo", entity="Ana", key="city", value="Oslo")
    assert type(table).merge_insert is real
    mem.store("Written once merges work again")
    report = mem.check()
    assert report.duplicate_vectors == [] and report.ok


# ------------------------------------------------------------------------------------ time limits


def test_a_read_past_its_time_limit_is_stopped_with_a_timeout(mem: Memory) -> None:
    mem.store_many([{"text": f"Sensor {n} reported a reading"} for n in range(200)])
    conn = read_connection(mem)  # this thread's read connection, which the limit stops
    slow = "SELECT count(*) FROM facts a, facts b, facts c"  # 8 million rows
    with pytest.raises(QueryTimeout), mem.time_limit(seconds=0.05):
        conn.execute(slow).fetchone()
    with mem.time_limit(seconds=0.05):  # fast reads pass, and the connection still works afterwards
        assert len(mem.search("sensor reading", limit=5)) == 5
    assert conn.execute("SELECT count(*) FROM facts").fetchone()[0] == 200
    # A spent budget stops the next read that does any real work.
    with mem.time_limit(seconds=0), pytest.raises(QueryTimeout):
        mem.search("sensor reading", mode="vector")


def test_the_server_stops_a_request_whose_reads_outrun_the_time_limit(
    tmp_path: Path, clock: Clock
) -> None:
    with Memory.open(tmp_path, settings=SETTINGS, clock=clock) as mem:
        mem.store_many([{"text": f"Invoice {n} was paid late"} for n in range(300)])
    query = '{ search(query: "invoice paid") { fact { id } } }'
    strict = Settings(embedder="hash", data_dir=tmp_path, sql_time_limit=1e-6)
    with InProcess(create_app(strict, clock=clock)) as client:
        status, body = client.post(query)
        assert status == 200
        assert body["errors"][0]["extensions"]["code"] == "TIMEOUT"
        assert "time limit" in body["errors"][0]["message"]
        assert client.data("{ namespace }") == {"namespace": "default"}  # no SQL, no limit hit
    with InProcess(create_app(Settings(embedder="hash", data_dir=tmp_path), clock=clock)) as client:
        assert len(client.data(query)["search"]) == 10


def test_an_mcp_tool_call_whose_reads_outrun_the_time_limit_is_a_timeout_tool_error(
    tmp_path: Path, clock: Clock
) -> None:
    import anyio
    from graphmem.server.mcp import build_server
    from mcp import Client

    strict = Settings(embedder="hash", sql_time_limit=1e-6)
    with Memory.open(tmp_path, settings=strict, clock=clock) as memory:
        memory.store_many([{"text": f"Invoice {n} was paid late"} for n in range(300)])

        async def run() -> tuple[bool, dict[str, object]]:
            async with Client(build_server(lambda ctx: (memory, None))) as client:
                result = await client.call_tool("memory_recall", {"query": "invoice paid late"})
                return result.is_error, result.structured_content

        is_error, content = anyio.run(run)
    assert is_error and content["error"] == {
        "code": "TIMEOUT",
        "message": "the query ran past its time limit and was stopped",
    }
