"""The SQLite store and the vector index beside it in the data directory (the embedded default):
migrations, the keyword index, namespaces as directories, the outbox across a crash, check and
reindex, concurrent writers."""

from __future__ import annotations

import io
import shutil
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from graphmem import Memory, Settings, StorageError
from graphmem.storage.sqlite.database import Database, SQLiteConnection
from graphmem.storage.sqlite.migrations import MIGRATIONS, SCHEMA_VERSION

from ..support.clock import Clock


def test_migrations_build_the_schema_from_an_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.sqlite3"
    path.touch()
    db = Database(path)
    conn = db.reader()
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"facts", "facts_fts", "links", "outbox", "embedding_cache", "meta"} <= tables
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    db.close()
    Database(path).close()  # reopening runs nothing and fails nothing


def test_an_older_schema_is_migrated_and_keeps_its_cached_embeddings(tmp_path: Path) -> None:
    path = tmp_path / "v1.sqlite3"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.executescript(MIGRATIONS[0] + "PRAGMA user_version = 1;")
    conn.execute(
        "INSERT INTO embedding_cache VALUES ('hash', 'feature-hash-4', 'abc', 4, x'00', 1.0)"
    )
    conn.close()
    db = Database(path)
    reader = db.reader()
    assert reader.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    rows = reader.execute("SELECT text_hash, dims FROM embedding_cache").fetchall()
    assert [tuple(r) for r in rows] == [("abc", 4)]
    indexes = {r[0] for r in reader.execute("SELECT name FROM sqlite_master WHERE type='index'")}
    assert {"links_source_strength", "links_target_strength", "facts_live_entity"} <= indexes
    columns = [r[2] for r in reader.execute("PRAGMA index_info(links_source_strength)")]
    assert columns == ["source_id", "strength", "target_id"]
    with pytest.raises(sqlite3.IntegrityError), db.write() as w:
        w.execute(
            "INSERT INTO embedding_cache VALUES ('hash', 'feature-hash-4', 'abc', 4, x'01', 2.0)"
        )
    db.close()


