"""Erase means erased: purge by ids, entity, source or episode, counted, recorded, and gone from
every file of the namespace."""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from graphmem.server.mcp import tools

from graphmem import InvalidInput, KeyStore, Memory, NotFound, Settings
from graphmem.cli import cli
from graphmem.storage.sqlite.backup import backup, restore

from ..support.clock import Clock
from ..support.graphql_clients import InProcess, bearer
from ..support.openai_stub import OpenAIStub

pytestmark = [pytest.mark.engines, pytest.mark.client_api]


def _files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def _hits(root: Path, needles: list[bytes]) -> list[str]:
    """The files under ``root`` holding any of ``needles``."""
    held = ((p, p.read_bytes()) for p in _files(root))
    return sorted(str(p.relative_to(root)) for p, data in held if any(n in data for n in needles))


def _secrets(mem: Memory, texts: list[str]) -> list[bytes]:
    """The texts (UTF-8), their float32 embeddings, and the keyword indexes' token of
    "Vrontimal" (porter-stemmed), as bytes to look for on disk."""
    vectors = mem.embedder.embed(texts)  # the bytes LanceDB and the embedding cache store
    return (
        [t.encode() for t in texts]
        + [np.asarray(v, dtype="<f4").tobytes() for v in vectors]
        + [b"vrontim"]
    )


#: The entity name the erased facts carry and an alias declared for it, as bytes on disk.
_ENTITY_NAMES = [b"Zanzibarquill", b"zanzibarquill", b"Quillzanna", b"quillzanna"]
#: What the chat model (the stub) says of Zanzibarquill's profile, citing its first fact, and
#: those words as bytes on disk.
SUMMARY_ANSWER = json.dumps({"summary": "She hoards coins in tins qz5.", "facts": ["F1"]})
SUMMARY_NEEDLE = b"hoards coins in tins qz5"


def chat_settings(stub: OpenAIStub) -> dict[str, Any]:
    """The settings that send chat requests to ``stub``."""
    return {"llm_base_url": stub.base_url, "llm_api_key": "test", "llm_max_retries": 0}


@pytest.mark.parametrize("by", ["ids", "entity", "source", "episode"])
def test_a_purge_leaves_no_copy_of_the_text_or_vector_in_any_file(
    data_dir: Path, clock: Clock, by: str, stub: OpenAIStub
) -> None:
    texts = [
        "Zanzibarquill keeps her savings in the blue tin xq7",
        "Zanzibarquill was born in Vrontimal in 1984 xq7",
    ]
    settings = Settings(embedder="hash", **chat_settings(stub))
    with Memory.open(data_dir, settings=settings, clock=clock) as mem:
        for n in range(40):  # other facts, so pages and segments are shared with the erased
            mem.store(f"An ordinary fact number {n} about the weather and the trams")
        results = mem.store_many(
            [{"text": t, "entity": "Zanzibarquill", "source": "notes/zq.md"} for t in texts],
            episode="zq-session",
        )
        mem.store("Another ordinary fact about lunch")
        mem.alias("Quillzanna", of="Zanzibarquill")
        stub.reply_next(SUMMARY_ANSWER)
        assert mem.profile("Zanzibarquill", summary=True).summary is not None
        ids = [r.fact.id for r in results if r.fact is not None]
        # The entity's name and its declared alias, as spelled and as the names compare them,
        # and what the summary of its profile says.
        needles = [*_secrets(mem, texts), *_ENTITY_NAMES, SUMMARY_NEEDLE]
        namespace = data_dir / "default"
        assert _hits(namespace, needles), "the positive control: before the purge they are there"
        assert _hits(namespace, [b"Quillzanna"]), "the alias is on disk before the purge"
        assert _hits(namespace, [SUMMARY_NEEDLE]), "the summary is on disk before the purge"
        filters = {
            "ids": {"ids": ids},
            "entity": {"entity": "zanzibarquill"},
            "source": {"source": "notes/zq.md"},
            "episode": {"episode": "zq-session"},
        }[by]
        report = mem.purge(**filters)  # type: ignore[arg-type]
        assert (report.facts, report.vectors, report.episodes) == (2, 2, 1)
        assert report.links >= 1  # the episode link between the two, and any automatic ones
        assert mem.get(ids[0]) is None and mem.episode("zq-session") is None
        with pytest.raises(NotFound):
            mem.entity("Quillzanna")
        assert mem.search("Zanzibarquill savings") == [] or all(
            h.fact.id not in ids for h in mem.search("Zanzibarquill savings")
        )
        assert _hits(namespace, needles) == []
    assert _hits(namespace, needles) == []  # and after closing (the WAL folded back)


