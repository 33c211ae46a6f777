"""What the PostgreSQL store adds to the conformance suite: replicas sharing a namespace, time
from the database, namespaces kept apart by row-level security as well as by the views, bad
URLs and credentials refused at start, and a server that goes away and comes back."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

import psycopg
import pytest
from click.testing import CliRunner
from graphmem.server.commands import cli as service_cli
from graphmem.server.http.app import create_app

from devtools.cluster import ROLE, Postgres, Unavailable, free_port
from graphmem import (
    InvalidInput,
    Memory,
    QueryTimeout,
    Settings,
    StorageError,
    memory,
)
from graphmem.cli import cli
from graphmem.storage import open_keys
from graphmem.storage.interface import EntitySignature
from graphmem.storage.postgres import dialect as pgsql
from graphmem.storage.postgres import redacted
from graphmem.storage.postgres import schema as pgschema
from graphmem.storage.postgres.keyword import CommonWords
from graphmem.storage.postgres.store import PostgresStore
from graphmem.storage.sql import entities as sql_entities
from graphmem.storage.sql import keyword
from graphmem.storage.sql import store as sql_store
from graphmem.storage.sql.dialect import Dialect
from graphmem.vectors.index import FOLLOW_EVERY, ROW_LIVE, VectorIndex
from graphmem.vectors.mirror import Mirror

from ..support.graphql_clients import InProcess


@pytest.fixture
def url(postgres: Postgres) -> str:
    return postgres.database(f"p{uuid.uuid4().hex}")


def start_server(auth: str = "trust") -> Postgres:
    """A server of the test's own (skipped, saying why, without PostgreSQL)."""
    try:
        return Postgres(auth=auth).start()
    except Unavailable as exc:
        pytest.skip(f"needs PostgreSQL: {exc}")


def open_memory(url: str, directory: Path, namespace: str = "default") -> Memory:
    return Memory.open(
        directory, namespace=namespace, settings=Settings(embedder="hash", store=url)
    )


#: The entity signature of a store without entity tables.
NO_ENTITIES: Final = EntitySignature(0, None, 0, None, None, None, None)


@contextmanager
def schema_version(version: int) -> Iterator[None]:
    """Inside the block, databases are made (or migrated) to ``version`` only, and the SQL is
    spoken as to that version (before migration 4, without the computed columns; before the
    entities migration, writes count and read no entity names: the migration counts them from
    the facts).
    The vector log has its rows' states and the change log exists at every version: the code
    reads and writes them, and migrations 5 and 6, which add them, run again harmlessly."""
    entities = pgschema.MIGRATIONS.index(pgschema.ENTITIES) + 1
    migrations = pgschema.MIGRATIONS[:version]
    later = [m for m in (pgschema.VECTOR_LOG_STATE, pgschema.CHANGE_LOG) if m not in migrations]
    if later:
        migrations = (*migrations[:-1], ";\n".join([migrations[-1], *later]))
    with pytest.MonkeyPatch.context() as before:
        before.setattr(pgschema, "MIGRATIONS", migrations)
        before.setattr(pgschema, "SCHEMA_VERSION", version)
        if version < 4:  # the expressions as written, not the columns that keep them
            for name in ("lower_entity", "lower_key", "dated"):
                before.setattr(pgsql.PostgresDialect, name, getattr(Dialect, name))
        if version < entities:  # no entity tables: no names counted, none read
            before.setattr(sql_entities, "count_in", lambda conn, inserts, now: None)
            before.setattr(sql_entities, "names", lambda conn, **bounds: [])
            before.setattr(sql_entities, "aliases", lambda conn: [])
            before.setattr(sql_entities, "signature", lambda conn: NO_ENTITIES)
        yield


def test_two_replicas_see_each_others_writes_at_once_in_commit_order(
    url: str, tmp_path: Path
) -> None:
    with open_memory(url, tmp_path / "a") as a, open_memory(url, tmp_path / "b") as b:
        stamps = []
        for n in range(6):
            writer = (a, b)[n % 2]
            fact = writer.store(f"Deploy number {n} went out", autolink=False).fact
            assert fact is not None
            stamps.append(fact.recorded_at)
            # Acknowledged by one replica, read at once by the other.
            assert (b, a)[n % 2].get(fact.id) is not None
        assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)  # strictly
        moved = a.store("Ana lives in Berlin", entity="Ana", key="city", value="Berlin").fact
        assert moved is not None
        b.store("Ana lives in Paris", entity="Ana", key="city", value="Paris")
        assert [f.value for f in a.lookup("Ana", key="city")] == ["Paris"]
        assert a.get(moved.id) is None and a.get(moved.id, known_at=moved.recorded_at)