def _keyword_index_agrees(path: Path) -> None:
    """FTS5's own check of the index against the facts (raises if a fact is missing or stale)."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("INSERT INTO facts_fts(facts_fts, rank) VALUES ('integrity-check', 1)")
    finally:
        conn.close()


def _keyword_texts(memory: Memory, query: str) -> set[str]:
    return {hit.fact.text for hit in memory.search(query, limit=50, mode="fts")}


def test_every_write_keeps_the_keyword_index_in_step(tmp_path: Path, clock: Clock) -> None:
    settings = Settings(embedder="hash")
    with Memory.open(tmp_path / "a", settings=settings, clock=clock) as mem:
        path = tmp_path / "a" / "default" / "graphmem.sqlite3"
        first = mem.store("Ana lives in Berlin", entity="Ana", key="city", value="Berlin").fact
        results = mem.store_many(
            [
                {"text": "Ana lives in Paris", "entity": "Ana", "key": "city", "value": "Paris"},
                {"text": "The quarterly report is due on Fridays"},
                {"text": "The quarterly report is due on Fridays"},  # a duplicate: NOOP
                {"text": "Bruno prefers green tea in the quarterly review"},
            ]
        )
        assert [r.action for r in results] == ["UPDATE", "ADD", "NOOP", "ADD"]
        _keyword_index_agrees(path)
        assert _keyword_texts(mem, "quarterly") == {
            "The quarterly report is due on Fridays",
            "Bruno prefers green tea in the quarterly review",
        }
        assert _keyword_texts(mem, "Berlin") == set()  # superseded
        assert first is not None and mem.search("Berlin", mode="fts", include_superseded=True)
        mem.forget(results[3].fact.id)  # type: ignore[union-attr]
        mem.purge(results[1].fact.id)  # type: ignore[union-attr]
        _keyword_index_agrees(path)
        assert _keyword_texts(mem, "quarterly") == set()
        mem.store("A quarterly offsite is planned in Lisbon")  # may take the purged position
        _keyword_index_agrees(path)
        assert _keyword_texts(mem, "quarterly") == {"A quarterly offsite is planned in Lisbon"}
        exported = io.StringIO()
        mem.export_jsonl(exported)
    with Memory.open(tmp_path / "b", settings=settings, clock=clock) as copy:
        copy.import_jsonl(io.StringIO(exported.getvalue()).readlines())
        _keyword_index_agrees(tmp_path / "b" / "default" / "graphmem.sqlite3")
        assert _keyword_texts(copy, "Paris Lisbon") == {
            "Ana lives in Paris",
            "A quarterly offsite is planned in Lisbon",
        }


def test_facts_indexed_before_the_schema_change_stay_searchable(tmp_path: Path) -> None:
    """Version 5 indexed facts by trigger; version 6 indexes each batch in one statement."""
    path = tmp_path / "data" / "default" / "graphmem.sqlite3"
    path.parent.mkdir(parents=True)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.executescript("".join(MIGRATIONS[:5]) + "PRAGMA user_version = 5;")
    conn.execute(
        "INSERT INTO facts (id, text, category, importance, decay_class, normalized_hash,"
        " valid_from, recorded_at) VALUES ('old', 'The backup runs nightly at two', 'fact',"
        " 0.5, 'permanent', 'h', 1.0, 1.0)"
    )
    conn.execute("INSERT INTO outbox VALUES ('old', 1.0)")
    conn.close()
    with Memory.open(tmp_path / "data", settings=Settings(embedder="hash")) as mem:
        mem.store("The backup is verified every Monday")
        assert _keyword_texts(mem, "backup") == {
            "The backup runs nightly at two",
            "The backup is verified every Monday",
        }
    _keyword_index_agrees(path)


def test_links_whose_start_was_defaulted_to_the_moment_of_linking_take_the_new_default(
    tmp_path: Path,
) -> None:
    """Before version 7 a link made without valid_from started when it was made; now it holds
    from when both of its facts hold. Given starts, and links of other origins, are kept."""
    path = tmp_path / "data" / "default" / "graphmem.sqlite3"
    path.parent.mkdir(parents=True)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.executescript("".join(MIGRATIONS[:6]) + "PRAGMA user_version = 6;")
    for fact_id, valid_from in (("a", 100.0), ("b", 250.0), ("c", 50.0)):
        conn.execute(
            "INSERT INTO facts (id, text, category, importance, decay_class, normalized_hash,"
            " valid_from, recorded_at) VALUES (?, ?, 'fact', 0.5, 'permanent', ?, ?, 900.0)",
            [fact_id, f"fact {fact_id}", fact_id, valid_from],
        )
    links = [
        ("defaulted", "a", "b", "explicit", 1000.0, 1000.0),
        ("given", "a", "c", "explicit", 1000.0, 60.0),
        ("automatic", "b", "c", "auto_similarity", 1000.0, 1000.0),
    ]
    conn.executemany(
        "INSERT INTO links (id, source_id, target_id, type, strength, origin, recorded_at,"
        " valid_from) VALUES (?, ?, ?, 'RELATED_TO', 1.0, ?, ?, ?)",
        links,
    )
    conn.close()
    Database(path).close()
    reader = sqlite3.connect(path)
    starts = dict(reader.execute("SELECT id, valid_from FROM links").fetchall())
    reader.close()
    assert starts == {"defaulted": 250.0, "given": 60.0, "automatic": 1000.0}


def test_commits_are_copied_into_the_database_file_in_the_background(tmp_path: Path) -> None:
    """A write returns once its commit is in the WAL; a thread of the database's own copies it
    into the file (a checkpoint), and stops when the database is closed."""
    path = tmp_path / "ckpt.sqlite3"
    before = set(threading.enumerate())
    db = Database(path)
    with db.write() as conn:
        conn.execute("CREATE TABLE t (x)")
        conn.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(5_000)])

    def in_file() -> int:  # rows in the database file itself, ignoring the WAL
        raw = sqlite3.connect(f"file:{path}?immutable=1", uri=True)
        try:
            return int(raw.execute("SELECT count(*) FROM t").fetchone()[0])
        except sqlite3.OperationalError:  # the table is not in the file yet
            return 0
        finally:
            raw.close()

    deadline = time.monotonic() + 10
    while in_file() < 5_000 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert in_file() == 5_000
    (thread,) = [t for t in threading.enumerate() if t not in before]
    assert thread.name == "graphmem-checkpoint"
    db.close()
    assert not thread.is_alive()


def test_a_database_from_a_newer_graphmem_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "future.sqlite3"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(StorageError, match="newer"):
        Database(path)


def test_a_file_that_is_not_sqlite_is_refused_with_a_storage_error(tmp_path: Path) -> None:
    (tmp_path / "d" / "default").mkdir(parents=True)
    (tmp_path / "d" / "default" / "graphmem.sqlite3").write_bytes(b"not a database" * 100)
    with pytest.raises(StorageError):
        Memory.open(tmp_path / "d", settings=Settings(embedder="hash"))


def test_namespaces_are_separate_directories(tmp_path: Path) -> None:
    settings = Settings(embedder="hash")
    with Memory.open(tmp_path, namespace="alpha", settings=settings) as a:
        a.store("Alpha's secret plan")
    with Memory.open(tmp_path, namespace="beta", settings=settings) as b:
        assert b.search("secret plan") == []
    assert (tmp_path / "alpha" / "graphmem.sqlite3").exists()
    assert (tmp_path / "beta" / "vectors").is_dir()


@pytest.mark.parametrize("bad", ["", "../escape", "a/b", ".hidden", "x" * 65])
def test_invalid_namespace_names_are_rejected(tmp_path: Path, bad: str) -> None:
    from graphmem import InvalidInput

    with pytest.raises(InvalidInput):
        Memory.open(tmp_path, namespace=bad, settings=Settings(embedder="hash"))


CRASH_SCRIPT = textwrap.dedent(
    """
    import os, signal, sys
    from graphmem import Memory, Settings
    from graphmem.vectors.index import VectorIndex

    mem = Memory.open(sys.argv[1], settings=Settings(embedder="hash"))
    mem.store("Committed before the crash: the backup runs at 02:00")
    def die(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGKILL)
    VectorIndex.upsert = die
    VectorIndex.delete = die
    result = mem.store_many([{"text": "Written to SQLite, never to LanceDB: rotate keys monthly"},
                             {"text": "Also pending: the VPN certificate expires in June"}])
    print("unreachable")
    """
)


@pytest.mark.integration
def test_a_sigkill_between_sqlite_and_lancedb_loses_nothing(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", CRASH_SCRIPT, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == -9, done.stderr
    assert "unreachable" not in done.stdout
    with Memory.open(tmp_path, settings=Settings(embedder="hash")) as mem:
        assert mem.stats().outbox_pending == 0  # replayed on open
        assert mem.stats().facts == 3
        found = {h.fact.text for h in mem.search("rotate keys VPN certificate", mode="vector")}
        assert "Written to SQLite, never to LanceDB: rotate keys monthly" in found
        assert "Also pending: the VPN certificate expires in June" in found
        assert mem.check().ok


def test_check_reports_every_disagreement_and_reindex_repairs_it(mem: Memory) -> None:
    ids = [
        r.fact.id  # type: ignore[union-attr]
        for r in mem.store_many([{"text": f"Server {n} runs Debian"} for n in range(5)])
    ]
    assert mem.check().ok
    vectors = mem._vectors
    vectors.delete([ids[0]])  # a missing vector
    rows = vectors.rows([ids[1]])
    vectors.upsert([ids[1]], rows[ids[1]][0][None, :], [False])  # a stale live flag
    vectors.upsert(["ghost"], rows[ids[1]][0][None, :], [True])  # an orphan
    vectors.upsert([ids[2]], rows[ids[1]][0][None, :], [True])  # a wrong vector
    report = mem.check()
    assert not report.ok
    assert report.missing_vectors == [ids[0]]
    assert report.stale_live_flags == [ids[1]]
    assert report.orphan_vectors == ["ghost"]
    assert report.wrong_vectors == [ids[2]]
    assert mem.reindex() == 5
    assert mem.check().ok


def test_check_reads_the_index_in_batches_and_reports_its_progress(
    mem: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    from graphmem.vectors import index as vectors

    monkeypatch.setattr(vectors, "LOAD_BATCH_ROWS", 3)
    texts = ["Oslo rain", "Lima sun", "Pune heat", "Kyiv snow", "Rome wind", "Nuuk ice", "Baku fog"]
    ids = [r.fact.id for r in mem.store_many([{"text": t} for t in texts]) if r.fact]
    calls: list[tuple[int, int]] = []
    assert mem.check(progress=lambda done, total: calls.append((done, total))).ok
    assert calls == [(3, 7), (6, 7), (7, 7)]
    rows = mem._vectors.rows([ids[0]])
    mem._vectors.upsert([ids[6]], rows[ids[0]][0][None, :], [True])  # wrong, in another batch
    assert mem.check().wrong_vectors == [ids[6]]


def test_reindex_restores_identical_search_results(mem: Memory) -> None:
    mem.store_many(
        [
            {"text": f"Note {n}: the {w} service restarts nightly"}
            for n, w in enumerate(["auth", "billing", "search", "mail", "chat"])
        ]
    )
    before = [(h.fact.id, round(h.score, 6)) for h in mem.search("billing restarts", mode="vector")]
    mem.reindex()
    after = [(h.fact.id, round(h.score, 6)) for h in mem.search("billing restarts", mode="vector")]
    assert after == before


def test_a_lost_vector_directory_is_rebuilt_on_open(tmp_path: Path, clock: Clock) -> None:
    settings = Settings(embedder="hash")
    with Memory.open(tmp_path, settings=settings, clock=clock) as mem:
        mem.store_many(
            [{"text": "The garage door code changed"}, {"text": "Bins go out on Tuesday"}]
        )
        before = [h.fact.id for h in mem.search("garage door", mode="vector")]
    shutil.rmtree(tmp_path / "default" / "vectors")
    with Memory.open(tmp_path, settings=settings, clock=clock) as mem:
        assert mem.check().ok
        assert [h.fact.id for h in mem.search("garage door", mode="vector")] == before


def test_concurrent_writers_and_readers_lose_nothing(mem: Memory) -> None:
    errors: list[BaseException] = []
    stored: list[str] = []
    lock = threading.Lock()

    def writer(n: int) -> None:
        try:
            for i in range(10):
                result = mem.store(f"Writer {n} wrote entry {i} about the heat pump")
                with lock:
                    stored.append(result.fact.id)  # type: ignore[union-attr]
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def reader() -> None:
        try:
            for _ in range(10):
                mem.search("heat pump entry")
                mem.lookup("nobody")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    threads += [threading.Thread(target=reader) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(set(stored)) == 40
    assert mem.stats().facts == 40
    assert mem.check().ok


def test_reindex_recovers_a_damaged_vector_directory(tmp_path: Path, clock: Clock) -> None:
    settings = Settings(embedder="hash")
    with Memory.open(tmp_path, settings=settings, clock=clock) as mem:
        mem.store("The boiler service is due in March")
    vectors = tmp_path / "default" / "vectors"
    for path in vectors.rglob("*"):
        if path.is_file():
            path.write_bytes(b"garbage")
    with Memory.open(tmp_path, settings=settings, clock=clock, reindex=True) as mem:
        assert mem.check().ok
        assert [h.fact.text for h in mem.search("boiler", mode="vector")] == [
            "The boiler service is due in March"
        ]


def test_a_different_embedder_is_refused_until_reindexed(tmp_path: Path, clock: Clock) -> None:
    from graphmem import EmbedderMismatch

    with Memory.open(tmp_path, settings=Settings(embedder="hash"), clock=clock) as mem:
        mem.store("The router's admin page is at 192.168.1.1")
    other = Settings(embedder="hash", hash_dimensions=128)
    with pytest.raises(EmbedderMismatch, match="graphmem reindex"):
        Memory.open(tmp_path, settings=other, clock=clock)
    # The refusal changed nothing: the original embedder still opens it.
    with Memory.open(tmp_path, settings=Settings(embedder="hash"), clock=clock) as mem:
        assert mem.check().ok
    with Memory.open(tmp_path, settings=other, clock=clock, reindex=True) as mem:
        assert mem.embedder.dimensions == 128
        assert mem.check().ok
        assert [h.fact.text for h in mem.search("router admin page", mode="vector")] == [
            "The router's admin page is at 192.168.1.1"
        ]
    with Memory.open(tmp_path, settings=other, clock=clock) as mem:  # now the recorded one
        assert mem.stats().vectors == 1


def test_a_lookup_reads_its_rows_in_order_from_an_index(tmp_path: Path) -> None:
    """An entity with thousands of facts: lookup walks the entity's index entries in its order
    and stops at the limit, instead of reading and sorting every fact of the entity."""
    from graphmem.storage.sql import reads
    from graphmem.temporal import TimeScope

    with Memory.open(tmp_path, embedder="hash") as mem:
        mem.store_many(
            [
                {"text": f"Ada note {i}", "entity": "Ada", "confidence": (i % 7) / 7}
                for i in range(300)
            ]
        )
        top = mem.lookup("ada", limit=5)
        assert [f.confidence for f in top] == [6 / 7] * 5
    conn = sqlite3.connect(tmp_path / "default" / "graphmem.sqlite3", factory=SQLiteConnection)
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    scope = TimeScope.resolve(time.time())
    reads.lookup(conn, "Ada", scope, key=None, tag=None, include_superseded=False, limit=5)
    plan = " ".join(r[3] for r in conn.execute(f"EXPLAIN QUERY PLAN {statements[-1]}"))
    assert "facts_entity_rank" in plan and "TEMP B-TREE" not in plan
    conn.close()


def test_the_embedded_default_needs_no_postgresql_driver(tmp_path: Path) -> None:
    # A fresh interpreter where psycopg cannot be imported, as after `pip install graphmem`
    # without the `postgres` extra: the service, the engine and SQLite work; a postgresql://
    # store says how to get its driver.
    script = f"""
import sys
sys.modules["psycopg"] = None
import graphmem.server.http.app  # the service, by its installed name
from graphmem import Memory, Settings, StorageError
with Memory.open({str(tmp_path)!r}, settings=Settings(embedder="hash")) as mem:
    mem.store("Ana lives in Lisbon")
    assert mem.search("Lisbon")[0].fact.text == "Ana lives in Lisbon"
try:
    Memory.open({str(tmp_path)!r}, settings=Settings(embedder="hash", store="postgresql://db/x"))
except StorageError as exc:
    print(exc.message)
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "pip install 'graphmem[postgres]'" in done.stdout