#: Facts about one entity under three names ("Zanzi" a short form, "zanzibarquill's" a
#: possessive), and one about another entity.
ALIASED = [
    {"text": "Zanzibarquill keeps her savings in the blue tin xq7", "entity": "Zanzibarquill"},
    {"text": "Zanzi was born in Vrontimal in 1984 xq7", "entity": "Zanzi"},
    {"text": "Zanzibarquill's cat is called Pemberlow xq7", "entity": "zanzibarquill's"},
    {"text": "Orla Brennan rides the trams to work", "entity": "Orla Brennan"},
]
#: Every name of that entity, and its alias, as the facts and declarations keep them.
ALIASED_NAMES = [
    b"Zanzibarquill",
    b"zanzibarquill",
    b"Zanzi",
    b"zanzi",
    b"Quillzanna",
    b"quillzanna",
]


def declare_aliased(mem: Memory, clock: Clock) -> list[str]:
    """ALIASED stored in ``mem``, and the alias "Quillzanna" declared first for Orla Brennan,
    then for Zanzibarquill (the first declaration stays, retracted, naming Orla); the texts of
    the entity's facts."""
    mem.store_many([{"text": f"An ordinary fact number {n} about lunch"} for n in range(20)])
    mem.store_many(ALIASED)
    mem.alias("Quillzanna", of="Orla Brennan")
    clock.advance(60)
    mem.alias("Quillzanna", of="Zanzibarquill")
    return [str(x["text"]) for x in ALIASED[:3]]


def test_an_entity_purge_takes_every_name_and_alias_of_it_and_leaves_none_in_any_file(
    data_dir: Path, clock: Clock
) -> None:
    with Memory.open(data_dir, settings=Settings(embedder="hash"), clock=clock) as mem:
        texts = declare_aliased(mem, clock)
        needles = [*_secrets(mem, texts), *ALIASED_NAMES]
        namespace = data_dir / "default"
        assert _hits(namespace, [b"Quillzanna", b"Zanzi", b"Pemberlow"]), "the positive control"
        counted = mem.purge(entity="quillzanna", dry_run=True)  # by the alias
        assert (counted.facts, counted.dry_run) == (3, True)
        assert counted.names[0] == "Zanzibarquill"
        assert set(counted.names) == {"Zanzibarquill", "Zanzi", "Quillzanna"}
        assert len(mem.lookup("Zanzi")) == 3 and mem.erasures() == []
        report = mem.purge(entity="quillzanna")
        assert (report.facts, report.names) == (3, counted.names)
        assert mem.lookup("Zanzibarquill") == [] and mem.lookup("Zanzi") == []
        with pytest.raises(NotFound):
            mem.entity("Quillzanna")
        orla = mem.entity("Orla Brennan")
        assert (orla.names, orla.aliases, orla.facts) == (("Orla Brennan",), (), 1)
        [record] = mem.erasures()
        assert record.filter == {
            "entity": hashlib.sha256(b"quillzanna").hexdigest(),
            "names": sorted(hashlib.sha256(n.lower().encode()).hexdigest() for n in report.names),
        }
        assert _hits(namespace, needles) == []
        assert _hits(namespace, [b"Orla Brennan"]), "the other entity is kept"
    assert _hits(namespace, needles) == []


def test_an_entity_purge_narrowed_to_some_facts_keeps_the_aliases_of_what_is_left(
    mem: Memory,
) -> None:
    mem.store_many(
        [
            {"text": "Ana lives in Berlin", "entity": "Ana", "source": "a"},
            {"text": "Ana rides a red bike", "entity": "Ana", "source": "b"},
        ]
    )
    mem.alias("Annie", of="Ana")
    narrowed = mem.purge(entity="Annie", source="a")
    assert (narrowed.facts, narrowed.names) == (1, ("Ana", "Annie"))
    assert mem.entity("Annie").aliases == ("Annie",)
    assert [f.text for f in mem.lookup("Annie")] == ["Ana rides a red bike"]
    assert mem.purge(entity="Annie").facts == 1
    with pytest.raises(NotFound):
        mem.entity("Annie")


