"""Decay classes, TTLs, refresh on access, prune (hard, soft, dry run, and by the server when it
starts; of facts and of the turns capture keeps), backfill and stats."""

from __future__ import annotations

from pathlib import Path

import pytest
from graphmem.server import create_app

from graphmem import Memory, Settings
from graphmem.decay import DECAY_CLASSES, TTL_SECONDS, classify_decay

from ..support.clock import Clock
from ..support.graphql_clients import InProcess

pytestmark = pytest.mark.client_api

HOUR = 3600
DAY = 24 * HOUR


@pytest.mark.parametrize(
    ("decay_class", "ttl"),
    [
        ("permanent", None),
        ("durable", 90 * DAY),
        ("normal", 14 * DAY),
        ("short", 2 * DAY),
        ("ephemeral", 4 * HOUR),
        ("stable", 90 * DAY),
        ("active", 14 * DAY),
        ("session", 24 * HOUR),
        ("checkpoint", 4 * HOUR),
        ("turn", 180 * DAY),
    ],
)
def test_every_class_expires_after_its_ttl(
    mem: Memory, clock: Clock, decay_class: str, ttl: int | None
) -> None:
    fact = mem.store(f"A {decay_class} note about the heat pump", decay_class=decay_class).fact
    assert fact is not None
    if ttl is None:
        assert fact.expires_at is None
        clock.advance(10 * 365 * DAY)
        assert mem.get(fact.id) is not None
        return
    assert fact.expires_at is not None
    assert fact.expires_at.timestamp() == pytest.approx(clock.now + ttl)
    clock.advance(ttl - 1)
    assert mem.get(fact.id) is not None
    clock.advance(2)
    assert mem.get(fact.id) is None
    # Memory knew it before it expired.
    assert mem.get(fact.id, known_at=clock.now - 3) is not None


def test_there_are_ten_classes() -> None:
    assert len(DECAY_CLASSES) == 10 and set(TTL_SECONDS) == set(DECAY_CLASSES)


@pytest.mark.parametrize(
    ("entity", "key", "text", "expected"),
    [
        ("user", "email", "User's email is a@b.c", "permanent"),
        ("user", "birthday", "Born on 13 Nov", "permanent"),
        ("decision", None, "Use tabs", "permanent"),
        (None, None, "We decided to always use UTC", "permanent"),
        (None, "current_file", "main.py", "session"),
        (None, None, "Currently debugging the importer", "session"),
        (None, "todo", "Write the changelog", "active"),
        (None, None, "Working on the sprint board", "active"),
        (None, None, "Preflight checks passed", "checkpoint"),
        (None, None, "The office plant is a ficus", "stable"),
    ],
)
def test_decay_heuristics_pick_the_class_their_words_name(
    entity: str | None, key: str | None, text: str, expected: str
) -> None:
    assert classify_decay(entity, key, None, text) == expected


def test_a_fact_about_1990_stored_today_is_as_fresh_as_any(mem: Memory, clock: Clock) -> None:
    fact = mem.store("The office moved in 1990", valid_from="1990-01-01", decay_class="normal").fact
    assert fact is not None and fact.expires_at is not None
    assert fact.expires_at.timestamp() == pytest.approx(clock.now + 14 * DAY)


@pytest.mark.in_process("reads Memory.check")
def test_hard_prune_deletes_expired_facts_for_good(mem: Memory, clock: Clock) -> None:
    gone = mem.store("Scratch: port 8080 is free", decay_class="ephemeral").fact
    kept = mem.store("The NAS is at 10.0.0.5", decay_class="permanent").fact
    assert gone and kept
    clock.advance(5 * HOUR)
    assert mem.stats().expired_pending_prune == 1
    report = mem.prune()
    assert report.expired == 1
    assert mem.get(gone.id, known_at=clock.now - 4 * HOUR) is None  # not even history
    assert mem.get(kept.id) is not None
    assert mem.stats().facts == 1 and mem.stats().vectors == 1
    assert mem.check().ok


def test_dry_run_counts_without_changing_anything(mem: Memory, clock: Clock) -> None:
    mem.store("Scratch value", decay_class="ephemeral")
    note = mem.store("Sprint note", decay_class="normal").fact
    assert note is not None
    clock.advance(11 * DAY)  # ephemeral expired; normal past 75% of 14 days
    report = mem.prune(dry_run=True)
    assert (report.expired, report.decayed, report.dry_run) == (1, 1, True)
    assert mem.stats().facts == 2
    assert mem.get(note.id).confidence == 1.0  # type: ignore[union-attr]


def test_soft_decay_halves_confidence_past_75_percent_then_deletes(
    mem: Memory, clock: Clock
) -> None:
    fact = mem.store("Sprint note about the billing page", decay_class="normal").fact
    fresh = mem.store("Another sprint note, fresh", decay_class="normal")
    assert fact is not None and fresh.fact is not None
    clock.advance(11 * DAY)
    newer = mem.store("Brand new sprint note", decay_class="normal").fact
    assert newer is not None
    assert mem.prune(soft=True).decayed == 2
    aged = mem.get(fact.id)
    assert aged is not None and aged.confidence == 0.5
    assert mem.get(newer.id).confidence == 1.0  # type: ignore[union-attr]
    for _ in range(3):
        mem.prune(soft=True)  # 0.25, 0.125, then 0.0625 < 0.1: deleted
    assert mem.get(fact.id, known_at=clock.now) is None
    assert mem.stats().facts == 1


