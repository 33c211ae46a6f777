"""The write path: validation, dedup, classification, batches, forget and purge."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from graphmem import InvalidInput, Memory, NotFound, Settings
from graphmem.limits import MAX_BATCH, MAX_TEXT_LENGTH

from ..support.clock import Clock
from ..support.connections import read_connection

pytestmark = [pytest.mark.engines, pytest.mark.client_api]


@pytest.mark.parametrize(
    ("item", "field"),
    [
        ({"text": ""}, "text"),
        ({"text": "   "}, "text"),
        ({"text": "x" * (MAX_TEXT_LENGTH + 1)}, "text"),
        ({"text": "a\x00b"}, "text"),
        ({"text": "ok", "category": "opinion"}, "category"),
        ({"text": "ok", "decay_class": "forever"}, "decay_class"),
        ({"text": "ok", "importance": 1.5}, "importance"),
        ({"text": "ok", "importance": -0.1}, "importance"),
        ({"text": "ok", "importance": float("nan")}, "importance"),
        ({"text": "ok", "confidence": 2}, "confidence"),
        ({"text": "ok", "tags": ["has space"]}, "tags"),
        ({"text": "ok", "valid_from": "next tuesday"}, None),
        ({"text": "ok", "colour": "blue"}, "colour"),
        ({"text": 42}, "text"),
    ],
)
def test_bad_input_is_rejected_with_a_typed_error_naming_the_field(
    mem: Memory, item: dict[str, Any], field: str | None
) -> None:
    with pytest.raises(InvalidInput) as caught:
        mem.store_many([item])
    if field is not None:
        assert field in str(caught.value)
    assert mem.stats().facts == 0


def test_one_bad_item_rejects_the_whole_batch(mem: Memory) -> None:
    with pytest.raises(InvalidInput, match="item 2"):
        mem.store_many([{"text": "fine one"}, {"text": "fine two"}, {"text": ""}])
    assert mem.stats().facts == 0
    assert mem.stats().vectors == 0


def test_an_oversized_batch_is_rejected(mem: Memory) -> None:
    with pytest.raises(InvalidInput, match=str(MAX_BATCH)):
        mem.store_many([{"text": f"fact {i}"} for i in range(MAX_BATCH + 1)])


def test_a_failing_supersedes_in_a_batch_leaves_nothing_written(mem: Memory) -> None:
    with pytest.raises(NotFound):
        mem.store_many([{"text": "first"}, {"text": "second", "supersedes": "missing"}])
    assert mem.stats().facts == 0


@pytest.mark.in_process("counts the embedder's calls")
def test_store_many_returns_results_in_input_order_and_embeds_once(mem: Memory) -> None:
    calls: list[int] = []
    original = mem.embedder.embed

    def counting(texts: Any) -> Any:
        calls.append(len(texts))
        return original(texts)

    mem.embedder.embed = counting  # type: ignore[method-assign]
    results = mem.store_many([{"text": f"Project {n} uses Postgres"} for n in "ABCDE"])
    assert [r.fact.text for r in results if r.fact] == [
        f"Project {n} uses Postgres" for n in "ABCDE"
    ]
    assert calls == [5]
    assert all(r.action == "ADD" for r in results)


def test_ids_are_uuids_that_sort_in_the_order_they_were_made(mem: Memory) -> None:
    # Time-ordered (version 7): an index on them grows at its end instead of at random pages.
    def ids(rows: list[dict[str, Any]]) -> list[str]:
        return [r.fact.id for r in mem.store_many(rows) if r.fact is not None]

    first = ids([{"text": f"Team {n} ships weekly"} for n in "AB"])
    time.sleep(0.002)
    second = ids([{"text": f"Team {n} ships daily"} for n in "CD"])
    time.sleep(0.002)
    link = mem.link(first[0], second[0], "RELATED_TO")
    assert all(uuid.UUID(i).version == 7 for i in [*first, *second, link.id])
    assert max(first) < min(second) < link.id
    assert len({*first, *second}) == 4


def test_exact_and_normalised_duplicates_are_noops(mem: Memory) -> None:
    first = mem.store("User prefers dark mode")
    assert first.action == "ADD"
    exact = mem.store("User prefers dark mode")
    assert exact.action == "NOOP" and "exact" in exact.reason
    assert exact.fact is not None and exact.fact.id == first.fact.id  # type: ignore[union-attr]
    fuzzy = mem.store("  user   PREFERS dark mode ")
    assert fuzzy.action == "NOOP" and "normalised" in fuzzy.reason
    assert mem.stats().facts == 1


def test_duplicates_inside_one_batch_are_noops(mem: Memory) -> None:
    results = mem.store_many(
        [{"text": "Deploys happen on Fridays"}, {"text": "deploys happen on fridays"}]
    )
    assert [r.action for r in results] == ["ADD", "NOOP"]
    assert results[1].target_ids == (results[0].fact.id,)  # type: ignore[union-attr]


def test_fuzzy_dedup_can_be_switched_off(tmp_path: Any, clock: Clock) -> None:
    settings = Settings(embedder="hash", fuzzy_dedup=False)
    with Memory.open(tmp_path / "d", settings=settings, clock=clock) as mem:
        mem.store("User prefers dark mode")
        assert mem.store("user prefers dark mode").action == "ADD"
        assert mem.store("user prefers dark mode").action == "NOOP"  # exact still dedups


@pytest.mark.in_process("reads Memory.check")
def test_a_near_duplicate_vector_is_shared_not_written_twice(mem: Memory) -> None:
    # The hash embedder ignores case and punctuation, so these embed identically.
    a = mem.store("The build server is ci-01")
    b = mem.store("The build server is CI 01!")
    assert a.action == b.action == "ADD"
    assert mem.stats().vectors == 1
    found = {h.fact.id for h in mem.search("build server", mode="vector")}
    assert {a.fact.id, b.fact.id} <= found  # type: ignore[union-attr]
    assert mem.check().ok


@pytest.mark.in_process("reads Memory.check")
def test_retracting_a_vector_owner_keeps_its_sharer_searchable(mem: Memory) -> None:
    a = mem.store("The build server is ci-01").fact
    b = mem.store("The build server is CI 01!").fact
    assert a and b
    mem.forget(a.id)
    assert [h.fact.id for h in mem.search("build server", mode="vector")] == [b.id]
    mem.purge(a.id)
    assert [h.fact.id for h in mem.search("build server", mode="vector")] == [b.id]
    assert mem.stats().vectors == 1
    assert mem.check().ok


def test_same_entity_and_key_with_a_new_value_is_an_update(mem: Memory, clock: Clock) -> None:
    old = mem.store("Editor is vim", entity="user", key="editor", value="vim")
    clock.advance(10)
    new = mem.store("Editor is helix", entity="User", key="Editor", value="helix")
    assert new.action == "UPDATE" and new.target_ids == (old.fact.id,)  # type: ignore[union-attr]
    assert [f.value for f in mem.lookup("user", key="editor")] == ["helix"]


def test_same_entity_key_and_value_is_a_noop(mem: Memory) -> None:
    mem.store("Editor is vim", entity="user", key="editor", value="vim")
    again = mem.store("The user's editor is Vim", entity="user", key="editor", value="Vim")
    assert again.action == "NOOP"
    assert mem.stats().facts == 1


def test_multi_valued_keys_add_instead_of_updating(mem: Memory) -> None:
    mem.store("Dana has a son, Eli", entity="dana", key="children", value="Eli")
    second = mem.store("Dana has a daughter, Fay", entity="dana", key="children", value="Fay")
    assert second.action == "ADD"
    assert sorted(f.value for f in mem.lookup("dana", key="children")) == ["Eli", "Fay"]  # type: ignore[type-var]


def test_a_write_can_opt_out_of_classification(mem: Memory) -> None:
    mem.store("Office in Lyon", entity="acme", key="office", value="Lyon")
    added = mem.store(
        "Office in Nantes", entity="acme", key="office", value="Nantes", classify=False
    )
    assert added.action == "ADD"
    assert len(mem.lookup("acme", key="office")) == 2


def test_the_classifier_can_be_switched_off_in_settings(tmp_path: Any, clock: Clock) -> None:
    with Memory.open(
        tmp_path / "d", settings=Settings(embedder="hash", classifier="off"), clock=clock
    ) as mem:
        mem.store("Editor is vim", entity="user", key="editor", value="vim")
        assert (
            mem.store("Editor is helix", entity="user", key="editor", value="helix").action == "ADD"
        )


def test_defaults_fill_category_tags_decay_and_expiry(mem: Memory, clock: Clock) -> None:
    fact = mem.store("We decided to run Postgres in Docker").fact
    assert fact is not None
    assert fact.category == "decision"
    assert fact.tags == ["postgres", "docker"]
    assert fact.decay_class == "permanent" and fact.expires_at is None
    assert fact.importance == 0.5 and fact.confidence == 1.0
    task = mem.store("Need to fix the login bug", key="task").fact
    assert task is not None and task.decay_class == "active"
    assert task.expires_at is not None
    assert task.expires_at.timestamp() == pytest.approx(clock.now + 14 * 86400)


def test_the_heuristics_ignore_case_in_any_script(mem: Memory) -> None:
    cases = [
        ("WE DECIDED TO RUN POSTGRES IN DOCKER", "decision", ["postgres", "docker"], "permanent"),
        ("Élodie PREFERS oat milk", "preference", [], "stable"),
        ("Zoë: call +33 1 23 45 67 89 about the OAuth flow", "entity", ["auth"], "stable"),
        ("Next \u017fprint review moved", "other", [], "active"),  # the long s folds to s
        ("The api-gateway lesson was rapid", "fact", [], "stable"),  # no tag word as a word
    ]
    for text, category, tags, decay_class in cases:
        fact = mem.store(text).fact
        assert fact is not None
        assert (fact.category, fact.tags, fact.decay_class) == (category, tags, decay_class), text


def test_explicit_fields_override_the_heuristics(mem: Memory) -> None:
    fact = mem.store(
        "We decided to run Postgres",
        category="fact",
        tags=["DB", "ops"],
        decay_class="short",
        importance=0.9,
    ).fact
    assert fact is not None
    assert (fact.category, fact.tags, fact.decay_class, fact.importance) == (
        "fact",
        ["db", "ops"],
        "short",
        0.9,
    )


@pytest.mark.in_process("reads the store's tables")
def test_purge_removes_the_fact_its_links_vector_and_cached_embedding(mem: Memory) -> None:
    old = mem.store("Use npm").fact
    assert old is not None
    new = mem.store("Use pnpm", supersedes=old.id).fact
    assert new is not None
    mem.purge(old.id)
    assert mem.get(old.id, as_of="2000-01-01", known_at="2100-01-01") is None
    assert mem.stats().links == 0
    assert mem.stats().vectors == 1
    conn = read_connection(mem)
    assert conn.execute("SELECT count(*) FROM embedding_cache").fetchone()[0] == 1
    assert mem.history(new.id)[0].id == new.id
    assert mem.check().ok
    assert len(mem._vectors._table.list_versions()) == 1  # no older version keeps the vector
    with pytest.raises(NotFound):
        mem.purge(old.id)


def test_store_accepts_context_summary_and_why(mem: Memory) -> None:
    fact = mem.store(
        "Chose SQLite",
        summary="SQLite chosen",
        why="embedded, no server",
        context="We compared Postgres and SQLite for the agent",
    ).fact
    assert fact is not None and fact.why == "embedded, no server"
    # The context is searchable (with a lower weight than the text).
    assert [h.fact.id for h in mem.search("compared", mode="fts")] == [fact.id]


def test_a_large_batch_updates_each_key_once(mem: Memory, clock: Clock) -> None:
    # More entity/key pairs than one prefetch query holds, crossing entities and keys.
    pairs = [(f"host{e}", f"attr{k}") for e in range(30) for k in range(20)]
    mem.store_many(
        [{"text": f"{e} {k} is old", "entity": e, "key": k, "value": "old"} for e, k in pairs],
        autolink=False,
    )
    clock.advance(60)
    results = mem.store_many(
        [{"text": f"{e} {k} is new", "entity": e, "key": k, "value": "new"} for e, k in pairs],
        autolink=False,
    )
    assert {r.action for r in results} == {"UPDATE"}
    assert all(len(r.target_ids) == 1 for r in results)
    assert mem.stats().current == len(pairs)
    assert mem.stats().links == len(pairs)  # one SUPERSEDES each (autolinks are off)


@pytest.mark.parametrize(
    ("text", "entity", "tags"),
    [
        ("NIBE F1245 uses Modbus TCP on port 502", None, ["nibe"]),
        ("Home Assistant Zigbee coordinator on /dev/ttyUSB0", None, ["zigbee", "homeassistant"]),
        ("OAuth token for the API endpoint", None, ["auth", "api"]),
        ("Z-Wave stick and the HA dashboard on k8s", None, ["z-wave", "kubernetes", "ha"]),
        (
            "Backups of postgres, sqlite and lancedb",
            "openclaw",
            ["openclaw", "postgres", "sqlite", "lancedb"],
        ),
        ("Ha ha, very funny", None, []),
        ("The dog sleeps", "docker", ["docker"]),
    ],
)
def test_auto_tags_follow_the_seed_patterns(text: str, entity: str | None, tags: list[str]) -> None:
    from graphmem.tagging import extract_tags

    assert extract_tags(text, entity) == tags


def test_a_batch_can_supersede_its_own_earlier_item_and_reports_both_states(
    mem: Memory,
) -> None:
    first, second = mem.store_many(
        [
            {
                "text": "Printer is on floor 2",
                "entity": "printer",
                "key": "floor",
                "value": "2",
                "valid_from": "2024-01-01",
            },
            {
                "text": "Printer is on floor 3",
                "entity": "printer",
                "key": "floor",
                "value": "3",
                "valid_from": "2024-06-01",
            },
        ]
    )
    assert (first.action, second.action) == ("ADD", "UPDATE")
    assert first.fact and second.fact
    assert first.fact.superseded_by == second.fact.id
    assert second.fact.supersedes_id == first.fact.id
    stored = mem.get(first.fact.id, as_of="2024-03-01")
    assert stored == first.fact
    assert mem.get(second.fact.id) == second.fact
