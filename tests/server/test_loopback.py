"""Who may reach a server: without API keys it serves loopback only, and refuses requests whose
Host or Origin names another site (DNS rebinding); a server on another address needs keys, and
leaves host names to them."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from graphmem.server import create_app
from graphmem.server.commands import cli
from starlette.websockets import WebSocketDisconnect

from graphmem import Settings
from graphmem.storage.sqlite.keys import KeyFile

from ..support.clock import Clock
from ..support.graphql_clients import SEARCH, STORE, WS, WS_URL, InProcess


def test_serve_refuses_a_public_address_without_keys(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["--data-dir", str(tmp_path), "serve", "--host", "0.0.0.0"])
    assert result.exit_code != 0
    assert "without API keys" in str(result.exception)


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
    token, _ = KeyFile(data_dir).create(["default"])
    settings = Settings(embedder="hash", data_dir=data_dir, host="0.0.0.0")
    with InProcess(create_app(settings, clock=clock)) as client:
        query = {"query": "{ stats { facts } }"}
        headers = {"Host": "memory.internal:8420", "Authorization": f"Bearer {token}"}
        assert client.client.post("/graphql", json=query, headers=headers).status_code == 200
        del headers["Authorization"]
        assert client.client.post("/graphql", json=query, headers=headers).status_code == 401
