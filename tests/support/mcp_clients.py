"""Clients of the MCP server for tests: the SDK's own client over streamable HTTP, tool calls
that must succeed or must be refused, and tool calls in this process."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
from graphmem.server.mcp import call
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult

from graphmem import ApiKey, Memory

#: A read-only key of the default namespace.
READ_ONLY_KEY = ApiKey(
    "k1", ("default",), read_only=True, label=None, created_at=0, revoked_at=None
)


@asynccontextmanager
async def over_http(
    url: str, headers: dict[str, str] | None = None, mode: str = "auto"
) -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as client,
    ):
        yield client


async def ok(client: Client, tool: str, **arguments: Any) -> tuple[str, dict[str, Any]]:
    """A call that must succeed: its text and its structured content."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, _text(result)
    return _text(result), result.structured_content


async def refused(client: Client, tool: str, **arguments: Any) -> tuple[str, str]:
    """A call that must come back as a tool error: its code and its text."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, _text(result)
    return result.structured_content["error"]["code"], _text(result)


def _text(result: CallToolResult) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


def call_in_process(
    memory: Memory, key: ApiKey | None, tool: str, **arguments: Any
) -> tuple[bool, Any]:
    """One call of ``tool`` through the server's dispatch (validation, key check, cost) on
    ``memory`` as ``key`` (None: no key): whether it failed, and its structured content."""

    async def run() -> CallToolResult:
        return await call(lambda _: (memory, key), None, tool, arguments)  # type: ignore[arg-type]

    result = anyio.run(run)
    return bool(result.is_error), result.structured_content
