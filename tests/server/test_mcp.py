"""The MCP server, driven by the SDK's own client: over stdio (``graphmem mcp`` in a subprocess)
and over streamable HTTP (``/mcp`` of a live server on 127.0.0.1), with API keys and
namespaces as in test_auth.py. Always on the hash embedder."""

from __future__ import annotations

import json
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO, Any
from unittest.mock import AsyncMock

import anyio
import httpx
import httpx2
import pytest
from graphmem.server import create_app
from graphmem.server.mcp import TOOLS, build_server
from graphmem.server.mcp.server import NO_OAUTH, OAUTH_PATHS
from mcp import Client, StdioServerParameters
from mcp.client.auth import OAuthClientProvider, OAuthRegistrationError, TokenStorage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientMetadata
from mcp.shared.exceptions import MCPError
from pydantic import AnyUrl

from graphmem import KeyStore, Memory, Settings

from ..support.graphql_clients import LiveServer, bearer
from ..support.mcp_clients import ok, over_http, refused

pytestmark = [pytest.mark.integration, pytest.mark.engines]

TOOL_NAMES = [
    "memory_store",
    "memory_recall",
    "memory_context",
    "memory_lookup",
    "memory_entities",
    "memory_profile",
    "memory_alias",
    "memory_merge_entities",
    "memory_split_alias",
    "memory_link",
    "memory_traverse",
    "memory_history",
    "memory_forget",
    "memory_tier",
    "memory_checkpoint",
    "memory_prune",
    "memory_maintain",
    "memory_reflect",
    "memory_consolidate",
    "memory_purge",
    "memory_read",
    "memory_capture",
]
Session = Callable[[], Any]  # an async context manager yielding a connected Client


def _script() -> str:
    return str(Path(sys.executable).parent / "graphmem")


def _environment(data_dir: Path) -> dict[str, str]:
    return {"GRAPHMEM_DATA_DIR": str(data_dir), "GRAPHMEM_EMBEDDER": "hash"}


@asynccontextmanager
async def over_stdio(data_dir: Path) -> AsyncIterator[Client]:
    params = StdioServerParameters(
        command=_script(), args=["mcp"], env=_environment(data_dir), cwd=str(data_dir.parent)
    )
    async with Client(params) as client:
        yield client


@pytest.fixture
def live(settings: Settings) -> Iterator[LiveServer]:
    with LiveServer(create_app(settings)) as server:
        yield server


# ------------------------------------------------------------------------------------ scenario


@pytest.mark.usefixtures("store_url")  # the stdio server's store, through GRAPHMEM_STORE
@pytest.mark.parametrize("transport", ["stdio", "http", "http-legacy"])
def test_an_agent_stores_recalls_links_traverses_and_forgets_through_the_tools(
    transport: str, data_dir: Path, request: pytest.FixtureRequest
) -> None:
    if transport == "stdio":
        anyio.run(_scenario, lambda: over_stdio(data_dir))
    else:
        server: LiveServer = request.getfixturevalue("live")
        mode = "legacy" if transport == "http-legacy" else "auto"
        anyio.run(_scenario, lambda: over_http(f"{server.base_url}/mcp", mode=mode))


