"""Several processes on one namespace: each one's in-memory copy of the vector index follows
the writes the others make (through the store's vector log), and writes to the index are made
one process at a time. Two ``Memory`` objects on one directory behave as two processes do (each
has its own SQLite connections, vector table handle, in-memory copy and lock file descriptor);
the last test runs two real ``graphmem serve`` processes."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from graphmem.server.events import FOLLOW_CHANGES_EVERY
from websockets.sync.client import connect
from websockets.typing import Subprotocol

from graphmem import ChangePage, Memory, Settings, memory
from graphmem.errors import Conflict, InvalidInput, NotFound, StorageError
from graphmem.limits import MAX_CHANGES
from graphmem.models import Vectors
from graphmem.storage.sql import store as sql_store
from graphmem.storage.sql.store import SQLTransaction
from graphmem.storage.sqlite.store import SQLiteStore
from graphmem.vectors.index import FOLLOW_EVERY

from ..support.graphql_clients import STORE, WS
from .soak import server


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[Memory, Memory]]:
    settings = Settings(embedder="hash", data_dir=tmp_path)
    with (
        Memory.open(tmp_path, settings=settings) as a,
        Memory.open(tmp_path, settings=settings) as b,
    ):
        yield a, b


def _vector_hits(mem: Memory, query: str) -> list[str]:
    time.sleep(FOLLOW_EVERY)  # a read looks at the vector log at most this often
    return [h.fact.text for h in mem.search(query, mode="vector", limit=3)]


def test_a_write_in_one_process_is_found_by_vector_search_in_the_other(
    pair: tuple[Memory, Memory],
) -> None:
    a, b = pair
    b.search("warm", mode="vector")  # b's copy is loaded and in use before a writes
    a.store("The staging database lives on host db-7")
    assert _vector_hits(b, "staging database host")[0] == "The staging database lives on host db-7"
    fact = b.store("The staging database moved to host db-9").fact
    assert fact is not None
    assert _vector_hits(a, "staging database moved")[0] == fact.text
    b.forget(fact.id)
    assert fact.text not in _vector_hits(a, "staging database moved")
    assert a.check().ok and b.check().ok


def test_a_rebuild_and_a_purge_in_one_process_reach_the_other(
    pair: tuple[Memory, Memory],
) -> None:
    a, b = pair
    kept = a.store("Backups run nightly at two").fact
    gone = a.store("The old VPN password hint is orange").fact
    assert kept is not None and gone is not None
    assert len(_vector_hits(b, "backups nightly")) == 2
    a.reindex()
    assert _vector_hits(b, "backups nightly")[0] == kept.text
    a.purge(gone.id)
    assert gone.text not in _vector_hits(b, "VPN password hint")
    assert b.check().ok


def _copy_equals_table(mem: Memory) -> bool:
    index = mem._vectors
    mirror = index._mirror
    assert mirror is not None
    rows = 0
    for ids, vectors, live in index.scan():
        rows += len(ids)
        if not all(mirror.holds(i, v, bool(x)) for i, v, x in zip(ids, vectors, live, strict=True)):
            return False
    return rows == len(mirror)


def test_a_copy_follows_the_others_rows_from_the_embedding_cache_not_the_table(
    pair: tuple[Memory, Memory], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = pair
    b.search("warm", mode="vector")
    read_back: list[list[str]] = []
    rows = b._vectors.rows

    def counted(ids: Iterable[str]) -> dict[str, tuple[Vectors, bool]]:
        read_back.append(list(ids))
        return rows(read_back[-1])

    monkeypatch.setattr(b._vectors, "rows", counted)
    old = a.store("The release train leaves on Thursdays").fact
    kept = a.store("Invoices are sent on the first of the month").fact
    retracted = a.store("The office plants are watered by Sam").fact
    purged = a.store("The door code is 4711").fact
    assert old is not None and kept is not None and retracted is not None and purged is not None
    new = a.store("The release train leaves on Wednesdays", supersedes=old.id).fact
    assert new is not None
    a.forget(retracted.id)
    a.purge(purged.id)
    b._vectors.catch_up(force=True)
    assert [ids for ids in read_back if ids] == []  # every row came from the log and the cache
    assert _copy_equals_table(b)
    hits = [h.fact.id for h in b.search("release train leaves", mode="vector", limit=5)]
    assert new.id in hits and old.id not in hits  # superseded: not live
    # An entry without the row's state (written by an earlier version) is read back.
    with a._store.transaction(durable=False) as tx:
        tx.log_vectors([kept.id])
    b._vectors.catch_up(force=True)
    assert [ids for ids in read_back if ids] == [[kept.id]]
    assert _copy_equals_table(b)


def test_a_row_written_by_a_process_that_died_before_logging_it_is_not_written_twice(
    pair: tuple[Memory, Memory], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = pair
    b.search("warm", mode="vector")
    log_vectors = SQLTransaction.log_vectors
    assert isinstance(a._store, SQLiteStore)
    dying = a._store._db._writer

    def died_before_logging(tx: SQLTransaction, *args: Any) -> int:
        if tx.conn is dying:  # a wrote the table, then "died": its log entry never commits
            raise StorageError("simulated death before the vector log entry")
        return log_vectors(tx, *args)

    monkeypatch.setattr(SQLTransaction, "log_vectors", died_before_logging)
    orphan = a.store("The boiler is serviced every October").fact
    assert orphan is not None and a._vectors.count() == 1  # in the table, not in the log
    assert b.check().pending_outbox == 1
    assert b._sync.drain(older_than=0) == 1  # as a server does after DRAIN_AFTER_S
    report = b.check()
    assert report.ok and report.vectors == 1, report.to_dict()  # one row, not two
    hits = b.search("boiler serviced", mode="vector", limit=1)
    assert [h.fact.id for h in hits] == [orphan.id]


def test_concurrent_writers_in_two_processes_leave_one_row_per_vector(
    pair: tuple[Memory, Memory],
) -> None:
    a, b = pair
    errors: list[Conflict] = []
    failures: list[BaseException] = []

    def write(mem: Memory, name: str) -> None:
        try:
            written(mem, name)
        except BaseException as exc:  # reported below
            failures.append(exc)

    def written(mem: Memory, name: str) -> None:
        other = "b" if name == "a" else "a"
        for i in range(30):
            mem.store(f"{name} logged event {i} in area {i * 13}")
            if i % 10 == 9:  # and supersede facts the other process wrote
                for f in mem.search(f"{other} logged event", limit=2):
                    try:
                        mem.store(f"{f.fact.text} (revised by {name})", supersedes=f.fact.id)
                    except Conflict as exc:  # both revised it: the second finds it superseded
                        errors.append(exc)

    threads = [threading.Thread(target=write, args=(m, n)) for m, n in ((a, "a"), (b, "b"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert all("not live" in str(e) for e in errors)
    for mem in (a, b):
        time.sleep(FOLLOW_EVERY)
        report = mem.check()
        assert report.ok, report.to_dict()
        assert mem.stats().vectors == report.vectors


def test_two_servers_on_one_data_directory_see_each_others_writes(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with (
        server(data, "hash", tmp_path / "one.log") as (one, _),
        server(data, "hash", tmp_path / "two.log") as (two, _),
    ):
        store = httpx.post(
            one + "/graphql",
            json={
                "query": 'mutation { storeFact(input: {text: "Lena manages the Oslo office"})'
                " { fact { id } } }"
            },
            timeout=30,
        ).json()
        fact_id = store["data"]["storeFact"]["fact"]["id"]
        written = time.monotonic()
        query = '{ search(query: "who manages the Oslo office", mode: VECTOR, limit: 1) { fact { id } } }'
        while True:
            hits = httpx.post(two + "/graphql", json={"query": query}, timeout=30).json()
            if [h["fact"]["id"] for h in hits["data"]["search"]] == [fact_id]:
                break
            assert time.monotonic() - written < 5, "the second server never found the fact"
            time.sleep(0.05)


def test_the_change_log_tells_each_process_what_the_others_committed(
    pair: tuple[Memory, Memory],
) -> None:
    a, b = pair
    start = b.change_position()
    first = a.store("Ana lives in Lisbon", entity="Ana", key="city", value="Lisbon").fact
    second = a.store("Ana lives in Porto", entity="Ana", key="city", value="Porto").fact
    third = a.store("The boiler was serviced in May", autolink=False).fact
    assert first is not None and second is not None and third is not None
    link = a.link(second.id, third.id, "RELATED_TO")
    a.unlink(link.id)
    a.forget(third.id)
    with pytest.raises(NotFound):
        a.forget("no-such-fact")  # rolled back: nothing logged
    a.purge(ids=[second.id])
    page = b.changes_since(start, others_only=True)
    assert [(c.kind, c.id) for c in page.changes] == [
        ("FACT_STORED", first.id),
        ("FACT_STORED", second.id),
        ("FACT_SUPERSEDED", first.id),
        ("FACT_STORED", third.id),
        ("LINK_MADE", link.id),
        ("LINK_REMOVED", link.id),
        ("FACT_FORGOTTEN", third.id),
        ("FACT_PURGED", second.id),
    ]
    assert page.changes[0].at == first.recorded_at.timestamp()
    assert not page.more and not page.missed and page.position == b.change_position()
    assert a.changes_since(start, others_only=True).changes == []  # a heard its own as they came
    assert a.changes_since(start).changes == page.changes
    read, position = [], start
    while True:  # in pages of three
        part = b.changes_since(position, limit=3)
        read += part.changes
        position = part.position
        if not part.more:
            break
    assert read == page.changes
    assert b.changes_since(page.position) == ChangePage([], page.position, False, False)


def test_a_reader_further_behind_than_the_change_log_keeps_is_told_it_missed_some(
    pair: tuple[Memory, Memory], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = pair
    monkeypatch.setattr(sql_store, "CHANGE_LOG_KEPT", 2)
    monkeypatch.setattr(memory, "CHANGE_LOG_KEPT", 2)
    start = b.change_position()
    a.store_many([{"text": f"Reading {n} of the boiler"} for n in range(4)], autolink=False)
    page = b.changes_since(start)
    assert page.missed and [c.kind for c in page.changes] == ["FACT_STORED"] * 2
    assert not b.changes_since(page.position).missed
    for position, limit in ((-1, 10), (True, 10), (0, 0), (0, MAX_CHANGES + 1)):
        with pytest.raises(InvalidInput):
            b.changes_since(position, limit=limit)


def test_a_subscriber_on_one_server_hears_of_the_writes_made_through_the_other(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    with (
        server(data, "hash", tmp_path / "one.log") as (one, _),
        server(data, "hash", tmp_path / "two.log") as (two, _),
        connect(two.replace("http", "ws") + "/graphql", subprotocols=[Subprotocol(WS)]) as ws,
    ):
        ws.send(json.dumps({"type": "connection_init"}))
        assert json.loads(ws.recv(timeout=10))["type"] == "connection_ack"
        query = "subscription { memoryChanged { kind fact { text } } }"
        ws.send(json.dumps({"type": "subscribe", "id": "1", "payload": {"query": query}}))
        metric = 'graphmem_subscribers{namespace="default"} 1.0'
        deadline = time.monotonic() + 10
        while metric not in httpx.get(two + "/metrics", timeout=10).text:
            assert time.monotonic() < deadline, "the subscription never started"
            time.sleep(0.02)
        heard = []
        for url, text in ((one, "Written through the first server"), (two, "And the second")):
            written = time.monotonic()
            response = httpx.post(url + "/graphql", json={"query": STORE, "variables": {"t": text}})
            assert response.json()["data"]["storeFact"]["error"] is None
            message = json.loads(ws.recv(timeout=10))
            heard.append((message["payload"]["data"]["memoryChanged"], time.monotonic() - written))
        assert [change for change, _ in heard] == [
            {"kind": "FACT_STORED", "fact": {"text": "Written through the first server"}},
            {"kind": "FACT_STORED", "fact": {"text": "And the second"}},
        ]
        assert heard[0][1] < 1.0  # read from the change log within FOLLOW_CHANGES_EVERY
        with pytest.raises(TimeoutError):  # the second server's own write was heard once
            ws.recv(timeout=2 * FOLLOW_CHANGES_EVERY)