def test_a_purged_name_is_gone_from_the_entities_read_before_the_purge(mem: Memory) -> None:
    """The entity index a read built is kept until the names change: a purge of a name that is
    not the newest must be seen as a change too."""
    mem.store_many(
        [
            {"text": "Ana lives in Berlin", "entity": "Ana"},
            {"text": "Bo lives in Rome", "entity": "Bo"},
        ]
    )
    assert {n for e in mem.entities() for n in e.names} == {"Ana", "Bo"}
    assert mem.purge(entity="Ana").names == ("Ana",)
    assert {n for e in mem.entities() for n in e.names} == {"Bo"}
    with pytest.raises(NotFound):
        mem.entity("Ana")
    mem.store("Cy lives in Oslo", entity="Cy")  # and a name added after it is read again
    assert {n for e in mem.entities() for n in e.names} == {"Bo", "Cy"}


def test_dry_run_counts_and_erases_nothing(mem: Memory) -> None:
    mem.store_many(
        [{"text": "Ana likes figs", "entity": "ana"}, {"text": "Ana runs", "entity": "Ana"}]
    )
    counted = mem.purge(entity="ANA", dry_run=True)
    assert (counted.facts, counted.dry_run) == (2, True)
    assert len(mem.lookup("ana")) == 2 and mem.erasures() == []


def test_filters_narrow_each_other_and_cover_every_state(mem: Memory, clock: Clock) -> None:
    old = mem.store("Ana lives in Berlin", entity="ana", key="city", value="Berlin", source="a")
    new = mem.store("Ana lives in Paris", entity="ana", key="city", value="Paris", source="a")
    gone = mem.store("Ana once owned a red bike", entity="ana", source="b")
    other = mem.store("Bo lives in Rome", entity="bo", source="a")
    assert old.fact and new.fact and gone.fact and other.fact
    mem.forget(gone.fact.id)
    assert mem.purge(entity="ana", source="a").facts == 2  # Berlin (replaced) and Paris
    assert mem.purge(entity="ana").facts == 1  # the forgotten one
    assert mem.get(other.fact.id) is not None


def test_bad_purges_are_refused_and_nothing_matching_answers_zero(mem: Memory) -> None:
    mem.store("Something to keep")
    with pytest.raises(InvalidInput) as error:
        mem.purge()
    assert error.value.field == "filter"
    with pytest.raises(InvalidInput):
        mem.purge(ids=[])
    with pytest.raises(InvalidInput):
        mem.purge(entity="  ")
    with pytest.raises(InvalidInput):
        mem.purge(source=3)  # type: ignore[arg-type]
    with pytest.raises(NotFound):
        mem.purge("no-such-id")
    nothing = mem.purge(entity="nobody")
    assert (nothing.facts, nothing.links, nothing.vectors, nothing.episodes) == (0, 0, 0, 0)
    assert len(mem.facts().items) == 1


def test_a_purge_that_matches_nothing_leaves_no_erasure_record(mem: Memory) -> None:
    kept = mem.store("Ana keeps her keys in the drawer", entity="ana")
    assert kept.fact is not None
    mem.purge(entity="nobody")
    mem.purge(ids=["no-such-id"], source="nowhere")
    mem.purge(ids=[kept.fact.id], entity="bob")  # the filters narrow each other to nothing
    assert mem.erasures() == [] and len(mem.facts().items) == 1
    mem.purge(entity="ana")
    assert [e.facts for e in mem.erasures()] == [1]


def test_each_purge_is_recorded_without_its_content_and_kept_across_backup(
    data_dir: Path, tmp_path: Path, clock: Clock
) -> None:
    settings = Settings(embedder="hash", data_dir=data_dir)
    with Memory.open(data_dir, settings=settings, clock=clock) as mem:
        mem.store("Ana's phone is in the drawer", entity="ana")
        clock.advance(60)
        mem.purge(entity="Ana")
        [record] = mem.erasures()
        assert (record.facts, record.vectors) == (1, 1)
        # The entity, and each name it covered, as digests (lower-cased), never as text.
        ana = hashlib.sha256(b"ana").hexdigest()
        assert record.filter == {"entity": ana, "names": [ana]}
        assert "drawer" not in str(record.to_dict())
    backup(data_dir, tmp_path / "backup")
    restored = tmp_path / "restored"
    restore(tmp_path / "backup", restored)
    with Memory.open(restored, settings=Settings(embedder="hash"), clock=clock) as copy:
        assert [e.to_dict() for e in copy.erasures()] == [record.to_dict()]


def test_a_purge_racing_writes_of_the_same_entity_leaves_no_half_state(mem: Memory) -> None:
    def write() -> None:
        for n in range(30):
            mem.store_many(
                [
                    {"text": f"Cy note {n} a", "entity": "cy"},
                    {"text": f"Cy note {n} b", "entity": "cy"},
                ],
                episode=f"cy-{n}",
            )

    writer = threading.Thread(target=write)
    writer.start()
    reports = [mem.purge(entity="cy") for _ in range(5)]
    writer.join()
    # Each purge took whole batches (two facts and their episode), never half of one.
    assert all(r.facts == 2 * r.episodes for r in reports)
    assert sum(r.facts for r in reports) + mem.purge(entity="cy").facts == 60
    assert mem.lookup("cy") == [] and mem.episodes() == []


