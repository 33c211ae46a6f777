"""The storage interface's conformance suite: every Store implementation must pass it.

Each test runs once per implementation in ``STORES``: the SQLite reference store and the
PostgreSQL store (on the session's PostgreSQL server; skipped, saying why, without Debian's
postgresql package), whatever ``--store`` says; another engine adds itself there. The tests
speak only the interface of :mod:`graphmem.storage.interface`: transactions, the time rule on
every read, links, the outbox, the embedding cache, access and decay bookkeeping, counts and
typed errors. What each engine adds beyond the interface is tested in test_sqlite_store.py and
test_postgres_store.py.
"""

from __future__ import annotations

import io
import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from graphmem import (
    Conflict,
    FactInput,
    InvalidInput,
    NotFound,
    Settings,
    StoreResult,
    dedup,
)
from graphmem.entities import Entities
from graphmem.ids import text_hash
from graphmem.imports import EXPORT_RULES
from graphmem.prune import SOFT_DECAY
from graphmem.storage.interface import Filters, Store
from graphmem.storage.postgres.store import PostgresStore
from graphmem.storage.sql import keyword
from graphmem.storage.sql import store as sql_store
from graphmem.storage.sqlite.store import SQLiteStore
from graphmem.temporal import TimeScope
from graphmem.timehints import TimeHint
from graphmem.vectors.index import ROW_DELETED, ROW_LIVE

from ..support.clock import Clock

pytestmark = pytest.mark.engines

#: Each implementation: a function making an empty store (in a directory, for an engine that
#: keeps files; on a server, for one that has a URL), on a clock.
STORES: dict[str, Callable[[pytest.FixtureRequest, Path, Clock], Store]] = {
    "sqlite": lambda _, directory, clock: SQLiteStore(directory / "store.sqlite3", clock),
    "postgresql": lambda request, _, clock: PostgresStore(
        request.getfixturevalue("postgres_url"), f"t{uuid.uuid4().hex}", clock
    ),
}

SETTINGS = Settings(embedder="hash")


@pytest.fixture(params=sorted(STORES))
def store(request: pytest.FixtureRequest, tmp_path: Path, clock: Clock) -> Iterator[Store]:
    made = STORES[request.param](request, tmp_path, clock)
    yield made
    made.close()


@pytest.fixture
def another(
    request: pytest.FixtureRequest, store: Store, tmp_path: Path, clock: Clock
) -> Iterator[Store]:
    """A second empty store of the same implementation as ``store``."""
    directory = tmp_path / "another"
    directory.mkdir()
    made = STORES[request.node.callspec.params["store"]](request, directory, clock)
    yield made
    made.close()


def put(store: Store, *items: str | dict[str, Any]) -> list[str]:
    """Store facts through the engine-neutral write path (no near-duplicates); their ids."""
    inputs = [
        FactInput.parse({"text": x} if isinstance(x, str) else x, index=i)
        for i, x in enumerate(items)
    ]
    with store.transaction() as tx:
        results, _ = dedup.write_batch(tx, inputs, [None] * len(inputs), SETTINGS)
    return [r.fact.id for r in results if r.fact is not None]


def now(store: Store) -> TimeScope:
    return TimeScope(store.now(), store.now())


# ------------------------------------------------------------------------------- transactions


def test_transaction_time_comes_from_the_store_and_never_goes_back(
    store: Store, clock: Clock
) -> None:
    first = put(store, "Ana lives in Berlin")[0]
    clock.advance(-3600)  # a clock stepped back must not make a later write look earlier
    second = put(store, "Ana likes tea")[0]
    facts = store.get_many([first, second], TimeScope(clock.now + 7200, clock.now + 7200))
    assert facts[second].recorded_at >= facts[first].recorded_at
    with store.transaction() as tx:
        assert tx.now >= facts[first].recorded_at.timestamp()


def test_a_transaction_that_raises_writes_nothing(store: Store) -> None:
    with pytest.raises(RuntimeError), store.transaction() as tx:
        inputs = [FactInput.parse({"text": "Half a batch"}, index=0)]
        dedup.write_batch(tx, inputs, [None], SETTINGS)
        tx.queue_vectors(["x"])
        raise RuntimeError("the caller failed mid-way")
    assert store.fact_ids() == [] and store.outbox() == []


