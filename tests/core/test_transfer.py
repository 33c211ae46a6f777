"""Export and import: a lossless JSON Lines round trip, all-or-nothing imports."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from graphmem import InvalidInput, Memory, Settings

from ..support.clock import Clock


def export_text(mem: Memory) -> str:
    out = io.StringIO()
    mem.export_jsonl(out)
    return out.getvalue()


@pytest.fixture
def populated(mem: Memory, clock: Clock) -> Memory:
    mem.store(
        "Alice lives in Berlin",
        entity="alice",
        key="city",
        value="Berlin",
        valid_from="2020-01-01",
        tags=["people"],
        source="chat",
    )
    clock.advance(3600.123456)
    mem.store(
        "Alice lives in Paris",
        entity="alice",
        key="city",
        value="Paris",
        valid_from="2023-06-01",
        why="she said so",
        summary="Paris",
        context="moving talk",
    )
    gone = mem.store("A retracted note").fact
    assert gone is not None
    clock.advance(10)
    mem.forget(gone.id)
    mem.store("Scratch idea", decay_class="ephemeral", importance=0.2, confidence=0.7)
    mem.search("Alice")  # access counts and refreshed TTLs must survive too
    return mem


def test_export_then_import_into_an_empty_store_gives_an_identical_export(
    populated: Memory, tmp_path: Path, clock: Clock
) -> None:
    first = export_text(populated)
    lines = first.splitlines()
    assert json.loads(lines[0])["kind"] == "header"
    assert sum(json.loads(x)["kind"] == "fact" for x in lines) == 4
    assert sum(json.loads(x)["kind"] == "link" for x in lines) == 1
    with Memory.open(tmp_path / "copy", settings=Settings(embedder="hash"), clock=clock) as copy:
        report = copy.import_jsonl(io.StringIO(first))
        assert (report.facts, report.links, report.skipped_existing) == (4, 1, 0)
        assert export_text(copy) == first
        assert copy.check().ok
        assert [h.fact.text for h in copy.search("where does alice live", as_of="2021-01-01")] == [
            "Alice lives in Berlin"
        ]


def test_importing_again_skips_existing_ids(populated: Memory) -> None:
    report = populated.import_jsonl(io.StringIO(export_text(populated)))
    assert (report.facts, report.links, report.skipped_existing) == (0, 0, 5)


def _another_link(lines: list[str], **fields: object) -> str:
    """A link line of the export under a new id, with ``fields`` changed."""
    link = json.loads(next(x for x in lines if '"kind": "link"' in x))
    return json.dumps({**link, "id": "another", **fields})


def _another_fact(lines: list[str], **fields: object) -> str:
    """A fact line of the export under a new id, with ``fields`` changed."""
    fact = json.loads(next(x for x in lines if '"kind": "fact"' in x))
    return json.dumps({**fact, "id": "another", **fields})


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda ls: ls[1:], "header"),
        (lambda ls: [*ls, "{not json"], "not JSON"),
        (lambda ls: [*ls, json.dumps({"kind": "fact", "id": "x"})], "missing"),
        (lambda ls: [*ls, json.dumps({"kind": "planet"})], "unknown kind"),
        (
            lambda ls: [
                ls[0],
                *(x.replace('"category": "fact"', '"category": "gossip"') for x in ls[1:]),
            ],
            "category",
        ),
        (
            lambda ls: [
                *ls,
                json.dumps(
                    {
                        "kind": "link",
                        "id": "l",
                        "source_id": "nope",
                        "target_id": "nope",
                        "type": "RELATED_TO",
                        "strength": 1,
                        "origin": "import",
                        "recorded_at": 0,
                        "valid_from": 0,
                    }
                ),
            ],
            "not a known fact",
        ),
        (lambda ls: [*ls, "[" * 100_000 + "]" * 100_000], "nested too deeply"),
        (lambda ls: [*ls, _another_fact(ls, id={"an": "object"})], "id must be text"),
        (lambda ls: [*ls, _another_fact(ls, entity="Ana\u0000")], "entity holds a NUL"),
        (lambda ls: [*ls, _another_fact(ls, importance=2**70)], "importance"),
        (lambda ls: [*ls, _another_fact(ls, entity="x" * 1_001)], "entity is longer"),
        (lambda ls: [*ls, _another_fact(ls, superseded_by="nowhere")], "not a known fact"),
        (lambda ls: [*ls, _another_link(ls, metadata=[1, 2])], "metadata must be"),
        (lambda ls: [*ls, _another_link(ls, strength=7)], "strength"),
        (lambda ls: [*ls, _another_link(ls, origin="gossip")], "origin"),
        (lambda ls: [*ls, _another_link(ls, metadata={"x": "y" * 20_000})], "metadata is over"),
    ],
)
def test_a_bad_line_rejects_the_whole_import_naming_the_line(
    populated: Memory, tmp_path: Path, mutate: Callable[[list[str]], list[str]], message: str
) -> None:
    lines = mutate(export_text(populated).splitlines())
    with Memory.open(tmp_path / "copy", settings=Settings(embedder="hash")) as copy:
        with pytest.raises(InvalidInput, match=message):
            copy.import_jsonl(lines)
        assert copy.stats().facts == 0


@pytest.fixture
def declared(populated: Memory, clock: Clock) -> dict[str, float]:
    """``populated`` with entities of their own and declarations on them, one retracted; the
    moments between the declarations, by name."""
    populated.store_many(
        [
            {"text": "Mrs Lopez teaches chemistry", "entity": "Lopez"},
            {"text": "Caroline went to a support group", "entity": "Caroline"},
            {"text": "Melanie paints", "entity": "Melanie"},
            {"text": "Mel runs", "entity": "Mel"},
        ]
    )
    moments = {}
    for name, declare in [
        ("alias", lambda: populated.alias("Teacher", of="Lopez")),
        ("realias", lambda: populated.alias("Teacher", of="Melanie")),  # retracts the first
        ("merge", lambda: populated.merge_entities("Caroline", "Lopez")),
        ("split", lambda: populated.split_alias("Mel")),
    ]:
        clock.advance(60)
        moments[name] = clock.now - 30
        declare()
    clock.advance(60)
    return moments


def _declarations(text: str) -> list[dict[str, object]]:
    lines = [json.loads(x) for x in text.splitlines()]
    return [x for x in lines if x["kind"] == "entity_declaration"]


def test_declared_aliases_merges_and_splits_survive_a_round_trip_with_their_times(
    populated: Memory, declared: dict[str, float], tmp_path: Path, clock: Clock
) -> None:
    first = export_text(populated)
    kinds = [
        (d["declaration_kind"], d["name"], d["retracted_at"] is None) for d in _declarations(first)
    ]
    assert kinds == [
        ("alias", "Teacher", False),
        ("alias", "Teacher", True),
        ("merge", "Lopez", True),
        ("split", "Mel", True),
    ]
    with Memory.open(tmp_path / "copy", settings=Settings(embedder="hash"), clock=clock) as copy:
        report = copy.import_jsonl(io.StringIO(first))
        assert report.declarations == 4
        assert export_text(copy) == first
        assert copy.entities() == populated.entities()
        assert {f.text for f in copy.lookup("Teacher")} == {"Melanie paints"}
        for moment in declared.values():
            assert copy.entities(known_at=moment) == populated.entities(known_at=moment)
        assert [f.text for f in copy.lookup("Teacher", known_at=declared["realias"])] == [
            "Mrs Lopez teaches chemistry"
        ]
        assert copy.entity("Lopez", known_at=declared["merge"]).name == "Lopez"
        assert copy.entity("Lopez").name == "Caroline"
        assert [f.text for f in copy.lookup("Mel")] == ["Mel runs"]


def test_importing_declarations_again_skips_them(
    populated: Memory, declared: dict[str, float]
) -> None:
    report = populated.import_jsonl(io.StringIO(export_text(populated)))
    assert (report.facts, report.declarations, report.skipped_existing) == (0, 0, 13)
    assert len(_declarations(export_text(populated))) == 4


def _another_declaration(lines: list[str], **fields: object) -> str:
    """The export's first declaration line with ``fields`` changed."""
    first = json.loads(next(x for x in lines if '"kind": "entity_declaration"' in x))
    return json.dumps({**first, **fields})


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda ls: [*ls, _another_declaration(ls, declaration_kind="rename")],
            "unknown declaration",
        ),
        (lambda ls: [*ls, _another_declaration(ls, target="nobody")], "no entity name"),
        (lambda ls: [*ls, _another_declaration(ls, name="!!")], "no letter or digit"),
        (lambda ls: [*ls, _another_declaration(ls, name="T\u0000")], "NUL"),
        (lambda ls: [*ls, _another_declaration(ls, name=7)], "non-empty string"),
        (lambda ls: [*ls, _another_declaration(ls, colour="red")], "unknown field"),
        (lambda ls: [*ls, _another_declaration(ls, recorded_at=None)], "missing recorded_at"),
        (lambda ls: [*ls, _another_declaration(ls, recorded_at="soon")], "recorded_at"),
        (
            lambda ls: [*ls, _another_declaration(ls, retracted_at="2001-01-01")],
            "retracted_at is before",
        ),
        (
            lambda ls: [*ls, _another_declaration(ls, declaration_kind="split", name="Prof")],
            "split's target",
        ),
        (
            lambda ls: [*ls, _another_declaration(ls, recorded_at="2030-01-01", retracted_at=None)],
            "live declaration already",
        ),
    ],
)
def test_a_bad_declaration_rejects_the_whole_import_naming_the_line(
    populated: Memory,
    declared: dict[str, float],
    tmp_path: Path,
    mutate: Callable[[list[str]], list[str]],
    message: str,
) -> None:
    lines = mutate(export_text(populated).splitlines())
    with Memory.open(tmp_path / "copy", settings=Settings(embedder="hash")) as copy:
        with pytest.raises(InvalidInput, match=f"line {len(lines)}: .*{message}"):
            copy.import_jsonl(lines)
        assert copy.stats().facts == 0
        assert copy.entities() == [] and export_text(copy).count("\n") == 1
