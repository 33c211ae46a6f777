"""Clients for the GraphQL service in tests: in-process (starlette's TestClient) or over real
HTTP against uvicorn serving on 127.0.0.1 in a thread. Both answer ``post(query, variables,
headers)`` with ``(status, json)``, so one contract suite runs against either."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

import httpx
import httpx2
import uvicorn
from graphmem.server.http.sockets import WebSocketProtocol
from starlette.applications import Starlette
from starlette.testclient import TestClient

#: What most service tests send: a fact stored from its text alone, and a search for texts.
STORE = "mutation($t: String!) { storeFact(input: {text: $t}) { fact { id } error { code } } }"
SEARCH = "query($q: String!) { search(query: $q) { fact { text } } }"
#: The subscriptions' WebSocket subprotocol, and its URL for an in-process client (a name that a
#: loopback server answers).
WS = "graphql-transport-ws"
WS_URL = "ws://127.0.0.1/graphql"

# starlette's TestClient answers with httpx2's Response, the live server's client with httpx's;
# the tests use what the two share (status_code, headers, text, json()).
Response = httpx.Response | httpx2.Response


class Api:
    """What a contract test talks to."""

    base_url: str

    def post(
        self,
        query: str,
        variables: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, Any]:
        response = self.request(
            "POST", "/graphql", json={"query": query, "variables": variables}, headers=headers
        )
        try:
            return response.status_code, response.json()
        except ValueError:
            return response.status_code, response.text

    def data(self, query: str, variables: dict[str, Any] | None = None, /, **headers: str) -> Any:
        """The ``data`` of a query that must succeed (no errors); keywords are headers."""
        status, body = self.post(query, variables, headers or None)
        assert status == 200 and not body.get("errors"), body
        return body["data"]

    def request(self, method: str, path: str, **kwargs: Any) -> Response:
        raise NotImplementedError


class InProcess(Api):
    def __init__(self, app: Starlette) -> None:
        self.client = TestClient(app, base_url="http://127.0.0.1")
        self.base_url = "http://127.0.0.1"

    def __enter__(self) -> InProcess:
        self.client.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.__exit__(None, None, None)

    def request(self, method: str, path: str, **kwargs: Any) -> Response:
        return self.client.request(method, path, **kwargs)


class LiveServer(Api):
    """uvicorn serving ``app`` on a free loopback port, in a thread, for the ``with`` block."""

    def __init__(self, app: Starlette) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        port = self.sock.getsockname()[1]
        self.base_url = f"http://127.0.0.1:{port}"
        self.server = uvicorn.Server(
            uvicorn.Config(app, log_level="warning", ws=WebSocketProtocol, lifespan="on")
        )
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )
        self.client = httpx.Client(base_url=self.base_url, timeout=30)

    def __enter__(self) -> LiveServer:
        self.thread.start()
        _wait(lambda: self.server.started, "uvicorn did not start")
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.client.close()
        self.server.should_exit = True
        self.thread.join(timeout=30)
        self.sock.close()

    def request(self, method: str, path: str, **kwargs: Any) -> Response:
        return self.client.request(method, path, **kwargs)


def bearer(token: str) -> dict[str, str]:
    """The headers that present an API key."""
    return {"Authorization": f"Bearer {token}"}


def _wait(done: Callable[[], bool], message: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError(message)
        time.sleep(0.02)