def test_try_transaction_gives_way_while_another_write_is_under_way(store: Store) -> None:
    holding, release = threading.Event(), threading.Event()

    def long_write() -> None:
        with store.transaction():
            holding.set()
            release.wait(10)

    writer = threading.Thread(target=long_write)
    writer.start()
    try:
        assert holding.wait(5)
        assert store.try_transaction() is None
    finally:
        release.set()
        writer.join()
    attempt = store.try_transaction()
    assert attempt is not None
    with attempt as tx:
        assert tx.now > 0


def test_meta_keeps_what_a_transaction_set(store: Store) -> None:
    assert store.meta("embedder") is None
    with store.transaction() as tx:
        tx.set_meta("embedder", {"provider": "hash", "dimensions": 4})
    assert store.meta("embedder") == {"provider": "hash", "dimensions": 4}


# ------------------------------------------------------------------------------- reads in time


def test_reads_obey_the_time_rule(store: Store, clock: Clock) -> None:
    (old,) = put(
        store,
        {
            "text": "Ana lives in Berlin",
            "entity": "Ana",
            "key": "city",
            "value": "Berlin",
            "valid_from": "2020-01-01",
        },
    )
    before = clock.now
    clock.advance(60)
    (new,) = put(
        store,
        {
            "text": "Ana lives in Paris",
            "entity": "Ana",
            "key": "city",
            "value": "Paris",
            "valid_from": "2023-06-01",
        },
    )
    current = now(store)
    assert store.get(old, current) is None and store.get(new, current) is not None
    as_of_2021 = TimeScope(TimeScope.resolve(clock.now, "2021-01-01", None).as_of, clock.now)
    assert store.get(old, as_of_2021) is not None and store.get(new, as_of_2021) is None
    known_before = TimeScope(clock.now, before)
    assert store.get(old, known_before) is not None and store.get(new, known_before) is None
    assert set(store.get_many([old, new], current, include_superseded=True)) == {old, new}
    assert [f.id for f in store.lookup("ana", current, key="CITY")] == [new]
    assert [f.id for f in store.history(new, current)] == [old, new]
    assert [f.id for f in store.history(new, known_before)] == [old]
    everything = TimeScope(clock.now + 1, clock.now + 1)
    assert [f.id for f in store.latest("Ana", "city", everything, limit=5)] == [new]


def test_history_of_an_unknown_id_is_not_found(store: Store) -> None:
    with pytest.raises(NotFound):
        store.history("no-such-id", now(store))


def test_pages_are_keyset_ordered_and_filtered(store: Store) -> None:
    ids = put(
        store,
        *(
            {"text": f"Note {n}", "category": "fact", "tags": ["work"] if n % 2 else []}
            for n in range(5)
        ),
    )
    first = store.page(now(store), Filters(), first=2, after=None)
    assert [f.id for _, f in first.items] == ids[:2] and first.has_more
    rest = store.page(now(store), Filters(), first=10, after=first.items[-1][0])
    assert [f.id for _, f in rest.items] == ids[2:] and not rest.has_more
    tagged = store.page(now(store), Filters(tag="WORK"), first=10, after=None)
    assert [f.id for _, f in tagged.items] == [ids[1], ids[3]]
    with pytest.raises(InvalidInput):
        store.page(now(store), Filters(), first=0, after=None)


def test_visible_keeps_only_what_the_filters_and_scope_allow(store: Store) -> None:
    a, b = put(store, {"text": "Deploys run on Fridays", "source": "wiki"}, "Standup at nine")
    scope = now(store)
    assert set(store.visible([a, b, "unknown"], scope, Filters())) == {a, b}
    assert set(store.visible([a, b], scope, Filters(source="wiki"))) == {a}
    assert store.visible([], scope, Filters()) == {}


def test_keyword_matches_rank_visible_facts_best_first(store: Store) -> None:
    berlin, tea, _ = put(store, "Ana moved to Berlin", "Ana drinks green tea", "Bob likes coffee")
    scores, rows = store.keyword_matches("berlin tea", now(store), Filters(), 10)
    assert set(scores) == {berlin, tea} and set(rows) == set(scores)
    assert rows[berlin]["importance"] is not None
    with store.transaction() as tx:
        tx.retract(berlin)
    scores, _ = store.keyword_matches("berlin", now(store), Filters(), 10)
    assert scores == {}


