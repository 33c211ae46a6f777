"""Automatic links on store: similarity links, same-entity links, their switches
and bounds. The hash embedder's cosines are word overlap; the threshold is set to 0.6 here."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from graphmem import Memory, NotFound, Settings, autolink
from graphmem.models import Fact

from ..support.clock import Clock

pytestmark = pytest.mark.client_api


@pytest.fixture
def settings() -> Settings:
    return Settings(embedder="hash", autolink_threshold=0.6)


def store(mem: Memory, text: str, **kw: Any) -> Fact:
    fact = mem.store(text, **kw).fact
    assert fact is not None
    return fact


def auto_links(mem: Memory, fact: Fact) -> list[tuple[str, str, str]]:
    """(target, origin, type) of the fact's automatic links, strongest first."""
    return [
        (k.target_id, k.origin, k.type)
        for k in mem.links(fact.id, direction="out")
        if k.origin.startswith("auto")
    ]


@pytest.mark.in_process("reads the embedder")
def test_a_similar_new_fact_is_linked_to_its_neighbour(mem: Memory) -> None:
    rust = store(mem, "The payments service is written in Rust")
    lunch = store(mem, "Lunch is at noon on Fridays")
    go = store(mem, "The payments service is written in Go")
    [link] = mem.links(go.id)
    assert (link.source_id, link.target_id, link.type, link.origin) == (
        go.id,
        rust.id,
        "RELATED_TO",
        "auto_similarity",
    )
    cosine = float(mem.embedder.embed([go.text])[0] @ mem.embedder.embed([rust.text])[0])
    assert link.strength == pytest.approx(cosine, abs=1e-3) and link.strength >= 0.6
    assert mem.links(lunch.id) == []
    # Links count in traversal like any other.
    assert {n.fact.id for n in mem.traverse(rust.id).nodes} == {rust.id, go.id}


def test_switches_per_call_per_item_and_in_settings(tmp_path: Path, clock: Clock) -> None:
    texts = ["The payments service is written in Rust", "The payments service is written in Go"]
    off = Settings(embedder="hash", autolink_threshold=0.6, autolink=False)
    with Memory.open(tmp_path / "off", settings=off, clock=clock) as mem:
        results = mem.store_many([{"text": t} for t in texts])
        assert mem.stats().links == 0
        # An item can ask for links although the settings say no.
        third = mem.store_many(
            [{"text": "The payments service is deployed in Rust", "autolink": True}]
        )[0].fact
        assert third is not None and len(auto_links(mem, third)) == 2
    on = Settings(embedder="hash", autolink_threshold=0.6)
    with Memory.open(tmp_path / "on", settings=on, clock=clock) as mem:
        mem.store(texts[0])
        assert mem.store(texts[1], autolink=False).fact is not None
        results = mem.store_many(
            [{"text": "The payments service is deployed in Rust"}], autolink=False
        )
        assert results[0].fact is not None and mem.stats().links == 0


def test_each_fact_gets_at_most_autolink_max_links_strongest_first(
    tmp_path: Path, clock: Clock
) -> None:
    settings = Settings(embedder="hash", autolink_threshold=0.5, autolink_max=3)
    with Memory.open(tmp_path / "d", settings=settings, clock=clock) as mem:
        mem.store_many(
            [{"text": f"The deploy of service {i} to region eu-west went fine"} for i in range(8)],
            autolink=False,
        )
        new = store(mem, "The deploy of service 9 to region eu-west went fine")
        links = mem.links(new.id, direction="out")
        assert len(links) == 3
        assert [k.strength for k in links] == sorted((k.strength for k in links), reverse=True)


def test_items_of_one_batch_link_to_earlier_items(mem: Memory) -> None:
    results = mem.store_many(
        [
            {"text": "The payments service is written in Rust"},
            {"text": "Lunch is at noon on Fridays"},
            {"text": "The payments service is written in Go"},
        ]
    )
    first, lunch, last = (r.fact for r in results)
    assert first and lunch and last
    assert auto_links(mem, last) == [(first.id, "auto_similarity", "RELATED_TO")]
    assert auto_links(mem, first) == [] and mem.links(lunch.id) == []


