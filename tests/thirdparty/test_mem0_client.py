"""mem0's own ``MemoryClient`` (PyPI ``mem0ai``, in a virtualenv of its own) against a live
service's mem0 API: it adds, searches, lists, gets, updates, deletes, deletes all, reads
history and erases a user through graphmem, and meets graphmem's refusals as its own exceptions
(docs/clients.md#mem0). Its telemetry is off, so nothing leaves the machine."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from graphmem.server import create_app

from graphmem import KeyStore, Settings

from ..support.graphql_clients import LiveServer
from ..support.thirdparty import python_env

REQUIREMENT = "mem0ai==2.2.1"
DRIVER = Path(__file__).with_name("mem0_client_driver.py")


@pytest.fixture(scope="session")
def mem0_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return python_env(tmp_path_factory.getbasetemp() / "mem0", REQUIREMENT)


@pytest.fixture
def driven(mem0_python: Path, settings: Settings, keys: KeyStore, tmp_path: Path) -> Any:
    """What the driver's calls answered, against a service with a read-write and a read-only
    key of namespace ``default``."""
    token, _ = keys.create(["default"])
    reader, _ = keys.create(["default"], read_only=True)
    quiet = settings.model_copy(update={"mem0_api": True, "prune_interval": 0})
    home = tmp_path / "home"
    home.mkdir()
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(home),
        "MEM0_DIR": str(home / ".mem0"),
        "MEM0_TELEMETRY": "False",  # no event to mem0's analytics (PostHog)
    }
    with LiveServer(create_app(quiet)) as server:
        done = subprocess.run(
            [str(mem0_python), str(DRIVER), f"{server.base_url}/mem0", token, reader],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_mem0s_client_adds_searches_lists_updates_deletes_and_reads_history(
    driven: Any,
) -> None:
    assert driven["org_id"] == driven["project_id"] == "default"
    added = driven["add"]
    assert added["status"] == "SUCCEEDED"
    assert [(r["event"], r["memory"]) for r in added["results"]] == [
        ("ADD", "I moved to Austin last month."),
        ("ADD", "I love hiking on weekends."),
    ]
    assert [r["memory"] for r in driven["add_whole"]["results"]] == ["Bob prefers green tea."]
    [hit] = driven["search"]["results"]
    assert hit["memory"] == "I moved to Austin last month." and hit["user_id"] == "alice"
    listed = driven["get_all"]
    assert listed["count"] == 2 and {m["metadata"]["topic"] for m in listed["results"]} == {"life"}
    assert [m["memory"] for m in driven["page"]["results"]] == ["I love hiking on weekends."]
    memory_id = added["results"][0]["id"]
    assert driven["get"]["id"] == memory_id
    assert driven["update"]["id"] == memory_id
    assert driven["after_update"]["memory"] == "I moved to Dallas last month."
    assert driven["get_deleted"] == "MemoryNotFoundError"
    assert [(e["event"], e["new_memory"]) for e in driven["history"]] == [
        ("ADD", "I moved to Austin last month."),
        ("UPDATE", "I moved to Dallas last month."),
        ("DELETE", None),
    ]
    assert driven["alice_after"]["results"] == []
    assert [m["memory"] for m in driven["bob_after"]["results"]] == ["Bob prefers green tea."]
    assert driven["delete_users"] == {"message": "Entity deleted successfully."}
    assert driven["bob_erased"]["results"] == []


def test_mem0s_client_raises_its_own_exceptions_for_graphmems_refusals(driven: Any) -> None:
    assert driven["or_filter"] == "ValidationError"
    assert driven["unsupported"] == "MemoryError"
    assert driven["wrong_key"] == "ValueError"  # mem0's client checks its key as it starts
    assert driven["read_only_add"] == "AuthenticationError"
    assert [m["memory"] for m in driven["read_only_get_all"]["results"]] == [
        "Bob prefers green tea."
    ]