async def _scenario(session: Session) -> None:
    async with session() as client:
        tools = (await client.list_tools()).tools
        assert [t.name for t in tools] == TOOL_NAMES
        for tool in tools:
            assert tool.description and tool.input_schema["type"] == "object", tool.name
            assert "$defs" not in json.dumps(tool.input_schema), tool.name

        text, berlin = await ok(
            client,
            "memory_store",
            text="Alice lives in Berlin",
            entity="alice",
            key="city",
            value="Berlin",
            valid_from="2020-01-01",
        )
        assert berlin["action"] == "ADD" and text.startswith("ADD: ")
        berlin_id = berlin["fact"]["id"]
        text, paris = await ok(
            client,
            "memory_store",
            text="Alice lives in Paris",
            entity="alice",
            key="city",
            value="Paris",
            valid_from="2023-06-01",
        )
        paris_id = paris["fact"]["id"]
        assert paris["action"] == "UPDATE" and paris["target_ids"] == [berlin_id]
        assert f"supersedes: {berlin_id}" in text

        text, found = await ok(client, "memory_recall", query="where does alice live")
        assert [h["fact"]["id"] for h in found["hits"]] == [paris_id]
        assert f"{paris_id}  Alice lives in Paris [alice.city=Paris]" in text
        assert "valid 2023-06-01 → now" in text

        text, then = await ok(
            client, "memory_recall", query="where does alice live", as_of="2021-06-01"
        )
        assert [h["fact"]["id"] for h in then["hits"]] == [berlin_id]
        assert "(as of 2021-06-01)" in text
        assert f"valid 2020-01-01 → 2023-06-01; superseded by {paris_id}" in text

        _, job = await ok(
            client,
            "memory_store",
            text="Alice took a job at Acme in Paris",
            entity="alice",
            key="employer",
            value="Acme",
        )
        job_id = job["fact"]["id"]
        text, linked = await ok(
            client, "memory_link", source_id=paris_id, target_id=job_id, type="CAUSED_BY"
        )
        assert linked["link"]["type"] == "CAUSED_BY"
        assert text.startswith(f"Linked {paris_id} -[CAUSED_BY]-> {job_id}")

        text, walked = await ok(
            client, "memory_traverse", ids=[paris_id], depth=1, types=["CAUSED_BY"], direction="OUT"
        )
        assert {n["fact"]["id"]: n["depth"] for n in walked["nodes"]} == {paris_id: 0, job_id: 1}
        assert f"{paris_id} -[CAUSED_BY]-> {job_id}" in text
        _, versions = await ok(
            client, "memory_traverse", ids=[paris_id], depth=1, types=["SUPERSEDES"]
        )
        assert berlin_id in {n["fact"]["id"] for n in versions["nodes"]}

        text, history = await ok(client, "memory_history", id=berlin_id)
        assert [f["id"] for f in history["versions"]] == [berlin_id, paris_id]
        assert text.startswith("2 versions, oldest first:")

        _, looked = await ok(client, "memory_lookup", entity="Alice", key="city")
        assert [f["value"] for f in looked["facts"]] == ["Paris"]
        for as_of in ("2021-06-01", 1622505600):  # a time as text, or as epoch seconds
            _, looked = await ok(client, "memory_lookup", entity="alice", key="city", as_of=as_of)
            assert [f["value"] for f in looked["facts"]] == ["Berlin"], as_of
        text, block = await ok(
            client, "memory_context", prompt="Where does Alice live?", max_tokens=200
        )
        assert text == block["context"] and "Alice lives in Paris" in text
        assert text.startswith("<memory-context>")

        text, captured = await ok(
            client,
            "memory_capture",
            messages=[
                {"role": "user", "content": "Thanks for the tip. My favourite editor is helix."},
                {"role": "assistant", "content": "Noted!"},
            ],
            episode="chat-1/1",
        )
        results = captured["results"]
        assert [(r["action"], r["kind"], r["message"]) for r in results] == [
            ("ADD", "turn", 0),
            ("ADD", "fact", 0),
            ("ADD", "turn", 1),
        ]
        turn_id = results[0]["fact"]["id"]
        assert results[1]["turn_id"] == turn_id and results[1]["text"] == (
            "My favourite editor is helix."
        )
        assert results[0]["turn_id"] is None and results[2]["fact"]["source"] == "turn:assistant"
        assert text.startswith("2 turns kept, 1 fact stored:")
        assert f"(from turn {turn_id})" in text
        text, facts_only = await ok(
            client,
            "memory_capture",
            messages=[{"role": "user", "content": "I always use black for formatting. Thanks!"}],
            keep="facts",
        )
        assert [(r["action"], r["kind"], r["turn_id"]) for r in facts_only["results"]] == [
            ("ADD", "fact", None)
        ]
        assert text.startswith("0 turns kept, 1 fact stored:")

        text, forgotten = await ok(client, "memory_forget", id=paris_id)
        assert forgotten["fact"]["id"] == paris_id and text.startswith(f"Forgot {paris_id}")
        _, found = await ok(client, "memory_recall", query="where does alice live")
        assert paris_id not in [h["fact"]["id"] for h in found["hits"]]
        _, known = await ok(
            client,
            "memory_lookup",
            entity="alice",
            key="city",
            known_at=paris["fact"]["recorded_at"],
        )
        assert [f["id"] for f in known["facts"]] == [paris_id]

        await _refusals(client, paris_id)
        _, still = await ok(client, "memory_lookup", entity="alice", key="employer")
        assert [f["id"] for f in still["facts"]] == [job_id]


