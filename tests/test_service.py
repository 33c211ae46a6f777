"""The service around the schema: API keys and namespaces, limits, subscriptions, the N+1
guard, schema drift and descriptions, and the serve / export-schema commands."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from graphql import GraphQLArgument, GraphQLEnumType, GraphQLInputObjectType, GraphQLObjectType
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

import graphmem.storage
from graphmem import KeyStore, Memory, Settings
from resolvers import build_schema, create_app, schema_sdl
from resolvers.commands import cli

from .api import InProcess, LiveServer, bearer
from .conftest import Clock
from .openai_stub import OpenAIStub

ROOT = Path(__file__).resolve().parent.parent
STORE = "mutation($t: String!) { storeFact(input: {text: $t}) { fact { id } error { code } } }"
SEARCH = "query($q: String!) { search(query: $q) { fact { text } } }"
WS = "graphql-transport-ws"
LOCAL, WS_URL = "http://127.0.0.1", "ws://127.0.0.1/graphql"  # names a loopback server answers


@pytest.fixture
def settings(data_dir: Path) -> Settings:
    return Settings(
        embedder="hash",
        data_dir=data_dir,
        max_body_bytes=4096,
        graphql_max_depth=8,
        graphql_max_aliases=3,
    )


# ------------------------------------------------------------------------------------ auth


def test_once_a_key_exists_requests_without_a_valid_one_get_401(
    service: InProcess, data_dir: Path
) -> None:
    assert service.post(STORE, {"t": "Open while no key exists"})[0] == 200
    token, _ = KeyStore(data_dir).create(["default"])
    for headers in (
        None,
        {"Authorization": "Bearer gm_000000000000_notthesecretatall"},
        {"Authorization": token},
        bearer(token[:-1] + "x"),
    ):
        status, body = service.post(SEARCH, {"q": "open"}, headers)
        assert status == 401, headers
        assert body["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"
    assert service.post(SEARCH, {"q": "open"}, bearer(token))[0] == 200


def test_a_key_for_one_namespace_never_sees_another(service: InProcess, data_dir: Path) -> None:
    keys = KeyStore(data_dir)
    alice, _ = keys.create(["alice"])
    bob, _ = keys.create(["bob"])
    stored = service.data(STORE, {"t": "Alice keeps her notes in Obsidian"}, **bearer(alice))
    fact_id = stored["storeFact"]["fact"]["id"]
    assert service.data(SEARCH, {"q": "Obsidian notes"}, **bearer(bob))["search"] == []
    assert service.data(
        "query($id: ID!) { fact(id: $id) { id } }", {"id": fact_id}, **bearer(bob)
    ) == {"fact": None}
    forget = "mutation($id: ID!) { forgetFact(id: $id) { error { code } } }"
    assert service.data(forget, {"id": fact_id}, **bearer(bob))["forgetFact"]["error"]["code"] == (
        "NOT_FOUND"
    )
    status, body = service.post(
        SEARCH, {"q": "Obsidian"}, {**bearer(bob), "X-Graphmem-Namespace": "alice"}
    )
    assert status == 403 and body["errors"][0]["extensions"]["code"] == "FORBIDDEN"
    assert service.data("{ namespace }", **bearer(alice)) == {"namespace": "alice"}
    hits = service.data(SEARCH, {"q": "Obsidian notes"}, **bearer(alice))["search"]
    assert [h["fact"]["text"] for h in hits] == ["Alice keeps her notes in Obsidian"]


def test_a_revoked_key_stops_working_at_once(service: InProcess, data_dir: Path) -> None:
    keys = KeyStore(data_dir)
    token, key = keys.create(["default"])
    keys.create(["default"])  # another key stays, so keys are still required
    assert service.post(SEARCH, {"q": "anything"}, bearer(token))[0] == 200
    keys.revoke(key.id)
    assert service.post(SEARCH, {"q": "anything"}, bearer(token))[0] == 401


def test_a_read_only_key_reads_but_cannot_write(service: InProcess, data_dir: Path) -> None:
    keys = KeyStore(data_dir)
    writer, _ = keys.create(["default"])
    reader, _ = keys.create(["default"], read_only=True)
    service.data(STORE, {"t": "Readers may search this fact"}, **bearer(writer))
    refused = service.data(STORE, {"t": "Readers may not store"}, **bearer(reader))
    assert refused["storeFact"] == {"fact": None, "error": {"code": "FORBIDDEN"}}
    assert len(service.data(SEARCH, {"q": "search fact"}, **bearer(reader))["search"]) == 1


def test_keys_are_stored_hashed(data_dir: Path) -> None:
    token, key = KeyStore(data_dir).create(["default"], label="ci")
    raw = (data_dir / "_keys.sqlite").read_bytes()
    assert token.split("_")[-1].encode() not in raw
    assert KeyStore(data_dir).authenticate(token) == key


def test_no_cursor_traversal_mutation_or_guessed_id_crosses_namespaces(
    service: InProcess, data_dir: Path
) -> None:
    keys = KeyStore(data_dir)
    alice, _ = keys.create(["alice"])
    bob, _ = keys.create(["bob"])
    store = "mutation($t: String!) { storeFact(input: {text: $t}) { fact { id } } }"
    a = [
        service.data(store, {"t": f"Alice's private note {n} about the merger"}, **bearer(alice))[
            "storeFact"
        ]["fact"]["id"]
        for n in range(3)
    ]
    link = "mutation($s: ID!, $t: ID!) { linkFacts(input: {sourceId: $s, targetId: $t, type: PART_OF}) { link { id } error { code } } }"
    alice_link = service.data(link, {"s": a[1], "t": a[0]}, **bearer(alice))["linkFacts"]["link"][
        "id"
    ]
    b = service.data(store, {"t": "Bob's note about lunch"}, **bearer(bob))["storeFact"]["fact"][
        "id"
    ]
    page = "query($after: String) { facts(first: 1, after: $after) { edges { cursor node { id text } } } }"
    alice_cursor = service.data(page, {"after": None}, **bearer(alice))["facts"]["edges"][0][
        "cursor"
    ]
    links = "query($id: ID!, $after: String) { fact(id: $id) { links(first: 1, after: $after) { edges { cursor neighbour { id } } } } }"
    alice_link_cursor = service.data(links, {"id": a[0], "after": None}, **bearer(alice))["fact"][
        "links"
    ]["edges"][0]["cursor"]

    def as_bob(query: str, **variables: object) -> dict[str, Any]:
        status, body = service.post(query, dict(variables), bearer(bob))
        assert status == 200, body
        return body

    reads = [
        (page, {"after": alice_cursor}),
        (links, {"id": b, "after": alice_link_cursor}),
        (links, {"id": a[0], "after": None}),
        (
            "query($ids: [ID!]!) { traverse(from: $ids, depth: 6) { nodes { fact { id } } edges { id } } }",
            {"ids": a},
        ),
        (
            "query($a: ID!, $b: ID!) { path(from: $a, to: $b) { facts { id } } }",
            {"a": b, "b": a[0]},
        ),
        ("query($id: ID!) { history(id: $id) { id } }", {"id": a[0]}),
        ('{ search(query: "private note merger", limit: 50) { fact { id text } } }', {}),
        ('{ recall(prompt: "What about the merger?") { context } }', {}),
    ]
    seen = json.dumps([as_bob(query, **variables).get("data") for query, variables in reads])
    for secret in [*a, alice_link, "merger"]:
        assert secret not in seen, (secret, seen)
    # A guessed id that exists in another namespace answers exactly as one that exists nowhere.
    nowhere = "00000000-0000-4000-8000-000000000000"
    for query, variables in reads[2:6]:
        answer = json.dumps(as_bob(query, **variables))
        for fact_id in a:
            answer = answer.replace(fact_id, nowhere)
        guessed = {
            k: ([nowhere] * len(v) if isinstance(v, list) else nowhere if v in a else v)
            for k, v in variables.items()
        }
        assert answer == json.dumps(as_bob(query, **guessed)), query
    for mutation, variables in [
        (link, {"s": b, "t": a[0]}),
        ("mutation($id: ID!) { unlink(id: $id) { error { code } } }", {"id": alice_link}),
        ("mutation($id: ID!) { forgetFact(id: $id) { error { code } } }", {"id": a[2]}),
        ("mutation($id: ID!) { purgeFact(id: $id) { error { code } } }", {"id": a[2]}),
        (
            'mutation($id: ID!) { storeFact(input: {text: "Replaced by Bob", supersedes: $id}) { error { code } } }',
            {"id": a[1]},
        ),
    ]:
        body = as_bob(mutation, **variables)
        payload = next(iter(body["data"].values()))
        assert payload["error"]["code"] == "NOT_FOUND", (mutation, body)
    after = service.data(
        "{ facts { edges { node { id links { edges { link { id } } } } } } }", **bearer(alice)
    )["facts"]["edges"]
    assert sorted(e["node"]["id"] for e in after) == sorted(a)  # nothing forgotten, purged, added
    assert sum(len(e["node"]["links"]["edges"]) for e in after) == 2  # the one link, both ends
    for name in ("alice", "../alice", "bob/../alice", "ALICE"):
        status, body = service.post(
            "{ namespace }", None, {**bearer(bob), "X-Graphmem-Namespace": name}
        )
        assert status in (400, 403) and body["errors"][0]["extensions"]["code"] != "OK", name


def test_key_secrets_are_compared_in_constant_time(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import hmac

    token, key = KeyStore(data_dir).create(["default"])
    compared: list[tuple[str, str]] = []
    real = hmac.compare_digest

    def recording(a: str, b: str) -> bool:
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr("graphmem.keys.hmac.compare_digest", recording)
    wrong = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    assert KeyStore(data_dir).authenticate(wrong) is None
    assert KeyStore(data_dir).authenticate(token) == key
    assert len(compared) == 2  # every presented secret goes through compare_digest
    assert all(len(a) == len(b) == 64 for a, b in compared)  # sha256 hex digests, not secrets


def test_a_revoked_key_ends_its_open_subscription(data_dir: Path, clock: Clock) -> None:
    keys = KeyStore(data_dir)
    token, key = keys.create(["default"])
    writer, _ = keys.create(["default"])
    app = create_app(Settings(embedder="hash", data_dir=data_dir), clock=clock)
    with (
        TestClient(app, base_url=LOCAL) as client,
        client.websocket_connect(WS_URL, subprotocols=[WS]) as ws,
    ):
        ws.send_json({"type": "connection_init", "payload": {"Authorization": f"Bearer {token}"}})
        assert ws.receive_json()["type"] == "connection_ack"
        _subscribe(ws, client, "default")
        post = {"query": STORE, "variables": {"t": "Heard while the key is valid"}}
        client.post("/graphql", headers=bearer(writer), json=post)
        assert ws.receive_json()["payload"]["data"]["memoryChanged"]["kind"] == "FACT_STORED"
        keys.revoke(key.id)
        post = {"query": STORE, "variables": {"t": "Never heard: the key was revoked"}}
        client.post("/graphql", headers=bearer(writer), json=post)
        message = ws.receive_json()
        assert message["payload"]["data"] is None
        assert message["payload"]["errors"][0]["extensions"]["code"] == "FORBIDDEN"
        assert ws.receive_json()["type"] == "complete"  # the subscription is over


# ------------------------------------------------------------------------------------ limits


def test_deep_aliased_and_oversized_documents_are_refused(service: InProcess) -> None:
    deep = (
        "{ facts { edges { node { links { edges { neighbour { links { edges { neighbour "
        "{ id } } } } } } } } } }"
    )
    aliases = "{ " + " ".join(f"a{i}: namespace" for i in range(4)) + " }"
    for _ in range(2):  # the second time from the document caches, refused all the same
        status, body = service.post(deep)
        assert "exceeds maximum operation depth" in body["errors"][0]["message"]
        assert body["errors"][0]["extensions"]["code"] == "INVALID_QUERY"
        assert "data" not in body or body["data"] is None
        assert "aliases" in service.post(aliases)[1]["errors"][0]["message"]
    status, body = service.post(STORE, {"t": "x" * 5000})
    assert status == 413 and body["errors"][0]["extensions"]["code"] == "PAYLOAD_TOO_LARGE"
    chunked = service.request(
        "POST",
        "/graphql",
        content=iter([b"{" + b" " * 3000, b" " * 3000]),
        headers={"content-type": "application/json"},
    )
    assert chunked.status_code == 413
    assert service.data("{ facts { edges { cursor } } }")["facts"]["edges"] == []


def test_a_list_of_facts_with_links_costs_a_bounded_number_of_queries(
    service: InProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = [
        service.data(STORE, {"t": f"Component {i} of the payment system"})["storeFact"]["fact"][
            "id"
        ]
        for i in range(50)
    ]
    link = "mutation($s: ID!, $t: ID!) { linkFacts(input: {sourceId: $s, targetId: $t, type: PART_OF}) { error { code } } }"
    for source, target in zip(ids[1:], ids[:-1], strict=True):
        service.data(link, {"s": source, "t": target})
    statements: list[str] = []
    connect = graphmem.storage._connect

    def traced(path: Path) -> sqlite3.Connection:
        conn = connect(path)
        conn.set_trace_callback(statements.append)
        return conn

    monkeypatch.setattr(graphmem.storage, "_connect", traced)
    query = """query($n: Int!) { facts(first: $n) { edges { node { id supersedes { id }
        links { edges { link { type } neighbour { id text supersededBy { id } } } } } } } }"""
    # Fresh reader connections are opened (and traced) by threads new to this test.
    service.data(query, {"n": 5})
    statements.clear()
    service.data(query, {"n": 5})
    few = len([s for s in statements if not s.startswith("PRAGMA")])
    statements.clear()
    service.data(query, {"n": 50})
    many = len([s for s in statements if not s.startswith("PRAGMA")])
    assert many == few <= 10, (few, many)


# ------------------------------------------------------------------------------------ subscriptions


def _subscribe(ws: Any, client: Any, namespace: str, kinds: str = "") -> None:
    """Subscribe, and return once the server counts the subscriber (so no write is missed)."""
    ws.send_json(
        {
            "type": "subscribe",
            "id": "1",
            "payload": {
                "query": f"subscription {{ memoryChanged{kinds} {{ kind id fact {{ text }} }} }}"
            },
        }
    )
    deadline = time.monotonic() + 10
    while f'graphmem_subscribers{{namespace="{namespace}"}} 1.0' not in client.get("/metrics").text:
        assert time.monotonic() < deadline, "the subscription never started"
        time.sleep(0.02)


def test_subscribers_hear_of_changes_in_their_own_namespace_only(
    data_dir: Path, clock: Clock
) -> None:
    keys = KeyStore(data_dir)
    alice, _ = keys.create(["alice"])
    bob, _ = keys.create(["bob"])
    app = create_app(Settings(embedder="hash", data_dir=data_dir), clock=clock)
    with (
        TestClient(app, base_url=LOCAL) as client,
        client.websocket_connect(WS_URL, subprotocols=[WS]) as ws,
    ):
        ws.send_json({"type": "connection_init", "payload": {"Authorization": f"Bearer {alice}"}})
        assert ws.receive_json()["type"] == "connection_ack"
        _subscribe(ws, client, "alice")
        client.post(
            "/graphql",
            headers=bearer(bob),
            json={"query": STORE, "variables": {"t": "Bob's secret plan"}},
        )
        client.post(
            "/graphql",
            headers=bearer(alice),
            json={"query": STORE, "variables": {"t": "Alice's public plan"}},
        )
        message = ws.receive_json()
        assert message["type"] == "next"
        assert message["payload"]["data"]["memoryChanged"]["kind"] == "FACT_STORED"
        assert message["payload"]["data"]["memoryChanged"]["fact"] == {
            "text": "Alice's public plan"
        }


def test_a_subscription_without_a_valid_key_is_refused(data_dir: Path, clock: Clock) -> None:
    KeyStore(data_dir).create(["default"])
    app = create_app(Settings(embedder="hash", data_dir=data_dir), clock=clock)
    with (
        TestClient(app, base_url=LOCAL) as client,
        client.websocket_connect(WS_URL, subprotocols=[WS]) as ws,
    ):
        ws.send_json({"type": "connection_init", "payload": {"Authorization": "Bearer wrong"}})
        with pytest.raises(WebSocketDisconnect) as refused:
            ws.receive_json()
        assert refused.value.code == 4403


def test_supersession_and_forgetting_are_announced(data_dir: Path, clock: Clock) -> None:
    app = create_app(Settings(embedder="hash", data_dir=data_dir), clock=clock)
    store = """mutation($v: String!) { storeFact(input: {text: $v, entity: "Ana", key: "city",
        value: $v}) { fact { id } } }"""
    with (
        TestClient(app, base_url=LOCAL) as client,
        client.websocket_connect(WS_URL, subprotocols=[WS]) as ws,
    ):
        ws.send_json({"type": "connection_init"})
        assert ws.receive_json()["type"] == "connection_ack"
        _subscribe(ws, client, "default", "(kinds: [FACT_SUPERSEDED, FACT_FORGOTTEN])")
        first = client.post("/graphql", json={"query": store, "variables": {"v": "Berlin"}}).json()
        old = first["data"]["storeFact"]["fact"]["id"]
        clock.advance(60)
        second = client.post("/graphql", json={"query": store, "variables": {"v": "Paris"}}).json()
        new = second["data"]["storeFact"]["fact"]["id"]
        client.post(
            "/graphql",
            json={
                "query": "mutation($id: ID!) { forgetFact(id: $id) { error { code } } }",
                "variables": {"id": new},
            },
        )
        kinds = [ws.receive_json()["payload"]["data"]["memoryChanged"] for _ in range(2)]
        assert [(k["kind"], k["id"]) for k in kinds] == [
            ("FACT_SUPERSEDED", old),
            ("FACT_FORGOTTEN", new),
        ]


# ------------------------------------------------------------------------------------ schema


def test_schema_graphql_matches_the_code() -> None:
    assert (ROOT / "schema.graphql").read_text(encoding="utf-8") == schema_sdl(), (
        "schema.graphql is stale: run `graphmem export-schema schema.graphql`"
    )


def test_every_type_field_and_argument_has_a_description() -> None:
    schema = build_schema()._schema
    missing = []
    for name, kind in schema.type_map.items():
        if name.startswith("__") or name in ("String", "Int", "Float", "Boolean", "ID"):
            continue
        if not kind.description:
            missing.append(name)
        if isinstance(kind, GraphQLObjectType | GraphQLInputObjectType):
            for field_name, field in kind.fields.items():
                if not field.description:
                    missing.append(f"{name}.{field_name}")
                args: dict[str, GraphQLArgument] = getattr(field, "args", {})
                missing += [
                    f"{name}.{field_name}({a})" for a, arg in args.items() if not arg.description
                ]
        if isinstance(kind, GraphQLEnumType):
            missing += [f"{name}.{v}" for v, value in kind.values.items() if not value.description]
    assert missing == []


def test_export_schema_prints_the_sdl() -> None:
    result = CliRunner().invoke(cli, ["export-schema"])
    assert result.exit_code == 0 and result.output == schema_sdl()


def test_serve_refuses_a_public_address_without_keys(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["--data-dir", str(tmp_path), "serve", "--host", "0.0.0.0"])
    assert result.exit_code != 0
    assert "without API keys" in str(result.exception)


def test_the_core_never_imports_the_service_and_the_service_writes_no_sql() -> None:
    import subprocess
    import sys

    code = (
        "import sys, graphmem, graphmem.cli; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'strawberry', 'starlette', 'resolvers', 'mcp'}))"
    )
    assert (
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout.strip()
        == "[]"
    )
    for source in (ROOT / "resolvers").glob("*.py"):
        text = source.read_text(encoding="utf-8")
        assert "sqlite3" not in text and ".execute(" not in text, source.name


def test_a_keyless_loopback_server_refuses_requests_naming_another_site(
    data_dir: Path, clock: Clock
) -> None:
    """DNS rebinding: a page elsewhere whose name resolves to 127.0.0.1 reads nothing."""
    settings = Settings(embedder="hash", data_dir=data_dir, cors_origins=("https://ui.example",))
    with InProcess(create_app(settings, clock=clock)) as client:
        client.data(STORE, {"t": "The staging password rotates monthly"})
        query = {"query": SEARCH, "variables": {"q": "staging"}}
        for headers in (
            {"Host": "evil.example"},
            {"Host": "evil.example:8420"},
            {"Host": "127.0.0.1.evil.example"},
            {"Origin": "http://evil.example"},
            {"Origin": "null"},
        ):
            response = client.client.post("/graphql", json=query, headers=headers)
            assert response.status_code == 403, headers
            assert response.json()["errors"][0]["extensions"]["code"] == "FORBIDDEN"
            assert "staging" not in response.text
            assert client.client.get("/explore/", headers=headers).status_code == 403
        for headers in (
            {"Host": "localhost:8420", "Origin": "http://localhost:8420"},
            {"Host": "[::1]:8420"},
            {"Origin": "https://ui.example"},  # a configured CORS origin
        ):
            response = client.client.post("/graphql", json=query, headers=headers)
            assert response.status_code == 200, headers
            assert response.json()["data"]["search"][0]["fact"]["text"].startswith("The staging")
        with (
            pytest.raises(WebSocketDisconnect) as refused,
            client.client.websocket_connect(
                WS_URL, subprotocols=[WS], headers={"Origin": "http://evil.example"}
            ) as ws,
        ):
            ws.send_json({"type": "connection_init"})
            ws.receive_json()
        assert refused.value.code == 4403


def test_a_server_bound_elsewhere_leaves_names_to_its_api_keys(
    data_dir: Path, clock: Clock
) -> None:
    token, _ = KeyStore(data_dir).create(["default"])
    settings = Settings(embedder="hash", data_dir=data_dir, host="0.0.0.0")
    with InProcess(create_app(settings, clock=clock)) as client:
        query = {"query": "{ stats { facts } }"}
        headers = {"Host": "memory.internal:8420", "Authorization": f"Bearer {token}"}
        assert client.client.post("/graphql", json=query, headers=headers).status_code == 200
        del headers["Authorization"]
        assert client.client.post("/graphql", json=query, headers=headers).status_code == 401


def test_cors_is_off_unless_origins_are_configured(data_dir: Path, clock: Clock) -> None:
    preflight = {"Origin": "https://ui.example.com", "Access-Control-Request-Method": "POST"}
    for origins, allowed in (((), None), (("https://ui.example.com",), "https://ui.example.com")):
        settings = Settings(embedder="hash", data_dir=data_dir, cors_origins=origins)
        with InProcess(create_app(settings, clock=clock)) as client:
            response = client.request("OPTIONS", "/graphql", headers=preflight)
            assert response.headers.get("access-control-allow-origin") == allowed


@pytest.mark.integration
def test_metrics_and_stats_count_the_calls_and_tokens_of_the_model_providers(
    data_dir: Path, clock: Clock
) -> None:
    stub = OpenAIStub(dimensions=16)
    with stub:
        settings = Settings(
            data_dir=data_dir,
            embedder="openai",
            embed_base_url=stub.base_url,
            embed_dimensions=16,
            classifier="llm",
            llm_base_url=stub.base_url,
            llm_model="tiny-classifier",
        )
        stub.default_reply = '{"decisions": [{"fact": 0, "action": "ADD"}]}'
        with InProcess(create_app(settings, clock=clock)) as client:
            client.data(STORE, {"t": "Kim likes sailing"})
            client.data(STORE, {"t": "Kim likes sailing boats"})
            metrics = client.request("GET", "/metrics").text
            usage = client.data("{ stats { data } }")["stats"]["data"]["usage"]
    labels = 'kind="llm",model="tiny-classifier",provider="openai"'
    assert f"graphmem_provider_calls_total{{{labels}}} 1.0" in metrics
    chat = next(r for r in stub.requests if r.route == "chat")
    words = sum(len(m["content"].split()) for m in chat.body["messages"])
    assert f'graphmem_provider_tokens_total{{{labels},type="prompt"}} {words}.0' in metrics
    embedding = 'kind="embedding",model="text-embedding-3-small",provider="openai"'
    assert f"graphmem_provider_calls_total{{{embedding}}} 2.0" in metrics
    assert f'graphmem_provider_tokens_total{{{embedding},type="prompt"}} 7.0' in metrics
    assert usage["llm"]["calls"] == 1 and usage["embedding"]["calls"] == 2


def test_the_server_prunes_expired_facts_when_it_starts(data_dir: Path, clock: Clock) -> None:
    settings = Settings(embedder="hash", data_dir=data_dir)
    with Memory.open(data_dir, settings=settings, clock=clock) as mem:
        mem.store("A one-off discount code valid today", expires_at=clock.now + 60)
        mem.store("The office is in Lisbon")
    clock.advance(3600)
    with InProcess(create_app(settings, clock=clock)) as client:
        stats = client.data("{ stats { data } }")["stats"]["data"]
    assert (stats["facts"], stats["expired_pending_prune"]) == (1, 0)  # deleted, not just hidden


def test_queries_also_work_over_get(service: InProcess) -> None:
    response = service.request("GET", "/graphql", params={"query": "{ namespace }"})
    assert response.json() == {"data": {"namespace": "default"}}
    mutation = service.request("GET", "/graphql", params={"query": "mutation { prune { dryRun } }"})
    assert 400 <= mutation.status_code < 500


@pytest.mark.integration
def test_a_live_server_streams_changes_over_graphql_transport_ws(
    data_dir: Path, clock: Clock
) -> None:
    import json

    from websockets.sync.client import connect
    from websockets.typing import Subprotocol

    token, _ = KeyStore(data_dir).create(["default"])
    app = create_app(Settings(embedder="hash", data_dir=data_dir), clock=clock)
    with LiveServer(app) as server:
        url = server.base_url.replace("http://", "ws://") + "/graphql"
        with connect(url, subprotocols=[Subprotocol(WS)], additional_headers=bearer(token)) as ws:
            ws.send(json.dumps({"type": "connection_init"}))
            assert json.loads(ws.recv(timeout=10))["type"] == "connection_ack"
            ws.send(
                json.dumps(
                    {
                        "type": "subscribe",
                        "id": "1",
                        "payload": {
                            "query": "subscription { memoryChanged { kind fact { text } } }"
                        },
                    }
                )
            )
            deadline = time.monotonic() + 10  # write once the subscription is listening
            while (
                'graphmem_subscribers{namespace="default"} 1.0'
                not in server.request("GET", "/metrics").text
            ):
                assert time.monotonic() < deadline, "the subscription never started"
                time.sleep(0.02)
            server.data(STORE, {"t": "Streamed over a real socket"}, **bearer(token))
            change = json.loads(ws.recv(timeout=10))["payload"]["data"]["memoryChanged"]
        assert change == {"kind": "FACT_STORED", "fact": {"text": "Streamed over a real socket"}}
        with pytest.raises(Exception, match="403"):
            connect(url, subprotocols=[Subprotocol(WS)], additional_headers=bearer(token + "x"))
