"""Search: fused legs, modes, filters, time scope, no under-fill, access tracking."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from graphmem.server.mcp import tools

from graphmem import InvalidInput, Memory, Settings

from ..support.clock import Clock
from ..support.connections import read_connection

pytestmark = [pytest.mark.engines, pytest.mark.client_api]


@pytest.fixture
def stocked(mem: Memory) -> Memory:
    mem.store_many(
        [
            {
                "text": "The staging database runs Postgres 16",
                "tags": ["db", "staging"],
                "entity": "staging",
                "source": "runbook",
            },
            {
                "text": "Production database is Postgres 15 on bare metal",
                "tags": ["db", "prod"],
                "entity": "production",
                "category": "fact",
            },
            {"text": "User prefers dark mode in every editor", "entity": "user"},
            {"text": "We decided to use Kubernetes for deployment", "entity": "platform"},
            {"text": "Caching layer uses Redis", "tags": ["cache"]},
        ]
    )
    return mem


def test_hybrid_search_ranks_the_best_match_first(stocked: Memory) -> None:
    hits = stocked.search("which postgres version runs on staging")
    assert hits[0].fact.text == "The staging database runs Postgres 16"
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True) and scores[0] > 0


@pytest.mark.parametrize("mode", ["hybrid", "fts", "vector"])
def test_every_mode_finds_a_keyword_match(stocked: Memory, mode: str) -> None:
    hits = stocked.search("dark mode", mode=mode)
    assert hits[0].fact.text == "User prefers dark mode in every editor"


def test_fts_mode_uses_porter_stemming(stocked: Memory) -> None:
    assert [h.fact.text for h in stocked.search("deciding deployments", mode="fts")] == [
        "We decided to use Kubernetes for deployment"
    ]


def test_vector_mode_returns_facts_without_shared_keywords_too(stocked: Memory) -> None:
    hits = stocked.search("postgres", mode="vector", limit=5)
    assert len(hits) == 5  # every visible fact has a similarity


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        (
            {"tag": "DB"},
            {
                "The staging database runs Postgres 16",
                "Production database is Postgres 15 on bare metal",
            },
        ),
        ({"tag": "prod"}, {"Production database is Postgres 15 on bare metal"}),
        ({"category": "decision"}, {"We decided to use Kubernetes for deployment"}),
        ({"entity": "STAGING"}, {"The staging database runs Postgres 16"}),
        ({"source": "runbook"}, {"The staging database runs Postgres 16"}),
    ],
)
def test_filters_restrict_results(stocked: Memory, kwargs: dict, expected: set[str]) -> None:
    for mode in ("hybrid", "fts", "vector"):
        hits = stocked.search("database deployment postgres", mode=mode, **kwargs)
        assert {h.fact.text for h in hits} == expected, mode


@pytest.mark.parametrize(
    "query",
    [
        '"unbalanced',
        "postgres OR",
        "NEAR(a b)",
        "col:value",
        "*",
        "a AND (b",
        "'; DROP TABLE facts; --",
        "^prefix",
        "-",
        "ü ñ 日本語",
        "x" * 5000,
    ],
)
def test_fts_syntax_and_sql_in_queries_are_treated_as_text(stocked: Memory, query: str) -> None:
    stocked.search(query)  # no exception
    assert stocked.stats().facts == 5


def test_bad_search_arguments_are_rejected(stocked: Memory) -> None:
    for kwargs in (
        {"query": ""},
        {"query": "x", "limit": 0},
        {"query": "x", "limit": 10_001},
        {"query": "x", "mode": "magic"},
    ):
        with pytest.raises(InvalidInput):
            stocked.search(**kwargs)


def test_no_underfill_with_hundreds_of_superseded_versions(mem: Memory, clock: Clock) -> None:
    """300 versions of one fact, all matching the query better, must not crowd out others."""
    mem.store_many(
        [{"text": f"Quarterly revenue target note {n}", "entity": f"team{n}"} for n in range(12)]
    )
    current = mem.store("Revenue forecast is 1 million revenue revenue").fact
    assert current is not None
    for version in range(300):
        clock.advance(1)
        current = mem.store(
            f"Revenue forecast is {version + 2} million revenue revenue", supersedes=current.id
        ).fact
        assert current is not None
    for mode in ("hybrid", "fts", "vector"):
        hits = mem.search("revenue forecast", limit=10, mode=mode)
        assert len(hits) == 10, mode
        assert sum("forecast" in h.fact.text for h in hits) == 1, mode
    # As of a moment when an old version was current, still 10 visible results.
    hits = mem.search("revenue forecast", limit=10, as_of=clock.now - 150)
    assert len(hits) == 10
    assert sum("forecast" in h.fact.text for h in hits) == 1


def test_no_underfill_with_many_retracted_facts(mem: Memory) -> None:
    ids = [
        r.fact.id  # type: ignore[union-attr]
        for r in mem.store_many(
            [{"text": f"Incident {n} on the payment service"} for n in range(150)]
        )
    ]
    mem.store_many([{"text": f"Payment provider note {n}"} for n in range(5)])
    for fact_id in ids:
        mem.forget(fact_id)
    for mode in ("hybrid", "fts", "vector"):
        hits = mem.search("payment service incident", limit=5, mode=mode)
        assert [h.fact.text.startswith("Payment provider") for h in hits] == [True] * 5, mode


def test_include_superseded_shows_old_versions(mem: Memory, clock: Clock) -> None:
    old = mem.store("Standup at 9:00").fact
    assert old is not None
    clock.advance(5)
    mem.store("Standup at 9:30", supersedes=old.id)
    assert {h.fact.text for h in mem.search("standup", include_superseded=True)} == {
        "Standup at 9:00",
        "Standup at 9:30",
    }
    assert {h.fact.text for h in mem.search("standup")} == {"Standup at 9:30"}


def test_importance_breaks_an_otherwise_even_match(mem: Memory) -> None:
    mem.store("Backup job runs nightly", importance=0.1)
    mem.store("Backup check runs nightly", importance=1.0)
    hits = mem.search("backup nightly")
    assert hits[0].fact.text == "Backup check runs nightly"


@pytest.mark.parametrize(
    "query",
    [
        "what did Caroline research about adoption",
        "Caroline's adoption research",
        "CAROLINE adoption research",
    ],
)
def test_a_query_naming_an_entity_ranks_its_facts_first_and_says_so(
    mem: Memory, query: str
) -> None:
    mem.store_many(
        [
            {"text": "researched adoption agencies in June", "entity": "Melanie"},
            {"text": "researched adoption agencies in May", "entity": "Caroline Smith"},
            {"text": "researched adoption agencies in April", "entity": "Carol"},
        ]
    )
    hits = mem.search(query, limit=3, mode="fts")
    # The others are still found, below, and say no entity was named.
    assert hits[0].fact.entity == "Caroline Smith" and len(hits) == 3
    assert [h.entity_matched for h in hits] == ["Caroline Smith", None, None]


@pytest.mark.in_process("calls the MCP tools in process")
def test_the_mcp_search_says_which_entities_the_query_named(mem: Memory) -> None:
    mem.store("researched adoption agencies", entity="Caroline")
    text, found = tools.search(mem, tools.SearchArgs(query="what did Caroline research"))
    assert text.startswith("Entities named: Caroline.")
    assert found["hits"][0]["entity_matched"] == "Caroline"
    text, _ = tools.search(mem, tools.SearchArgs(query="adoption agencies"))
    assert "Entities named" not in text


def test_search_counts_access_and_refreshes_ttl(mem: Memory, clock: Clock) -> None:
    fact = mem.store("Sprint goal is the billing page", decay_class="normal").fact
    assert fact is not None and fact.expires_at is not None
    clock.advance(10 * 86400)
    mem.search("sprint goal")
    seen = mem.get(fact.id)
    assert seen is not None and seen.access_count == 1
    assert seen.expires_at is not None
    assert seen.expires_at.timestamp() == pytest.approx(clock.now + 14 * 86400)


@pytest.mark.in_process("holds the store's writer")
def test_search_does_not_wait_for_a_write_in_progress(mem: Memory, clock: Clock) -> None:
    fact = mem.store("Sprint goal is the billing page", decay_class="normal").fact
    assert fact is not None
    holding, release = threading.Event(), threading.Event()

    def long_write() -> None:
        with mem._store.transaction():
            holding.set()
            release.wait(10)

    writer = threading.Thread(target=long_write)
    writer.start()
    try:
        assert holding.wait(5)
        clock.advance(86400)
        began = time.monotonic()
        assert [h.fact.id for h in mem.search("sprint goal")] == [fact.id]
        assert [h.fact.id for h in mem.search("billing page")] == [fact.id]
        assert time.monotonic() - began < 2  # did not wait for the writer
        seen = mem.get(fact.id)
        assert seen is not None and seen.access_count == 0  # not written yet
    finally:
        release.set()
        writer.join()
    clock.advance(60)
    assert mem.search("unrelated words", mode="fts") == []  # the next search writes them
    seen = mem.get(fact.id)
    assert seen is not None and seen.access_count == 2
    assert seen.last_accessed_at is not None
    assert seen.last_accessed_at.timestamp() == pytest.approx(clock.now - 60)


def test_accesses_still_waiting_are_written_at_close(tmp_path: Path, clock: Clock) -> None:
    mem = Memory.open(tmp_path, embedder="hash", clock=clock)
    fact = mem.store("Sprint goal is the billing page").fact
    assert fact is not None
    with (
        mem._store.transaction()
    ):  # this thread holds the writer, so the search must defer its write
        held = threading.Thread(target=lambda: mem.search("sprint goal"))
        held.start()
        held.join()
    mem.close()
    with Memory.open(tmp_path, embedder="hash", clock=clock) as again:
        seen = again.get(fact.id)
        assert seen is not None and seen.access_count == 1


def test_accesses_within_the_interval_wait_for_the_next_write(tmp_path: Path, clock: Clock) -> None:
    settings = Settings(embedder="hash", access_write_interval=3600)
    with Memory.open(tmp_path, settings=settings, clock=clock) as mem:
        fact = mem.store("Sprint goal is the billing page").fact
        assert fact is not None
        mem.search("sprint goal")  # the first accesses are written at once
        versions = read_connection(mem).execute("PRAGMA data_version").fetchone()[0]
        mem.search("billing page")
        mem.lookup("sprint")  # no entity: nothing returned, nothing counted
        # the second search wrote nothing: the readers' caches stay valid
        assert read_connection(mem).execute("PRAGMA data_version").fetchone()[0] == versions
        assert mem.get(fact.id).access_count == 1  # type: ignore[union-attr]
        mem.store("Retro is on Friday")  # any write takes the waiting accesses along
        assert mem.get(fact.id).access_count == 2  # type: ignore[union-attr]
        mem.search("sprint goal")
    with Memory.open(tmp_path, settings=settings, clock=clock) as again:  # and so does close
        assert again.get(fact.id).access_count == 3  # type: ignore[union-attr]


def test_short_lived_classes_are_not_refreshed_by_access(mem: Memory, clock: Clock) -> None:
    fact = mem.store("Currently debugging the parser", decay_class="session").fact
    assert fact is not None and fact.expires_at is not None
    clock.advance(3600)
    mem.search("debugging parser")
    seen = mem.get(fact.id)
    assert seen is not None and seen.access_count == 1
    assert seen.expires_at == fact.expires_at


def test_historical_reads_do_not_count_as_access(mem: Memory, clock: Clock) -> None:
    fact = mem.store("Quarterly plan drafted").fact
    assert fact is not None
    clock.advance(60)
    mem.search("quarterly plan", as_of=clock.now)
    seen = mem.get(fact.id)
    assert seen is not None and seen.access_count == 0


def test_expired_facts_are_not_returned(mem: Memory, clock: Clock) -> None:
    mem.store("Temporary token for the demo", decay_class="ephemeral")
    clock.advance(5 * 3600)
    assert mem.search("temporary token demo") == []
