"""Subscriptions over graphql-transport-ws: a subscriber hears of the changes in its own namespace
only, and of the kinds it asked for; where keys exist a subscription needs a valid one, and
revoking the key ends it; the same stream runs over a real socket."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from graphmem.server import create_app, events
from graphmem.server.http import app as app_module
from graphmem.server.http import sockets
from starlette.applications import Starlette
from starlette.testclient import WebSocketTestSession
from starlette.websockets import WebSocketDisconnect
from websockets.sync.client import connect
from websockets.typing import Subprotocol

from graphmem import KeyStore, Memory, Settings, memory
from graphmem.storage.sql import store as sql_store

from ..support.clock import Clock
from ..support.graphql_clients import STORE, WS, WS_URL, Api, InProcess, LiveServer, bearer

pytestmark = pytest.mark.engines


def test_subscribers_hear_of_changes_in_their_own_namespace_only(
    service: InProcess, keys: KeyStore
) -> None:
    alice, _ = keys.create(["alice"])
    bob, _ = keys.create(["bob"])
    with service.client.websocket_connect(WS_URL, subprotocols=[WS]) as ws:
        _open(ws, alice)
        _subscribe(ws, service, "alice")
        service.post(STORE, {"t": "Bob's secret plan"}, bearer(bob))
        service.post(STORE, {"t": "Alice's public plan"}, bearer(alice))
        message = ws.receive_json()
        assert message["type"] == "next"
        assert message["payload"]["data"]["memoryChanged"]["kind"] == "FACT_STORED"
        assert message["payload"]["data"]["memoryChanged"]["fact"] == {
            "text": "Alice's public plan"
        }


def test_supersession_and_forgetting_are_announced(service: InProcess, clock: Clock) -> None:
    store = """mutation($v: String!) { storeFact(input: {text: $v, entity: "Ana", key: "city",
        value: $v}) { fact { id } } }"""
    with service.client.websocket_connect(WS_URL, subprotocols=[WS]) as ws:
        _open(ws)
        _subscribe(ws, service, "default", "(kinds: [FACT_SUPERSEDED, FACT_FORGOTTEN])")
        old = service.data(store, {"v": "Berlin"})["storeFact"]["fact"]["id"]
        clock.advance(60)
        new = service.data(store, {"v": "Paris"})["storeFact"]["fact"]["id"]
        service.data("mutation($id: ID!) { forgetFact(id: $id) { error { code } } }", {"id": new})
        kinds = [ws.receive_json()["payload"]["data"]["memoryChanged"] for _ in range(2)]
        assert [(k["kind"], k["id"]) for k in kinds] == [
            ("FACT_SUPERSEDED", old),
            ("FACT_FORGOTTEN", new),
        ]


def test_a_subscription_without_a_valid_key_is_refused(service: InProcess, keys: KeyStore) -> None:
    keys.create(["default"])
    with service.client.websocket_connect(WS_URL, subprotocols=[WS]) as ws:
        ws.send_json({"type": "connection_init", "payload": {"Authorization": "Bearer wrong"}})
        with pytest.raises(WebSocketDisconnect) as refused:
            ws.receive_json()
        assert refused.value.code == 4403


def test_a_revoked_key_ends_its_open_subscription(service: InProcess, keys: KeyStore) -> None:
    token, key = keys.create(["default"])
    writer, _ = keys.create(["default"])
    with service.client.websocket_connect(WS_URL, subprotocols=[WS]) as ws:
        _open(ws, token)
        _subscribe(ws, service, "default")
        service.post(STORE, {"t": "Heard while the key is valid"}, bearer(writer))
        assert ws.receive_json()["payload"]["data"]["memoryChanged"]["kind"] == "FACT_STORED"
        keys.revoke(key.id)
        service.post(STORE, {"t": "Never heard: the key was revoked"}, bearer(writer))
        # Either the event finds the key revoked and ends the subscription, or the server's
        # look at its sockets' keys (every 0.5 s) closed the socket first.
        try:
            message = ws.receive_json()
        except WebSocketDisconnect as closed:
            assert closed.code == 4403
        else:
            assert message["payload"]["data"] is None
            assert message["payload"]["errors"][0]["extensions"]["code"] == "FORBIDDEN"
            assert ws.receive_json()["type"] == "complete"  # the subscription is over


def test_a_subscriber_hears_of_another_processs_writes_and_is_ended_if_it_missed_some(
    service: InProcess, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    with (
        service.client.websocket_connect(WS_URL, subprotocols=[WS]) as ws,
        Memory.open(settings.data_dir, settings=settings) as other,  # as another process
    ):
        _open(ws)
        _subscribe(ws, service, "default")
        fact = other.store("Stored by another process").fact
        assert fact is not None
        heard = ws.receive_json()["payload"]["data"]["memoryChanged"]
        assert (heard["kind"], heard["id"]) == ("FACT_STORED", fact.id)
        monkeypatch.setattr(sql_store, "CHANGE_LOG_KEPT", 2)  # the log keeps the newest two
        monkeypatch.setattr(memory, "CHANGE_LOG_KEPT", 2)
        other.store_many([{"text": f"Reading {n} of the boiler"} for n in range(4)])
        message = ws.receive_json()
        assert message["payload"]["errors"][0]["extensions"]["code"] == "UNAVAILABLE"
        assert ws.receive_json()["type"] == "complete"


def test_a_failed_read_of_the_change_log_is_tried_again(
    service: InProcess, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    failures = [OSError("the disk hiccuped")]
    read = Memory.changes_since

    def flaky(self: Memory, *args: object, **kwargs: object) -> object:
        if failures:
            raise failures.pop()
        return read(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Memory, "changes_since", flaky)
    with (
        service.client.websocket_connect(WS_URL, subprotocols=[WS]) as ws,
        Memory.open(settings.data_dir, settings=settings) as other,
    ):
        _open(ws)
        _subscribe(ws, service, "default")
        fact = other.store("Heard at the next look").fact
        assert fact is not None
        assert ws.receive_json()["payload"]["data"]["memoryChanged"]["id"] == fact.id
    assert failures == []


def test_a_subscriber_too_far_behind_is_ended(
    service: InProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(events, "SUBSCRIBER_BACKLOG", 3)
    with service.client.websocket_connect(WS_URL, subprotocols=[WS]) as ws:
        _open(ws)
        _subscribe(ws, service, "default")
        service.data(
            'mutation { storeFacts(inputs: [{text: "One"}, {text: "Two"}, {text: "Three"},'
            ' {text: "Four"}]) { results { action } } }'
        )
        # It missed changes: those it held are dropped, and it is told at once.
        ended = ws.receive_json()["payload"]
        assert ended["errors"][0]["extensions"]["code"] == "UNAVAILABLE"
        assert ws.receive_json()["type"] == "complete"


@pytest.mark.integration
def test_a_live_server_streams_changes_over_graphql_transport_ws(
    app: Starlette, keys: KeyStore
) -> None:
    token, _ = keys.create(["default"])
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
            _listening(server, "default")
            server.data(STORE, {"t": "Streamed over a real socket"}, **bearer(token))
            change = json.loads(ws.recv(timeout=10))["payload"]["data"]["memoryChanged"]
        assert change == {"kind": "FACT_STORED", "fact": {"text": "Streamed over a real socket"}}
        with pytest.raises(Exception, match="403"):
            connect(url, subprotocols=[Subprotocol(WS)], additional_headers=bearer(token + "x"))


def _open(ws: WebSocketTestSession, token: str | None = None) -> None:
    """Start a graphql-transport-ws session, presenting ``token`` if given."""
    init: dict[str, object] = {"type": "connection_init"}
    if token is not None:
        init["payload"] = {"Authorization": f"Bearer {token}"}
    ws.send_json(init)
    assert ws.receive_json()["type"] == "connection_ack"


def _subscribe(ws: WebSocketTestSession, api: Api, namespace: str, kinds: str = "") -> None:
    """Subscribe to memoryChanged (with ``kinds`` as its arguments), and return once the server
    counts the subscriber."""
    query = f"subscription {{ memoryChanged{kinds} {{ kind id fact {{ text }} }} }}"
    ws.send_json({"type": "subscribe", "id": "1", "payload": {"query": query}})
    _listening(api, namespace)


def _listening(api: Api, namespace: str) -> None:
    """Wait until the server counts a subscriber in ``namespace``: a write made before then could
    go unheard, and the test would hang waiting for it."""
    deadline = time.monotonic() + 10
    metric = f'graphmem_subscribers{{namespace="{namespace}"}} 1.0'
    while metric not in api.request("GET", "/metrics").text:
        assert time.monotonic() < deadline, "the subscription never started"
        time.sleep(0.02)


def test_each_operation_on_a_socket_reads_memory_as_it_is_now(
    service: InProcess, clock: Clock
) -> None:
    def store(text: str, value: str) -> str:
        mutation = (
            "mutation($t: String!, $v: String!) { storeFact(input: {text: $t, entity: "
            '"alice", key: "city", value: $v}) { fact { id } } }'
        )
        return str(service.data(mutation, {"t": text, "v": value})["storeFact"]["fact"]["id"])

    old = store("Alice lives in Berlin", "Berlin")
    hub = service.data(STORE, {"t": "The office party is in Berlin"})["storeFact"]["fact"]["id"]
    service.data(
        "mutation($s: ID!, $t: ID!) { linkFacts(input: {sourceId: $s, targetId: $t, "
        "type: RELATED_TO}) { error { code } } }",
        {"s": hub, "t": old},
    )
    # The old fact, read through the hub's links (as a UI expanding a node does).
    read = (
        "query($id: ID!) { fact(id: $id) { links(types: [RELATED_TO]) { edges { neighbour { "
        "id supersededById } } } } }"
    )
    with service.client.websocket_connect(WS_URL, subprotocols=[WS]) as ws:
        _open(ws)
        query = (
            "subscription { memoryChanged(kinds: [FACT_SUPERSEDED]) { fact { id "
            "supersededById } } }"
        )
        ws.send_json({"type": "subscribe", "id": "sub", "payload": {"query": query}})
        _listening(service, "default")
        seen = _answer(ws, "1", read, id=hub)
        assert seen == {
            "fact": {"links": {"edges": [{"neighbour": {"id": old, "supersededById": None}}]}}
        }
        clock.advance(60)
        new = store("Alice moved to Paris", "Paris")
        event = _next(ws, "sub")["payload"]["data"]["memoryChanged"]
        assert event == {"fact": {"id": old, "supersededById": new}}
        again = _answer(ws, "2", read, id=hub)
        assert again["fact"]["links"]["edges"][0]["neighbour"]["supersededById"] == new


def test_a_socket_runs_a_bounded_number_of_operations_at_once(
    settings: Settings, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(app_module, "MAX_SUBSCRIPTIONS_PER_SOCKET", 2)
    query = "subscription { memoryChanged { kind } }"
    with (
        InProcess(create_app(settings, clock=clock)) as service,
        service.client.websocket_connect(WS_URL, subprotocols=[WS]) as ws,
    ):
        _open(ws)
        for op in ("1", "2", "3"):
            ws.send_json({"type": "subscribe", "id": op, "payload": {"query": query}})
        refused = ws.receive_json()
        assert (refused["id"], refused["type"]) == ("3", "error")
        assert "limit" in refused["payload"][0]["message"]


def test_a_key_holds_a_bounded_number_of_sockets(
    settings: Settings, clock: Clock, keys: KeyStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sockets, "MAX_SOCKETS_PER_KEY", 2)
    token, _ = keys.create(["default"])
    other, _ = keys.create(["default"])
    with InProcess(create_app(settings, clock=clock)) as service:
        with (
            service.client.websocket_connect(WS_URL, subprotocols=[WS]) as first,
            service.client.websocket_connect(WS_URL, subprotocols=[WS]) as second,
            service.client.websocket_connect(WS_URL, subprotocols=[WS]) as third,
            service.client.websocket_connect(WS_URL, subprotocols=[WS]) as another,
        ):
            _open(first, token)
            _open(second, token)
            _open(third, token)  # acknowledged, then closed
            with pytest.raises(WebSocketDisconnect) as closed:
                third.receive_json()
            assert closed.value.code == 4429
            _open(another, other)  # another key's sockets are its own
            assert _answer(another, "1", "{ namespace }") == {"namespace": "default"}
        # Closed sockets no longer count.
        with service.client.websocket_connect(WS_URL, subprotocols=[WS]) as again:
            _open(again, token)
            assert _answer(again, "1", "{ namespace }") == {"namespace": "default"}


def test_only_graphql_transport_ws_is_spoken(service: InProcess) -> None:
    with (
        pytest.raises(WebSocketDisconnect) as refused,
        service.client.websocket_connect(WS_URL, subprotocols=["graphql-ws"]) as ws,
    ):
        ws.receive_json()
    assert refused.value.code == 4406


def _next(ws: WebSocketTestSession, op: str) -> dict[str, Any]:
    """The next message for operation ``op`` (others in between are dropped)."""
    while True:
        message = ws.receive_json()
        if message.get("id") == op:
            return message


def _answer(ws: WebSocketTestSession, op: str, query: str, **variables: object) -> Any:
    """The data of a query or mutation run on the socket as operation ``op``."""
    payload = {"query": query, "variables": variables}
    ws.send_json({"type": "subscribe", "id": op, "payload": payload})
    message = _next(ws, op)
    assert message["type"] == "next" and not message["payload"].get("errors"), message
    assert _next(ws, op)["type"] == "complete"
    return message["payload"]["data"]
