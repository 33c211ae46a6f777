"""Entities: every name of one entity reaches the same facts, in lookup, search and recall;
aliases, merges and splits are declared with transaction time; bad names are typed errors."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from graphmem import Conflict, InvalidInput, Memory, NotFound
from graphmem.entities import EntityIndex, entity_key
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


def test_a_store_through_an_alias_supersedes_the_fact_of_the_canonical_name(
    mem: Memory,
) -> None:
    rome = mem.store("Melanie lives in Rome", entity="Melanie", key="city", value="Rome").fact
    mem.alias("Mellie", of="Melanie")
    paris = mem.store("Mellie moved to Paris", entity="Mellie", key="city", value="Paris")
    assert paris.action == "UPDATE" and paris.fact is not None and rome is not None
    assert paris.target_ids == (rome.id,)
    assert "the same entity as Melanie" in paris.reason
    assert [f.text for f in mem.history(paris.fact.id)] == [rome.text, paris.fact.text]
    assert [f.text for f in mem.lookup("Melanie", key="city")] == ["Mellie moved to Paris"]
    again = mem.store("Mel lives in Paris", entity="Mel", key="city", value="Paris")
    assert (again.action, again.target_ids) == ("NOOP", (paris.fact.id,))


def test_a_short_form_supersedes_in_its_batch_and_after_it(tmp_path) -> None:
    with Memory.open(tmp_path, embedder="hash") as m:
        first, second = m.store_many(
            [
                {
                    "text": "Caroline Smith works at Acme",
                    "entity": "Caroline Smith",
                    "key": "employer",
                    "value": "Acme",
                },
                {
                    "text": "Caroline joined Globex",
                    "entity": "Caroline",
                    "key": "employer",
                    "value": "Globex",
                },
            ]
        )
        assert second.action == "UPDATE" and first.fact is not None
        assert second.target_ids == (first.fact.id,)
        third = m.store("Caro now works at Initech", entity="Caro", key="employer", value="Initech")
        assert third.action == "UPDATE" and second.fact is not None
        assert third.target_ids == (second.fact.id,)


def test_names_of_other_entities_and_split_names_do_not_supersede(mem: Memory) -> None:
    lopez = mem.store("Lopez lives in Lima", entity="Lopez", key="city", value="Lima").fact
    mel = mem.store("Mel lives in Oslo", entity="Mel", key="city", value="Oslo").fact
    other = mem.store("Caroline lives in Rome", entity="Caroline", key="city", value="Rome")
    assert other.action == "ADD"
    mem.split_alias("Mel")
    melanie = mem.store("Melanie lives in Bern", entity="Melanie", key="city", value="Bern")
    assert melanie.action == "ADD" and lopez is not None and mel is not None
    assert {f.id for f in mem.lookup("Mel", key="city")} == {mel.id}
    assert (
        mem.store("Melvin lives in Riga", entity="Melvin", key="city", value="Riga").action == "ADD"
    )


#: Names that shorten, nickname, spell alike and share first words, to add in any order.
_FIRST = ["mel", "melanie", "melany", "melvin", "bob", "robert", "rob", "caroline", "carolyn"]
_FIRST += ["jon", "jonathan", "jonathon", "ann", "anna", "liz", "elizabeth", "mover", "mover0"]
_LAST = ["", "", "smith", "smyth", "jones", "brown", "browne"]


def _grouped(index: EntityIndex) -> list[list[str]]:
    return sorted(sorted(index.members(g)) for g in index.groups())


def test_an_index_grown_by_new_names_groups_as_one_built_with_them() -> None:
    rng = random.Random(3)
    names = sorted({f"{f} {last}".strip() for f in _FIRST for last in _LAST})
    grown = 0
    for _ in range(400):
        rng.shuffle(names)
        n = rng.randint(0, 10)
        before = [(x, x.title(), 1, float(i)) for i, x in enumerate(names[:n])]
        added = [(x, x.title(), 1, 100.0 + i) for i, x in enumerate(names[n : n + 3])]
        declared = (
            [(1, "alias", "Teacher", names[0], 0.0, None)] if n and rng.random() < 0.3 else []
        )
        index, whole = EntityIndex(before, declared), EntityIndex(before + added, declared)
        newcomers = index.newcomers([x.title() for x, *_ in added], 100.0)
        # Classifying by the index before: new names that join none are their own entity.
        if index.joins_none(list(newcomers)):
            assert all(whole.members(whole.token(k)) == [k] for k in newcomers)
        extended = index.extended(added)
        if extended is not None:
            grown += 1
            assert _grouped(extended) == _grouped(whole)
            for x in [*names[: n + 3], "Mel", "Bob", "Liz"]:
                a, b = extended.resolve(x, guess=True), whole.resolve(x, guess=True)
                assert (a and sorted(extended.names_of(a))) == (b and sorted(whole.names_of(b)))
    assert grown > 200  # most additions join nothing


def test_new_names_past_the_spelling_budget_count_as_names_that_may_join(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    index = EntityIndex([("ann smith", "Ann Smith", 1, 0.0)], [])
    newcomers = ["john smith", "jane smith", "pete smith"]  # spelt apart: they join none
    assert index.joins_none(newcomers)
    monkeypatch.setattr("graphmem.entities.SPELLING_CHECKS", 5)
    assert not EntityIndex([("ann smith", "Ann Smith", 1, 0.0)], []).joins_none(newcomers)
