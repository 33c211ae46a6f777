"""The registries of enumerated facts (error codes, limits, decay classes, link origins) hold
what the code does, and what the API tells its users is built from them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from graphmem.server import create_app, schema_sdl
from graphql import GraphQLEnumType, GraphQLInputObjectType, GraphQLObjectType
from graphql import build_schema as parse_sdl

from graphmem import InvalidInput, Memory, Settings, limits
from graphmem.decay import DECAY_CLASSES, DECAY_RULES
from graphmem.errors import CODES, Code, GraphmemError, SubscriberTooSlow
from graphmem.limits import LIMITS, MAX_LIMIT
from graphmem.models import LINK_ORIGINS, LinkOrigin

from ..support.clock import Clock
from ..support.connections import read_connection
from ..support.graphql_clients import STORE, InProcess

ROOT = Path(__file__).resolve().parents[2]


def error_classes(root: type[GraphmemError] = GraphmemError) -> list[type[GraphmemError]]:
    """Every class under ``root``, once (one that two classes share is reached twice)."""
    found = [c for sub in root.__subclasses__() for c in (sub, *error_classes(sub))]
    return list(dict.fromkeys(found))


# ------------------------------------------------------------------------------------ errors


def test_every_exception_carries_a_registered_code_and_no_two_share_one() -> None:
    classes = error_classes()
    assert SubscriberTooSlow in classes  # the subscription's error is part of the tree
    codes = [c.code for c in classes]
    assert len(set(codes)) == len(codes)
    assert set(codes) <= set(CODES)
    assert set(CODES) == set(Code)


def test_mutations_return_as_data_exactly_the_codes_the_registry_marks() -> None:
    enum = parse_sdl(schema_sdl()).get_type("ErrorCode")
    assert isinstance(enum, GraphQLEnumType)
    assert set(enum.values) == {code for code, use in CODES.items() if use.payload}
    assert enum.values["NOT_FOUND"].description == (
        "No fact or link with that id, or no entity a name reaches, in this namespace."
    )


def test_a_namespace_indexed_by_another_embedder_answers_its_documented_status(
    tmp_path: Path, clock: Clock
) -> None:
    data = tmp_path / "data"
    with Memory.open(data, namespace="old", settings=Settings(embedder="hash"), clock=clock) as m:
        m.store("Indexed with 256-dimensional hash vectors")
    app = create_app(Settings(embedder="hash", hash_dimensions=128, data_dir=data), clock=clock)
    with InProcess(app) as service:
        status, body = service.post("{ namespace }", headers={"X-Graphmem-Namespace": "old"})
    [error] = body["errors"]
    assert (status, error["extensions"]["code"]) == (503, "EMBEDDER_MISMATCH")
    assert "graphmem reindex" in error["message"]
    assert CODES[Code.EMBEDDER_MISMATCH].http_status == status
    documented = (ROOT / "docs" / "graphql.md").read_text(encoding="utf-8")
    assert f"| `EMBEDDER_MISMATCH` | {status} |" in documented


# ------------------------------------------------------------------------------------ limits


def test_every_limit_is_listed_under_its_own_name() -> None:
    assert [getattr(limits, k.name) for k in LIMITS] == [k.value for k in LIMITS]
    constants = {n for n, v in vars(limits).items() if n.isupper() and isinstance(v, int)}
    assert constants == {k.name for k in LIMITS}


def test_a_page_of_a_facts_links_holds_at_most_the_page_limit(mem: Memory) -> None:
    hub, leaf = (mem.store(t, autolink=False).fact for t in ("The hub", "A leaf"))
    assert hub is not None and leaf is not None
    mem.link(hub.id, leaf.id, "RELATED_TO")
    assert len(mem.links_page([hub.id], first=MAX_LIMIT)[hub.id][0]) == 1
    with pytest.raises(InvalidInput, match=f"first must be an integer from 0 to {MAX_LIMIT}"):
        mem.links_page([hub.id], first=MAX_LIMIT + 1)


def test_graphql_documents_the_page_limit_it_enforces(service: InProcess) -> None:
    fact = service.data(STORE, {"t": "A fact with no links"})["storeFact"]["fact"]
    query = "query($id: ID!, $n: Int!) { fact(id: $id) { links(first: $n) { edges { cursor } } } }"
    assert service.data(query, {"id": fact["id"], "n": MAX_LIMIT})["fact"]["links"]["edges"] == []
    status, body = service.post(query, {"id": fact["id"], "n": MAX_LIMIT + 1})
    assert (status, body["errors"][0]["extensions"]["code"]) == (200, "INVALID_INPUT")
    fact_type = parse_sdl(schema_sdl()).get_type("Fact")
    assert isinstance(fact_type, GraphQLObjectType)
    assert f"{MAX_LIMIT:,})" in (fact_type.fields["links"].args["first"].description or "")


# ------------------------------------------------------------------------------------ decay


def test_every_decay_class_can_be_stored_and_is_named_where_the_api_describes_one(
    service: InProcess,
) -> None:
    store = """mutation($t: String!, $c: String) {
      storeFact(input: {text: $t, decayClass: $c}) { fact { decayClass expiresAt } error { code } }
    }"""
    for rule in DECAY_RULES:
        fact = service.data(store, {"t": f"A {rule.name} fact", "c": rule.name})["storeFact"]
        assert fact["fact"]["decayClass"] == rule.name
        assert (fact["fact"]["expiresAt"] is None) == (rule.ttl is None)
    schema = parse_sdl(schema_sdl())
    fact_type, input_type = schema.get_type("Fact"), schema.get_type("FactInput")
    assert isinstance(fact_type, GraphQLObjectType)
    assert isinstance(input_type, GraphQLInputObjectType)
    described = [
        fact_type.fields["decayClass"].description or "",
        input_type.fields["decayClass"].description or "",
    ]
    for text in described:
        assert [c for c in DECAY_CLASSES if c not in text] == [], text
    assert tuple(rule.name for rule in DECAY_RULES) == DECAY_CLASSES


# ------------------------------------------------------------------------------------ origins


def test_the_link_origins_are_those_links_get_and_the_only_ones_described(
    tmp_path: Path, clock: Clock
) -> None:
    settings = Settings(embedder="hash", entity_links=True)
    with Memory.open(tmp_path / "data", settings=settings, clock=clock) as mem:
        berlin = mem.store("Ana lives in Berlin", entity="ana", key="city", value="Berlin").fact
        paris = mem.store("Ana lives in Paris", entity="ana", key="city", value="Paris").fact
        mem.store("Ana lives in Paris.")  # a near repeat: a similarity link
        mem.store("Ana drinks green tea", entity="ana")  # the same entity: an entity link
        assert berlin is not None and paris is not None
        mem.link(paris.id, berlin.id, "CAUSED_BY")
        mem.store_many(
            [{"text": "Bo asked about the tram"}, {"text": "The tram runs hourly"}], episode="chat"
        )  # consecutive facts of an episode: an episode link
        mem.capture([{"role": "user", "content": "Hello again. I moved to Porto."}])
        made = {
            k.origin for f in mem.facts(include_superseded=True).items for k in mem.links(f[1].id)
        }
        table = (
            read_connection(mem)
            .execute("SELECT sql FROM sqlite_master WHERE name = 'links'")
            .fetchone()[0]
        )
    check = re.search(r"origin IN\s*\(([^)]*)\)", table)
    assert check is not None
    accepted = set(re.findall(r"'(\w+)'", check[1]))
    # graphmem makes all but import's; reflection's and the classifier's need a chat model
    # (tests/core/test_reflection.py, tests/core/test_classify.py)
    assert made == set(LINK_ORIGINS) - {
        LinkOrigin.IMPORT,
        LinkOrigin.REFLECTION,
        LinkOrigin.CLASSIFIER,
    }
    assert accepted == set(LINK_ORIGINS)
    link_type = parse_sdl(schema_sdl()).get_type("Link")
    assert isinstance(link_type, GraphQLObjectType)
    described = link_type.fields["origin"].description or ""
    assert set(re.findall(r"`([a-z_]+)`", described)) >= set(LINK_ORIGINS)
    assert "manual" not in described