def test_transaction_time_is_the_databases_whatever_the_replicas_clock(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ahead, behind = PostgresStore(url, "skewed"), PostgresStore(url, "skewed")  # no clock given
    real = time.time
    try:
        stamps = []
        for store, skew in ((ahead, 5.0), (behind, -5.0), (ahead, 5.0)):
            monkeypatch.setattr(time, "time", lambda skew=skew: real() + skew)
            with store.transaction() as tx:
                stamps.append(tx.now)
        monkeypatch.setattr(time, "time", real)
        with psycopg.connect(url) as conn:
            row = conn.execute("SELECT extract(epoch FROM clock_timestamp())").fetchone()
        assert row is not None
        assert all(abs(float(row[0]) - s) < 1 for s in stamps)  # the database's, not +-5 s
        assert stamps == sorted(stamps) and len(set(stamps)) == 3
        assert ahead.now() >= stamps[-1] and behind.now() >= stamps[-1]
    finally:
        ahead.close()
        behind.close()


def test_row_level_security_keeps_namespaces_apart_beneath_the_views(
    url: str, tmp_path: Path
) -> None:
    with open_memory(url, tmp_path, "alice") as alice:
        alice.store("Alice keeps her notes in Obsidian")
    with open_memory(url, tmp_path, "bob") as bob:
        assert bob.search("Obsidian notes") == []
    with psycopg.connect(url, autocommit=True) as conn:
        # The base table, past the views: nothing without the namespace setting, only the
        # setting's own namespace with it.
        assert conn.execute("SELECT count(*) FROM gm_facts").fetchone() == (0,)
        conn.execute("SELECT set_config('graphmem.namespace', 'bob', false)")
        assert conn.execute("SELECT count(*) FROM gm_facts").fetchone() == (0,)
        conn.execute("SELECT set_config('graphmem.namespace', 'alice', false)")
        assert conn.execute("SELECT count(*) FROM gm_facts").fetchone() == (1,)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(
                "INSERT INTO gm_facts (namespace, id, text, category, importance,"
                " decay_class, normalized_hash, valid_from, recorded_at) VALUES"
                " ('bob', 'x', 'planted', 'other', 0.5, 'stable', 'h', 0, 0)"
            )


@pytest.mark.parametrize(
    ("store", "error", "says"),
    [
        ("mysql://localhost/graphmem", InvalidInput, "postgresql://"),
        ("postgresql://graphmem:wrong-password@127.0.0.1:1/graphmem", StorageError, "cannot"),
    ],
)
def test_a_bad_store_url_or_credentials_fail_at_open_without_showing_the_password(
    tmp_path: Path, store: str, error: type[Exception], says: str
) -> None:
    with pytest.raises(error) as raised:
        open_memory(store, tmp_path)
    assert says in str(raised.value) and "wrong-password" not in str(raised.value)


def test_passwords_are_checked_when_the_server_asks_for_them(tmp_path: Path) -> None:
    """A server that checks passwords (scram) refuses a wrong one with a clear error."""
    server = start_server(auth="scram-sha-256")
    try:
        wrong = server.url.replace(f"{ROLE}:{ROLE}@", f"{ROLE}:wrong-password@")
        with pytest.raises(StorageError, match="password authentication failed") as raised:
            open_memory(wrong, tmp_path / "data")
        assert "wrong-password" not in str(raised.value)
        with open_memory(server.url, tmp_path / "data") as mem:
            assert mem.store("Scram works").fact is not None
    finally:
        server.remove()


@pytest.fixture
def own_server() -> Iterator[Postgres]:
    server = start_server()
    try:
        yield server
    finally:
        server.remove()


def test_a_server_that_goes_away_fails_requests_fast_and_they_recover_when_it_returns(
    own_server: Postgres, tmp_path: Path
) -> None:
    with open_memory(own_server.url, tmp_path / "data") as mem:
        kept = mem.store("Written before the outage", autolink=False).fact
        assert kept is not None
        own_server.stop()
        for attempt in (lambda: mem.store("Written during the outage"), lambda: mem.get(kept.id)):
            started = time.monotonic()
            with pytest.raises(StorageError):
                attempt()
            assert time.monotonic() - started < 10
        own_server.start()
        assert mem.get(kept.id) is not None  # the same Memory, without reopening
        after = mem.store("Written after the outage", autolink=False).fact
        assert after is not None and mem.get(after.id) is not None
        texts = {hit.fact.text for hit in mem.search("outage", mode="fts")}
        assert texts == {"Written before the outage", "Written after the outage"}


def test_a_read_past_its_time_limit_is_cancelled_by_the_server(url: str) -> None:
    store = PostgresStore(url, "slow")
    try:
        with store.time_limit(time.monotonic() + 0.2):
            started = time.monotonic()
            with pytest.raises(QueryTimeout):
                store._read().execute("SELECT pg_sleep(5)")
            assert time.monotonic() - started < 2
        store._read().execute("SELECT pg_sleep(0.3)")  # the limit ended with its block
    finally:
        store.close()


def test_backup_and_restore_refuse_a_postgresql_store_and_say_what_to_use(
    url: str, tmp_path: Path
) -> None:
    for command in (["backup", str(tmp_path / "copy")], ["restore", str(tmp_path)]):
        result = CliRunner().invoke(
            cli, ["--data-dir", str(tmp_path / "data"), *command], env={"GRAPHMEM_STORE": url}
        )
        assert isinstance(result.exception, InvalidInput) and "pg_dump" in str(result.exception)
    assert not (tmp_path / "copy").exists()


def test_api_keys_live_in_the_database_hashed_and_every_replica_sees_them(
    url: str, tmp_path: Path
) -> None:
    settings = Settings(store=url, data_dir=tmp_path)
    first, second = open_keys(settings), open_keys(settings)  # two replicas' key stores
    try:
        token, key = first.create(["alice"], label="agent")
        assert second.any_active() and second.authenticate(token) == key
        with psycopg.connect(url) as conn:
            rows = conn.execute("SELECT secret_hash, namespaces FROM gm_api_keys").fetchall()
        secret = token.split("_", 2)[2]
        assert len(rows) == 1 and secret not in repr(rows)
        first.revoke(key.id)
        assert second.authenticate(token) is None and not second.any_active()
    finally:
        first.close()
        second.close()


def test_a_thread_reads_every_namespace_through_one_connection_and_never_mixes_them(
    url: str, tmp_path: Path
) -> None:
    names = [f"team{n}" for n in range(6)]
    memories = [open_memory(url, tmp_path / name, name) for name in names]
    try:
        for name, mem in zip(names, memories, strict=True):
            mem.store(f"Only {name} knows the launch code", autolink=False)
        for _ in range(2):  # the thread's reader moves between namespaces and back
            for name, mem in zip(names, memories, strict=True):
                assert [h.fact.text for h in mem.search("launch code", mode="fts")] == [
                    f"Only {name} knows the launch code"
                ]
        first, second = memories[0]._store.database, memories[1]._store.database  # type: ignore[attr-defined]
        with first.snapshot() as conn:  # inside a transaction of one namespace ...
            assert second.reader() is not conn  # ... another gets a connection of its own
            assert len(second.reader().execute("SELECT id FROM facts").fetchall()) == 1
            assert len(conn.execute("SELECT id FROM facts").fetchall()) == 1
        with psycopg.connect(url) as admin:
            row = admin.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND application_name = 'graphmem'"
            ).fetchone()
        assert row is not None and row[0] <= len(names) + 3  # a writer each, few readers
    finally:
        for mem in memories:
            mem.close()


