"""LangGraph's own store tests against ``GraphmemStore``: the test files of the
langgraph-checkpoint and langgraph-checkpoint-sqlite source distributions, downloaded from PyPI
for the session and run unmodified by a pytest of their own (in the unpacked folder, with its
pyproject's settings) with ``langgraph_store_plugin`` loaded, which swaps the stores they build
for ``GraphmemStore``s — over a ``Memory`` in process, or a ``Client`` of a live service (on the
store ``--store`` names). Every test passes but the ``DESELECTED`` ones, each for its reason
(docs/compatibility.md, "LangGraph's store tests")."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Final

import pytest
from graphmem.server.http.app import create_app

from graphmem import Client, Settings

from ..support.graphql_clients import LiveServer
from ..support.thirdparty import python_packages, sdist

pytest.importorskip("langgraph", reason="the langgraph extra is not installed")

#: The suites: a source distribution, and its test files run against GraphmemStore.
SUITES: Final = {
    "langgraph-checkpoint==4.3.2": ("tests/test_store.py",),
    "langgraph-checkpoint-sqlite==3.1.2": ("tests/test_store.py", "tests/test_async_store.py"),
}
#: What the suites import beyond graphmem's langgraph extra (exact pins, no dependencies: the
#: rest is this environment's), put on their PYTHONPATH.
TEST_PACKAGES: Final = (
    "pytest-asyncio==1.5.0",
    "pytest-mock==3.17.0",
    "langgraph-checkpoint-sqlite==3.1.2",  # the SQLite tests import its module
    "aiosqlite==0.22.1",
    "sqlite-vec==0.1.9",
)
#: Why a test is left out.
SCORES: Final = (
    "asserts score values of cosine similarity between the test's own embeddings: graphmem "
    "embeds with its own embedder, an item's indexed fields as one text, and scores by its "
    "hybrid ranking (relative, the best near 1)"
)
SQLITE: Final = "reads SqliteStore's own SQL: its tables, migrations or connection"
#: The tests left out, by suite, each with its reason (docs/compatibility.md lists them too).
DESELECTED: Final[dict[str, dict[str, str]]] = {
    "langgraph-checkpoint==4.3.2": {"tests/test_store.py::test_embed_with_path": SCORES},
    "langgraph-checkpoint-sqlite==3.1.2": {
        "tests/test_store.py::test_embed_with_path[cosine]": SCORES,
        "tests/test_store.py::test_embed_with_path_operation_config[cosine]": SCORES,
        "tests/test_store.py::test_scores": SCORES,
        "tests/test_async_store.py::test_embed_with_path": SCORES,
        "tests/test_store.py::test_vector_store_initialization": SQLITE,
        "tests/test_store.py::test_nonnull_migrations": SQLITE,
        "tests/test_store.py::test_sql_injection_vulnerability": (
            "expects SqliteStore's refusal of filter keys its SQL cannot quote: GraphmemStore "
            "filters in Python, where any text is a key"
        ),
        "tests/test_store.py::test_namespace_labels_with_trailing_newline": (
            "puts a namespace ending in a newline: graphmem keeps no outer whitespace of an "
            "entity, so GraphmemStore refuses it (InvalidNamespaceError) rather than merge it "
            "with the namespace without"
        ),
        "tests/test_async_store.py::test_no_running_loop": (
            "expects AsyncSqliteStore's sync methods to refuse on the event loop's thread: "
            "GraphmemStore's sync and async methods both work on any thread"
        ),
    },
}
#: The SQLite suites run most of their tests twice, on ":memory:" and on a file; GraphmemStore
#: does not use the connection string, so the ``[file]`` forms (59) are the same tests again and
#: are left out (``-k``: no test's own name holds "file"), for time.
SELECTED: Final = {"langgraph-checkpoint-sqlite==3.1.2": ("-k", "not file")}
#: What each suite's run ends with: (passed, deselected), so that a test renamed or dropped by
#: the sdist, which --deselect would pass over silently, shows.
OUTCOME: Final = {
    "langgraph-checkpoint==4.3.2": (116, 1),
    "langgraph-checkpoint-sqlite==3.1.2": (70, 72),  # 59 [file] forms, 13 listed
}
#: The counts of a pytest summary line (its warnings left aside).
OUTCOMES: Final = r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected)\b"
#: How long one suite may take.
TIMEOUT_S: Final = 600


@pytest.fixture(scope="session")
def pythonpath(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The suites' extra packages, and this folder (the plugin), for their PYTHONPATH."""
    extra = python_packages(tmp_path_factory.mktemp("langgraph-packages"), *TEST_PACKAGES)
    return os.pathsep.join([str(extra), str(Path(__file__).parent)])


def run_suite(
    requirement: str, folder: Path, pythonpath: str, env: dict[str, str], basetemp: Path
) -> subprocess.CompletedProcess[str]:
    """pytest over the suite's test files in ``folder``, with the plugin; its outcome."""
    deselect = [f"--deselect={test}" for test in DESELECTED[requirement]]
    command = [sys.executable, "-m", "pytest", "-p", "langgraph_store_plugin", "-p",
               "no:cacheprovider", "-q", "--no-header", "-rfE", f"--basetemp={basetemp}",
               *SUITES[requirement], *SELECTED.get(requirement, ()), *deselect]  # fmt: skip
    return subprocess.run(
        command,
        cwd=folder,
        env={**env, "PYTHONPATH": pythonpath},
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )


@pytest.mark.parametrize("api", ["memory", "client"])
@pytest.mark.parametrize("requirement", list(SUITES))
def test_langgraph_store_tests_pass_against_graphmem(
    requirement: str,
    api: str,
    pythonpath: str,
    settings: Settings,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    folder = sdist(tmp_path_factory.getbasetemp() / requirement.replace("==", "-"), requirement)
    env = dict(os.environ)
    if api == "memory":
        done = run_suite(requirement, folder, pythonpath, env, tmp_path / "runs")
    else:
        quiet = settings.model_copy(update={"prune_interval": 0, "classify_interval": 0})
        with LiveServer(create_app(quiet)) as server, Client(server.base_url) as client:
            assert client.stats() is not None  # the service answers
            env["GRAPHMEM_LANGGRAPH_URL"] = server.base_url
            done = run_suite(requirement, folder, pythonpath, env, tmp_path / "runs")
    summary = "\n".join(done.stdout.strip().splitlines()[-40:])
    assert done.returncode == 0, f"{requirement} ({api}): {summary}\n{done.stderr[-2000:]}"
    last = summary.splitlines()[-1]
    counts = {word: int(n) for n, word in re.findall(OUTCOMES, last)}
    passed, deselected = OUTCOME[requirement]
    assert counts == {"passed": passed, "deselected": deselected}, last