PURGE = """mutation($filter: PurgeFilter!, $dry: Boolean!) {
  purgeFacts(filter: $filter, dryRun: $dry) {
    facts links vectors episodes dryRun names error { code field } } }"""
ERASURES = "query { erasures { filter facts } }"


def test_graphql_purges_for_keys_that_may_write_and_shows_records_to_admin_keys(
    service: InProcess, keys: KeyStore
) -> None:
    writer, _ = keys.create(["default"])
    reader, _ = keys.create(["default"], read_only=True)
    admin, _ = keys.create(["default"], read_only=True, admin=True)
    service.data(
        """mutation { storeFacts(inputs: [{text: "Dee plays the oboe", entity: "dee"},
                                           {text: "Dee lives by the canal", entity: "dee"}]) {
            error { code } } }""",
        **bearer(writer),
    )
    service.data(
        'mutation { alias(name: "Deedee", of: "dee") { error { code } } }', **bearer(writer)
    )
    counted = service.data(PURGE, {"filter": {"entity": "dee"}, "dry": True}, **bearer(writer))
    assert counted["purgeFacts"]["facts"] == 2 and counted["purgeFacts"]["dryRun"] is True
    assert counted["purgeFacts"]["names"] == ["dee", "Deedee"]  # what the purge takes with it
    refused = service.data(PURGE, {"filter": {"entity": "dee"}, "dry": False}, **bearer(reader))
    assert refused["purgeFacts"]["error"]["code"] == "FORBIDDEN"
    empty = service.data(PURGE, {"filter": {}, "dry": False}, **bearer(writer))
    assert empty["purgeFacts"]["error"] == {"code": "INVALID_INPUT", "field": "filter"}
    done = service.data(PURGE, {"filter": {"entity": "dee"}, "dry": False}, **bearer(writer))
    assert (done["purgeFacts"]["facts"], done["purgeFacts"]["error"]) == (2, None)
    assert done["purgeFacts"]["names"] == ["dee", "Deedee"]
    digests = sorted(hashlib.sha256(n.encode()).hexdigest() for n in ("dee", "deedee"))
    assert service.data(ERASURES, **bearer(admin))["erasures"] == [
        {"filter": {"entity": hashlib.sha256(b"dee").hexdigest(), "names": digests}, "facts": 2}
    ]
    for other in (writer, reader):  # the records are for admin keys only
        _, body = service.post(ERASURES, None, {**bearer(other)})
        assert body["errors"][0]["extensions"]["code"] == "FORBIDDEN"


def test_the_cli_and_mcp_purge_by_filter(mem: Memory, data_dir: Path) -> None:
    mem.store_many([{"text": "Eve's locker code is in the notes", "source": "notes/eve.md"}])
    _, counted = tools.purge(mem, tools.PurgeArgs(source="notes/eve.md", dry_run=True))
    assert counted == {
        "facts": 1,
        "links": 0,
        "vectors": 1,
        "episodes": 0,
        "dry_run": True,
        "names": [],
    }
    mem.store("Eve keeps a spare key", entity="Eve")
    text, named = tools.purge(mem, tools.PurgeArgs(entity="eve", dry_run=True))
    assert named["names"] == ["Eve"] and text.endswith("(names: Eve)")
    mem.close()
    run = CliRunner().invoke(
        cli,
        ["--data-dir", str(data_dir), "purge", "--source", "notes/eve.md", "--json"],
        env={"GRAPHMEM_EMBEDDER": "hash"},
    )
    assert run.exit_code == 0, run.output
    assert json.loads(run.output)["facts"] == 1
    run = CliRunner().invoke(
        cli, ["--data-dir", str(data_dir), "erasures", "--json"], env={"GRAPHMEM_EMBEDDER": "hash"}
    )
    assert [e["facts"] for e in json.loads(run.output)] == [1]


# ------------------------------------------------------------------------ conversation turns

#: A conversation as capture keeps it: the user's message a turn, with a fact drawn from it
#: (entity Zanzibarquill); the assistant's reply a turn with nothing drawn.
CHAT = [
    {
        "role": "user",
        "content": "Hello again, the Quillowmere ferry was late. "
        "Zanzibarquill's favourite tin is hidden in Vrontimal xq7.",
    },
    {"role": "assistant", "content": "Thanks, I have noted that for later."},
]


