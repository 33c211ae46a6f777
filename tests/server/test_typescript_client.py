"""The TypeScript client (clients/typescript): its committed types are what graphql-codegen makes
from schema.graphql now, it builds under strict tsc, and its node tests and its quickstart
example pass against a real ``graphmem serve`` that requires API keys.

Skipped, saying why, where node or npm is missing. ``npm ci`` runs only when node_modules is
missing or older than package-lock.json, so a run after the first takes seconds."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import graphmem
from devtools.cluster import free_port

from ..support.serving import wait_until_serving

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
CLIENT = ROOT / "clients" / "typescript"
#: The graphmem of the environment running the tests (the repository's virtualenv).
GRAPHMEM = Path(sys.executable).parent / "graphmem"


@dataclass(frozen=True)
class Service:
    url: str
    #: A key of namespaces t1 (its default) and t2: what the node tests use.
    key: str
    #: A key of namespace quickstart alone: the example starts from an empty namespace.
    quickstart_key: str


def _run(args: list[str], env: dict[str, str] | None = None, timeout: float = 300) -> str:
    """Run ``args`` in the client's folder; its output, or a failure showing it."""
    done = subprocess.run(
        args,
        cwd=CLIENT,
        env=env if env is not None else _environment(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{' '.join(args)} exited {done.returncode}:\n{output}"
    return output


def _environment(**values: str) -> dict[str, str]:
    """This process's environment without the developer's GRAPHMEM_* settings, plus ``values``."""
    kept = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHMEM_")}
    return {**kept, **values}


@pytest.fixture(scope="module")
def npm() -> str:
    """npm, with the client's packages installed as package-lock.json pins them."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("the TypeScript client's tests need node and npm on PATH (node 20 or later)")
    version = subprocess.run([node, "--version"], capture_output=True, text=True, check=False)
    major = re.match(r"v(\d+)\.", version.stdout)
    if major is None or int(major.group(1)) < 20:
        pytest.skip(f"the TypeScript client needs node 20 or later, not {version.stdout.strip()}")
    installed = CLIENT / "node_modules" / ".package-lock.json"  # npm writes it on each install
    lock = CLIENT / "package-lock.json"
    if not installed.is_file() or installed.stat().st_mtime < lock.stat().st_mtime:
        _run([npm, "ci", "--no-audit", "--no-fund"], timeout=600)
    return npm


@pytest.fixture(scope="module")
def built(npm: str) -> str:
    """npm, after a strict ``tsc`` build of the client, its tests and its example into dist/."""
    _run([npm, "run", "build"])
    return npm


def _create_key(env: dict[str, str], *namespaces: str) -> str:
    args = [str(GRAPHMEM), "create-key", "--json"]
    for name in namespaces:
        args += ["--namespace", name]
    made = subprocess.run(args, env=env, capture_output=True, text=True, check=True, timeout=60)
    key: str = json.loads(made.stdout)["key"]
    return key


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """``graphmem serve`` on loopback (hash embedder, no chat model: what the node tests of
    reflect and autoClassify expect) with two live keys, so every request needs one; stopped
    at the end."""
    work = tmp_path_factory.mktemp("typescript-client")
    port = free_port()
    env = _environment(
        GRAPHMEM_EMBEDDER="hash", GRAPHMEM_DATA_DIR=str(work / "data"), GRAPHMEM_PORT=str(port)
    )
    env.pop("OPENAI_API_KEY", None)  # graphmem's chat model would otherwise use it
    key = _create_key(env, "t1", "t2")
    quickstart_key = _create_key(env, "quickstart")
    log = work / "serve.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [str(GRAPHMEM), "serve"], cwd=work, env=env, stdout=out, stderr=subprocess.STDOUT
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(url, server, log)
        yield Service(url, key, quickstart_key)
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_the_generated_types_are_the_schemas(npm: str) -> None:
    """src/generated/graphql.ts is what codegen makes from schema.graphql and the client's
    operations now (every operation valid against the schema): a schema change without
    ``npm run codegen`` fails here."""
    assert "up to date" in _run([npm, "run", "codegen:check"])


def test_the_sources_are_formatted(npm: str) -> None:
    """The client's sources are as prettier formats them (``npm run format``), as ruff format
    keeps the Python ones."""
    _run([npm, "run", "lint"])


def test_the_client_names_graphmems_version() -> None:
    """The version the client reports to a server of another version is the graphmem version
    its types were generated for: package.json, src/version.ts and graphmem agree."""
    package = json.loads((CLIENT / "package.json").read_text(encoding="utf-8"))
    source = (CLIENT / "src" / "version.ts").read_text(encoding="utf-8")
    stated = re.search(r"CLIENT_VERSION = '([^']+)'", source)
    assert stated is not None
    assert package["version"] == stated.group(1) == graphmem.__version__


def test_the_node_tests_pass_against_the_service(built: str, service: Service) -> None:
    """The node tests (clients/typescript/test): every verb against the real service with a
    key (upkeep included: pin, checkpoints, maintenance…), keys and namespaces (a wrong key, another namespace over HTTP and WebSocket), changes,
    and retries, timeouts and version mismatches against local stand-ins."""
    tests = sorted(str(p.relative_to(CLIENT)) for p in (CLIENT / "dist" / "test").glob("*.test.js"))
    assert tests, "the build made no tests"
    env = _environment(
        GRAPHMEM_URL=service.url, GRAPHMEM_API_KEY=service.key, GRAPHMEM_OTHER_NAMESPACE="t2"
    )
    output = _run(["node", "--test", "--test-reporter=spec", *tests], env=env)
    assert "set GRAPHMEM_" not in output, output  # none skipped for want of a setting


def test_the_quickstart_runs_as_documented(built: str, service: Service) -> None:
    """examples/quickstart.ts (quoted in docs/clients.md), with GRAPHMEM_URL and
    GRAPHMEM_API_KEY: stores two facts, finds the first, links them and walks the link."""
    env = _environment(GRAPHMEM_URL=service.url, GRAPHMEM_API_KEY=service.quickstart_key)
    output = _run(["node", "dist/examples/quickstart.js"], env=env)
    lines = output.splitlines()
    assert [line.split()[:2] for line in lines[:2]] == [["stored:", "ADD"], ["stored:", "ADD"]]
    home, work = (line.split()[2] for line in lines[:2])
    assert lines[2].startswith("search: Ana moved to Lisbon in 2019 (score "), output
    assert lines[3] == f"linked: {home} -[RELATED_TO]-> {work}"
    assert lines[4:] == [
        "  depth 0: Ana moved to Lisbon in 2019",
        "  depth 1: Ana works at a bakery in Alfama",
    ]
