"""Documents the service has validated before are executed without strawberry's per-request
pipeline (``graphmem.server.graphql.schema.Prepared``): the answers, errors and codes are those of the first
request, and whatever the shortcut does not cover goes through strawberry's view as before."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from graphmem.server.graphql.schema import Prepared, Schema
from graphql import parse

import graphmem

from ..support.graphql_clients import STORE, InProcess

FACT = "query($id: ID!) { fact(id: $id) { id text } }"
TRAVERSE = "query($id: ID!) { traverse(from: [$id], depth: 1) { nodes { depth fact { id } } } }"


@pytest.fixture
def prepared_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The operation names (or "") of the requests answered by the prepared path."""
    calls: list[str] = []
    execute_prepared = Schema.execute_prepared

    async def counted(self: Schema, document: Any, operation: Any, **kwargs: Any) -> Any:
        calls.append(kwargs["operation_name"] or "")
        return await execute_prepared(self, document, operation, **kwargs)

    monkeypatch.setattr(Schema, "execute_prepared", counted)
    yield calls


def test_a_repeated_document_is_answered_alike_by_the_prepared_path(
    service: InProcess, prepared_calls: list[str]
) -> None:
    first = service.data(STORE, {"t": "The deploy runs on Fridays"})["storeFact"]
    assert prepared_calls == []
    second = service.data(STORE, {"t": "The audit runs on Mondays"})["storeFact"]
    assert len(prepared_calls) == 1
    assert first["error"] is None and second["error"] is None
    assert first["fact"]["id"] != second["fact"]["id"]
    # Leaves, lists and nested objects as graphql-core completes them.
    for _ in range(2):
        nodes = service.data(TRAVERSE, {"id": first["fact"]["id"]})["traverse"]["nodes"]
        assert nodes == [{"depth": 0, "fact": {"id": first["fact"]["id"]}}]
    assert len(prepared_calls) == 2
    # Variables the schema refuses: the same error each time, with its code.
    answers = [service.post(FACT, {"id": None}) for _ in range(2)]
    assert answers[0] == answers[1]
    assert answers[0][0] == 200 and answers[0][1]["errors"][0]["extensions"]["code"]
    assert len(prepared_calls) == 3  # the first of the two validated the document


def test_errors_keep_their_codes_and_unexpected_ones_stay_masked(
    service: InProcess, prepared_calls: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    query = "query($id: ID!) { history(id: $id) { id } }"
    answers = [service.post(query, {"id": "no-such-fact"}) for _ in range(2)]
    assert answers[0] == answers[1], answers
    assert answers[0][1]["errors"][0]["extensions"]["code"] == "NOT_FOUND"
    assert prepared_calls == [""]

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("disk on fire at /secret/path")

    monkeypatch.setattr(graphmem.Memory, "search", broken)
    search = "query($q: String!) { search(query: $q) { fact { id } } }"
    answers = [service.post(search, {"q": "deploy"}) for _ in range(2)]
    assert answers[0] == answers[1], answers
    error = answers[0][1]["errors"][0]
    assert error["extensions"]["code"] == "INTERNAL_ERROR"
    assert error["message"] == "Unexpected error." and "secret" not in str(answers)
    assert len(prepared_calls) == 2


def test_documents_the_pipeline_refuses_are_never_prepared(
    service: InProcess, prepared_calls: list[str]
) -> None:
    for query in ("{ nope }", "{ namespace ", "query A { namespace } query B { canWrite }"):
        answers = [service.post(query) for _ in range(2)]
        assert answers[0] == answers[1], answers
        assert answers[0][1]["errors"][0]["extensions"]["code"] == "INVALID_QUERY"
    named = "query A { namespace } query B { canWrite }"
    for name, field in (("A", "namespace"), ("B", "canWrite"), ("A", "namespace")):
        response = service.request("POST", "/graphql", json={"query": named, "operationName": name})
        body = response.json()
        assert response.status_code == 200 and field in body["data"] and "errors" not in body
    assert prepared_calls == []


def test_what_the_shortcut_does_not_cover_goes_through_strawberry(
    service: InProcess, prepared_calls: list[str]
) -> None:
    query = "query Q { namespace }"
    service.data(query)
    # A request with extensions, an operation name that is not the document's, and a GET.
    with_extensions = service.request(
        "POST", "/graphql", json={"query": query, "extensions": {"x": 1}}
    )
    assert with_extensions.json()["data"] == {"namespace": "default"}
    wrong_name = service.request("POST", "/graphql", json={"query": query, "operationName": "R"})
    assert wrong_name.status_code == 400
    get = service.request("GET", "/graphql", params={"query": query})
    assert get.json()["data"] == {"namespace": "default"}
    assert prepared_calls == []
    assert service.request("POST", "/graphql", json={"query": query, "operationName": "Q"}).json()
    assert prepared_calls == ["Q"]


def test_prepared_documents_are_bounded_and_leave_out_subscriptions() -> None:
    prepared = Prepared(size=2)
    for text in ("{ a }", "{ b }", "{ c }"):
        prepared.add(text, parse(text))
    assert prepared.get("{ a }") is None and prepared.get("{ c }") is not None
    prepared.add("{ d }", parse("{ d }"))  # "{ b }" was the least recently used
    assert prepared.get("{ b }") is None and prepared.get("{ c }") is not None
    prepared.add("subscription { e }", parse("subscription { e }"))
    assert prepared.get("subscription { e }") is None
    prepared.add("query A { a } query B { b }", parse("query A { a } query B { b }"))
    assert prepared.get("query A { a } query B { b }") is None


def test_answers_orjson_cannot_encode_are_encoded_by_json(service: InProcess) -> None:
    ids = [
        service.data(STORE, {"t": f"Service {i} of the billing system"})["storeFact"]["fact"]["id"]
        for i in range(3)
    ]
    link = """mutation($s: ID!, $t: ID!, $m: JSON) {
      linkFacts(input: {sourceId: $s, targetId: $t, type: RELATED_TO, metadata: $m}) {
        link { metadata } error { code }
      }
    }"""
    huge = {"n": 2**70, "text": "ünïcode"}
    for target in ids[1:]:  # through strawberry's view, then the prepared path
        variables = {"s": ids[0], "t": target, "m": huge}
        response = service.request("POST", "/graphql", json={"query": link, "variables": variables})
        assert response.status_code == 200
        assert response.json()["data"]["linkFacts"] == {"link": {"metadata": huge}, "error": None}
