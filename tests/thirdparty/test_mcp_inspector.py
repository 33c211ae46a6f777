"""The MCP Inspector's command line (npm ``@modelcontextprotocol/inspector``, ``--cli``) against
a live ``/mcp`` with API keys: its ``--strict`` schema checks find nothing but what
docs/compatibility.md lists (nothing today), it calls the tools, and without the key it is told
to send one, whether it stops at the 401 or goes looking for OAuth."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from graphmem.server import create_app
from graphmem.server.mcp import TOOLS
from graphmem.server.mcp.server import NO_OAUTH

from graphmem import KeyStore, Settings

from ..support.clock import Clock
from ..support.graphql_clients import LiveServer
from ..support.thirdparty import npm_project

PACKAGES = ("@modelcontextprotocol/inspector@2.12.0",)
#: The ``--strict`` findings graphmem's tools are allowed, as "tool path", each with its reason
#: (as docs/compatibility.md#mcp-the-python-sdks-client-and-the-mcp-inspector lists them).
FINDINGS: dict[str, str] = {}
#: The Inspector's exit code for "authentication required" (its CLI's EXIT_CODES).
AUTH_REQUIRED = 3


@pytest.fixture(scope="session")
def inspector(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Inspector's command, installed in an npm project of the session."""
    folder = npm_project(tmp_path_factory.getbasetemp() / "mcp-inspector", *PACKAGES)
    return folder / "node_modules" / ".bin" / "mcp-inspector"


@pytest.fixture
def served(
    settings: Settings, clock: Clock, keys: KeyStore
) -> Iterator[tuple[str, dict[str, str]]]:
    """A live service with an API key: the URL of its ``/mcp`` and the key's header."""
    token, _ = keys.create(["default"])
    quiet = settings.model_copy(update={"prune_interval": 0, "classify_interval": 0})
    with LiveServer(create_app(quiet, clock=clock)) as server:
        yield f"{server.base_url}/mcp", {"Authorization": f"Bearer {token}"}


def _run(
    inspector: Path, url: str, headers: dict[str, str], *args: str, **env: str
) -> subprocess.CompletedProcess[str]:
    """One CLI run; its settings and secrets in the test's own home, kept in memory."""
    home = inspector.parents[2] / "home"
    home.mkdir(exist_ok=True)
    sent = [arg for name, value in headers.items() for arg in ("--header", f"{name}: {value}")]
    return subprocess.run(
        [str(inspector), "--cli", url, "--transport", "http", *sent, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "HOME": str(home), "MCP_INSPECTOR_SECRET_STORE": "memory", **env},
    )


def _findings(stderr: str) -> set[str]:
    """The ``--strict`` report's findings, as "tool path"."""
    return {
        f"{tool} {path}"
        for tool, path in re.findall(r'(?:Warning|Error): tool "([^"]+)"\n  Path: (\S+)', stderr)
    }


def test_the_inspectors_strict_schema_checks_find_nothing_but_the_documented_list(
    inspector: Path, served: tuple[str, dict[str, str]]
) -> None:
    done = _run(inspector, *served, "--method", "tools/list", "--strict")
    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)["tools"]
    assert [t["name"] for t in listed] == [t.name for t in TOOLS]
    assert _findings(done.stderr) == set(FINDINGS), done.stderr


def test_the_inspector_stores_and_recalls_through_the_tools(
    inspector: Path, served: tuple[str, dict[str, str]]
) -> None:
    def call(tool: str, *arguments: str) -> dict[str, Any]:
        done = _run(
            inspector,
            *served,
            "--method",
            "tools/call",
            "--tool-name",
            tool,
            "--tool-arg",
            *arguments,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        result: dict[str, Any] = json.loads(done.stdout)
        assert not result.get("isError"), result
        return result

    stored = call("memory_store", "text=Alice lives in Paris", "valid_from=2023-06-01")
    fact = stored["structuredContent"]["fact"]
    assert fact["valid_from"].startswith("2023-06-01")
    # The CLI reads a bare number as a number: epoch seconds, as the schema's anyOf allows.
    found = call("memory_recall", "query=where does alice live", "as_of=1700000000")
    assert [h["fact"]["id"] for h in found["structuredContent"]["hits"]] == [fact["id"]]
    assert found["content"][0]["text"].startswith("1 fact (as of 1700000000), best first:")


def test_the_inspector_without_the_key_is_told_to_send_one_and_that_there_is_no_oauth(
    inspector: Path, served: tuple[str, dict[str, str]]
) -> None:
    url, _ = served
    stopped = _run(inspector, url, {}, "--method", "tools/list", "--stored-auth-only")
    assert stopped.returncode == AUTH_REQUIRED, stopped.stderr
    assert "an API key is required: Authorization: Bearer <key>" in _error(stopped)["message"]
    # As a person at a terminal would: on the 401 it tries OAuth, finds no metadata, tries to
    # register, and shows the server's answer (no browser is opened: it stops before).
    tried = _run(
        inspector, url, {}, "--method", "tools/list", MCP_AUTO_OPEN_ENABLED="true", BROWSER="true"
    )
    assert tried.returncode != 0
    assert NO_OAUTH in _error(tried)["message"], tried.stderr


def _error(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The error a failed run reports, as the JSON line it writes to stderr last."""
    [*_, line] = [line for line in done.stderr.splitlines() if line.startswith("{")]
    error: dict[str, Any] = json.loads(line)["error"]
    return error
