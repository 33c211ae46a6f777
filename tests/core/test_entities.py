"""Entities: every name of one entity reaches the same facts, in lookup, search and recall;
aliases, merges and splits are declared with transaction time; bad names are typed errors."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from graphmem import Conflict, InvalidInput, Memory, NotFound
from graphmem.entities import entity_key
from graphmem.limits import MAX_FIELD_LENGTH

from ..support.clock import Clock


@pytest.fixture
def mem(tmp_path, clock: Clock) -> Iterator[Memory]:
    with Memory.open(tmp_path, embedder="hash", clock=clock) as m:
        m.store_many(
            [
                {"text": "Melanie paints sunsets by the lake", "entity": "Melanie"},
                {"text": "Mel ran a charity race in June", "entity": "Mel"},
                {"text": "Caroline went to a support group", "entity": "Caroline"},
                {"text": "Mrs Lopez teaches chemistry", "entity": "Lopez"},
            ]
        )
        yield m


def test_a_name_is_keyed_by_case_spacing_possessive_and_punctuation() -> None:
    assert {entity_key(n) for n in ["Melanie's", "melanie\u2019s", "  MELANIE ", "Melanie."]} == {
        "melanie"
    }
    assert entity_key("Jean-Luc") == "jean luc"


def test_mel_melanie_and_melanies_reach_the_same_facts(mem: Memory) -> None:
    texts = {f.text for f in mem.lookup("Melanie")}
    assert texts == {"Melanie paints sunsets by the lake", "Mel ran a charity race in June"}
    assert {f.text for f in mem.lookup("mel")} == texts
    assert {f.text for f in mem.lookup("melanie\u2019s")} == texts
    assert mem.entity("Mel") == mem.entity("Melanie")
    assert {n for e in mem.entities() for n in e.names} == {"Melanie", "Mel", "Caroline", "Lopez"}


def test_a_short_form_that_fits_two_entities_joins_neither(tmp_path) -> None:
    with Memory.open(tmp_path, embedder="hash") as m:
        m.store_many(
            [
                {"text": "Melanie paints", "entity": "Melanie"},
                {"text": "Melvin codes", "entity": "Melvin"},
                {"text": "Mel runs", "entity": "Mel"},
            ]
        )
        assert [f.text for f in m.lookup("Mel")] == ["Mel runs"]
        assert len(m.entities()) == 3


def test_near_spellings_are_one_entity_but_other_first_names_are_not(tmp_path) -> None:
    with Memory.open(tmp_path, embedder="hash") as m:
        m.store_many(
            [
                {"text": "Melanie Smith paints", "entity": "Melanie Smith"},
                {"text": "Melany Smith sings", "entity": "Melany Smith"},
                {"text": "John Smith codes", "entity": "John Smith"},
                {"text": "Jane Smith cooks", "entity": "Jane Smith"},
            ]
        )
        assert {f.text for f in m.lookup("Melany Smith")} == {
            "Melanie Smith paints",
            "Melany Smith sings",
        }
        assert [f.text for f in m.lookup("Jane Smith")] == ["Jane Smith cooks"]


def test_names_that_differ_in_a_number_are_other_entities(tmp_path) -> None:
    with Memory.open(tmp_path, embedder="hash") as m:
        m.store_many(
            [
                {"text": "mover0 lives in Lisbon", "entity": "mover0", "key": "city"},
                {"text": "mover1 lives in Porto", "entity": "mover1", "key": "city"},
                {"text": "Room 101 is booked", "entity": "Room 101"},
                {"text": "Room 102 is free", "entity": "Room 102"},
            ]
        )
        assert [f.text for f in m.lookup("mover0")] == ["mover0 lives in Lisbon"]
        assert [f.text for f in m.lookup("Room 102")] == ["Room 102 is free"]
        m.store("The mover arrived", entity="mover")  # not a short form of "mover0"
        assert [f.text for f in m.lookup("mover")] == ["The mover arrived"]


def test_the_search_boost_and_the_entity_filter_reach_a_declared_alias(mem: Memory) -> None:
    mem.alias("Teacher", of="Lopez")
    assert [f.text for f in mem.lookup("teacher")] == ["Mrs Lopez teaches chemistry"]
    hits = mem.search("what does the teacher teach", entity="Teacher")
    assert [h.fact.text for h in hits] == ["Mrs Lopez teaches chemistry"]
    [hit] = [h for h in mem.search("what does Teacher do") if h.fact.entity == "Lopez"]
    assert hit.entity_matched == "Lopez"


def test_recall_brings_the_facts_of_an_alias_the_prompt_names(mem: Memory) -> None:
    mem.alias("Teacher", of="Lopez")
    block = mem.recall("Tell me about Teacher")
    assert "Mrs Lopez teaches chemistry" in block.context


def test_an_alias_is_seen_only_by_reads_known_after_it_was_declared(
    mem: Memory, clock: Clock
) -> None:
    clock.advance(60)
    before = clock.now - 30
    mem.alias("Teacher", of="Lopez")
    assert mem.lookup("Teacher", known_at=before) == []
    assert mem.entity("Lopez", known_at=before).aliases == ()
    assert mem.entity("Lopez").aliases == ("Teacher",)
    clock.advance(60)
    mem.split_alias("Teacher")
    assert mem.lookup("Teacher") == []
    with pytest.raises(NotFound):
        mem.entity("Teacher")
    middle = clock.now - 30
    assert [f.text for f in mem.lookup("Teacher", known_at=middle)] == [
        "Mrs Lopez teaches chemistry"
    ]


def test_merge_and_split_change_what_a_name_reaches(mem: Memory) -> None:
    merged = mem.merge_entities("Caroline", "Lopez")
    assert merged.name == "Caroline" and set(merged.names) == {"Caroline", "Lopez"}
    assert len(mem.lookup("Lopez")) == 2
    left = mem.split_alias("Lopez")
    assert left.names == ("Caroline",)
    assert [f.text for f in mem.lookup("Lopez")] == ["Mrs Lopez teaches chemistry"]
    mem.split_alias("Mel")  # found by the rules, not declared
    assert [f.text for f in mem.lookup("Mel")] == ["Mel ran a charity race in June"]
    with pytest.raises(Conflict):
        mem.split_alias("Caroline")


def test_bad_names_and_unknown_entities_are_typed_errors(mem: Memory) -> None:
    for bad in ["", "   ", "!!", "x" * (MAX_FIELD_LENGTH + 1), "a\x00b"]:
        with pytest.raises(InvalidInput):
            mem.alias(bad, of="Melanie")
        with pytest.raises(InvalidInput):
            mem.entity(bad)
    with pytest.raises(NotFound):
        mem.alias("Prof", of="Nobody Known")
    with pytest.raises(NotFound):
        mem.merge_entities("Melanie", "Nobody Known")


def test_a_purge_leaves_no_name_or_alias_that_only_the_purged_facts_carried(mem: Memory) -> None:
    mem.alias("Chem Teacher", of="Lopez")
    mem.purge(entity="Lopez")
    with pytest.raises(NotFound):
        mem.entity("Chem Teacher")
    assert "Lopez" not in {n for e in mem.entities() for n in e.names}
    mem.store("Mrs Lopez moved away", entity="Lopez")
    assert mem.entity("Lopez").aliases == ()


def test_entity_names_are_rebuilt_from_the_facts(mem: Memory) -> None:
    listed = mem.entities()
    assert mem.rebuild_entities() == 4
    assert mem.entities() == listed