async def _refusals(client: Client, forgotten_id: str) -> None:
    """Invalid calls are tool errors that say what is wrong; the server goes on serving."""
    cases: list[tuple[str, dict[str, Any], str, str]] = [
        (
            "memory_recall",
            {"query": "alice", "as_of": "yesterday"},
            "INVALID_INPUT",
            "as_of: cannot parse 'yesterday'",
        ),
        (
            "memory_recall",
            {"query": "alice", "known_at": "2024-13-45"},
            "INVALID_INPUT",
            "known_at",
        ),
        (
            "memory_recall",
            {"limit": 0},
            "INVALID_INPUT",
            "query: Field required; limit: Input should be greater than or equal to 1",
        ),
        (
            "memory_recall",
            {"query": "alice", "limit": "many"},
            "INVALID_INPUT",
            "limit: Input should be a valid integer",
        ),
        (
            "memory_store",
            {"text": "x", "colour": "red"},
            "INVALID_INPUT",
            "colour: Extra inputs are not permitted",
        ),
        (
            "memory_store",
            {"text": "Bob is here", "category": "gossip"},
            "INVALID_INPUT",
            "unknown category 'gossip'",
        ),
        (
            "memory_store",
            {"text": "Bob is here", "valid_from": "soon"},
            "INVALID_INPUT",
            "cannot parse 'soon'",
        ),
        (
            "memory_link",
            {"source_id": forgotten_id, "target_id": forgotten_id, "type": "LIKES"},
            "INVALID_INPUT",
            "LIKES",
        ),
        (
            "memory_traverse",
            {"ids": [], "depth": 9},
            "INVALID_INPUT",
            "ids: List should have at least 1 item",
        ),
        (
            "memory_capture",
            {"messages": [{"role": "robot", "content": "beep"}]},
            "INVALID_INPUT",
            "robot",
        ),
        (
            "memory_capture",
            {"messages": [{"role": "user", "content": "I live in Rome"}], "keep": "everything"},
            "INVALID_INPUT",
            "keep: Input should be 'conversation' or 'facts'",
        ),
        ("memory_history", {"id": "no-such-fact"}, "NOT_FOUND", "no fact with id 'no-such-fact'"),
        ("memory_forget", {"id": forgotten_id}, "CONFLICT", "already forgotten"),
    ]
    for tool, arguments, code, message in cases:
        got_code, text = await refused(client, tool, **arguments)
        assert (got_code, message in text) == (code, True), (tool, arguments, text)
        assert text.startswith(f"{code}: ")
    # A tool that does not exist is the request's error, not a tool's (the spec's -32602).
    with pytest.raises(MCPError) as unknown:
        await client.call_tool("memory_remember", {"text": "x"})
    assert (unknown.value.code, unknown.value.data) == (-32602, {"code": "INVALID_INPUT"})
    assert unknown.value.message.startswith("unknown tool 'memory_remember'; the tools are ")


# ------------------------------------------------------------------------------------ keys


def test_a_key_for_one_namespace_cannot_reach_another_through_mcp(
    live: LiveServer, keys: KeyStore
) -> None:
    alice, _ = keys.create(["alice"])
    bob, _ = keys.create(["bob"])
    reader, _ = keys.create(["alice"], read_only=True)
    url = f"{live.base_url}/mcp"

    async def run() -> None:
        async with over_http(url, bearer(alice)) as client:
            _, stored = await ok(client, "memory_store", text="Alice keeps her notes in Obsidian")
        fact_id = stored["fact"]["id"]
        async with over_http(url, bearer(bob)) as client:
            _, found = await ok(client, "memory_recall", query="Obsidian notes")
            assert found["hits"] == []
            for tool in ("memory_history", "memory_forget"):
                assert (await refused(client, tool, id=fact_id))[0] == "NOT_FOUND"
            assert (await refused(client, "memory_traverse", ids=[fact_id]))[0] == "NOT_FOUND"
            _, own = await ok(client, "memory_store", text="Bob keeps his notes on paper")
            code, _ = await refused(
                client,
                "memory_link",
                source_id=own["fact"]["id"],
                target_id=fact_id,
                type="RELATED_TO",
            )
            assert code == "NOT_FOUND"
        async with over_http(url, bearer(reader)) as client:
            assert (await refused(client, "memory_store", text="Readers may not write"))[0] == (
                "FORBIDDEN"
            )
            assert (await refused(client, "memory_forget", id=fact_id))[0] == "FORBIDDEN"
            _, found = await ok(client, "memory_recall", query="Obsidian notes")
            assert [h["fact"]["id"] for h in found["hits"]] == [fact_id]

    anyio.run(run)

    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "memory_recall", "arguments": {"query": "Obsidian"}},
    }
    headers = {"Accept": "application/json, text/event-stream"}
    refused_key = 'error="invalid_token", error_description="unknown or revoked API key"'
    for extra, status, challenge in (
        ({}, 401, 'Bearer realm="graphmem"'),  # RFC 6750: no error when no key was sent
        (
            bearer("gm_000000000000_notthesecretatall"),
            401,
            f'Bearer realm="graphmem", {refused_key}',
        ),
        ({**bearer(bob), "X-Graphmem-Namespace": "alice"}, 403, None),
    ):
        response = httpx.post(url, json=message, headers={**headers, **extra}, timeout=30)
        assert response.status_code == status, (extra, response.text)
        assert response.headers.get("www-authenticate") == challenge, response.headers
    assert httpx.get(url, headers={"Accept": "text/html"}, timeout=30).status_code == 401
    with pytest.raises(BaseExceptionGroup) as refusal:  # the SDK's client shows the message
        anyio.run(_connect, url, {**bearer(bob), "X-Graphmem-Namespace": "alice"})
    assert refusal.group_contains(MCPError, match="no access to namespace 'alice'")
    answer = httpx.post(url, json=message, headers={**headers, **bearer(alice)}, timeout=30)
    assert answer.status_code == 200 and "Obsidian" in answer.text