def test_no_automatic_link_to_the_superseded_version_or_a_forgotten_fact(mem: Memory) -> None:
    old = store(
        mem,
        "The payments service is written in Rust",
        entity="payments",
        key="language",
        value="Rust",
    )
    new = store(
        mem, "The payments service is written in Go", entity="payments", key="language", value="Go"
    )
    assert [(k.type, k.target_id) for k in mem.links(new.id, direction="out")] == [
        ("SUPERSEDES", old.id)
    ]
    mem.forget(new.id)
    again = store(mem, "The payments service is deployed in Go")
    assert auto_links(mem, again) == []


def test_links_are_valid_from_the_later_fact(mem: Memory, clock: Clock) -> None:
    clock.set("2026-01-01T00:00:00+00:00")
    rust = store(mem, "The payments service is written in Rust", valid_from="2020-01-01")
    go = store(mem, "The payments service is written in Go", valid_from="2024-01-01")
    [link] = mem.links(go.id)
    assert link.valid_from == go.valid_from
    assert mem.links(rust.id, as_of="2023-06-01") == []
    assert len(mem.links(rust.id, as_of="2025-01-01")) == 1


def test_a_failed_batch_writes_no_links(mem: Memory) -> None:
    store(mem, "The payments service is written in Rust")
    with pytest.raises(NotFound):
        mem.store_many(
            [
                {"text": "The payments service is written in Go"},
                {"text": "Something else", "supersedes": "no-such-id"},
            ]
        )
    assert mem.stats().links == 0 and mem.stats().current == 1


def test_entity_links_are_off_by_default_and_bounded_when_on(
    mem: Memory, tmp_path: Path, clock: Clock
) -> None:
    texts = [
        f"Alice note {i}: {word}"
        for i, word in enumerate(
            [
                "tea",
                "chess",
                "rowing",
                "berlin",
                "python",
                "cats",
                "jazz",
                "hiking",
                "piano",
                "sushi",
                "dune",
                "tango",
            ]
        )
    ]
    mem.store_many([{"text": t, "entity": "Alice"} for t in texts])
    assert all(k.origin != "auto_entity" for f in mem.lookup("alice") for k in mem.links(f.id))
    on = Settings(embedder="hash", entity_links=True, entity_links_max=3, autolink=False)
    with Memory.open(tmp_path / "entities", settings=on, clock=clock) as em:
        ids: list[str] = []
        for t in texts:  # one at a time, and then a batch: the same bound
            ids.append(store(em, t, entity="alice" if len(ids) % 2 else "Alice").id)
        batch = em.store_many([{"text": f"Alice later {i}", "entity": "ALICE"} for i in range(5)])
        ids += [r.fact.id for r in batch if r.fact]
        other = store(em, "Bob likes tea", entity="Bob")
        for i, fact_id in enumerate(ids):
            out = em.links(fact_id, direction="out")
            assert [k.target_id for k in out] == ids[max(0, i - 3) : i][::-1]  # newest first
            assert all(
                k.origin == "auto_entity" and k.strength == autolink.ENTITY_LINK_STRENGTH
                for k in out
            )
            # a popular entity makes no hub: each fact is linked from at most 3 newer ones
            assert len(em.links(fact_id, direction="in")) <= 3
        assert em.links(other.id) == []


@pytest.fixture
def many(tmp_path: Path, clock: Clock) -> Iterator[Memory]:
    with Memory.open(tmp_path / "m", settings=Settings(embedder="hash"), clock=clock) as mem:
        yield mem


def test_the_default_hash_threshold_links_only_near_copies(many: Memory) -> None:
    a = store(many, "The payments service is written in Rust")
    assert auto_links(many, store(many, "The payments service is written in Go")) == []
    close = store(many, "The payments service is written in Rust, mostly")
    assert auto_links(many, close) == [(a.id, "auto_similarity", "RELATED_TO")]
