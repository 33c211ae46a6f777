"""The Python clients against a hostile server (a raw socket on loopback): whatever it answers —
a huge body, one dripped a byte at a time, a Retry-After of hours, a JSON list, JSON nested
100,000 deep, something other than JSON, over HTTP or in a subscription's messages — a call
ends within the client's ``timeout``, reads at most ``max_answer_bytes`` and raises
``ServiceError``, in ``Client``, ``AsyncClient`` and the LangGraph store over a ``Client``
alike."""

from __future__ import annotations

import asyncio
import base64
import gzip
import hashlib
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from graphmem.client import AsyncClient, Client, ServiceError
from graphmem.client.sync import DEFAULT_MAX_ANSWER_BYTES
from graphmem.integrations.langgraph import GraphmemStore
from graphmem.limits import MAX_ANSWER_NESTING

#: What the server does with one connection, once it has read the request (its head given).
Behaviour = Callable[[socket.socket, bytes], None]

NO_FACT = b'{"data": {"fact": null}}'


class HostileServer:
    """Answers every request on 127.0.0.1 by ``behaviour``, one thread a connection; ``url``
    is where it listens and ``requests`` counts what it received."""

    def __init__(self, behaviour: Behaviour) -> None:
        self.behaviour = behaviour
        self.requests = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.1)
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join(timeout=5)
        self._listener.close()

    def _serve(self) -> None:
        while not self._stopped.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            try:
                head = _read_request(conn)
                self.requests += 1
                self.behaviour(conn, head)
            except OSError:  # the client gave up and closed: as it should
                pass