def test_a_client_that_tries_oauth_on_the_401_is_told_at_once_to_send_a_key(
    live: LiveServer, keys: KeyStore
) -> None:
    """The SDK's OAuth client meets the 401, finds no OAuth metadata (the challenge names none
    and the well-known URLs answer 404), tries to register, and stops with the server's
    message, which names the API key; no OAuth URL asks for a key itself."""
    keys.create(["default"])
    url = f"{live.base_url}/mcp"
    for path in OAUTH_PATHS:
        response = httpx.get(f"{live.base_url}{path}", timeout=30)
        assert response.status_code == 404, path
        assert response.json()["error_description"] == NO_OAUTH, path

    async def connect() -> None:
        never_authorized = AsyncMock(  # a client with no tokens and no registration yet
            spec=TokenStorage,
            **{"get_tokens.return_value": None, "get_client_info.return_value": None},
        )
        provider = OAuthClientProvider(
            url,
            OAuthClientMetadata(redirect_uris=[AnyUrl("http://127.0.0.1:1/callback")]),
            never_authorized,
        )
        async with (
            httpx2.AsyncClient(auth=provider, timeout=30) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            await client.list_tools()

    start = time.monotonic()
    with pytest.raises(BaseExceptionGroup) as refusal:
        anyio.run(connect)
    assert refusal.group_contains(OAuthRegistrationError, match="Authorization: Bearer <key>")
    assert time.monotonic() - start < 10  # no retries, no waiting for a browser


async def _connect(url: str, headers: dict[str, str]) -> None:
    async with over_http(url, headers) as client:
        await client.list_tools()


def test_no_event_stream_is_held_open_for_a_get(live: LiveServer, keys: KeyStore) -> None:
    token, _ = keys.create(["default"], read_only=True)
    start = time.monotonic()
    for _ in range(20):
        response = httpx.get(
            f"{live.base_url}/mcp",
            headers={**bearer(token), "Accept": "text/event-stream"},
            timeout=5,
        )
        assert response.status_code == 405 and response.headers["allow"] == "POST"
    assert time.monotonic() - start < 5  # answered at once, never held


def test_a_request_naming_another_host_is_refused_on_loopback(live: LiveServer) -> None:
    """DNS rebinding: a page served from another name must not reach a keyless local server."""
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {"Accept": "application/json, text/event-stream"}
    url = f"{live.base_url}/mcp"
    assert httpx.post(url, json=message, headers=headers, timeout=30).status_code == 200
    for extra in ({"Host": "evil.example:8420"}, {"Origin": "http://evil.example"}):
        response = httpx.post(url, json=message, headers={**headers, **extra}, timeout=30)
        assert response.status_code in (403, 421), extra
    metrics = httpx.get(f"{live.base_url}/metrics", timeout=30).text
    assert 'route="/mcp"' in metrics


# ------------------------------------------------------------------------------------ failures


#: The envelope of a 2026-07-28 request (no handshake: each request says who it is).
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def test_a_lone_surrogate_is_invalid_input_naming_where_it_is_in_every_protocol(
    live: LiveServer,
) -> None:
    """JSON can spell a lone surrogate, which the SDK's parser refuses (a parse error, -32700):
    the call is answered as the same call made in process, whatever protocol it speaks."""
    url = f"{live.base_url}/mcp"

    def post(params: dict[str, Any], **headers: str) -> dict[str, Any]:
        message = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}
        response = httpx.post(
            url,
            content=json.dumps(message),  # json writes a lone surrogate as its escape
            headers={
                "Accept": "application/json, text/event-stream",
                "Content-Type": "application/json",
                **headers,
            },
            timeout=30,
        )
        assert response.status_code == 200, response.text
        answer: dict[str, Any] = response.json()
        assert answer["id"] == 7, answer
        return answer

    protocols: list[tuple[dict[str, Any], dict[str, str]]] = [
        ({}, {}),  # no version header: 2025-03-26
        ({}, {"MCP-Protocol-Version": "2025-11-25"}),
        (
            {"_meta": MODERN_META},
            {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call"},
        ),
    ]
    calls = [
        ("memory_recall", {"query": "where \ud800"}, "query"),
        (
            "memory_capture",
            {"messages": [{"role": "user", "content": "\udc00"}]},
            "messages[0].content",
        ),
    ]
    for meta, headers in protocols:
        for tool, arguments, where in calls:
            named = {"Mcp-Name": tool} if meta else {}
            answer = post({"name": tool, "arguments": arguments, **meta}, **headers, **named)
            result = answer["result"]
            assert result["isError"] is True, (headers, result)
            error = result["structuredContent"]["error"]
            assert error["code"] == "INVALID_INPUT", (headers, error)
            assert error["message"].startswith(f"argument `{where}"), error
            assert "contains a lone surrogate" in error["message"], error
    for headers in ({}, {"MCP-Protocol-Version": "2025-11-25"}):  # 2026-07-28 names it twice
        stray = post({"name": "memory_\ud800", "arguments": {}}, **headers)
        assert stray["error"]["code"] == -32602, (headers, stray)
        assert stray["error"]["data"] == {"code": "INVALID_INPUT"}, stray
        assert stray["error"]["message"].startswith("`params.name` contains a lone surrogate")
    answer = post({"name": "memory_recall", "arguments": {"query": "anything"}})
    assert answer["result"]["isError"] is False  # the server goes on serving


def test_an_unexpected_failure_is_a_tool_error_and_the_server_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with Memory.open(tmp_path / "data", settings=Settings(embedder="hash")) as memory:
        calls = 0

        def caller(ctx: Any) -> tuple[Memory, None]:
            nonlocal calls
            calls += 1
            if calls == 1:
                raise RuntimeError("disk on fire")
            return memory, None

        def failing(*_: object, **__: object) -> None:
            raise RuntimeError("disk still on fire")

        async def run() -> None:
            async with Client(build_server(caller)) as client:
                code, text = await refused(client, "memory_recall", query="anything")
                assert code == "INTERNAL_ERROR" and "disk on fire" not in text
                await ok(client, "memory_store", text="The server survived its failure")
                with pytest.MonkeyPatch.context() as patch:
                    patch.setattr(Memory, "search", failing)
                    for _ in range(50):  # the same failure, over and over
                        assert (await refused(client, "memory_recall", query="x"))[0] == (
                            "INTERNAL_ERROR"
                        )

        with caplog.at_level(logging.ERROR, logger="graphmem.mcp"):
            anyio.run(run)
    assert "tool memory_recall failed" in caplog.text and "disk on fire" in caplog.text
    assert caplog.text.count("RuntimeError: disk still on fire") == 1  # once, then counted


def test_every_tool_is_described_and_its_arguments_too_in_portable_schemas() -> None:
    for tool in TOOLS:
        spec = tool.spec()
        assert spec.description and len(spec.description) > 80, tool.name
        for name, schema in spec.input_schema["properties"].items():
            assert schema.get("description"), (tool.name, name)
        assert _unportable(spec.input_schema, "inputSchema") == [], tool.name


#: Keywords that constrain a value (a schema with none accepts anything, and says nothing).
_CONSTRAINING = {"type", "enum", "const", "anyOf", "oneOf", "allOf"}


def _unportable(node: dict[str, Any], path: str) -> list[str]:
    """What the MCP Inspector's ``--strict`` warns of in a tool's schema (its own run is
    tests/thirdparty/test_mcp_inspector.py): a ``type`` array, which clients that map schemas
    onto one type per schema (Gemini's function declarations) reject, or a schema that
    constrains nothing. Each argument is one ``type``, or ``anyOf`` branches of one each."""
    problems = []
    if isinstance(node.get("type"), list):
        problems.append(f"{path}: type array")
    if not _CONSTRAINING & node.keys():
        problems.append(f"{path}: no type")
    children = [(f"{path}.{k}", v) for k, v in node.get("properties", {}).items()]
    children += [(f"{path}.anyOf[{i}]", v) for i, v in enumerate(node.get("anyOf", []))]
    if isinstance(node.get("items"), dict):
        children.append((f"{path}.items", node["items"]))
    for where, child in children:
        problems += _unportable(child, where)
    return problems


# ------------------------------------------------------------------------------------ processes


def test_the_stdio_server_answers_every_request_and_writes_nothing_but_protocol_to_stdout(
    tmp_path: Path,
) -> None:
    requests = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "test", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "memory_recall", "arguments": {"query": ""}},
        },
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "memory_store", "arguments": {"text": "Stdout stays clean"}},
        },
        {  # lines the SDK's parser refuses (a lone surrogate), which it would leave unanswered
            "jsonrpc": "2.0",
            "id": 4,
            "method": "tools/call",
            "params": {"name": "memory_store", "arguments": {"text": "Stdout \ud83d clean"}},
        },
        {"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": {"cursor": "\udc00"}},
    ]
    stderr = tmp_path / "stderr.txt"
    with (
        stderr.open("w") as errors,
        subprocess.Popen(
            [_script(), "mcp", "--log-level", "debug"],
            cwd=tmp_path,
            env={**os.environ, **_environment(tmp_path / "data")},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors,
        ) as process,
    ):
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(b"".join(json.dumps(r).encode() + b"\n" for r in requests))
        process.stdin.flush()
        answered = _read_lines(process.stdout, 5)
        process.stdin.close()  # the client is done: the server ends
        rest = process.stdout.read()
        assert process.wait(timeout=30) == 0, stderr.read_text()
    answers = sorted(
        (json.loads(line) for line in (answered + rest).splitlines()), key=lambda a: a["id"]
    )
    assert [a.get("id") for a in answers] == [1, 2, 3, 4, 5], answers
    assert all(a["jsonrpc"] == "2.0" for a in answers)
    assert answers[1]["result"]["isError"] is True
    assert answers[2]["result"]["structuredContent"]["action"] == "ADD"
    surrogate = answers[3]["result"]["structuredContent"]["error"]
    assert surrogate["code"] == "INVALID_INPUT", surrogate
    assert surrogate["message"].startswith("argument `text` contains a lone surrogate (\\ud83d)")
    assert answers[4]["error"]["code"] == -32602, answers[4]
    assert answers[4]["error"]["data"] == {"code": "INVALID_INPUT"}
    assert "DEBUG" in stderr.read_text()  # the logs went to stderr