#: Each way to name the user's turn of CHAT, or the fact drawn from it.
TURN_FILTERS = ["fact id", "turn id", "entity", "turn source", "capture source", "episode"]


def turn_filter(by: str, turn_id: str, fact_id: str) -> dict[str, Any]:
    """The purge filter of TURN_FILTERS named ``by``."""
    filters: dict[str, dict[str, Any]] = {
        "fact id": {"ids": [fact_id]},
        "turn id": {"ids": [turn_id]},
        "entity": {"entity": "zanzibarquill"},
        "turn source": {"source": "turn:user"},
        "capture source": {"source": "capture:user"},
        "episode": {"episode": "zq-session"},
    }
    return filters[by]


@pytest.mark.parametrize("by", TURN_FILTERS)
def test_a_purge_takes_the_turn_a_fact_was_drawn_from_and_leaves_no_copy_in_any_file(
    data_dir: Path, clock: Clock, by: str
) -> None:
    """ "Forget what I said about Zanzibarquill" must not leave it in the turn that said it, nor
    in the episode's windows of turns; a purged turn takes the facts drawn from it."""
    with Memory.open(data_dir, settings=Settings(embedder="hash"), clock=clock) as mem:
        mem.store_many(
            [{"text": f"An ordinary fact number {n} about the trams"} for n in range(40)]
        )
        results = mem.capture(CHAT, episode="zq-session")
        turn, fact, reply = (r.fact for r in results)
        assert turn and fact and reply and fact.entity == "Zanzibarquill"
        assert results[1].turn_id == turn.id
        needles = [*_secrets(mem, [turn.text, fact.text]), b"quillowm"]  # the turn's own words
        namespace = data_dir / "default"
        assert _hits(namespace, needles), "the positive control: before the purge they are there"
        filters = turn_filter(by, turn.id, fact.id)
        counted = mem.purge(**filters, dry_run=True)
        report = mem.purge(**filters)
        assert counted.to_dict() == {**report.to_dict(), "dry_run": True}
        whole = by == "episode"
        # The fact shares its turn's vector: one vector for the two.
        assert (report.facts, report.vectors, report.episodes) == (2 + whole, 1 + whole, whole)
        assert mem.get(turn.id) is None and mem.get(fact.id) is None
        assert (mem.get(reply.id) is None) == whole
        assert _hits(namespace, needles) == []
    assert _hits(namespace, needles) == []


def test_a_turn_taken_with_its_fact_leaves_the_other_facts_drawn_from_it(mem: Memory) -> None:
    turn, ana, cat = (
        r.fact
        for r in mem.capture(
            [
                {
                    "role": "user",
                    "content": "Ana's favourite city is Berlin. She has a cat named Pim.",
                }
            ]
        )
    )
    assert turn and ana and cat and ana.entity == "Ana"
    assert mem.purge(entity="ana").facts == 2  # the fact and its turn, one step
    assert mem.get(turn.id) is None and mem.get(ana.id) is None
    assert mem.get(cat.id) is not None  # a fact of its own, not named by the filter


def test_a_purged_turn_takes_every_fact_drawn_from_it(mem: Memory) -> None:
    turn, ana, cat = (
        r.fact
        for r in mem.capture(
            [
                {
                    "role": "user",
                    "content": "Ana's favourite city is Berlin. She has a cat named Pim.",
                }
            ]
        )
    )
    assert turn and ana and cat
    assert mem.purge(turn.id).facts == 3
    assert mem.facts().items == []


def test_a_fact_said_again_in_another_session_takes_that_turn_too(data_dir: Path) -> None:
    with Memory.open(data_dir, settings=Settings(embedder="hash")) as mem:
        said = "Ana's favourite city is Vrontimal."
        first = mem.capture([{"role": "user", "content": f"Hello. {said}"}], episode="s1")
        again = mem.capture([{"role": "user", "content": f"As I said: {said}"}], episode="s2")
        alone = mem.capture([{"role": "user", "content": said}], episode="s3")
        assert [r.action for r in first] == ["ADD", "ADD"]
        assert [(r.kind, r.action) for r in again] == [("turn", "ADD"), ("fact", "NOOP")]
        assert [(r.kind, r.action) for r in alone] == [("turn", "ADD"), ("fact", "NOOP")]
        assert mem.purge(entity="ana").facts == 4  # the fact and the three turns that say it
        assert mem.facts().items == []
        assert _hits(data_dir / "default", _secrets(mem, [said])) == []
