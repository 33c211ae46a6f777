"""Profiles over the service: the GraphQL ``profile`` query and ``recall(profile:)``, the MCP
tool ``memory_profile``, the CLI's ``graphmem profile`` and ``Client.profile``: the same
profile as ``Memory`` reads, the engine's refusals as typed errors, a summary (the OpenAI stub)
charged as heavy work."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner
from graphmem.server import create_app
from graphmem.server.cost import HEAVY_COST

from graphmem import Client, Memory, Settings
from graphmem.cli import cli

from ..core.test_erasure import chat_settings
from ..support.clock import Clock
from ..support.graphql_clients import InProcess, LiveServer
from ..support.mcp_clients import READ_ONLY_KEY, call_in_process
from ..support.openai_stub import OpenAIStub

pytestmark = pytest.mark.engines

FACTS = [
    {"text": "Ana lives in Berlin", "entity": "Ana", "key": "city", "value": "Berlin"},
    {"text": "Ana has a cat", "entity": "Ana", "key": "pets", "value": "cat"},
    {"text": "Ana has a dog", "entity": "Ana", "key": "pets", "value": "dog"},
    {"text": "Ana likes green tea", "entity": "Ana"},
    {"text": "Bob fixes bikes", "entity": "Bob"},
]
STORE_MANY = "mutation($i: [FactInput!]!) { storeFacts(inputs: $i) { results { fact { id } } } }"
PROFILE = """{ profile(entity: "ana's") {
    entity { name } attributes { key values { value validUntil fact { id text } } }
    facts { text } linked { entity { name } links types } truncated summary { text }
    summaryError } }"""


@pytest.fixture
def settings(settings: Settings, stub: OpenAIStub) -> Settings:
    return settings.model_copy(update=chat_settings(stub))


@pytest.fixture
def ana(service: InProcess) -> list[str]:
    """The service with Ana's facts, and Bob's linked to her tea; their ids."""
    stored = service.data(STORE_MANY, {"i": FACTS})["storeFacts"]["results"]
    ids = [r["fact"]["id"] for r in stored]
    link = "mutation($i: LinkInput!) { linkFacts(input: $i) { error { code } } }"
    made = service.data(link, {"i": {"sourceId": ids[3], "targetId": ids[4], "type": "RELATED_TO"}})
    assert made["linkFacts"]["error"] is None
    return ids


def summary_answer(body: dict[str, Any]) -> str:
    """The chat model's answer: a summary citing the first fact shown."""
    return json.dumps({"summary": "Ana keeps a cat and a dog.", "facts": ["F1"]})


def test_the_profile_query_answers_as_memory_reads_it(service: InProcess, ana: list[str]) -> None:
    profile = service.data(PROFILE)["profile"]
    assert profile["entity"] == {"name": "Ana"} and not profile["truncated"]
    values = {a["key"]: sorted(v["value"] for v in a["values"]) for a in profile["attributes"]}
    assert values == {"city": ["Berlin"], "pets": ["cat", "dog"]}
    assert profile["facts"] == [{"text": "Ana likes green tea"}]
    assert profile["linked"] == [{"entity": {"name": "Bob"}, "links": 1, "types": ["RELATED_TO"]}]
    assert profile["summary"] is None and profile["summaryError"] is None


def test_a_summary_is_asked_for_once_and_charged_as_heavy_work(
    service: InProcess, ana: list[str], stub: OpenAIStub
) -> None:
    def cost(document: str) -> tuple[int, dict[str, Any]]:
        status, body = service.post(document)
        assert status == 200 and not body.get("errors"), body
        return body["extensions"]["cost"]["requested"], body["data"]

    plain, _ = cost('{ profile(entity: "Ana") { truncated } }')
    assert plain < HEAVY_COST
    stub.reply_next(summary_answer)
    asked, data = cost('{ profile(entity: "Ana", summary: true) { summary { text cached } } }')
    assert asked >= HEAVY_COST
    assert data["profile"]["summary"] == {"text": "Ana keeps a cat and a dog.", "cached": False}
    _, again = cost('{ profile(entity: "Ana", summary: true) { summary { cached } } }')
    assert again["profile"]["summary"] == {"cached": True} and len(stub.chat_requests) == 1


def test_the_engines_refusals_are_typed_errors(service: InProcess, ana: list[str]) -> None:
    for document, code, field in [
        ('{ profile(entity: "Nobody Known") { truncated } }', "NOT_FOUND", None),
        ('{ profile(entity: "!!") { truncated } }', "INVALID_INPUT", "entity"),
        ('{ profile(entity: "Ana", asOf: "last May") { truncated } }', "INVALID_INPUT", "asOf"),
    ]:
        status, body = service.post(document)
        extensions = body["errors"][0]["extensions"]
        assert status == 200 and extensions["code"] == code, document
        assert extensions.get("field") == field, document