def _read_lines(stream: IO[bytes], count: int, timeout: float = 60) -> bytes:
    """What ``stream`` gives until it holds ``count`` lines (without blocking past ``timeout``)."""
    data = b""
    deadline = time.monotonic() + timeout
    while data.count(b"\n") < count:
        ready, _, _ = select.select([stream], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            raise TimeoutError(f"{count} lines expected, got {data!r}")
        chunk = os.read(stream.fileno(), 65536)
        if not chunk:
            break
        data += chunk
    return data


def test_graphmem_serve_starts_serves_mcp_and_stops_cleanly(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen(
        [_script(), "serve", "--port", str(port)],
        cwd=tmp_path,
        env={**os.environ, **_environment(tmp_path / "data"), "PYTHONWARNINGS": "error"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_until_up(f"http://127.0.0.1:{port}/healthz", server)
        url = f"http://127.0.0.1:{port}/mcp"
        stored = anyio.run(_store_one, url)
        assert stored["action"] == "ADD"
    finally:
        server.send_signal(signal.SIGINT)
        _, stderr = server.communicate(timeout=30)
    assert server.returncode == 0, stderr
    for word in ("Traceback", "WARNING", "ERROR", "Warning"):
        assert word not in stderr, stderr


async def _store_one(url: str) -> dict[str, Any]:
    async with over_http(url) as client:
        _, stored = await ok(client, "memory_store", text="Served over streamable HTTP")
    return stored


def _wait_until_up(url: str, process: subprocess.Popen[str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(process.communicate()[1])
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"{url} did not come up")
