"""Crashes and concurrency: a real server SIGKILLed in the middle of bulk ingests, and many
writers and readers over HTTP at once (tests/system/soak.py holds the scenarios; `make soak` runs
them at length). Plus the race they look for, pinned down deterministically: a supersession
that commits between the two legs of a search."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from graphmem import Memory

from ..support.clock import Clock
from . import soak


@pytest.mark.integration
def test_a_server_killed_in_the_middle_of_bulk_ingests_loses_and_duplicates_nothing(
    tmp_path: Path,
) -> None:
    result = soak.crash(tmp_path / "data", kills=2, clients=3, batch=40, max_wait=1.5)
    assert result.problems == []
    assert result.acknowledged >= 40  # each round got some writes in before its kill


@pytest.mark.integration
def test_sixteen_writers_and_sixteen_readers_over_http_see_no_errors_or_half_writes(
    tmp_path: Path,
) -> None:
    result = soak.load(tmp_path / "data", writers=16, readers=16, seconds=8, operations=2_000)
    figures = result.to_dict()
    assert result.failures == [], result.failures[:3]  # "database is locked" would land here
    assert result.read_timeouts == 0, figures
    assert result.anomalies == [], result.anomalies[:3]
    assert result.problems == []
    assert result.writes > 16 and result.reads > 16, figures


@pytest.mark.slow
@pytest.mark.integration
def test_twenty_kills_at_random_moments_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    result = soak.crash(tmp_path / "data", kills=20)
    assert result.problems == [] and result.acknowledged > 0


@pytest.mark.slow
@pytest.mark.integration
def test_two_minutes_of_sixteen_writers_and_sixteen_readers(tmp_path: Path) -> None:
    result = soak.load(tmp_path / "data", seconds=120)
    assert (result.failures, result.anomalies, result.problems) == ([], [], [])
    assert result.read_timeouts == 0


def test_a_supersession_between_the_legs_of_a_search_never_shows_both_versions(
    mem: Memory, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = mem.store("Ana lives in Berlin near the river", entity="Ana", key="city", value="Berlin")
    assert old.fact is not None
    clock.advance(60)
    superseded = threading.Event()
    fts_leg, vector_leg = mem._store.keyword_matches, mem._search._vector_leg

    def keyword_then_write(*args: Any) -> Any:
        found = fts_leg(*args)  # sees Berlin, the current version
        mem.store("Ana lives in Paris near the river", entity="Ana", key="city", value="Paris")
        superseded.set()
        return found

    def vector_after_write(*args: Any) -> Any:
        superseded.wait(10)
        return vector_leg(*args)  # sees Paris, the current version by now

    monkeypatch.setattr(mem._store, "keyword_matches", keyword_then_write)
    monkeypatch.setattr(mem._search, "_vector_leg", vector_after_write)
    hits = mem.search("Ana lives near the river")
    assert [h.fact.value for h in hits] == ["Paris"]
    assert all(h.fact.valid_until is None for h in hits)