def test_a_reader_closed_by_another_thread_is_not_reopened_behind_its_back(
    url: str, tmp_path: Path
) -> None:
    """The last namespace sharing a thread's reader closes it from another thread while this
    thread reads: the read fails as on a closed memory, and no new connection is opened that
    nothing would close."""
    with open_memory(url, tmp_path) as mem:
        database = mem._store.database  # type: ignore[attr-defined]
        reader = database.reader()
        opened: list[object] = []
        reopen = reader._reopen

        def counted(namespace: str) -> Any:
            opened.append(namespace)
            return reopen(namespace)

        reader._reopen = counted
        closer = threading.Thread(target=reader.close)
        closer.start()
        closer.join()
        with pytest.raises(StorageError):
            reader.execute("SELECT 1")
        assert opened == [] and reader.raw.closed


def test_the_keyword_postings_follow_every_write_and_rank_as_the_index_does(
    url: str, tmp_path: Path
) -> None:
    with open_memory(url, tmp_path) as mem:
        moved = mem.store("Ana moved to Berlin in May", autolink=False).fact
        mem.store("Ana lives in Paris", entity="Ana", key="city", value="Paris", autolink=False)
        mem.store("Ana lives in Lisbon", entity="Ana", key="city", value="Lisbon", autolink=False)
        mem.store("Bob keeps bees in Lisbon", tags=["hobby"], autolink=False)
        assert moved is not None
        mem.purge(moved.id)
        posted = _postings_as_indexed(url)
        assert "berlin" not in {row[0] for row in posted}  # the purged fact's words are gone
        hits = mem.search("Lisbon", mode="fts", include_superseded=True)
        assert hits[0].fact.text == "Ana lives in Lisbon"  # value and text