@pytest.mark.parametrize("cap", [0, 10_000], ids=["ranked-first", "period-first"])
def test_keyword_matches_of_a_period_are_the_best_matches_dated_in_it(
    store: Store, cap: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A period holding at most PERIOD_SELECT_MAX facts is scored on its own; a larger one is
    # read from the ranked matches of all facts. Either way: the same facts, the same scores.
    monkeypatch.setattr(keyword, "PERIOD_SELECT_MAX", cap)
    rows: list[str | dict[str, Any]] = [
        {
            "text": f"The platform team shipped release {n}" + " again" * (n % 4),
            "source_date": f"2023-0{1 + n % 6}-1{n % 3}",
        }
        for n in range(60)
    ]
    put(store, *rows, "An undated platform note", "Platform release notes", "Lunch at noon")
    in_may = TimeHint("in May", None, None, 5)  # of any year
    sizes = [
        _same_as_filtered(
            store, TimeHint("in May 2023", _epoch("2023-05-01"), _epoch("2023-06-01"), None)
        ),
        _same_as_filtered(store, in_may),
        _same_as_filtered(store, TimeHint("before 2023", None, _epoch("2023-01-01"), None)),
        _same_as_filtered(store, TimeHint("since March 2023", _epoch("2023-03-01"), None, None)),
    ]
    # since March 2023: 40 of the releases, the two undated facts (dated when they were stored)
    assert sizes == [10, 10, 0, 42]
    # dates spanning too many years to read a month of any year as ranges of dates
    put(store, {"text": "Platform release in May 1700", "source_date": "1700-05-02"})
    assert _same_as_filtered(store, in_may) == 11


def _same_as_filtered(store: Store, hint: TimeHint) -> int:
    """Check that the keyword matches of ``hint``'s period are the best of all matches dated in
    it, with the same scores; their number."""
    scope = now(store)
    query = "platform release notes"
    every, dates = store.keyword_matches(query, scope, Filters(), 1000)
    dated = {
        i: score
        for i, score in every.items()
        if hint.covers(dates[i]["source_date"] or dates[i]["valid_from"])
    }
    best = sorted(dated.values(), reverse=True)
    for n in (3, 100):
        scores, found = store.keyword_matches(query, scope, Filters(period=hint), n)
        assert set(found) == set(scores) and len(scores) == min(n, len(dated)), hint.text
        assert sorted(scores.values(), reverse=True) == pytest.approx(best[:n]), hint.text
        assert set(scores) <= set(dated), hint.text
    return len(dated)


def _epoch(day: str) -> float:
    return datetime.fromisoformat(day).replace(tzinfo=UTC).timestamp()


def test_entity_facts_come_per_named_entity(store: Store) -> None:
    ids = put(
        store,
        *({"text": f"Ana fact {n}", "entity": "Ana"} for n in range(4)),
        {"text": "Bob fact", "entity": "Bob"},
    )
    found = store.entity_facts(["ana", "bob"], now(store), per_entity=2)
    assert len([f for f in found if f.entity == "Ana"]) == 2 and ids[-1] in {f.id for f in found}


# ------------------------------------------------------------------------------- writes


def test_retracting_is_typed_for_unknown_and_repeated_ids(store: Store) -> None:
    (fact,) = put(store, "A fact to forget")
    with store.transaction() as tx:
        assert tx.retract(fact).id == fact
    with pytest.raises(Conflict), store.transaction() as tx:
        tx.retract(fact)
    with pytest.raises(NotFound), store.transaction() as tx:
        tx.retract("no-such-id")


def test_purge_removes_the_fact_its_links_and_its_orphaned_embedding(store: Store) -> None:
    a, b = put(store, "Purge me", "Keep me")
    vector = np.ones(4, dtype=np.float32)
    with store.transaction() as tx:
        tx.link(a, b, "RELATED_TO", 0.5)
        tx.cache_vectors("hash", "m", 4, [(text_hash("Purge me"), vector)])
    with store.transaction() as tx:
        purged = tx.purge([a, "unknown"])
    assert purged.removed == 1 and purged.gone == [a] and a in purged.touched
    assert store.get_many([a, b], now(store), include_superseded=True).keys() == {b}
    assert store.links_of(b, now(store)) == []
    assert store.cached_vectors("hash", "m", 4, [text_hash("Purge me")]) == {}


def test_links_follow_the_time_rule_and_unlinking_is_typed(store: Store, clock: Clock) -> None:
    a, b, c = put(store, "Outage", "Disk full", "Cleanup job")
    with store.transaction() as tx:
        made = tx.link(a, b, "CAUSED_BY", 0.9)
        tx.link(b, c, "CAUSED_BY", 0.8)
    before_unlink = store.now()
    clock.advance(60)
    sub = store.traverse(
        a, now(store), depth=2, types=None, direction="OUT", max_nodes=10, min_strength=0.0
    )
    assert {n.fact.id for n in sub.nodes} == {a, b, c}
    found = store.path(a, c, now(store), types=None, direction="BOTH", max_depth=4)
    assert found is not None and [f.id for f in found] == [a, b, c]
    with store.transaction() as tx:
        tx.unlink(made.id)
    assert store.links_of(a, now(store)) == []
    assert [k.id for k in store.links_of(a, TimeScope(clock.now, before_unlink))] == [made.id]
    with pytest.raises(Conflict), store.transaction() as tx:
        tx.unlink(made.id)
    with pytest.raises(NotFound), store.transaction() as tx:
        tx.unlink("no-such-link")
    with pytest.raises(NotFound), store.transaction() as tx:
        tx.link(a, "no-such-fact", "RELATED_TO", 1.0)


def test_a_prepared_traversal_follows_every_later_write(store: Store, clock: Clock) -> None:
    a, b, c, d = put(store, "Release", "Build", "Tests", "Docs")
    with store.transaction() as tx:
        tx.link(a, b, "DEPENDS_ON", 0.9)
        extra = tx.link(a, d, "DEPENDS_ON", 0.5)
    store.preload_graph(5.0)  # ready or not, the answers below are the same

    def reached() -> list[str]:
        sub = store.traverse(
            a, now(store), depth=2, types=None, direction="OUT", max_nodes=10, min_strength=0.0
        )
        return [n.fact.id for n in sub.nodes]

    assert reached() == [a, b, d]
    clock.advance(60)
    with store.transaction() as tx:  # a new link
        tx.link(b, c, "DEPENDS_ON", 0.8)
        tx.unlink(extra.id)  # and one retracted
    assert reached() == [a, b, c]
    clock.advance(60)
    put(store, {"text": "Build v2", "supersedes": b})  # b is no longer current
    assert reached() == [a]
    assert store.path(a, c, now(store), types=None, direction="BOTH", max_depth=4) is None


def test_link_pairs_and_the_walker_see_the_same_links(store: Store) -> None:
    a, b, c = put(store, "Hub", "Spoke one", "Spoke two")
    with store.transaction() as tx:
        tx.link(a, b, "RELATED_TO", 0.7)
        tx.link(c, a, "PART_OF", 0.4)
    among = store.link_pairs([a, b, c], now(store), skip_origins=[])
    assert set(among) == {(a, b, 0.7), (c, a, 0.4)}
    # Those touching a few of them, either way round, the other end among the ids.
    assert set(store.link_pairs([a, b, c], now(store), skip_origins=[], touching=[b])) == {
        (a, b, 0.7)
    }
    assert set(store.link_pairs([a, c], now(store), skip_origins=[], touching=[a])) == {(c, a, 0.4)}
    assert store.link_pairs([a, b, c], now(store), skip_origins=["explicit"], touching=[a]) == []
    steps = store.walk(now(store), skip_origins=[]).level([a])
    assert {s.step for s in steps} == {b, c}
    pages = store.links_page([a], now(store), first=1)
    items, more = pages[a]
    assert len(items) == 1 and more


# ------------------------------------------------------------------------------- bookkeeping


def test_a_savepoint_undoes_only_what_its_block_wrote(store: Store) -> None:
    with store.transaction() as tx:
        inputs = [FactInput.parse({"text": "Kept"}, index=0)]
        dedup.write_batch(tx, inputs, [None], SETTINGS)
        with pytest.raises(RuntimeError), tx.savepoint():
            undone = [FactInput.parse({"text": "Undone"}, index=0)]
            dedup.write_batch(tx, undone, [None], SETTINGS)
            tx.queue_vectors(["x"])
            raise RuntimeError("this part failed")
        with tx.savepoint():
            later = [FactInput.parse({"text": "Also kept"}, index=0)]
            dedup.write_batch(tx, later, [None], SETTINGS)
    texts = {f.text for f in store.get_many(store.fact_ids(), now(store)).values()}
    assert texts == {"Kept", "Also kept"} and store.outbox() == []


def test_the_vector_log_lists_entries_in_order_after_a_position(store: Store) -> None:
    assert store.vector_log_end() == 0 and store.vector_log(0) == []
    with store.transaction(durable=False) as tx:
        first = tx.log_vectors(["a", "b"], [ROW_LIVE, ROW_DELETED])
    with store.transaction(durable=False) as tx:
        last = tx.log_vectors(["c"])
    assert store.vector_log_end() == last == first + 1
    assert [(i, state) for _, i, state in store.vector_log(0)] == [
        ("a", ROW_LIVE),
        ("b", ROW_DELETED),
        ("c", None),  # no state given: read back from the index
    ]
    assert store.vector_log(first) == [(last, "c", None)]


def test_the_change_log_lists_committed_changes_in_order_and_keeps_the_newest(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert store.change_log(0, 10) == ([], 0)
    with store.transaction() as tx:
        tx.log_changes([("FACT_STORED", "f1"), ("LINK_MADE", "l1")], "one")
        at = tx.now
    with pytest.raises(RuntimeError), store.transaction() as tx:
        tx.log_changes([("FACT_FORGOTTEN", "f1")], "one")
        raise RuntimeError("rolled back")
    with store.transaction() as tx:
        tx.log_changes([("FACT_FORGOTTEN", "f1")], "two")
    rows, end = store.change_log(0, 10)
    assert [row[1:] for row in rows[:2]] == [
        ("FACT_STORED", "f1", at, "one"),
        ("LINK_MADE", "l1", at, "one"),
    ]
    assert [row[1:3] + row[4:] for row in rows[2:]] == [("FACT_FORGOTTEN", "f1", "two")]
    assert [row[0] for row in rows] == sorted(row[0] for row in rows) and end == rows[-1][0]
    assert store.change_log(rows[0][0], 1) == ([rows[1]], end)
    monkeypatch.setattr(sql_store, "CHANGE_LOG_KEPT", 2)
    with store.transaction() as tx:
        tx.log_changes([("FACT_PURGED", "f1")], "two")
    assert [row[1] for row in store.change_log(0, 10)[0]] == ["FACT_FORGOTTEN", "FACT_PURGED"]


def test_the_outbox_keeps_queued_writes_until_they_are_synced(store: Store) -> None:
    a, b = put(store, "One", "Two")
    with store.transaction() as tx:
        tx.queue_vectors([a, b])
    queued = store.outbox()
    assert {i for i, _ in queued} == {a, b}
    with store.transaction() as tx:
        tx.queue_vectors([a])  # queued again: a new position, kept by the sync below
    with store.transaction() as tx:
        tx.vectors_synced(queued)
    assert [i for i, _ in store.outbox()] == [a]
    assert store.vector_owners([a, b]) == {a: True, b: True}
    assert store.vector_sources([a, "unknown"]) == {a: ("One", None)}


def test_cached_vectors_are_kept_per_provider_model_and_size(store: Store) -> None:
    vector = np.arange(4, dtype=np.float32)
    with store.transaction() as tx:
        tx.cache_vectors("hash", "m", 4, [("h1", vector)])
    found = store.cached_vectors("hash", "m", 4, ["h1", "h2"])
    assert list(found) == ["h1"] and np.array_equal(found["h1"], vector)
    assert store.cached_vectors("hash", "other", 4, ["h1"]) == {}
    assert store.cached_vectors("hash", "m", 8, ["h1"]) == {}


def test_accesses_count_and_refresh_the_classes_that_refresh(store: Store, clock: Clock) -> None:
    stable, session = put(
        store,
        {"text": "Prefers tea", "decay_class": "stable"},
        {"text": "Debugging now", "decay_class": "session"},
    )
    clock.advance(3600)
    with store.transaction() as tx:
        tx.record_accesses({stable: (2, clock.now), session: (1, clock.now)})
    facts = store.get_many([stable, session], now(store))
    assert facts[stable].access_count == 2 and facts[session].access_count == 1
    confirmed = facts[stable].last_confirmed_at
    assert confirmed is not None and confirmed.timestamp() == pytest.approx(clock.now)
    assert facts[session].last_confirmed_at != facts[stable].last_confirmed_at


def test_decay_bookkeeping_finds_expired_and_faded_facts(store: Store, clock: Clock) -> None:
    short, keep = put(
        store,
        {"text": "Checkpoint reached", "decay_class": "checkpoint"},
        {"text": "Name is Ana", "decay_class": "permanent"},
    )
    clock.advance(5 * 3600)
    assert store.expired(clock.now) == [short]
    assert store.decay_forecast(clock.now, SOFT_DECAY, soft=False) == (0, 0)
    with store.transaction() as tx:
        tx.set_decay_classes([("short", clock.now + 10, short)])
    assert store.expired(clock.now) == []
    assert store.faded(SOFT_DECAY) == []
    assert {r["id"] for r in store.decay_inputs()} == {short, keep}


def test_counts_cover_every_state(store: Store) -> None:
    a, b, c = put(store, "One", "Two", {"text": "Three", "category": "decision"})
    with store.transaction() as tx:
        tx.retract(a)
        tx.link(b, c, "RELATED_TO", 1.0)
        tx.queue_vectors([b])
    counts = store.counts(store.now())
    assert (counts.facts, counts.retracted, counts.links, counts.outbox) == (3, 1, 1, 1)
    assert sum(counts.by_decay_class.values()) == 2
    assert counts.by_category.get("decision") == 1


def test_the_write_path_dedups_and_supersedes_through_the_interface(store: Store) -> None:
    berlin, same = put(
        store,
        {"text": "Ana lives in Berlin", "entity": "Ana", "key": "city", "value": "Berlin"},
        {"text": "Ana lives in Berlin", "entity": "Ana", "key": "city", "value": "Berlin"},
    )
    assert same == berlin  # the repeat is a NOOP that names the live fact
    (paris,) = put(
        store, {"text": "Ana moved to Paris", "entity": "ana", "key": "CITY", "value": "Paris"}
    )
    old = store.get_many([berlin], now(store), include_superseded=True)[berlin]
    assert old.superseded_by == paris
    with store.transaction() as tx:
        assert tx.fact_row(berlin) is not None and not tx.is_live(berlin) and tx.is_live(paris)
        row = tx.fact_row(paris)
        assert row is not None
        assert [r["id"] for r in tx.live_by_hash([row["normalized_hash"]])] == [paris]
        assert [r["id"] for r in tx.current_by_key([("ana", "city")])] == [paris]
        assert tx.fact_row("no-such-id") is None
    with pytest.raises(NotFound):
        put(store, {"text": "Ana lives in Rome", "supersedes": "no-such-id"})
    with pytest.raises(Conflict):
        put(store, {"text": "Ana lives in Rome", "supersedes": berlin})


def test_the_write_path_supersedes_across_the_names_of_one_entity(store: Store) -> None:
    entities = Entities(store)

    def classified(*items: dict[str, Any]) -> list[StoreResult]:
        inputs = [FactInput.parse(x, index=i) for i, x in enumerate(items)]
        with store.transaction() as tx:
            results, _ = dedup.write_batch(
                tx, inputs, [None] * len(inputs), SETTINGS, entities=entities
            )
        return results

    fact = {"key": "city", "value": "Rome"}
    (rome,) = classified({"text": "Melanie lives in Rome", "entity": "Melanie", **fact})
    entities.alias("Mellie", of="Melanie")
    fact["value"] = "Paris"
    (paris, again) = classified(
        {"text": "Mellie moved to Paris", "entity": "Mellie", **fact},
        {"text": "Melanie's home is Paris", "entity": "Melanie's", **fact},
    )
    assert rome.fact is not None and paris.fact is not None
    assert (paris.action, paris.target_ids) == ("UPDATE", (rome.fact.id,))
    assert (again.action, again.target_ids) == ("NOOP", (paris.fact.id,))
    (mel,) = classified({"text": "Mel is in Oslo", "entity": "Mel", **fact, "value": "Oslo"})
    assert (mel.action, mel.target_ids) == ("UPDATE", (paris.fact.id,))


def test_automatic_links_read_and_write_through_the_interface(store: Store) -> None:
    first, second, third = put(
        store,
        {"text": "Ana joined the team", "entity": "Ana"},
        {"text": "Ana likes tea", "entity": "Ana"},
        {"text": "Ana runs on Sundays", "entity": "Ana"},
    )
    with store.transaction() as tx:
        tx.retract(first)
    with store.transaction() as tx:
        assert tx.recent_same_entity(third, 5) == [second]  # the retracted one is skipped
        assert tx.live_ids([first, second, "unknown"]) == {second}
        starts = tx.valid_from([second, third])
        tx.add_links([(third, second, "RELATED_TO", 0.4, "auto_entity", starts[third])])
    (made,) = store.links_of(third, now(store))
    assert (made.target_id, made.origin, made.strength) == (second, "auto_entity", 0.4)


def test_documents_are_recorded_found_by_scope_and_dropped(store: Store) -> None:
    from graphmem.documents import DocumentFile
    from graphmem.episodes import EpisodeInput

    with store.transaction() as tx:
        tx.episode(EpisodeInput("/n/a.md", "document", "/n/a.md", 0.0))
        for path in ("/n/a.md", "/n/sub/b.md", "/na.md", "/n-other/c.md"):
            tx.put_document(DocumentFile(path, "h-" + path, 1.0, 10, 2, tx.now))
    assert [d.path for d in store.documents(["/n"])] == ["/n/a.md", "/n/sub/b.md"]
    assert [d.path for d in store.documents(["/n/sub/b.md", "/na.md"])] == ["/n/sub/b.md", "/na.md"]
    assert [d.path for d in store.documents(["/"])] == [
        "/n-other/c.md",
        "/n/a.md",
        "/n/sub/b.md",
        "/na.md",
    ]
    with store.transaction() as tx:  # recording again replaces the record
        tx.put_document(DocumentFile("/n/a.md", "h2", 2.0, 11, 3, tx.now))
        tx.drop_document("/na.md")
    assert [(d.hash, d.chunks) for d in store.documents(["/n/a.md"])] == [("h2", 3)]
    assert store.documents(["/na.md"]) == []

    inputs = [FactInput(text=t, source=f"/n/a.md:{i}-{i}") for i, t in enumerate("xyz")]
    with store.transaction() as tx:
        results, _ = dedup.write_batch(tx, inputs, [None] * 3, SETTINGS, episode_id="/n/a.md")
    first, second, gone = (r.fact.id for r in results if r.fact is not None)
    with store.transaction() as tx:
        tx.retract(gone)
        assert tx.current_chunks("/n/a.md") == [first, second]
    # a purge that takes a document's chunk drops its record: the next sync indexes it again
    with store.transaction() as tx:
        tx.purge([first])
    assert store.documents(["/n/a.md"]) == []


# ------------------------------------------------------------------------------- entities


def test_entity_names_follow_writes_and_purges_and_declarations_keep_their_time(
    store: Store, clock: Clock
) -> None:
    ids = put(
        store,
        {"text": "Melanie paints", "entity": "Melanie"},
        {"text": "Melanie sings", "entity": "melanie"},
        {"text": "Lopez teaches", "entity": "Lopez"},
    )
    assert sorted((n, c) for n, _, c, _ in store.entity_names()) == [("lopez", 1), ("melanie", 2)]
    with store.transaction() as tx:
        tx.declare_entity("alias", "Teacher", "lopez")
        declared_at = tx.now
    clock.advance(10)
    [(seq, kind, name, target, recorded, retracted)] = store.entity_declarations()
    assert (kind, name, target, recorded, retracted) == (
        "alias",
        "Teacher",
        "lopez",
        declared_at,
        None,
    )
    signature = store.entity_signature()
    with store.transaction() as tx:
        tx.declare_entity(None, "Teacher", "", retract=[seq])
    assert store.entity_declarations()[0][5] is not None
    assert store.entity_signature() != signature
    with store.transaction() as tx:
        tx.declare_entity("alias", "Teacher", "lopez")
        tx.purge([ids[2]])
    assert [n for n, *_ in store.entity_names()] == ["melanie"]
    assert store.entity_declarations() == []
    with store.transaction() as tx:
        assert tx.rebuild_entities() == 1
    assert [(n, c) for n, _, c, _ in store.entity_names()] == [("melanie", 2)]
    found = store.lookup("x", now(store), names=["melanie"])
    assert {f.text for f in found} == {"Melanie paints", "Melanie sings"}


def test_profile_reads_give_an_entitys_facts_by_key_and_the_entities_linked_to_it(
    store: Store, clock: Clock
) -> None:
    berlin, cat, dog, tea, bob = put(
        store,
        {"text": "Ana lives in Berlin", "entity": "Ana", "key": "city", "value": "Berlin"},
        {"text": "Ana has a cat", "entity": "ana", "key": "pets", "value": "cat"},
        {"text": "Ana has a dog", "entity": "Ana", "key": "Pets", "value": "dog"},
        {"text": "Ana likes tea", "entity": "Ana", "importance": 0.9},
        {"text": "Bob fixes bikes", "entity": "Bob"},
    )
    before = now(store)
    clock.advance(10)
    (paris,) = put(
        store, {"text": "Ana lives in Paris", "entity": "Ana", "key": "city", "value": "Paris"}
    )
    with store.transaction() as tx:
        tx.link(tea, bob, "RELATED_TO", 0.5)
        tx.link(bob, paris, "DEPENDS_ON", 0.5)
    keyed, plain = store.profile_facts(["ana"], now(store), keys=5, per_key=5, unkeyed=5)
    assert {(f.key or "").lower(): f.value for f in keyed if f.key == "city"} == {"city": "Paris"}
    assert sorted(f.value or "" for f in keyed if (f.key or "").lower() == "pets") == ["cat", "dog"]
    assert [f.id for f in plain] == [tea]
    keyed, _ = store.profile_facts(["ana"], before, keys=5, per_key=5, unkeyed=5)
    assert berlin in {f.id for f in keyed} and paris not in {f.id for f in keyed}
    keyed, _ = store.profile_facts(["ana"], now(store), keys=0, per_key=0, unkeyed=0)
    assert len(keyed) == 1  # one more than asked for: there are more
    links = store.profile_links(["ana"], now(store), limit=10)
    assert sorted(links) == [("bob", "DEPENDS_ON", 1), ("bob", "RELATED_TO", 1)]
    assert store.profile_links(["ana"], before, limit=10) == []  # the links came later
    assert {f.id for f in keyed} <= {cat, dog, paris}


def test_a_profile_summary_is_kept_by_signature_and_a_purge_of_a_fact_it_was_shown_deletes_it(
    store: Store,
) -> None:
    a, b, c = put(
        store,
        {"text": "Ana lives in Paris", "entity": "Ana"},
        {"text": "Ana likes tea", "entity": "Ana"},
        {"text": "Bob fixes bikes", "entity": "Bob"},
    )
    with store.transaction() as tx:
        assert tx.keep_profile_summary("ana", "s1", "Ana, of Paris.", [a], [a, b])
        assert tx.keep_profile_summary("ana", "s2", "Ana drinks tea.", [b], [b])
        assert tx.keep_profile_summary("bob", "s1", "Bob fixes bikes.", [c], [c])
        assert not tx.keep_profile_summary("bob", "s3", "Bob.", [c], [c, "no-such-fact"])
    assert store.profile_summary("ana", "s1") == ("Ana, of Paris.", [a])
    assert store.profile_summary("bob", "s3") is None
    with store.transaction() as tx:
        tx.keep_profile_summary("ana", "s1", "Ana lives in Paris.", [a], [a, b])  # replaced
    assert store.profile_summary("ana", "s1") == ("Ana lives in Paris.", [a])
    with store.transaction() as tx:
        tx.purge([a])
    assert store.profile_summary("ana", "s1") is None  # it was shown the purged fact
    assert store.profile_summary("ana", "s2") == ("Ana drinks tea.", [b])
    assert store.profile_summary("bob", "s1") == ("Bob fixes bikes.", [c])
    with store.transaction() as tx:
        for n in range(6):
            tx.keep_profile_summary("bob", f"t{n}", f"Bob, take {n}.", [c], [c])
    kept = [n for n in range(6) if store.profile_summary("bob", f"t{n}") is not None]
    assert kept == [2, 3, 4, 5] and store.profile_summary("bob", "s1") is None  # the newest


def test_declarations_travel_with_an_export_and_keep_their_times(
    store: Store, another: Store, clock: Clock
) -> None:
    put(
        store,
        {"text": "Lopez teaches", "entity": "Lopez"},
        {"text": "Melanie paints", "entity": "Melanie"},
    )
    with store.transaction() as tx:
        tx.declare_entity("alias", "Teacher", "lopez")
    clock.advance(10)
    [(seq, *_)] = store.entity_declarations()
    with store.transaction() as tx:
        tx.declare_entity("alias", "Teacher", "melanie", retract=[seq])
    exported = io.StringIO()
    store.export("default", exported)
    with another.transaction() as tx:
        report, _ = tx.import_lines(exported.getvalue().splitlines(), EXPORT_RULES)
    assert (report.facts, report.declarations) == (2, 2)
    assert [d[1:] for d in another.entity_declarations()] == [
        d[1:] for d in store.entity_declarations()
    ]
    again = io.StringIO()
    another.export("default", again)
    assert again.getvalue() == exported.getvalue()
    with another.transaction() as tx:
        report, _ = tx.import_lines(exported.getvalue().splitlines(), EXPORT_RULES)
    assert (report.declarations, report.skipped_existing) == (0, 4)
