"""A read the service refuses names the argument at fault in ``extensions.field``, as the
schema names it (docs/graphql.md#errors), and the Python client's InvalidInput names it as
Memory does."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from graphmem.server import create_app

from graphmem import InvalidInput, Settings
from graphmem.client import Client

from ..support.clock import Clock
from ..support.graphql_clients import InProcess, LiveServer

FACT = 'mutation { storeFact(input: {text: "Ana lives in Porto"}) { fact { id } } }'

#: A read with one bad argument, and the field its error names (FACT: a stored fact's id).
REFUSED = {
    "a time in no accepted form": ('{ search(query: "x", knownAt: "soon") { score } }', "knownAt"),
    "a time beyond the years": ('{ fact(id: "FACT", asOf: 1e300) { id } }', "asOf"),
    "an empty query": ('{ search(query: "") { score } }', "query"),
    "a query too long": (f'{{ search(query: "{"x" * 10_001}") {{ score }} }}', "query"),
    "a depth out of range": ('{ search(query: "x", graphDepth: 7) { score } }', "graphDepth"),
    "a limit out of range": ('{ lookup(entity: "ana", limit: 0) { id } }', "limit"),
    "no start": ("{ traverse(from: []) { truncated } }", "from"),
    "a budget of nothing": ('{ recall(prompt: "x", maxTokens: 0) { context } }', "maxTokens"),
    "a bad cursor": ('{ facts(after: "nope") { edges { cursor } } }', "after"),
    "a nested page too large": (
        '{ fact(id: "FACT") { links(first: 100000) { edges { cursor } } } }',
        "first",
    ),
    "a wrong literal type": ('{ lookup(entity: "ana", limit: "all") { id } }', "limit"),
}


@pytest.fixture
def fact_id(service: InProcess) -> str:
    return service.data(FACT)["storeFact"]["fact"]["id"]


@pytest.mark.parametrize(("query", "field"), REFUSED.values(), ids=REFUSED.keys())
def test_a_refused_read_names_the_argument_at_fault(
    service: InProcess, fact_id: str, query: str, field: str
) -> None:
    status, body = service.post(query.replace("FACT", fact_id))
    assert status == 200, body
    [error] = body["errors"]
    assert error["extensions"]["field"] == field, error


@pytest.mark.parametrize(
    ("variables", "field"),
    [
        ({"at": "the day before"}, "knownAt"),
        ({"input": {"text": "Ana lives in Porto", "validFrom": "whenever"}}, "input.validFrom"),
    ],
    ids=["a time", "a time inside an input object"],
)
def test_a_refused_variable_names_the_argument_it_is_given_to(
    service: InProcess, variables: dict[str, Any], field: str
) -> None:
    query = (
        'query($at: DateTime) { search(query: "x", knownAt: $at) { score } }'
        if "at" in variables
        else "mutation($input: FactInput!) { storeFact(input: $input) { error { code } } }"
    )
    status, body = service.post(query, variables)
    assert status == 200, body
    [error] = body["errors"]
    assert error["extensions"] == {"code": "INVALID_QUERY", "field": field}, error


def test_a_refused_variable_is_placed_in_the_operation_that_ran(service: InProcess) -> None:
    document = (
        'query A($at: DateTime) { fact(id: "x", asOf: $at) { id } } '
        'query B($at: DateTime) { search(query: "x", knownAt: $at) { score } }'
    )
    body = {"query": document, "operationName": "B", "variables": {"at": "soon"}}
    [error] = service.request("POST", "/graphql", json=body).json()["errors"]
    assert error["extensions"]["field"] == "knownAt", error


@pytest.fixture
def client(settings: Settings, clock: Clock) -> Iterator[Client]:
    quiet = settings.model_copy(update={"prune_interval": 0, "classify_interval": 0})
    with LiveServer(create_app(quiet, clock=clock)) as server, Client(server.base_url) as client:
        yield client


def test_the_python_client_names_the_parameter_a_read_was_refused_for(client: Client) -> None:
    refused = {
        "graph_depth": lambda: client.search("x", graph_depth=7),
        "query": lambda: client.search("x" * 10_001),
        "limit": lambda: client.lookup("ana", limit=0),
        "ids": lambda: client.traverse([]),
        "max_tokens": lambda: client.recall("x", max_tokens=0),
    }
    for field, read in refused.items():
        with pytest.raises(InvalidInput) as raised:
            read()
        assert raised.value.field == field, raised.value
