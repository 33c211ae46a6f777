"""Subscriptions over graphql-transport-ws: a subscriber hears of the changes in its own namespace
only, and of the kinds it asked for; where keys exist a subscription needs a valid one, and
revoking the key ends it; the same stream runs over a real socket."""

from __future__ import annotations

import json
import time

import pytest
from starlette.applications import Starlette
from starlette.testclient import WebSocketTestSession
from starlette.websockets import WebSocketDisconnect
from websockets.sync.client import connect
from websockets.typing import Subprotocol

from graphmem import KeyStore, Memory, Settings, memory, sqlitestore
from resolvers import events

from .api import STORE, WS, WS_URL, Api, InProcess, LiveServer, bearer
from .conftest import Clock


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
        message = ws.receive_json()
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
        monkeypatch.setattr(sqlitestore, "CHANGE_LOG_KEPT", 2)  # the log keeps the newest two
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
        kinds = [ws.receive_json()["payload"] for _ in range(3)]
        assert [k["data"]["memoryChanged"]["kind"] for k in kinds[:2]] == ["FACT_STORED"] * 2
        assert kinds[2]["errors"][0]["extensions"]["code"] == "UNAVAILABLE"
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
