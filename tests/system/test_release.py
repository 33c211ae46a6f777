"""The release: ``python -m build`` makes a wheel and an sdist; the wheel, installed into a fresh
virtualenv outside the repository, serves from an empty directory — GraphiQL, the explorer and
its assets, a store and a search through ``Client`` — and answers ``graphmem mcp``.

The virtualenv gets the wheel alone (``--no-deps``); its dependencies are read from the test's
own environment through a ``.pth`` file, so the test needs no network and takes seconds, while
graphmem itself — code, package data, entry points — comes from the wheel only (the editable
install of the repository is not visible there: its hook is not a ``.pth`` of that site)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import graphmem
from devtools.cluster import free_port
from graphmem import Client

from ..support.serving import wait_until_serving

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The bin directory of a virtualenv holding the wheel just built."""
    work = tmp_path_factory.mktemp("release")
    dist = work / "dist"
    built = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(dist), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    version = graphmem.__version__
    wheel = dist / f"graphmem-{version}-py3-none-any.whl"
    assert wheel.is_file() and (dist / f"graphmem-{version}.tar.gz").is_file()
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    bin_dir = venv / "bin"
    subprocess.run(
        [
            str(bin_dir / "python"),
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            str(wheel),
        ],
        check=True,
        timeout=300,
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )
    site = subprocess.run(
        [str(bin_dir / "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(site) / "graphmem_test_dependencies.pth").write_text(
        sysconfig.get_path("purelib") + "\n", encoding="utf-8"
    )
    yield bin_dir


def test_the_installed_package_is_the_wheels(installed: Path, tmp_path: Path) -> None:
    where = subprocess.run(
        [
            str(installed / "python"),
            "-c",
            "import importlib.util, graphmem, graphmem.server; print(graphmem.__file__);"
            " print(graphmem.server.__file__); print(importlib.util.find_spec('resolvers'))",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
    ).stdout.split()
    assert all(str(installed.parent) in path for path in where[:2]), where
    assert where[2] == "None"  # the wheel claims no top-level name but graphmem
    [top_level] = installed.parent.glob(
        "lib/python*/site-packages/graphmem-*.dist-info/top_level.txt"
    )
    assert top_level.read_text(encoding="utf-8").split() == ["graphmem"]
    version = subprocess.run(
        [str(installed / "graphmem"), "--version"], capture_output=True, text=True, check=True
    )
    assert version.stdout.strip() == f"graphmem, version {graphmem.__version__}"


def test_the_wheel_serves_from_an_empty_directory(installed: Path, tmp_path: Path) -> None:
    port = free_port()
    env = {
        **os.environ,
        "GRAPHMEM_EMBEDDER": "hash",
        "GRAPHMEM_DATA_DIR": str(tmp_path / "data"),
        "GRAPHMEM_PORT": str(port),
    }
    empty = tmp_path / "empty"
    empty.mkdir()
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [str(installed / "graphmem"), "serve"],
            cwd=empty,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(url, server, log)
        graphiql = httpx.get(f"{url}/graphql", headers={"accept": "text/html"})
        assert graphiql.status_code == 200 and "graphiql" in graphiql.text.lower()
        page = httpx.get(f"{url}/explore/")
        assert page.status_code == 200 and "explorer.js" in page.text
        asset = httpx.get(f"{url}/explore/explorer.js")
        assert asset.status_code == 200 and "javascript" in asset.headers["content-type"]
        with Client(url) as client:
            stored = client.store("The installed wheel serves", entity="release")
            assert stored.action == "ADD"
            assert client.search("installed wheel")[0].fact.text == "The installed wheel serves"
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_the_wheel_answers_mcp_on_stdio(installed: Path, tmp_path: Path) -> None:
    messages: list[dict[str, Any]] = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "release-test", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    env = {**os.environ, "GRAPHMEM_EMBEDDER": "hash", "GRAPHMEM_DATA_DIR": str(tmp_path / "d")}
    mcp = subprocess.Popen(
        [str(installed / "graphmem"), "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=tmp_path,
        env=env,
    )
    assert mcp.stdin is not None and mcp.stdout is not None
    answers: dict[int, dict[str, Any]] = {}
    try:
        for message in messages:  # one at a time: each request waits for its answer
            mcp.stdin.write(json.dumps(message) + "\n")
            mcp.stdin.flush()
            wanted = message.get("id")
            while isinstance(wanted, int) and wanted not in answers:
                line = mcp.stdout.readline()
                assert line, "graphmem mcp closed its output"
                answer = json.loads(line)
                if isinstance(answer.get("id"), int):
                    answers[answer["id"]] = answer
    finally:
        mcp.stdin.close()
        mcp.wait(timeout=30)
        mcp.stdout.close()
    assert answers[1]["result"]["serverInfo"]["name"]
    tools = {t["name"] for t in answers[2]["result"]["tools"]}
    assert {"memory_store", "memory_checkpoint", "memory_prune", "memory_reflect"} <= tools