def test_soft_prune_leaves_expired_facts_to_the_hard_prune(mem: Memory, clock: Clock) -> None:
    mem.store("Scratch value", decay_class="ephemeral")
    clock.advance(5 * HOUR)
    report = mem.prune(soft=True)
    assert report.expired == 0
    assert mem.stats().facts == 1
    assert mem.prune().expired == 1


def test_recall_keeps_a_refreshable_fact_alive(mem: Memory, clock: Clock) -> None:
    fact = mem.store("The wifi password hint is the cat's name", decay_class="normal").fact
    assert fact is not None
    for _ in range(4):
        clock.advance(10 * DAY)
        assert mem.search("wifi password hint")  # each access restarts the 14 days
    mem.prune()
    assert mem.get(fact.id) is not None


@pytest.mark.in_process("backfill_decay is not in the GraphQL API")
def test_backfill_reclassifies_and_recomputes_expiry(mem: Memory, clock: Clock) -> None:
    fact = mem.store("We decided to use UTC everywhere", decay_class="short").fact
    assert fact is not None
    assert mem.backfill_decay(dry_run=True) == {"permanent": 1}
    assert mem.get(fact.id).decay_class == "short"  # type: ignore[union-attr]
    assert mem.backfill_decay() == {"permanent": 1}
    after = mem.get(fact.id)
    assert after is not None and after.decay_class == "permanent" and after.expires_at is None
    assert mem.backfill_decay() == {}


def test_stats_count_live_facts_per_class(mem: Memory, clock: Clock) -> None:
    mem.store("Decided: tabs not spaces")
    mem.store("Todo: rotate keys", key="todo")
    mem.store("Scratch", decay_class="ephemeral")
    stats = mem.stats()
    assert set(stats.by_decay_class) == set(DECAY_CLASSES)
    assert (
        stats.by_decay_class["permanent"],
        stats.by_decay_class["active"],
        stats.by_decay_class["ephemeral"],
    ) == (1, 1, 1)
    clock.advance(5 * HOUR)
    assert mem.stats().by_decay_class["ephemeral"] == 0
    assert mem.stats().expired_pending_prune == 1


def test_the_server_prunes_expired_facts_when_it_starts(data_dir: Path, clock: Clock) -> None:
    settings = Settings(embedder="hash", data_dir=data_dir)
    with Memory.open(data_dir, settings=settings, clock=clock) as mem:
        mem.store("A one-off discount code valid today", expires_at=clock.now + 60)
        mem.store("The office is in Lisbon")
    clock.advance(3600)
    with InProcess(create_app(settings, clock=clock)) as client:
        stats = client.data("{ stats { data } }")["stats"]["data"]
    assert (stats["facts"], stats["expired_pending_prune"]) == (1, 0)  # deleted, not just hidden


# ------------------------------------------------------------------------ conversation turns

#: A session whose turns say "Tessaly" (no fact drawn from them does), and a fact drawn on top
#: that never expires (a decision).
DECIDED = [
    {
        "role": "user",
        "content": "Good morning from Tessaly. We decided to use Quillgate for the billing queue.",
    },
    {"role": "assistant", "content": "Nice, the Quillgate docs mention Tessaly too."},
]
#: A session with nothing to draw: turns only.
FERRY = [
    {"role": "user", "content": "Is the ferry timetable to Vrontimal out yet?"},
    {"role": "assistant", "content": "Yes, the ferry timetable to Vrontimal came out on Monday."},
]


@pytest.mark.in_process("reads the store's windows")
def test_a_turn_is_kept_180_days_each_recall_starting_them_again_then_pruned(
    mem: Memory, clock: Clock
) -> None:
    first, decision, second = (r.fact for r in mem.capture(DECIDED, episode="billing"))
    assert first and decision and second and decision.decay_class == "permanent"
    ferry = [r.fact.id for r in mem.capture(FERRY, episode="ferry") if r.fact is not None]
    assert first.decay_class == "turn" and first.expires_at is not None
    assert first.expires_at.timestamp() == pytest.approx(clock.now + 180 * DAY)
    assert mem._store.windows_holding([first.id, second.id])  # the session's windows of turns
    clock.advance(170 * DAY)
    assert {f.id for f in mem.recall("ferry timetable to Vrontimal").facts} == set(ferry)
    clock.advance(20 * DAY)  # 190 days after the capture, 20 after the recall
    assert mem.get(first.id) is None and mem.get(second.id) is None
    assert all(mem.get(i) is not None for i in ferry)
    assert mem.stats().expired_pending_prune == 2
    assert mem.prune().expired == 2
    assert mem.get(first.id, known_at=clock.now - 100 * DAY) is None  # not even history
    assert mem._store.windows_holding([first.id, second.id]) == {}  # the windows cut again
    assert mem._store.window_matches("Tessaly", 10) == {}
    assert mem.search("Tessaly", mode="fts") == [] and mem.get(decision.id) is not None
    assert mem.check().ok


def test_backfill_leaves_turns_in_the_class_capture_gave_them(data_dir: Path, clock: Clock) -> None:
    """The heuristics would call the first turn permanent ("decided") and the second stable;
    a turn is kept for as long as the conversation is, whatever it says."""
    for keep in ("turn", "durable"):
        settings = Settings(embedder="hash", turn_decay_class=keep)
        with Memory.open(data_dir / keep, settings=settings, clock=clock) as mem:
            turns = [r.fact.id for r in mem.capture(DECIDED) if r.kind == "turn" and r.fact]
            moved = mem.store("We decided to use UTC everywhere", decay_class="short").fact
            assert len(turns) == 2 and moved is not None
            assert mem.backfill_decay() == {"permanent": 1}  # the fact, not the turns
            assert {mem.get(i).decay_class for i in turns} == {keep}  # type: ignore[union-attr]