def _read_request(conn: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        data += conn.recv(65_536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        (
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        ),
        0,
    )
    while len(body) < length:
        body += conn.recv(65_536)
    return head


def answer(body: bytes, *, status: str = "200 OK", headers: str = "") -> Behaviour:
    def send(conn: socket.socket, head: bytes) -> None:
        conn.sendall(
            f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\n{headers}"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n".encode()
            + body
        )

    return send


def huge(size: int) -> Behaviour:
    """A valid answer padded to ``size`` bytes, sent until the connection closes."""

    def send(conn: socket.socket, head: bytes) -> None:
        conn.sendall(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n"
        )
        conn.sendall(b'{"padding": "')
        chunk = b"x" * 1_048_576
        for _ in range(size // len(chunk)):
            conn.sendall(chunk)
        conn.sendall(b'", "data": {"fact": null}}')

    return send


def dripped(*, interval: float, lasting: float, in_headers: bool = False) -> Behaviour:
    """A valid answer, after a byte every ``interval`` seconds for ``lasting`` seconds: in the
    body (spaces before the JSON) or in the headers (one header's value)."""

    def send(conn: socket.socket, head: bytes) -> None:
        start = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n"
        conn.sendall(start.encode() + (b"x-slow: " if in_headers else b"\r\n"))
        deadline = time.monotonic() + lasting
        while time.monotonic() < deadline:
            conn.sendall(b"x" if in_headers else b" ")
            time.sleep(interval)
        conn.sendall((b"\r\n\r\n" if in_headers else b"") + NO_FACT)

    return send


def subscription(message: bytes) -> Behaviour:
    """A service whose ``{ namespace }`` answers, and whose WebSocket sends ``message`` first."""
    namespace = answer(b'{"data": {"namespace": "default"}}')

    def send(conn: socket.socket, head: bytes) -> None:
        if not head.startswith(b"GET"):
            return namespace(conn, head)
        key = next(
            line.split(b":")[1].strip()
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"sec-websocket-key:")
        )
        accept = base64.b64encode(
            hashlib.sha1(key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest()
        )
        conn.sendall(
            b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade\r\n"
            b"sec-websocket-accept: " + accept + b"\r\n"
            b"sec-websocket-protocol: graphql-transport-ws\r\n\r\n"
        )
        size = len(message)
        length = bytes([size]) if size < 126 else bytes([127]) + size.to_bytes(8, "big")
        conn.sendall(b"\x81" + length + message)  # one text frame, unmasked as a server's are
        time.sleep(0.3)  # until the client has read it

    return send


@pytest.fixture
def serve() -> Iterator[Callable[[Behaviour], HostileServer]]:
    servers: list[HostileServer] = []

    def start(behaviour: Behaviour) -> HostileServer:
        servers.append(HostileServer(behaviour))
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


def test_a_huge_answer_is_refused_once_max_answer_bytes_are_read(
    serve: Callable[[Behaviour], HostileServer],
) -> None:
    server = serve(huge(150 * 1_048_576))
    started = time.monotonic()
    with Client(server.url, retries=0) as client, pytest.raises(ServiceError) as refused:
        client.get("x")
    assert refused.value.code == "TOO_COSTLY"
    assert f"max_answer_bytes ({DEFAULT_MAX_ANSWER_BYTES:,})" in refused.value.message
    assert time.monotonic() - started < 5
    small = serve(huge(2 * 1_048_576))
    with Client(small.url, max_answer_bytes=1_048_576) as client, pytest.raises(ServiceError):
        client.get("x")
    with Client(small.url, max_answer_bytes=4 * 1_048_576) as client:
        assert client.get("x") is None


def test_a_gzip_bomb_is_inflated_only_up_to_max_answer_bytes(
    serve: Callable[[Behaviour], HostileServer],
) -> None:
    bomb = gzip.compress(b" " * (100 * 1_048_576) + NO_FACT, compresslevel=9)
    assert len(bomb) < 200_000
    server = serve(answer(bomb, headers="content-encoding: gzip\r\n"))
    with Client(server.url, retries=0) as client, pytest.raises(ServiceError) as refused:
        client.get("x")
    assert refused.value.code == "TOO_COSTLY"
    packed = serve(answer(gzip.compress(NO_FACT), headers="content-encoding: gzip\r\n"))
    with Client(packed.url) as client:
        assert client.get("x") is None  # an honest compressed answer is read


@pytest.mark.parametrize("in_headers", [False, True], ids=["body", "headers"])
def test_an_answer_dripped_a_byte_at_a_time_ends_at_the_timeout_retries_included(
    serve: Callable[[Behaviour], HostileServer], in_headers: bool
) -> None:
    server = serve(dripped(interval=0.05, lasting=3.0, in_headers=in_headers))
    started = time.monotonic()
    with Client(server.url, timeout=0.5) as client, pytest.raises(ServiceError) as late:
        client.get("x")  # a read: retried, but not past the timeout
    assert time.monotonic() - started < 1.2
    assert late.value.code == "UNAVAILABLE" and "timeout (0.5 s)" in late.value.message


def test_a_retry_after_beyond_the_timeout_is_not_waited_for(
    serve: Callable[[Behaviour], HostileServer],
) -> None:
    limited = b'{"errors": [{"message": "slow down", "extensions": {"code": "RATE_LIMITED"}}]}'
    server = serve(answer(limited, status="429 Too Many Requests", headers="retry-after: 3\r\n"))
    started = time.monotonic()
    with Client(server.url, timeout=0.5) as client, pytest.raises(ServiceError) as refused:
        client.get("x")
    assert refused.value.code == "RATE_LIMITED" and server.requests == 1
    assert time.monotonic() - started < 0.5


MALFORMED = {
    "a JSON list": b"[1, 2, 3]",
    "JSON nested 100,000 deep": b"[" * 100_000 + b"]" * 100_000,
    "not JSON": b"<html>hello</html>",
    "a fact of the wrong shape": b'{"data": {"fact": {"id": 7}}}',
    "a list where a fact was due": b'{"data": {"fact": [1]}}',
    "errors of the wrong shape": b'{"errors": [{"message": 5, "extensions": ["code"]}]}',
}


def test_every_malformed_answer_raises_service_error(
    serve: Callable[[Behaviour], HostileServer],
) -> None:
    for name, body in MALFORMED.items():
        server = serve(answer(body))
        with Client(server.url, retries=0) as client, pytest.raises(ServiceError) as bad:
            client.get("x")
        assert bad.value.code == "INTERNAL_ERROR", name
    deep = serve(answer(b'{"data": {"fact": ' + b"[" * 300 + b"]" * 300 + b"}}"))
    with Client(deep.url) as client, pytest.raises(ServiceError) as refused:
        client.get("x")
    assert f"nested deeper than {MAX_ANSWER_NESTING} levels" in refused.value.message


def test_the_async_client_keeps_the_same_bounds(
    serve: Callable[[Behaviour], HostileServer],
) -> None:
    slow = serve(dripped(interval=0.05, lasting=3.0))
    listed = serve(answer(MALFORMED["a JSON list"]))

    async def calls() -> list[Any]:
        outcomes: list[Any] = []
        for url, timeout in ((slow.url, 0.5), (listed.url, 5.0)):
            async with AsyncClient(url, timeout=timeout) as client:
                try:
                    await client.get("x")
                except ServiceError as exc:
                    outcomes.append(exc.code)
        return outcomes

    started = time.monotonic()
    assert asyncio.run(calls()) == ["UNAVAILABLE", "INTERNAL_ERROR"]
    assert time.monotonic() - started < 2.5


def test_the_langgraph_store_over_a_client_raises_service_error_for_a_malformed_answer(
    serve: Callable[[Behaviour], HostileServer],
) -> None:
    search = json.dumps({"data": {"search": {"not": "a list"}}}).encode()
    for body in (MALFORMED["a JSON list"], MALFORMED["JSON nested 100,000 deep"], search):
        server = serve(answer(body))
        with Client(server.url, retries=0) as client, pytest.raises(ServiceError):
            store = GraphmemStore(client)
            store.search(("users", "ana"), query="tea")


def test_a_subscription_message_that_is_malformed_raises_service_error(
    serve: Callable[[Behaviour], HostileServer],
) -> None:
    for message in (b"[1]", b"[" * 100_000 + b"]" * 100_000, b'{"type": "next"}'):
        server = serve(subscription(message))
        with Client(server.url) as client, pytest.raises(ServiceError) as bad:
            next(iter(client.changes()))
        assert bad.value.code == "INTERNAL_ERROR"
