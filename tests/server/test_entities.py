"""Entities over the service: the GraphQL ``entities`` and ``entity`` queries and the ``alias``,
``mergeEntities``, ``splitAlias`` and ``rebuildEntities`` mutations, and the MCP tools
``memory_entities``, ``memory_alias``, ``memory_merge_entities`` and ``memory_split_alias``:
the names grouped as ``Memory`` groups them, declarations seen only by reads known after them,
the engine's refusals as typed errors, a read-only key that reads but never declares, and each
read's cost bounded by its ``limit``."""

from __future__ import annotations

from typing import Any

import pytest
from graphmem.server.cost import HEAVY_COST

from graphmem import ApiKey, KeyStore, Memory

from ..support.clock import Clock
from ..support.graphql_clients import InProcess, bearer
from ..support.mcp_clients import READ_ONLY_KEY, call_in_process

pytestmark = pytest.mark.engines

FACTS = [
    {"text": "Melanie paints sunsets by the lake", "entity": "Melanie"},
    {"text": "Mel ran a charity race in June", "entity": "Mel"},
    {"text": "Caroline went to a support group", "entity": "Caroline"},
    {"text": "Mrs Lopez teaches chemistry", "entity": "Lopez"},
]
STORE_MANY = "mutation($i: [FactInput!]!) { storeFacts(inputs: $i) { error { code } } }"
ENTITY = "name names aliases facts"
MELANIE = {"name": "Melanie", "names": ["Melanie", "Mel"], "aliases": [], "facts": 2}


def declare(service: InProcess, call: str, **headers: str) -> dict[str, Any]:
    """The payload of one entity mutation (``call``: its field and arguments)."""
    field = call.partition("(")[0]
    document = f"mutation {{ {call} {{ entity {{ {ENTITY} }} error {{ code field }} }} }}"
    payload: dict[str, Any] = service.data(document, None, **headers)[field]
    return payload


def refusal(service: InProcess, query: str) -> dict[str, Any]:
    """The extensions of the one error a query must answer."""
    status, body = service.post(query)
    assert status == 200 and body.get("data") is None, body
    [error] = body["errors"]
    extensions: dict[str, Any] = error["extensions"]
    return extensions


@pytest.fixture
def named(service: InProcess) -> InProcess:
    """The service with facts about Melanie (and Mel), Caroline and Lopez."""
    assert service.data(STORE_MANY, {"i": FACTS})["storeFacts"]["error"] is None
    return service


# ------------------------------------------------------------------------------------ GraphQL


def test_entities_and_entity_read_the_names_grouped_as_memory_groups_them(named: InProcess) -> None:
    data = named.data(f'{{ entities {{ {ENTITY} }} entity(name: "mel\'s") {{ {ENTITY} }} }}')
    assert data["entities"][0] == MELANIE and data["entity"] == MELANIE
    assert {n for e in data["entities"] for n in e["names"]} == {
        "Melanie",
        "Mel",
        "Caroline",
        "Lopez",
    }
    assert named.data(f"{{ entities(limit: 1) {{ {ENTITY} }} }}")["entities"] == [MELANIE]


def test_an_alias_is_seen_only_by_reads_known_after_it_and_merge_and_split_regroup_names(
    named: InProcess, clock: Clock
) -> None:
    clock.advance(60)
    before = clock.now - 30
    taught = declare(named, 'alias(name: "Teacher", of: "Lopez")')
    assert taught == {
        "entity": {"name": "Lopez", "names": ["Lopez"], "aliases": ["Teacher"], "facts": 1},
        "error": None,
    }
    then = named.data(
        'query($at: DateTime) { now: entity(name: "teacher") { name } '
        'then: entity(name: "Lopez", knownAt: $at) { aliases } }',
        {"at": before},
    )
    assert then == {"now": {"name": "Lopez"}, "then": {"aliases": []}}
    merged = declare(named, 'mergeEntities(a: "Caroline", b: "Lopez")')["entity"]
    assert (merged["name"], set(merged["names"])) == ("Caroline", {"Caroline", "Lopez"})
    left = declare(named, 'splitAlias(alias: "Mel")')["entity"]
    assert left == {"name": "Melanie", "names": ["Melanie"], "aliases": [], "facts": 1}
    lookup = named.data('{ lookup(entity: "Mel") { text } }')["lookup"]
    assert lookup == [{"text": "Mel ran a charity race in June"}]
    rebuilt = named.data("mutation { rebuildEntities { names error { code } } }")
    assert rebuilt["rebuildEntities"] == {"names": 4, "error": None}


def test_the_engines_refusals_are_typed_errors_naming_the_argument(named: InProcess) -> None:
    assert refusal(named, '{ entity(name: "Nobody Known") { name } }') == {"code": "NOT_FOUND"}
    assert refusal(named, '{ entity(name: "!!") { name } }') == {
        "code": "INVALID_INPUT",
        "field": "name",
    }
    assert refusal(named, "{ entities(limit: 0) { name } }")["field"] == "limit"
    assert refusal(named, '{ entities(knownAt: "last May") { name } }')["field"] == "knownAt"
    refused = {
        'alias(name: "Prof", of: "Nobody Known")': {"code": "NOT_FOUND", "field": None},
        'alias(name: "", of: "Lopez")': {"code": "INVALID_INPUT", "field": "name"},
        'mergeEntities(a: "Melanie", b: "Nobody Known")': {"code": "NOT_FOUND", "field": None},
        'splitAlias(alias: "Caroline")': {"code": "CONFLICT", "field": None},
        'splitAlias(alias: "Nobody")': {"code": "NOT_FOUND", "field": None},
    }
    for call, error in refused.items():
        assert declare(named, call) == {"entity": None, "error": error}, call


