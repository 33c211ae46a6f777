"""Valid time and transaction time on every read: get, search, lookup, history."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from graphmem import Conflict, InvalidInput, Memory, NotFound

from ..support.clock import Clock

pytestmark = [
    pytest.mark.engines,
    pytest.mark.quick_engines,
    pytest.mark.client_api,
    pytest.mark.quick_client_api,
]


@pytest.fixture
def moved(mem: Memory, clock: Clock) -> dict[str, object]:
    """Alice lived in Berlin from 2020 (stored 2020-02-01) and moved to Paris in June 2023
    (stored 2024-03-01)."""
    clock.set("2020-02-01T00:00:00+00:00")
    berlin = mem.store(
        "Alice lives in Berlin", entity="alice", key="city", value="Berlin", valid_from="2020-01-01"
    )
    clock.set("2024-03-01T00:00:00+00:00")
    stored_paris_at = clock.now
    paris = mem.store(
        "Alice lives in Paris", entity="alice", key="city", value="Paris", valid_from="2023-06-01"
    )
    clock.advance(86400)  # a day later (the default "stable" class lives 90 days)
    assert berlin.fact and paris.fact
    return {"berlin": berlin.fact.id, "paris": paris.fact.id, "stored_paris_at": stored_paris_at}


def texts(hits: list) -> list[str]:
    return [h.fact.text for h in hits]


def test_moving_supersedes_the_old_city_and_links_the_versions(mem: Memory, moved: dict) -> None:
    paris = mem.get(moved["paris"])
    assert paris is not None and paris.supersedes_id == moved["berlin"]
    berlin = mem.get(moved["berlin"], as_of="2021-01-01")
    assert berlin is not None
    assert berlin.superseded_by == moved["paris"]
    assert berlin.valid_until == datetime(2023, 6, 1, tzinfo=UTC)
    assert [f.id for f in mem.history(moved["paris"])] == [moved["berlin"], moved["paris"]]


def test_now_sees_paris_only(mem: Memory, moved: dict) -> None:
    assert texts(mem.search("where does Alice live")) == ["Alice lives in Paris"]
    assert [f.value for f in mem.lookup("alice", key="city")] == ["Paris"]
    assert mem.get(moved["berlin"]) is None


def test_as_of_2021_sees_berlin(mem: Memory, moved: dict) -> None:
    assert texts(mem.search("where does Alice live", as_of="2021-01-01")) == [
        "Alice lives in Berlin"
    ]
    assert [f.value for f in mem.lookup("alice", key="city", as_of="2021-01-01")] == ["Berlin"]
    assert mem.get(moved["paris"], as_of="2021-01-01") is None


def test_as_of_2024_known_before_the_move_was_stored_sees_berlin(mem: Memory, moved: dict) -> None:
    before = moved["stored_paris_at"] - 1
    hits = mem.search("where does Alice live", as_of="2024-01-01", known_at=before)
    assert texts(hits) == ["Alice lives in Berlin"]
    assert [
        f.value for f in mem.lookup("alice", key="city", as_of="2024-01-01", known_at=before)
    ] == ["Berlin"]
    # Known after it was stored, the same valid time shows Paris.
    assert texts(mem.search("where does Alice live", as_of="2024-01-01")) == [
        "Alice lives in Paris"
    ]
    # History as memory knew it then has only the Berlin version.
    assert [f.value for f in mem.history(moved["berlin"], known_at=before)] == ["Berlin"]


def test_forgetting_paris_hides_it_now_but_not_known_before_the_forget(
    mem: Memory, moved: dict, clock: Clock
) -> None:
    before_forget = clock.now
    clock.advance(3600)
    mem.forget(moved["paris"])
    assert "Alice lives in Paris" not in texts(mem.search("Alice lives in Paris"))
    assert mem.get(moved["paris"]) is None
    assert mem.lookup("alice", key="city") == []  # Berlin stays ended: forgetting is no undo
    assert texts(mem.search("Alice lives in Paris", known_at=before_forget))[0] == (
        "Alice lives in Paris"
    )
    assert mem.get(moved["paris"], known_at=before_forget) is not None
    assert [f.value for f in mem.history(moved["berlin"])] == ["Berlin"]
    assert [f.value for f in mem.history(moved["berlin"], known_at=before_forget)] == [
        "Berlin",
        "Paris",
    ]


def test_forgetting_twice_is_a_conflict_and_unknown_ids_are_not_found(
    mem: Memory, moved: dict
) -> None:
    mem.forget(moved["paris"])
    with pytest.raises(Conflict):
        mem.forget(moved["paris"])
    with pytest.raises(NotFound):
        mem.forget("no-such-id")
    with pytest.raises(NotFound):
        mem.history("no-such-id")
    assert mem.get("no-such-id") is None


def test_a_fact_about_the_past_is_visible_as_of_its_valid_time(mem: Memory) -> None:
    mem.store("The Berlin Wall fell", valid_from="1989-11-09")
    assert texts(mem.search("Berlin Wall", as_of="1990-01-01")) == ["The Berlin Wall fell"]
    assert mem.search("Berlin Wall", as_of="1980-01-01") == []


def test_a_read_known_before_a_fact_was_recorded_does_not_see_it(mem: Memory, clock: Clock) -> None:
    before = clock.now
    clock.advance(60)
    mem.store("Bob plays the cello")
    assert mem.search("cello", known_at=before) == []
    assert texts(mem.search("cello")) == ["Bob plays the cello"]


def test_explicit_supersedes_replaces_a_live_fact(mem: Memory, clock: Clock) -> None:
    old = mem.store("Use npm for the frontend")
    clock.advance(60)
    new = mem.store("Use pnpm for the frontend", supersedes=old.fact.id)  # type: ignore[union-attr]
    assert new.action == "UPDATE" and new.target_ids == (old.fact.id,)  # type: ignore[union-attr]
    assert texts(mem.search("frontend package manager")) == ["Use pnpm for the frontend"]
    both = mem.search("frontend", include_superseded=True)
    assert sorted(texts(both)) == ["Use npm for the frontend", "Use pnpm for the frontend"]


def test_superseding_a_fact_that_is_not_live_is_a_conflict_and_writes_nothing(
    mem: Memory, clock: Clock
) -> None:
    old = mem.store("Use npm").fact
    assert old is not None
    mem.store("Use pnpm", supersedes=old.id)
    before = mem.stats().facts
    with pytest.raises(Conflict):
        mem.store("Use yarn", supersedes=old.id)
    with pytest.raises(NotFound):
        mem.store("Use bun", supersedes="no-such-id")
    assert mem.stats().facts == before


def test_superseding_with_a_start_before_the_old_fact_is_invalid(mem: Memory) -> None:
    old = mem.store("Team size is 5", valid_from="2024-01-01").fact
    assert old is not None
    with pytest.raises(InvalidInput, match="valid_from"):
        mem.store("Team size is 6", valid_from="2023-01-01", supersedes=old.id)


def test_a_back_dated_value_is_recorded_as_history_not_as_the_current_one(mem: Memory) -> None:
    mem.store(
        "Carol works at Acme", entity="carol", key="employer", value="Acme", valid_from="2022-01-01"
    )
    older = mem.store(
        "Carol works at Initech",
        entity="carol",
        key="employer",
        value="Initech",
        valid_from="2019-01-01",
    )
    assert older.action == "ADD"
    assert [f.value for f in mem.lookup("carol", key="employer")] == ["Acme"]
    assert [f.value for f in mem.lookup("carol", key="employer", as_of="2020-06-01")] == ["Initech"]
    assert older.fact is not None
    assert [f.value for f in mem.history(older.fact.id)] == ["Initech", "Acme"]


def test_times_are_accepted_as_iso_epoch_or_datetime_and_returned_as_utc(mem: Memory) -> None:
    a = mem.store("Event A", valid_from="2024-05-01T12:00:00+02:00").fact
    b = mem.store("Event B", valid_from=1714557600).fact
    c = mem.store("Event C", valid_from=datetime(2024, 5, 1, 10, tzinfo=UTC)).fact
    assert a and b and c
    assert a.valid_from == b.valid_from == c.valid_from == datetime(2024, 5, 1, 10, tzinfo=UTC)
    assert a.valid_from.tzinfo is not None
    assert a.to_dict()["valid_from"] == "2024-05-01T10:00:00Z"


@pytest.mark.parametrize("bad", ["yesterday", "2024-13-01", "", "1e400"])
def test_unparsable_dates_are_rejected_with_a_typed_error(mem: Memory, bad: str) -> None:
    with pytest.raises(InvalidInput):
        mem.store("Something happened", valid_from=bad)
    with pytest.raises(InvalidInput):
        mem.search("something", as_of=bad)
    assert mem.stats().facts == 0


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def test_epoch_zero_is_a_time_like_any_other_not_a_missing_one(mem: Memory) -> None:
    start = mem.store("The Unix clock started", valid_from=0).fact
    stated = mem.store("A note dated at the epoch", source_date=0).fact
    assert start is not None and stated is not None
    assert start.valid_from == EPOCH  # not the moment it was stored
    assert stated.valid_from == EPOCH  # valid_from falls back to the source date, even 0
    later = mem.store("The Unix clock kept going", valid_from="2024-05-01").fact
    assert later is not None
    link = mem.link(later.id, start.id, "CAUSED_BY", valid_from=0)
    assert link.valid_from == EPOCH
    assert [k.id for k in mem.links(start.id, as_of="1971")] == [link.id]


def test_a_source_date_at_the_epoch_is_searchable_by_its_date(mem: Memory) -> None:
    fact = mem.store("Release notes", source_date=0, valid_from="2024-05-01").fact
    assert fact is not None
    hits = mem.search("January 1970", mode="fts", as_of="2024-06-01")
    assert [h.fact.id for h in hits] == [fact.id]