def test_the_postings_migration_indexes_the_facts_already_stored(url: str, tmp_path: Path) -> None:
    with schema_version(2):  # a database of the version before the postings
        with open_memory(url, tmp_path, namespace="early") as mem:
            mem.store_many([{"text": f"Deploy {n} of the billing service"} for n in range(30)])
            mem.store("Ana lives in Lisbon", entity="Ana", key="city", value="Lisbon")
        with psycopg.connect(url, autocommit=True) as conn:
            assert conn.execute("SELECT to_regclass('gm_postings')").fetchone() == (None,)
    with open_memory(url, tmp_path, namespace="early") as mem:  # migrates
        assert len(_postings_as_indexed(url, "early")) > 30
        assert mem.search("Lisbon", mode="fts")[0].fact.text == "Ana lives in Lisbon"
        assert len(mem.search("billing deploy", mode="fts", limit=50)) == 30


def test_the_computed_columns_migration_fills_them_for_facts_already_stored(
    url: str, tmp_path: Path
) -> None:
    with schema_version(3), open_memory(url, tmp_path) as mem:  # the version before them
        mem.store("Ana lives in Lisbon", entity="Ana", key="City", value="Lisbon")
        mem.store("The release shipped", source_date="2023-05-03")
    with open_memory(url, tmp_path) as mem:  # migrates
        assert [f.value for f in mem.lookup("ANA", key="city")] == ["Lisbon"]
        mem.store("Ana lives in Porto", entity="ana", key="city", value="Porto")  # supersedes
        assert [f.value for f in mem.lookup("Ana")] == ["Porto"]
        assert mem.search("what shipped on 3 May 2023")[0].fact.text == "The release shipped"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT set_config('graphmem.namespace', 'default', false)")
        rows = conn.execute(
            "SELECT lower_entity, lower_key, dated = COALESCE(source_date, valid_from)"
            " FROM facts ORDER BY seq"
        ).fetchall()
    assert rows == [("ana", "city", True), (None, None, True), ("ana", "city", True)]


def test_the_vector_log_states_migration_keeps_the_entries_logged_before(
    url: str, tmp_path: Path
) -> None:
    with pytest.MonkeyPatch.context() as before, psycopg.connect(url, autocommit=True) as conn:
        before.setattr(pgschema, "MIGRATIONS", pgschema.MIGRATIONS[:4])  # without the states
        before.setattr(pgschema, "SCHEMA_VERSION", 4)
        pgschema.apply(conn)
        conn.execute("SELECT set_config('graphmem.namespace', 'default', false)")
        conn.execute("INSERT INTO vector_log (fact_id) VALUES ('x')")
    with open_memory(url, tmp_path) as mem:  # migrates
        assert mem._store.vector_log(0)[0][1:] == ("x", None)  # read back from the index
        fact = mem.store("The staging database lives on host db-7").fact
        assert fact is not None
        assert mem._store.vector_log(0)[-1][1:] == (fact.id, ROW_LIVE)