def test_a_read_only_key_reads_entities_but_may_not_declare_or_rebuild_them(
    named: InProcess, keys: KeyStore
) -> None:
    reader, _ = keys.create(["default"], read_only=True)
    headers = bearer(reader)
    assert named.data(f"{{ entities {{ {ENTITY} }} }}", None, **headers)["entities"][0] == MELANIE
    for call in [
        'alias(name: "Teacher", of: "Lopez")',
        'mergeEntities(a: "Caroline", b: "Lopez")',
        'splitAlias(alias: "Mel")',
    ]:
        refused = declare(named, call, **headers)
        assert refused == {"entity": None, "error": {"code": "FORBIDDEN", "field": None}}, call
    rebuilt = named.data("mutation { rebuildEntities { names error { code } } }", None, **headers)
    assert rebuilt["rebuildEntities"] == {"names": 0, "error": {"code": "FORBIDDEN"}}
    entity = named.data('{ entity(name: "Lopez") { aliases } }', None, **headers)["entity"]
    assert entity == {"aliases": []}  # nothing was declared
    assert named.data('{ entity(name: "Mel") { name } }', None, **headers)["entity"] == {
        "name": "Melanie"
    }


def test_listing_costs_its_limit_and_rebuilding_runs_as_heavy_work(named: InProcess) -> None:
    def cost(document: str) -> int:
        status, body = named.post(document)
        assert status == 200 and not body.get("errors"), body
        requested: int = body["extensions"]["cost"]["requested"]
        return requested

    assert cost("{ entities(limit: 7) { name } }") == 7
    assert cost("{ a: entities { name } b: entities(limit: 1000) { names } }") == 1_100
    assert cost('{ entity(name: "Mel") { names } }') == 1
    assert cost("mutation { rebuildEntities { names } }") >= HEAVY_COST


# ------------------------------------------------------------------------------------ MCP


def test_the_mcp_tools_list_find_alias_merge_and_split_entities(mem: Memory, clock: Clock) -> None:
    mem.store_many(FACTS)
    failed, data = call_in_process(mem, READ_ONLY_KEY, "memory_entities", limit=1)
    assert not failed and data == {"entities": [MELANIE]}
    failed, data = call_in_process(mem, READ_ONLY_KEY, "memory_entities", name="mel")
    assert not failed and data == {"entities": [MELANIE]}
    clock.advance(60)
    before = clock.now - 30
    failed, data = call_in_process(mem, None, "memory_alias", name="Teacher", of="Lopez")
    assert not failed and data["entity"]["aliases"] == ["Teacher"]
    failed, data = call_in_process(mem, None, "memory_entities", name="Lopez", known_at=before)
    assert not failed and data["entities"][0]["aliases"] == []
    failed, data = call_in_process(mem, None, "memory_merge_entities", a="Caroline", b="Lopez")
    assert not failed and set(data["entity"]["names"]) == {"Caroline", "Lopez"}
    failed, data = call_in_process(mem, None, "memory_split_alias", alias="Mel")
    assert not failed and data["entity"]["names"] == ["Melanie"]
    assert [f.text for f in mem.lookup("Mel")] == ["Mel ran a charity race in June"]


def test_the_mcp_entity_tools_refuse_as_the_engine_does_and_a_read_only_key_never_declares(
    mem: Memory,
) -> None:
    mem.store_many(FACTS)
    refused: list[tuple[ApiKey | None, str, dict[str, Any], str]] = [
        (READ_ONLY_KEY, "memory_alias", {"name": "Teacher", "of": "Lopez"}, "FORBIDDEN"),
        (READ_ONLY_KEY, "memory_merge_entities", {"a": "Caroline", "b": "Lopez"}, "FORBIDDEN"),
        (READ_ONLY_KEY, "memory_split_alias", {"alias": "Mel"}, "FORBIDDEN"),
        (None, "memory_entities", {"name": "Nobody Known"}, "NOT_FOUND"),
        (None, "memory_entities", {"limit": 0}, "INVALID_INPUT"),
        (None, "memory_alias", {"name": "Prof", "of": "Nobody Known"}, "NOT_FOUND"),
        (None, "memory_alias", {"name": "!!", "of": "Lopez"}, "INVALID_INPUT"),
        (None, "memory_alias", {"name": "Prof"}, "INVALID_INPUT"),
        (None, "memory_split_alias", {"alias": "Caroline"}, "CONFLICT"),
    ]
    for key, tool, arguments, code in refused:
        failed, data = call_in_process(mem, key, tool, **arguments)
        assert failed and data["error"]["code"] == code, (tool, arguments)
    assert mem.entity("Lopez").aliases == () and mem.entity("Mel") == mem.entity("Melanie")
