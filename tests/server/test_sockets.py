"""WebSockets of /graphql before their key is acknowledged: what one socket, or many, may hold
of the server (pings it does not read, messages, sockets that never present a key)."""

from __future__ import annotations

import base64
import json
import logging
import os
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from graphmem.server import create_app, events
from graphmem.server.http import app as app_module
from graphmem.server.http import sockets
from starlette.testclient import TestClient, WebSocketDenialResponse
from starlette.websockets import WebSocketDisconnect
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

from graphmem import KeyStore, Settings

from ..support.clock import Clock
from ..support.graphql_clients import WS, WS_URL, InProcess, LiveServer, bearer

ROOT = Path(__file__).resolve().parents[2]
#: A connection_init deadline short enough for a test.
DEADLINE_S = 1.0


@pytest.fixture
def keyed(
    settings: Settings, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> Iterator[LiveServer]:
    """A live server as bound beyond loopback (keys required), whose sockets have
    ``DEADLINE_S`` to present their key."""
    monkeypatch.setattr(app_module, "INIT_WAIT_S", DEADLINE_S)
    beyond = settings.model_copy(update={"host": "0.0.0.0"})
    with LiveServer(create_app(beyond, clock=clock)) as server:
        yield server


@pytest.mark.integration
def test_a_socket_that_pings_without_reading_holds_little_memory_and_ends_at_its_deadline(
    keyed: LiveServer,
) -> None:
    client = _upgrade(keyed)
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # its pongs pile up at once
    client.settimeout(0.1)
    pings = _frame(0x9, b"p" * 125) * 1_000
    started = time.monotonic()
    buffered = 0
    ended = None
    while time.monotonic() - started < DEADLINE_S + 4:
        try:
            client.sendall(pings)
        except TimeoutError:
            pass  # the server reads no more pings while its pongs wait
        except OSError:  # reset: the server dropped the socket
            ended = time.monotonic() - started
            break
        buffered = max([buffered, *(_buffered(keyed))])
    client.close()
    assert buffered < 1_048_576, f"{buffered:,} bytes of pongs held for one socket"
    assert ended is not None and ended < DEADLINE_S + 3, "the deadline did not end the socket"
    assert not _buffered(keyed)


@pytest.mark.integration
def test_a_large_message_before_the_key_is_refused_from_its_header_and_allowed_after(
    keyed: LiveServer, keys: KeyStore
) -> None:
    client = _upgrade(keyed)
    client.settimeout(5)
    # The header of a 15 MiB connection_init, and its first bytes: refused without the rest.
    client.sendall(_frame(0x1, b'{"type": "connection_init", "payload": "', announce=15 << 20))
    assert _close_code(client) == 1009
    client.close()

    token, _ = keys.create(["default"])
    client = _upgrade(keyed)
    client.settimeout(5)
    init = {"type": "connection_init", "payload": {"Authorization": f"Bearer {token}"}}
    client.sendall(_frame(0x1, json.dumps(init).encode()))
    assert json.loads(_message(client))["type"] == "connection_ack"
    subscribe = {"type": "subscribe", "id": "1", "payload": {"query": "{ namespace }"}}
    padded = json.dumps(subscribe) + " " * 100_000  # beyond the limit before the key
    client.sendall(_frame(0x1, padded.encode()))
    answer = json.loads(_message(client))
    assert answer["payload"]["data"] == {"namespace": "default"}
    client.close()


@pytest.mark.parametrize(
    "value",
    ["[" * 30_000 + "]" * 30_000, "1" * 5_000],
    ids=["nested deeper than json parses", "an integer of more digits than Python converts"],
)
def test_a_connection_init_json_cannot_read_closes_its_socket_cleanly(
    service: InProcess, caplog: pytest.LogCaptureFixture, value: str
) -> None:
    with (
        caplog.at_level(logging.ERROR),
        service.client.websocket_connect(WS_URL, subprotocols=[WS]) as ws,
    ):
        ws.send_text(f'{{"type": "connection_init", "payload": {{"value": {value}}}}}')
        with pytest.raises(WebSocketDisconnect) as closed:
            ws.receive_json()
    assert closed.value.code == 4400
    assert not caplog.records


def test_sockets_that_have_not_presented_a_key_are_bounded_per_address_and_in_all(
    settings: Settings, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sockets, "MAX_UNACKNOWLEDGED_PER_ADDRESS", 2, raising=False)
    monkeypatch.setattr(sockets, "MAX_UNACKNOWLEDGED_SOCKETS", 3, raising=False)
    app = create_app(settings, clock=clock)
    elsewhere = TestClient(app, base_url="http://127.0.0.1", client=("192.0.2.7", 50000))
    further = TestClient(app, base_url="http://127.0.0.1", client=("192.0.2.8", 50000))
    with (
        InProcess(app) as service,
        service.client.websocket_connect(WS_URL, subprotocols=[WS]) as first,
        service.client.websocket_connect(WS_URL, subprotocols=[WS]),
    ):
        with (
            pytest.raises(WebSocketDenialResponse) as per_address,
            service.client.websocket_connect(WS_URL, subprotocols=[WS]),
        ):
            pass
        assert per_address.value.status_code == 429
        assert per_address.value.headers["retry-after"] == "10"
        with elsewhere.websocket_connect(WS_URL, subprotocols=[WS]):  # another address's own
            with (
                pytest.raises(WebSocketDenialResponse) as in_all,
                further.websocket_connect(WS_URL, subprotocols=[WS]),
            ):
                pass
            assert in_all.value.status_code == 503
        # Once a socket presents its key (here: none needed, on loopback) it waits no more.
        first.send_json({"type": "connection_init"})
        assert first.receive_json()["type"] == "connection_ack"
        with service.client.websocket_connect(WS_URL, subprotocols=[WS]) as another:
            another.send_json({"type": "connection_init"})
            assert another.receive_json()["type"] == "connection_ack"


@pytest.mark.integration
def test_an_upgrade_refused_for_the_caps_logs_no_error(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """uvicorn logs an error for every upgrade an app answers with HTTP; a client refused in a
    loop would fill the log with it."""
    monkeypatch.setattr(sockets, "MAX_UNACKNOWLEDGED_PER_ADDRESS", 1)
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = records.append  # type: ignore[method-assign,assignment]
    uvicorn_log = logging.getLogger("uvicorn.error")
    try:
        with LiveServer(create_app(settings)) as server:
            uvicorn_log.addHandler(handler)  # after uvicorn has set its logging up
            held = _upgrade(server)
            for _ in range(5):
                host, port = server.base_url.removeprefix("http://").split(":")
                with socket.create_connection((host, int(port)), timeout=5) as refused:
                    refused.sendall(
                        f"GET /graphql HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
                        "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                        f"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: {WS}\r\n\r\n".encode()
                    )
                    assert refused.recv(64).startswith(b"HTTP/1.1 429")
            held.close()
    finally:
        uvicorn_log.removeHandler(handler)
    assert [r.getMessage() for r in records] == []


def test_the_bounds_of_a_socket_before_its_key_are_documented() -> None:
    documented = (ROOT / "docs" / "graphql.md").read_text(encoding="utf-8")
    assert f"| time to send `connection_init` | {sockets.INIT_WAIT_S:g} s |" in documented
    assert f"| {sockets.MAX_INIT_MESSAGE_BYTES // 1024} KiB |" in documented
    assert f"| {sockets.MAX_UNACKNOWLEDGED_SOCKETS} |" in documented
    assert f"| {sockets.MAX_UNACKNOWLEDGED_PER_ADDRESS} |" in documented
    assert f"`Retry-After: {sockets.INIT_WAIT_S:g}`" in documented


@pytest.mark.integration
def test_a_socket_whose_subscriptions_fall_behind_while_it_reads_nothing_is_dropped(
    settings: Settings, keys: KeyStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client that subscribes and then reads nothing: once what it was sent fills the network
    and its subscriptions fall behind, the server drops the socket rather than hold it with its
    changes waiting."""
    # Room for a batch's changes, so that the subscriptions fall behind only once their
    # socket's writes wait on the client.
    monkeypatch.setattr(events, "SUBSCRIBER_BACKLOG", 1_000)
    monkeypatch.setattr(events, "END_WAIT_S", 0.2)
    token, _ = keys.create(["default"])
    unpaced = settings.model_copy(update={"subscription_events_per_second": 0})
    store = "mutation($i: [FactInput!]!) { storeFacts(inputs: $i) { results { action } } }"
    with LiveServer(create_app(unpaced)) as server:
        client = _upgrade(server)
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # it takes little at once
        init = {"type": "connection_init", "payload": {"Authorization": f"Bearer {token}"}}
        client.sendall(_frame(0x1, json.dumps(init).encode()))
        assert json.loads(_message(client))["type"] == "connection_ack"
        query = "subscription { memoryChanged { id fact { text } } }"
        for n in range(20):
            subscribe = {"type": "subscribe", "id": str(n), "payload": {"query": query}}
            client.sendall(_frame(0x1, json.dumps(subscribe).encode()))
        time.sleep(0.5)  # the subscriptions start
        text = "a long fact " * 800
        for batch in range(8):  # 20 x 96 events of 10 KB: far more than the network holds
            inputs = [{"text": f"{text} {batch} {n}"} for n in range(12)]
            assert server.post(store, {"i": inputs}, bearer(token))[0] == 200
        deadline = time.monotonic() + 10
        while _buffered(server) and time.monotonic() < deadline:
            time.sleep(0.1)
        held = _buffered(server)
        client.close()
    assert not held, f"the socket that reads nothing still holds {held} bytes"


def _upgrade(server: LiveServer) -> socket.socket:
    """A raw socket upgraded to graphql-transport-ws at the server's /graphql, without a key."""
    host, port = server.base_url.removeprefix("http://").split(":")
    client = socket.create_connection((host, int(port)), timeout=5)
    nonce = base64.b64encode(os.urandom(16)).decode()
    client.sendall(
        f"GET /graphql HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
        f"Connection: Upgrade\r\nSec-WebSocket-Key: {nonce}\r\nSec-WebSocket-Version: 13\r\n"
        f"Sec-WebSocket-Protocol: {WS}\r\n\r\n".encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        head += client.recv(1)
    assert head.startswith(b"HTTP/1.1 101"), head
    return client


def _frame(opcode: int, payload: bytes, *, announce: int | None = None) -> bytes:
    """A client's (masked) frame carrying ``payload``; its header says ``announce`` bytes."""
    length = len(payload) if announce is None else announce
    if length < 126:
        header = bytes([0x80 | opcode, 0x80 | length])
    elif length < 1 << 16:
        header = bytes([0x80 | opcode, 0x80 | 126]) + struct.pack("!H", length)
    else:
        header = bytes([0x80 | opcode, 0x80 | 127]) + struct.pack("!Q", length)
    mask = os.urandom(4)
    return header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def _read_frame(client: socket.socket) -> tuple[int, bytes]:
    """The opcode and payload of the server's next frame (unmasked)."""
    head = _exactly(client, 2)
    length = head[1] & 0x7F
    if length == 126:
        length = struct.unpack("!H", _exactly(client, 2))[0]
    elif length == 127:
        length = struct.unpack("!Q", _exactly(client, 8))[0]
    return head[0] & 0x0F, _exactly(client, length)


def _message(client: socket.socket) -> str:
    """The next text message from the server (pings and pongs skipped)."""
    while True:
        opcode, payload = _read_frame(client)
        if opcode == 0x1:
            return payload.decode()
        assert opcode in (0x9, 0xA), (opcode, payload)


def _close_code(client: socket.socket) -> int:
    """The code of the server's close frame, the next frame it sends."""
    opcode, payload = _read_frame(client)
    assert opcode == 0x8, (opcode, payload)
    code: int = struct.unpack("!H", payload[:2])[0]
    return code


def _exactly(client: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = client.recv(size - len(data))
        assert chunk, "the server closed the connection"
        data += chunk
    return data


def _buffered(server: LiveServer) -> list[int]:
    """The bytes waiting in the write buffer of each WebSocket the server holds."""
    return [
        connection.transport.get_write_buffer_size()
        for connection in list(server.server.server_state.connections)
        if isinstance(connection, WebSocketsSansIOProtocol)
        and not connection.transport.is_closing()
    ]