def test_each_namespace_counts_its_own_log_entries(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A table's identity counter is shared by every namespace of the database. Positions drawn
    # from it left gaps wherever another namespace wrote, and a follower reads a gap as entries
    # pruned before it read them: it loaded its vector copy afresh, and ended its subscribers.
    with (
        open_memory(url, tmp_path / "a", "alpha") as alpha,
        open_memory(url, tmp_path / "b", "beta") as beta,
        open_memory(url, tmp_path / "c", "alpha") as follower,
    ):
        follower.search("warm", mode="vector")  # its copy is loaded and in use
        start = follower.change_position()
        loads: list[VectorIndex] = []

        def loaded(index: VectorIndex) -> Mirror:  # counts the loads of a copy afresh
            loads.append(index)
            return Mirror(index.dimensions)

        monkeypatch.setattr(VectorIndex, "_loaded", loaded)
        monkeypatch.setattr(sql_store, "CHANGE_LOG_KEPT", 5)  # alpha's changes below
        monkeypatch.setattr(memory, "CHANGE_LOG_KEPT", 5)
        for n, city in enumerate(["Lisbon", "Porto", "Faro"]):
            for mem in (alpha, beta):  # each a supersession: the graph log too
                mem.store(
                    f"{mem.namespace} office moved to {city}",
                    entity=mem.namespace,
                    key="office",
                    value=city,
                )
            beta.store_many([{"text": f"Beta reading {n}.{i}"} for i in range(5)])
        time.sleep(FOLLOW_EVERY)
        hits = follower.search("alpha office moved to Faro", mode="vector", limit=1)
        assert [h.fact.text for h in hits] == ["alpha office moved to Faro"] and loads == []
        page = follower.changes_since(start)
        assert not page.missed  # beta's 20 changes in between are none of alpha's
        assert [c.kind for c in page.changes] == ["FACT_STORED"] + [
            "FACT_STORED",
            "FACT_SUPERSEDED",
        ] * 2
    with psycopg.connect(url) as conn:
        for namespace in ("alpha", "beta"):
            conn.execute("SELECT set_config('graphmem.namespace', %s, false)", [namespace])
            for table in ("vector_log", "change_log", "graph_log"):
                seqs = [r[0] for r in conn.execute(f"SELECT seq FROM {table} ORDER BY seq")]
                assert seqs and seqs == list(range(seqs[0], seqs[0] + len(seqs))), table


def test_reads_by_entity_and_by_date_use_their_indexes_under_row_level_security(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Under row-level security PostgreSQL uses no index on a leaky expression (lower(),
    # COALESCE): a lookup by entity read the whole table (64 ms at 100k facts). The statements
    # the service sends must find their rows through an index, as the service's own role.
    sent: list[tuple[str, Any]] = []
    run = pgsql.Connection._run

    def recorded(self: pgsql.Connection, sql: str, params: Any, *, tuples: bool) -> Any:
        sent.append((sql, params))
        return run(self, sql, params, tuples=tuples)

    with open_memory(url, tmp_path) as mem:
        mem.store("Ana lives in Lisbon", entity="Ana", key="city", value="Lisbon")
        mem.store_many(
            [{"text": f"Release {n} shipped", "source_date": f"2023-05-0{n}"} for n in range(1, 8)]
        )
        monkeypatch.setattr(pgsql.Connection, "_run", recorded)
        mem.store("Ana lives in Porto", entity="Ana", key="city", value="Porto")  # supersedes
        assert [f.value for f in mem.lookup("ana")] == ["Porto"]
        assert mem.search("what shipped on 3 May 2023")[0].fact.text == "Release 3 shipped"
    monkeypatch.undo()
    # a condition on the column: the index that serves it
    wanted = {"f.lower_entity =": "gm_facts_entity_", "f.dated >=": "gm_facts_dated"}
    used: dict[str, bool] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT set_config('graphmem.namespace', 'default', false)")
        conn.execute("SET enable_seqscan = off")  # a few rows: only an unusable index loses
        for sql, params in sent:
            statement = sql
            for condition, index in wanted.items():
                if condition in statement and statement.lstrip().startswith(("SELECT", "WITH")):
                    explained = conn.execute(
                        f"EXPLAIN {statement}", pgsql._params(params) if params else None
                    )
                    plan = "\n".join(r[0] for r in explained)
                    assert "Seq Scan on gm_facts" not in plan, plan
                    used[condition] = used.get(condition, False) or index in plan
    # each condition was sent, and its index served it (a join may pick the rows otherwise)
    assert used == dict.fromkeys(wanted, True)


def _postings_as_indexed(url: str, namespace: str = "default") -> list[tuple[str, int, float, int]]:
    """The namespace's postings, checked against its facts' tsvectors."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT set_config('graphmem.namespace', %s, false)", [namespace])
        posted = conn.execute(
            "SELECT lexeme, seq, tf, tokens FROM gm_postings ORDER BY 1, 2"
        ).fetchall()
        indexed = conn.execute(
            "SELECT u.lexeme, f.seq, sum(CASE w WHEN 'A' THEN 1.0 WHEN 'B' THEN 0.6"
            " WHEN 'C' THEN 0.4 ELSE 0.3 END), f.fts_tokens FROM gm_facts f, unnest(f.fts) u,"
            " unnest(u.weights) w GROUP BY 1, 2, 4 ORDER BY 1, 2"
        ).fetchall()
    assert [(x, s, round(t, 6), n) for x, s, t, n in posted] == [
        (x, s, round(float(t), 6), n) for x, s, t, n in indexed
    ]
    return posted


def _window_postings_as_indexed(url: str, namespace: str = "default") -> list[tuple[str, int]]:
    """The namespace's window postings (lexeme, window), checked against the windows' tsvectors
    and texts."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT set_config('graphmem.namespace', %s, false)", [namespace])
        posted = conn.execute(
            "SELECT lexeme, seq, tf, chars FROM gm_window_postings ORDER BY 1, 2"
        ).fetchall()
        indexed = conn.execute(
            "SELECT u.lexeme, w.seq, cardinality(u.positions), length(w.text)"
            " FROM gm_windows w, unnest(w.fts) u ORDER BY 1, 2"
        ).fetchall()
    assert posted == indexed
    return [(lexeme, seq) for lexeme, seq, _, _ in posted]


def _best_window(mem: Memory, query: str) -> tuple[str, ...]:
    """The facts of the best keyword match among the windows."""
    matches = mem._store.window_matches(query, 10)
    return max(matches.values())[1]


def _conversation(mem: Memory, episode: str) -> list[str]:
    turns = [
        "Ana: I adopted a greyhound last spring",
        "Bob: what did you call her?",
        "Ana: Juniper, after the tree by the kennel",
    ]
    results = mem.store_many([{"text": t} for t in turns], episode={"id": episode})
    return [r.fact.id for r in results if r.fact is not None]


def test_the_window_postings_follow_every_window_and_rank_the_windows(
    url: str, tmp_path: Path
) -> None:
    with open_memory(url, tmp_path) as mem:
        ids = _conversation(mem, "walk")
        assert {"greyhound", "junip"} <= {x for x, _ in _window_postings_as_indexed(url)}
        assert _best_window(mem, "greyhound Juniper") == tuple(ids)  # the words of two turns
        mem.purge(ids[0])
        posted = {x for x, _ in _window_postings_as_indexed(url)}
        assert "greyhound" not in posted and "junip" in posted  # windows cut again without it
        assert mem._store.window_matches("greyhound", 10) == {}


def test_the_window_postings_migration_indexes_the_windows_already_cut(
    url: str, tmp_path: Path
) -> None:
    with schema_version(13):  # a database of the version before the window postings
        with open_memory(url, tmp_path, namespace="cut") as mem:
            ids = _conversation(mem, "walk")
        with psycopg.connect(url, autocommit=True) as conn:
            assert conn.execute("SELECT to_regclass('gm_window_postings')").fetchone() == (None,)
    with open_memory(url, tmp_path, namespace="cut") as mem:  # migrates
        assert len(_window_postings_as_indexed(url, "cut")) > 10
        assert _best_window(mem, "greyhound Juniper") == tuple(ids)


def test_common_words_kept_in_memory_score_exactly_as_the_database_whatever_other_replicas_write(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(keyword, "RANKING_BUDGET", 10)  # "team" and "platform" only score
    common = [{"text": f"The platform team shipped release {n}"} for n in range(30)]
    common += [{"text": f"Invoice {n} was paid on day {n}"} for n in range(80)]
    rare = [{"text": f"Zephyr {n} belongs to the platform team"} for n in range(4)]
    rare += [{"text": "Zephyr was retired"}]

    def ranked(mem: Memory) -> list[tuple[str, float | None]]:
        return [(h.fact.text, h.fts_score) for h in mem.search(QUERY, mode="fts", limit=8)]

    with open_memory(url, tmp_path / "a") as a, open_memory(url, tmp_path / "b") as b:
        made = a.store_many([*common, *rare], autolink=False)
        seen = {r.fact.text: r.fact.id for r in made if r.fact is not None}
        first = ranked(a)  # reads the common words' postings into a's memory
        assert [t for t, _ in first].index("Zephyr was retired") == 4  # no common word
        ranker = a._store._keywords  # type: ignore[attr-defined]
        assert {"team", "platform"} <= set(ranker._common._lists)  # kept in a's memory
        # Another replica writes facts with the common words, then purges one a has seen.
        b.store_many(
            [{"text": "Zephyr moved to the platform team platform"},
             {"text": "Zephyr team"}], autolink=False,
        )  # fmt: skip
        b.purge(seen["Zephyr 0 belongs to the platform team"])
        kept = ranked(a)
        assert {t for t, _ in kept[:2]} == {
            "Zephyr team",
            "Zephyr moved to the platform team platform",
        }
        assert "Zephyr 0 belongs to the platform team" not in [t for t, _ in kept]
        # The same ranker reading every posting from the database answers the same.
        monkeypatch.setattr(ranker, "_common", CommonWords(capacity=0))
        assert ranked(a) == kept


QUERY = "zephyr platform team"


def test_serve_refuses_a_store_it_cannot_reach_before_the_server_starts(
    postgres: Postgres, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[object] = []
    monkeypatch.setattr("uvicorn.run", lambda *args, **kwargs: started.append(args))
    unreachable = f"postgresql://{ROLE}:secret@127.0.0.1:{free_port()}/graphmem"
    missing = postgres.database(f"p{uuid.uuid4().hex}").rsplit("/", 1)[0] + "/no_such_database"
    for url, says in ((unreachable, "Connection refused"), (missing, "no_such_database")):
        result = CliRunner().invoke(
            service_cli,
            ["--data-dir", str(tmp_path / "data"), "serve"],
            env={"GRAPHMEM_STORE": url},
        )
        assert isinstance(result.exception, StorageError), result.output
        assert says in str(result.exception) and "secret" not in str(result.exception)
    assert not started


STORE_FACT = "mutation($t: String!) { storeFact(input: {text: $t}) { fact { id } error { code } } }"


def error_codes(body: Any) -> set[str]:
    """The codes of a GraphQL answer's errors and of its payloads' ``error`` fields."""
    codes = {e.get("extensions", {}).get("code") for e in body.get("errors") or []}
    payloads = (body.get("data") or {}).values()
    codes |= {p["error"]["code"] for p in payloads if isinstance(p, dict) and p.get("error")}
    return codes


def test_the_service_answers_storage_error_while_the_server_is_away_and_recovers(
    own_server: Postgres, tmp_path: Path
) -> None:
    """Over HTTP: while PostgreSQL is down every request fails fast with STORAGE_ERROR and
    HTTP 503 (the API keys live in the database, so the gate cannot admit it), never a 500 or
    a half write; when it is back the same service answers again without a restart."""
    settings = Settings(embedder="hash", store=own_server.url, data_dir=tmp_path / "data")
    fact = "query($id: ID!) { fact(id: $id) { text } }"
    search = "query($q: String!) { search(query: $q, mode: FTS) { fact { text } } }"
    with InProcess(create_app(settings)) as api:
        kept = api.data(STORE_FACT, {"t": "Written before the outage"})["storeFact"]["fact"]["id"]
        own_server.stop()
        requests: list[tuple[str, dict[str, Any], dict[str, str] | None]] = [
            (STORE_FACT, {"t": "Written during the outage"}, None),
            (fact, {"id": kept}, None),
            (search, {"q": "outage"}, None),
            (STORE_FACT, {"t": "A namespace never opened"}, {"X-Graphmem-Namespace": "other"}),
        ]
        for query, variables, headers in requests:
            began = time.monotonic()
            status, body = api.post(query, variables, headers)
            assert time.monotonic() - began < 10, query
            assert status == 503 and error_codes(body) == {"STORAGE_ERROR"}, (query, body)
        own_server.start()
        assert api.data(fact, {"id": kept})["fact"] == {"text": "Written before the outage"}
        after = api.data(STORE_FACT, {"t": "Written after the outage"})["storeFact"]
        assert after["fact"] and not after["error"]
        found = api.data(search, {"q": "outage"})["search"]
        assert {hit["fact"]["text"] for hit in found} == {
            "Written before the outage",
            "Written after the outage",
        }
        # A restart between two requests: every connection the service holds was dropped
        # while idle, and the next request is answered as if nothing happened.
        own_server.stop()
        own_server.start()
        assert api.data(fact, {"id": kept})["fact"] == {"text": "Written before the outage"}
        again = api.data(STORE_FACT, {"t": "Written after the restart"})["storeFact"]
        assert again["fact"] and not again["error"]
        assert len(api.data(search, {"q": "outage OR restart"})["search"]) == 3


def test_a_multi_host_url_is_accepted_and_shown_without_its_password(
    postgres: Postgres, tmp_path: Path
) -> None:
    """libpq's multi-host URL (a primary and its standby): the first host down, the next one
    that accepts writes serves; messages show the URL without its password."""
    hosts = f"127.0.0.1:{free_port()},127.0.0.1:{postgres.port}"
    url = f"postgresql://{ROLE}:{ROLE}@{hosts}/graphmem?target_session_attrs=read-write"
    with open_memory(url, tmp_path / "data", namespace="multihost") as mem:
        assert mem.store("Found on the second host", autolink=False).fact is not None
    keys = open_keys(Settings(store=url))
    try:
        assert keys.create(["multihost"])[1].id
    finally:
        keys.close()
    assert redacted(url) == url.replace(f"{ROLE}:{ROLE}@", f"{ROLE}:***@")
    assert redacted("postgresql://u@h1,h2/db?password=s3cret&sslmode=require") == (
        "postgresql://u@h1,h2/db?password=***&sslmode=require"
    )
    with pytest.raises(StorageError) as raised:
        open_memory(hosts.join(["postgresql://u:s3cret@", "/nowhere"]), tmp_path / "other")
    assert "s3cret" not in str(raised.value)


def test_a_write_to_a_server_that_accepts_no_writes_is_a_storage_error_not_an_internal_one(
    own_server: Postgres, tmp_path: Path
) -> None:
    """A primary made read-only (as before a switchover) or a standby: a write is refused with
    STORAGE_ERROR (not INTERNAL_ERROR) and nothing written; once writes are accepted again, the same
    service writes without a restart."""
    settings = Settings(embedder="hash", store=own_server.url, data_dir=tmp_path / "data")
    facts = "{ facts(first: 10) { edges { node { text } } } }"
    with InProcess(create_app(settings)) as api:
        api.data(STORE_FACT, {"t": "Written while writable"})
        own_server.sql("ALTER SYSTEM SET default_transaction_read_only = on")
        own_server.sql("SELECT pg_reload_conf()")
        time.sleep(0.5)  # the server's processes read the new setting
        _, body = api.post(STORE_FACT, {"t": "Written while read-only"})
        assert error_codes(body) == {"STORAGE_ERROR"}, body
        assert "accepts no writes" in json.dumps(body), body
        own_server.sql("SET default_transaction_read_only = off")
        own_server.sql("ALTER SYSTEM RESET default_transaction_read_only")
        own_server.sql("SELECT pg_reload_conf()")
        time.sleep(0.5)
        again = api.data(STORE_FACT, {"t": "Written once writable again"})["storeFact"]
        assert again["fact"] and not again["error"]
        texts = {e["node"]["text"] for e in api.data(facts)["facts"]["edges"]}
        assert texts == {"Written while writable", "Written once writable again"}


def test_a_lock_lost_with_its_connection_refuses_the_holders_writes_and_is_taken_again(
    postgres: Postgres, url: str
) -> None:
    """The vector writer's lock lives on a connection of its own: when the server drops it
    (a failover), another replica may take the lock, so the process that held it has its
    writes inside the block refused instead of believing it still holds it; its next block
    takes the lock again."""
    holder, other = PostgresStore(url, "locked"), PostgresStore(url, "locked")
    try:
        with holder.vector_lock():
            postgres.sql(
                "SELECT pg_terminate_backend(pid) FROM pg_locks"
                " WHERE locktype = 'advisory' AND granted AND pid <> pg_backend_pid()"
                f" AND database = (SELECT oid FROM pg_database WHERE datname = '{url.rsplit('/', 1)[1]}')"
            )
            taken = threading.Event()

            def take() -> None:
                with other.vector_lock():
                    taken.set()

            thread = threading.Thread(target=take)
            thread.start()
            thread.join(timeout=10)
            assert taken.is_set()  # the lock is gone from the server
            with (
                pytest.raises(StorageError, match="lock this write needs was lost"),
                holder.transaction(),
            ):
                pass
        with holder.vector_lock(), holder.transaction():  # taken again, on a new connection
            pass
    finally:
        holder.close()
        other.close()
