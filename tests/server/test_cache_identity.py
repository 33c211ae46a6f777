"""``viewId``, the key a client cache normalises facts, links and episodes by
(docs/graphql.md#caching): one per object and time scope, whatever spelling the scope had, the
same at every depth of one read, and the present's the one writes answer with."""

from __future__ import annotations

from typing import Any

from ..support.clock import Clock
from ..support.graphql_clients import InProcess

STORE = """mutation($text: String!, $who: String!, $city: String!) {
  storeFacts(inputs: [{text: $text, entity: $who, key: "city", value: $city}],
             episode: {id: "chat-1"}) {
    results { action fact { id viewId } }
  }
}"""
LINK = """mutation($source: ID!, $target: ID!) {
  linkFacts(input: {sourceId: $source, targetId: $target, type: RELATED_TO}) { link { viewId } }
}"""
READ = """query($id: ID!, $asOf: DateTime, $knownAt: DateTime) {
  fact(id: $id, asOf: $asOf, knownAt: $knownAt) {
    id viewId validUntil
    knownNow { viewId validUntil }
    history { viewId }
    episode { viewId facts { viewId } }
    links { edges { link { viewId source { viewId } } neighbour { viewId } } }
  }
}"""


def _store(service: InProcess, text: str, city: str) -> dict[str, Any]:
    variables = {"text": text, "who": text.split()[0], "city": city}
    [result] = service.data(STORE, variables)["storeFacts"]["results"]
    return result


def _read(service: InProcess, fact_id: str, **scope: Any) -> dict[str, Any]:
    return service.data(READ, {"id": fact_id, **scope})["fact"]


def test_view_ids_are_the_id_and_the_time_scope_the_fact_was_read_at(
    service: InProcess, clock: Clock
) -> None:
    porto = _store(service, "Ana lives in Porto", "Porto")
    fact_id = porto["fact"]["id"]
    assert porto["fact"]["viewId"] == f"{fact_id}@now/now"  # a write answers with the present
    clock.advance(3600)
    other = _store(service, "Bo lives in Rome", "Rome")["fact"]["id"]
    service.data(LINK, {"source": fact_id, "target": other})
    clock.advance(3600)
    assert _store(service, "Ana lives in Lisbon", "Lisbon")["action"] == "UPDATE"

    then = _read(service, fact_id, asOf="2026-01-01T01:30:00Z", knownAt="2026-01-01T01:30:00Z")
    now = _read(service, fact_id, asOf="2026-01-01T01:30:00Z")
    scope = "2026-01-01T01:30:00Z/2026-01-01T01:30:00Z"
    assert then["viewId"] == f"{fact_id}@{scope}" and then["validUntil"] is None
    assert now["viewId"] == f"{fact_id}@2026-01-01T01:30:00Z/now"
    assert now["validUntil"] is not None
    # Every object beneath a top-level field was read at its scope, and says so.
    assert then["history"] == [{"viewId": f"{fact_id}@{scope}"}]
    assert then["episode"]["viewId"] == f"chat-1@{scope}"
    assert then["episode"]["facts"] == [{"viewId": f"{i}@{scope}"} for i in (fact_id, other)]
    edges = then["links"]["edges"]
    assert {e["neighbour"]["viewId"] for e in edges} == {f"{other}@{scope}"}
    assert all(e["link"]["viewId"].endswith(f"@{scope}") for e in edges)
    sources = {e["link"]["source"]["viewId"] for e in edges}
    assert f"{fact_id}@{scope}" in sources and sources <= {f"{i}@{scope}" for i in (fact_id, other)}
    # knownNow is the present, whatever the scope: the view writes' answers update.
    assert then["knownNow"] == now["knownNow"]
    assert then["knownNow"]["viewId"] == f"{fact_id}@now/now"
    assert then["knownNow"]["validUntil"] == now["validUntil"]


def test_one_instant_spelt_three_ways_is_one_view(service: InProcess) -> None:
    fact_id = _store(service, "Ana lives in Porto", "Porto")["fact"]["id"]
    spellings = ["2030", "2030-01-01T01:00:00+01:00", 1893456000]
    views = {_read(service, fact_id, knownAt=at)["viewId"] for at in spellings}
    assert views == {f"{fact_id}@now/2030-01-01T00:00:00Z"}
    assert _read(service, fact_id, knownAt="2030-01-01T00:00:01Z")["viewId"] not in views
