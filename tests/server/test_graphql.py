"""The GraphQL contract, run in-process and against a live uvicorn server on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from starlette.applications import Starlette

from ..support.clock import Clock
from ..support.graphql_clients import Api, InProcess, LiveServer

pytestmark = pytest.mark.engines

STORE = """
mutation($input: FactInput!) {
  storeFact(input: $input) {
    action reason targetIds fact { id text validFrom validUntil } error { code message field }
  }
}"""
LINK = """
mutation($input: LinkInput!) {
  linkFacts(input: $input) { link { id type sourceId targetId strength } error { code message } }
}"""
TRAVERSE = """
query($from: [ID!]!, $asOf: DateTime, $knownAt: DateTime, $depth: Int = 2) {
  traverse(from: $from, depth: $depth, direction: BOTH, asOf: $asOf, knownAt: $knownAt) {
    nodes { depth parentIds fact { id text } } edges { id type sourceId targetId } truncated
  }
}"""


@pytest.fixture(params=["in-process", "live"])
def api(request: pytest.FixtureRequest, app: Starlette) -> Iterator[Api]:
    with InProcess(app) if request.param == "in-process" else LiveServer(app) as client:
        yield client


def store(api: Api, clock: Clock | None = None, **fields: Any) -> dict[str, Any]:
    if clock is not None:
        clock.advance(60)
    payload = api.data(STORE, {"input": fields})["storeFact"]
    assert payload["error"] is None, payload
    return payload


def link(
    api: Api, source: str, target: str, type: str = "DEPENDS_ON", **extra: Any
) -> dict[str, Any]:
    payload = api.data(
        LINK, {"input": {"sourceId": source, "targetId": target, "type": type, **extra}}
    )["linkFacts"]
    assert payload["error"] is None, payload
    return payload["link"]


def test_store_fact_returns_the_contract_shape(api: Api) -> None:
    payload = store(api, text="The deploy runs on Fridays", tags=["ops"])
    assert payload["action"] == "ADD"
    assert payload["fact"]["text"] == "The deploy runs on Fridays"
    assert payload["fact"]["validFrom"].endswith("Z")
    assert payload["fact"]["validUntil"] is None


def test_moving_city_is_answered_for_now_the_past_and_what_memory_knew(
    api: Api, clock: Clock
) -> None:
    berlin = store(
        api,
        clock,
        text="Ana lives in Berlin",
        entity="Ana",
        key="city",
        value="Berlin",
        validFrom="2020-01-01",
    )
    stored_berlin_at = clock.now
    paris = store(
        api,
        clock,
        text="Ana lives in Paris",
        entity="Ana",
        key="city",
        value="Paris",
        validFrom="2023-06-01",
    )
    assert paris["action"] == "UPDATE"
    assert paris["targetIds"] == [berlin["fact"]["id"]]

    query = """query($asOf: DateTime, $knownAt: DateTime) {
      search(query: "where does Ana live", limit: 5, asOf: $asOf, knownAt: $knownAt) {
        score fact { id text } } }"""
    assert [h["fact"]["text"] for h in api.data(query)["search"]] == ["Ana lives in Paris"]
    assert [h["fact"]["text"] for h in api.data(query, {"asOf": "2021-05-01"})["search"]] == [
        "Ana lives in Berlin"
    ]
    before_move_was_known = {"asOf": "2024-01-01", "knownAt": stored_berlin_at + 1}
    assert [h["fact"]["text"] for h in api.data(query, before_move_was_known)["search"]] == [
        "Ana lives in Berlin"
    ]
    history = api.data(
        "query($id: ID!) { history(id: $id) { id text validFrom validUntil } }",
        {"id": paris["fact"]["id"]},
    )["history"]
    assert [h["text"] for h in history] == ["Ana lives in Berlin", "Ana lives in Paris"]
    assert history[0]["validUntil"] == "2023-06-01T00:00:00Z"
    lookup = api.data('{ lookup(entity: "ana", key: "city") { text } }')["lookup"]
    assert lookup == [{"text": "Ana lives in Paris"}]


def test_traverse_respects_valid_and_transaction_time_of_links(api: Api, clock: Clock) -> None:
    a = store(api, clock, text="Service A serves the checkout page", validFrom="2020-01-01")[
        "fact"
    ]["id"]
    b = store(api, clock, text="Service B stores the shopping carts", validFrom="2020-01-01")[
        "fact"
    ]["id"]
    c = store(api, clock, text="Service C sends the receipts by mail", validFrom="2020-01-01")[
        "fact"
    ]["id"]
    before_links = clock.now
    clock.advance(60)
    made = link(api, a, b, validFrom="2025-06-01")
    assert (made["type"], made["sourceId"], made["targetId"]) == ("DEPENDS_ON", a, b)
    link(api, b, c, "RELATED_TO", strength=0.5)

    sub = api.data(TRAVERSE, {"from": [a]})["traverse"]
    assert [(n["fact"]["id"], n["depth"]) for n in sub["nodes"]] == [(a, 0), (b, 1), (c, 2)]
    assert sub["nodes"][2]["parentIds"] == [b]
    assert len(sub["edges"]) == 2 and sub["truncated"] is False

    before_valid = api.data(TRAVERSE, {"from": [a], "asOf": "2025-05-31"})["traverse"]
    assert [n["fact"]["id"] for n in before_valid["nodes"]] == [a]
    known_before = api.data(TRAVERSE, {"from": [b], "knownAt": before_links})["traverse"]
    assert [n["fact"]["id"] for n in known_before["nodes"]] == [b]

    assert api.data(TRAVERSE, {"from": [a], "depth": 1})["traverse"]["truncated"] is True


def test_unlink_hides_a_link_now_but_not_from_earlier_reads(api: Api, clock: Clock) -> None:
    a = store(api, clock, text="The API gateway routes traffic")["fact"]["id"]
    b = store(api, clock, text="The auth service issues tokens")["fact"]["id"]
    made = link(api, a, b)
    clock.advance(60)
    linked_at = clock.now
    clock.advance(60)
    gone = api.data(
        "mutation($id: ID!) { unlink(id: $id) { link { id } error { code } } }", {"id": made["id"]}
    )["unlink"]
    assert gone == {"link": {"id": made["id"]}, "error": None}
    assert len(api.data(TRAVERSE, {"from": [a]})["traverse"]["nodes"]) == 1
    assert len(api.data(TRAVERSE, {"from": [a], "knownAt": linked_at})["traverse"]["edges"]) == 1
    again = api.data(
        "mutation($id: ID!) { unlink(id: $id) { link { id } error { code } } }", {"id": made["id"]}
    )["unlink"]
    assert again["link"] is None and again["error"]["code"] in ("CONFLICT", "NOT_FOUND")


def test_forget_hides_a_fact_and_reports_a_second_forget_as_a_conflict(
    api: Api, clock: Clock
) -> None:
    fact = store(api, clock, text="The office wifi password rotates monthly")["fact"]["id"]
    known_at = clock.now
    clock.advance(60)
    forget = "mutation($id: ID!) { forgetFact(id: $id) { fact { id } error { code message } } }"
    assert api.data(forget, {"id": fact})["forgetFact"] == {"fact": {"id": fact}, "error": None}
    get = "query($id: ID!, $knownAt: DateTime) { fact(id: $id, knownAt: $knownAt) { text } }"
    assert api.data(get, {"id": fact})["fact"] is None
    assert api.data(get, {"id": fact, "knownAt": known_at})["fact"] is not None
    second = api.data(forget, {"id": fact})["forgetFact"]
    assert second["fact"] is None and second["error"]["code"] == "CONFLICT"
    unknown = api.data(forget, {"id": "no-such-fact"})["forgetFact"]
    assert unknown["error"]["code"] == "NOT_FOUND"


def test_fact_pages_neither_repeat_nor_skip_while_facts_are_written(api: Api) -> None:
    api.data(
        "mutation($inputs: [FactInput!]!) { storeFacts(inputs: $inputs) { error { code } } }",
        {"inputs": [{"text": f"Inventory note number {i}"} for i in range(25)]},
    )
    page = """query($after: String) { facts(first: 10, after: $after) {
        edges { cursor node { text } } pageInfo { hasNextPage endCursor } } }"""
    seen: list[str] = []
    after = None
    while True:
        facts = api.data(page, {"after": after})["facts"]
        seen += [e["node"]["text"] for e in facts["edges"]]
        if len(seen) == 10:  # writes land between pages
            for i in range(25, 30):
                store(api, text=f"Inventory note number {i}")
        if not facts["pageInfo"]["hasNextPage"]:
            break
        after = facts["pageInfo"]["endCursor"]
    assert seen == [f"Inventory note number {i}" for i in range(30)]
    bad = api.post('{ facts(after: "bm90LWEtY3Vyc29y") { edges { cursor } } }')[1]
    assert bad["errors"][0]["extensions"]["code"] == "INVALID_INPUT"


def test_nested_fields_read_at_the_top_level_time_scope(api: Api, clock: Clock) -> None:
    old = store(
        api,
        clock,
        text="The team uses Jenkins",
        entity="team",
        key="ci",
        value="Jenkins",
        validFrom="2021-01-01",
    )
    new = store(
        api,
        clock,
        text="The team uses GitHub Actions",
        entity="team",
        key="ci",
        value="GitHub Actions",
        validFrom="2024-01-01",
    )
    other = store(api, clock, text="Builds take ten minutes")["fact"]["id"]
    link(api, new["fact"]["id"], other, "RELATED_TO", validFrom="2024-02-01")
    query = """query($id: ID!, $asOf: DateTime) { fact(id: $id, asOf: $asOf) {
        text supersedes { text } supersededBy { text } history { text }
        links(types: [RELATED_TO, SUPERSEDES]) {
          edges { outgoing link { type } neighbour { text } } pageInfo { hasNextPage } } } }"""
    now = api.data(query, {"id": new["fact"]["id"]})["fact"]
    assert now["supersedes"] == {"text": "The team uses Jenkins"}
    assert {(e["link"]["type"], e["neighbour"]["text"]) for e in now["links"]["edges"]} == {
        ("SUPERSEDES", "The team uses Jenkins"),
        ("RELATED_TO", "Builds take ten minutes"),
    }
    early = api.data(query, {"id": new["fact"]["id"], "asOf": "2024-01-15"})["fact"]
    assert [e["link"]["type"] for e in early["links"]["edges"]] == ["SUPERSEDES"]
    past = api.data(query, {"id": old["fact"]["id"], "asOf": "2022-01-01"})["fact"]
    assert past["text"] == "The team uses Jenkins"
    assert [h["text"] for h in past["history"]] == ["The team uses Jenkins"]


def test_link_pages_continue_after_their_cursor(api: Api, clock: Clock) -> None:
    hub = store(api, clock, text="The release train leaves every two weeks")["fact"]["id"]
    for i in range(7):
        spoke = store(api, clock, text=f"Team {i} ships on the release train")["fact"]["id"]
        link(api, spoke, hub, "PART_OF", strength=round(0.9 - i * 0.1, 2))
    query = """query($id: ID!, $after: String) { fact(id: $id) { links(first: 3, after: $after) {
        edges { cursor link { strength } } pageInfo { hasNextPage endCursor } } } }"""
    strengths: list[float] = []
    after = None
    while True:
        links = api.data(query, {"id": hub, "after": after})["fact"]["links"]
        strengths += [e["link"]["strength"] for e in links["edges"]]
        if not links["pageInfo"]["hasNextPage"]:
            break
        after = links["pageInfo"]["endCursor"]
    assert strengths == [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3]


def test_expected_failures_are_typed_and_write_nothing(api: Api) -> None:
    empty = api.data(STORE, {"input": {"text": ""}})["storeFact"]
    assert empty["error"]["code"] == "INVALID_INPUT" and empty["fact"] is None
    unknown = api.data(
        LINK, {"input": {"sourceId": "nope", "targetId": "nada", "type": "RELATED_TO"}}
    )["linkFacts"]
    assert unknown["error"]["code"] == "NOT_FOUND"
    batch = api.data(
        "mutation($inputs: [FactInput!]!) { storeFacts(inputs: $inputs) { results { action }"
        " error { code message } } }",
        {"inputs": [{"text": "A fine fact about tea"}, {"text": "x", "importance": 7}]},
    )["storeFacts"]
    assert batch["results"] == [] and batch["error"]["code"] == "INVALID_INPUT"
    assert "item 1" in batch["error"]["message"]
    assert api.data("{ facts { edges { cursor } } }")["facts"]["edges"] == []

    status, body = api.post('{ search(query: "  ") { score } }')
    assert status == 200 and body["errors"][0]["extensions"]["code"] == "INVALID_INPUT"
    status, body = api.post("{ search(query: 42) { score } }")
    assert status in (200, 400) and body["errors"][0]["extensions"]["code"] == "INVALID_QUERY"
    status, body = api.post("{ nothingHere }")
    assert status in (200, 400) and body["errors"][0]["extensions"]["code"] == "INVALID_QUERY"
    status, body = api.post(
        'query($t: DateTime) { fact(id: "x", asOf: $t) { id } }', {"t": "next tuesday"}
    )
    assert status in (200, 400) and "cannot parse" in body["errors"][0]["message"]
    assert api.data('{ fact(id: "unknown") { id } }') == {"fact": None}


def test_malformed_requests_get_a_4xx_never_a_500(api: Api) -> None:
    for content in (b"{not json", b"[]", b'{"query": 5}', b"\xff\xfe"):
        response = api.request(
            "POST", "/graphql", content=content, headers={"content-type": "application/json"}
        )
        assert 400 <= response.status_code < 500, (content, response.status_code)


def test_health_metrics_and_graphiql_are_served(api: Api) -> None:
    assert api.request("GET", "/healthz").json()["status"] == "ok"
    store(api, text="Metrics count stored facts")
    metrics = api.request("GET", "/metrics").text
    assert 'graphmem_facts{namespace="default",state="current"} 1.0' in metrics
    assert 'graphmem_http_requests_total{method="POST",route="/graphql",status="200"}' in metrics
    page = api.request("GET", "/graphql", headers={"accept": "text/html"})
    assert page.status_code == 200 and "graphiql" in page.text.lower()


# ------------------------------------------------------------------------------------ agents

RECALL = """
query($prompt: String!, $maxTokens: Int, $format: RecallFormat, $asOf: DateTime) {
  recall(prompt: $prompt, maxTokens: $maxTokens, format: $format, asOf: $asOf) {
    context tokens omitted facts { id text } items { kind source line summarized fact { id } }
  }
}"""
CAPTURE = """
mutation($messages: [MessageInput!]!, $keep: CaptureKeep) {
  captureMessages(messages: $messages, keep: $keep) {
    results {
      action kind reason message role text targetIds turnId
      fact { id kind source entity key value }
    }
    error { code message field }
  }
}"""
TURN = [
    {"role": "user", "content": "My favourite editor is vim. What's the weather like?"},
    {"role": "assistant", "content": "Noted. My API key is sk-proj-4fT9xQ2mZk81LwPq7RbN3v."},
]


def test_capture_keeps_each_message_as_a_turn_with_its_facts_drawn_on_top(
    api: Api, clock: Clock
) -> None:
    day = datetime.fromtimestamp(clock.now, UTC).strftime("%Y-%m-%d")
    payload = api.data(CAPTURE, {"messages": TURN})["captureMessages"]
    assert payload["error"] is None
    turn, fact, secret = payload["results"]
    assert (turn["action"], turn["kind"], turn["text"], turn["turnId"]) == (
        "ADD",
        "TURN",
        "My favourite editor is vim. What's the weather like?",
        None,
    )
    assert (turn["fact"]["kind"], turn["fact"]["source"]) == ("TURN", "turn:user")
    assert (fact["action"], fact["kind"], fact["text"], fact["role"]) == (
        "ADD",
        "FACT",
        "My favourite editor is vim.",
        "user",
    )
    assert fact["turnId"] == turn["fact"]["id"] and fact["fact"]["kind"] == "FACT"
    assert fact["fact"]["key"] == "favourite_editor" and fact["fact"]["value"] == "vim"
    assert (secret["action"], secret["kind"], secret["text"], secret["message"]) == (
        "SKIP",
        "TURN",
        None,
        1,
    )
    assert "sk-proj" not in str(payload)
    clock.advance(60)
    recall = api.data(RECALL, {"prompt": "what editor does the user like?"})["recall"]
    [item] = recall["items"]  # the fact or its turn, never both
    assert item["kind"] == "TURN" and item["fact"]["id"] == turn["fact"]["id"]
    assert recall["context"] == (
        "<memory-context>\n[keyword/turn] "
        f"{day} user: My favourite editor is vim. What's the weather like?\n</memory-context>"
    )
    assert item["source"] == "KEYWORD" and recall["tokens"] <= 800
    kinds = api.data("{ facts { edges { node { kind source } } } }")["facts"]["edges"]
    assert sorted((e["node"]["kind"], e["node"]["source"]) for e in kinds) == [
        ("FACT", "capture:user"),
        ("TURN", "turn:user"),
    ]
    before = api.data(RECALL, {"prompt": "editor", "asOf": "2020-01-01"})["recall"]
    assert before["context"] == "" and before["facts"] == []


def test_capture_with_keep_facts_stores_the_memorable_sentences_alone(
    api: Api, clock: Clock
) -> None:
    payload = api.data(CAPTURE, {"messages": TURN, "keep": "FACTS"})["captureMessages"]
    assert payload["error"] is None
    stored, secret = payload["results"]
    assert (stored["action"], stored["kind"], stored["text"], stored["turnId"]) == (
        "ADD",
        "FACT",
        "My favourite editor is vim.",
        None,
    )
    assert stored["fact"]["key"] == "favourite_editor" and stored["fact"]["value"] == "vim"
    assert (secret["action"], secret["text"], secret["message"]) == ("SKIP", None, 1)
    clock.advance(60)
    recall = api.data(RECALL, {"prompt": "what editor does the user like?"})["recall"]
    assert recall["context"] == (
        "<memory-context>\n[keyword/preference] My favourite editor is vim.\n</memory-context>"
    )
    assert recall["facts"] == [{"id": stored["fact"]["id"], "text": "My favourite editor is vim."}]
    assert recall["items"][0]["kind"] == "FACT"
    short = api.data(RECALL, {"prompt": "editor", "format": "SHORT"})["recall"]
    assert short["items"][0]["line"] == "preference: My favourite editor is vim."


def test_an_unknown_keep_is_refused_before_anything_is_stored(api: Api) -> None:
    status, body = api.post(CAPTURE, {"messages": TURN, "keep": "EVERYTHING"})
    assert status in (200, 400) and body["errors"][0]["extensions"]["code"] == "INVALID_QUERY"
    assert "EVERYTHING" in body["errors"][0]["message"]
    assert api.data("{ stats { data } }")["stats"]["data"]["facts"] == 0


def test_agent_calls_with_bad_input_fail_clearly_and_store_nothing(api: Api) -> None:
    payload = api.data(CAPTURE, {"messages": [{"role": "narrator", "content": "I live in Rome"}]})
    assert payload["captureMessages"]["results"] == []
    assert payload["captureMessages"]["error"]["code"] == "INVALID_INPUT"
    assert "unknown role" in payload["captureMessages"]["error"]["message"]
    status, body = api.post(RECALL, {"prompt": "anything", "maxTokens": 0})
    assert status == 200 and body["errors"][0]["extensions"]["code"] == "INVALID_INPUT"
    assert "max_tokens" in body["errors"][0]["message"]
    assert api.data("{ stats { data } }")["stats"]["data"]["facts"] == 0


def test_a_time_in_epoch_seconds_beyond_the_years_a_time_can_name_is_invalid_input(
    service: InProcess,
) -> None:
    status, body = service.post("{ episodes(after: -100000000000) { id } }")
    assert status == 200 and "data" not in body  # refused as it was validated
    assert [e["extensions"]["code"] for e in body["errors"]] == ["INVALID_INPUT"]
    assert "years a time can name" in body["errors"][0]["message"]
