"""Every example in docs/clients.md runs as it is written: each Python block in a fresh
interpreter against a live service of its own (``GRAPHMEM_URL``), the TypeScript block is
clients/typescript/examples/quickstart.ts, which tests/server/test_typescript_client.py runs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from graphmem.server.http.app import create_app

from graphmem import Settings

from ..support.graphql_clients import LiveServer

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "clients.md"
EXAMPLE = re.compile(r"<!-- example: (\w+)(?: (\S+))? -->\n```\w+\n(.*?)```", re.S)


def _examples(language: str) -> list[tuple[str | None, str]]:
    return [
        (path, code)
        for found, path, code in EXAMPLE.findall(PAGE.read_text(encoding="utf-8"))
        if found == language
    ]


def test_the_page_has_its_examples() -> None:
    assert len(_examples("python")) == 3 and len(_examples("typescript")) == 1


@pytest.mark.parametrize(
    "code", [code for _, code in _examples("python")], ids=["sync", "async", "langgraph"]
)
def test_each_python_example_runs_against_a_service(
    code: str, settings: Settings, tmp_path: Path
) -> None:
    if "langgraph" in code:
        pytest.importorskip("langgraph", reason="the langgraph extra is not installed")
    with LiveServer(create_app(settings)) as server:
        ran = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
            env={**os.environ, "GRAPHMEM_URL": server.base_url},
        )
    assert ran.returncode == 0, ran.stderr
    printed = ran.stdout
    if "Client()" in code and "history" in code:
        assert "Ana lives in Porto" in printed and "not found:" in printed
    elif "AsyncClient" in code:
        assert printed.startswith("FACT_STORED ") and "Release note number 1" in printed
    else:
        assert printed.strip() == "I know: Alice likes pizza"


def test_the_typescript_example_is_the_quickstart_file() -> None:
    [(path, code)] = _examples("typescript")
    assert path is not None
    assert code == (ROOT / path).read_text(encoding="utf-8")