def test_recall_leads_with_the_profile_when_asked(service: InProcess, ana: list[str]) -> None:
    query = """{ recall(prompt: "Where does Ana live?", profile: %s) {
        context profiles { entity { name } attributes { key values { value } } facts { id } } } }"""
    led = service.data(query % "true")["recall"]
    first = led["context"].splitlines()[1]
    assert first.startswith("[profile/Ana] ") and "Berlin" in first
    [shown] = led["profiles"]
    assert shown["entity"] == {"name": "Ana"} and shown["facts"] == []
    assert {a["key"] for a in shown["attributes"]} == {"city", "pets"}
    plain = service.data(query % "false")["recall"]
    assert not plain["context"].splitlines()[1].startswith("[profile/")
    assert plain["profiles"] == []


def test_the_mcp_tool_reads_a_profile_and_a_read_only_key_may(mem: Memory) -> None:
    mem.store_many(FACTS)
    failed, data = call_in_process(mem, READ_ONLY_KEY, "memory_profile", entity="Ana")
    assert not failed and data["entity"]["name"] == "Ana"
    assert {a["key"] for a in data["attributes"]} == {"city", "pets"}
    failed, data = call_in_process(mem, None, "memory_profile", entity="Nobody Known")
    assert failed and data["error"]["code"] == "NOT_FOUND"


def test_the_mcp_context_tool_leads_with_the_profile_when_asked_or_set(mem: Memory) -> None:
    mem.store_many(FACTS)

    def context(**arguments: Any) -> tuple[bool, Any]:
        return call_in_process(
            mem, None, "memory_context", prompt="Where does Ana live?", **arguments
        )

    failed, led = context(profile=True)
    assert not failed and led["context"].splitlines()[1].startswith("[profile/Ana] ")
    assert [p["entity"]["name"] for p in led["profiles"]] == ["Ana"]
    _, plain = context()
    assert not plain["context"].splitlines()[1].startswith("[profile/") and plain["profiles"] == []
    mem.settings = mem.settings.model_copy(update={"recall_profile": True})
    assert context()[1]["profiles"] and context(profile=False)[1]["profiles"] == []
    failed, refused = context(profile="sometimes")
    assert failed and refused["error"]["code"] == "INVALID_INPUT"


def test_the_cli_prints_a_profile(mem: Memory, settings: Settings) -> None:
    # Lasting: the CLI reads on the real clock, long after the test clock's writes.
    mem.store_many([{**f, "decay_class": "permanent"} for f in FACTS])
    mem.close()  # the CLI opens the namespace itself
    args = ["--data-dir", str(settings.data_dir), "--embedder", "hash", "profile", "ana"]
    env = {"GRAPHMEM_STORE": settings.store} if settings.store else {}
    runner = CliRunner()
    shown = runner.invoke(cli, args, env=env)
    assert shown.exit_code == 0, shown.output
    assert shown.stdout.startswith("Ana  (4 facts)") and "  pets: " in shown.stdout
    as_json = json.loads(runner.invoke(cli, [*args, "--json"], env=env).stdout)
    assert as_json["entity"]["name"] == "Ana" and as_json["summary"] is None


@pytest.fixture
def client(settings: Settings, clock: Clock) -> Iterator[Client]:
    with (
        LiveServer(create_app(settings, clock=clock)) as server,
        Client(server.base_url) as made,
    ):
        yield made


def test_the_client_reads_the_same_profile_as_memory(
    client: Client, settings: Settings, clock: Clock, stub: OpenAIStub
) -> None:
    client.store_many(FACTS)
    remote = client.profile("Ana", as_of="2100")
    with Memory.open(settings.data_dir, settings=settings, clock=clock) as memory:
        local = memory.profile("Ana", as_of="2100")
    assert remote.entity == local.entity and remote.truncated == local.truncated
    assert [(a.key, [v.value for v in a.values]) for a in remote.attributes] == [
        (a.key, [v.value for v in a.values]) for a in local.attributes
    ]
    assert [f.id for f in remote.facts] == [f.id for f in local.facts]
    stub.reply_next(summary_answer)
    summarised = client.profile("Ana", summary=True)
    assert summarised.summary is not None and len(summarised.summary.facts) == 1
    first = client.recall("Where does Ana live?", profile=True).context.splitlines()[1]
    assert first.startswith("[profile/Ana]")
