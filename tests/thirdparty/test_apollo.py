"""Apollo Client's InMemoryCache, installed from npm, against a live service: a fact's view at a
past ``knownAt`` stays as it was when today's versions of the same fact are read, with the
``typePolicies`` docs/graphql.md#caching gives; with Apollo's default (a Fact normalised by its
``id``) it is overwritten, which shows the check can fail (docs/compatibility.md)."""

from __future__ import annotations

import json
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from graphmem.server import create_app

from graphmem import Settings

from ..support.clock import Clock
from ..support.graphql_clients import LiveServer
from ..support.thirdparty import npm_project

PACKAGES = ("@apollo/client@4.3.8", "graphql@16.15.0", "rxjs@7.8.2")
SCRIPT = Path(__file__).with_name("apollo_cache.mjs")
STORE = """mutation($text: String!, $city: String!) {
  storeFact(input: {text: $text, entity: "ana", key: "city", value: $city}) { action fact { id } }
}"""


@pytest.fixture(scope="session")
def apollo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An npm project with Apollo Client and the script that drives it."""
    folder = npm_project(tmp_path_factory.getbasetemp() / "apollo", *PACKAGES)
    shutil.copy(SCRIPT, folder / SCRIPT.name)  # ESM resolves packages from the script's folder
    return folder


@pytest.fixture
def moved(settings: Settings, clock: Clock) -> Any:
    """A live service where Ana lived in Porto until, an hour later, memory learnt she moved to
    Lisbon: the service, the Porto fact's id and an instant in between."""
    quiet = settings.model_copy(update={"prune_interval": 0, "classify_interval": 0})
    with LiveServer(create_app(quiet, clock=clock)) as server:
        porto = server.data(STORE, {"text": "Ana lives in Porto", "city": "Porto"})
        clock.advance(1800)
        between = datetime.fromtimestamp(clock.now, UTC).isoformat()
        clock.advance(1800)
        lisbon = server.data(STORE, {"text": "Ana lives in Lisbon", "city": "Lisbon"})
        assert lisbon["storeFact"]["action"] == "UPDATE"
        yield server, porto["storeFact"]["fact"]["id"], between


def _run(apollo: Path, moved: Any, keyed_by: str) -> dict[str, Any]:
    server, porto, between = moved
    done = subprocess.run(
        ["node", SCRIPT.name, f"{server.base_url}/graphql", porto, between, keyed_by],
        cwd=apollo,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    answer: dict[str, Any] = json.loads(done.stdout)
    today = next(f for f in answer["now"] if f["id"] == porto)
    assert today["validUntil"] is not None and today["supersededById"] is not None
    assert answer["before"]["validUntil"] is None and answer["before"]["supersededById"] is None
    return answer


def test_a_view_at_a_past_known_at_keeps_its_values_in_a_cache_keyed_by_view_id(
    apollo: Path, moved: Any
) -> None:
    answer = _run(apollo, moved, "viewId")
    assert answer["after"] == answer["before"]
    assert len(answer["cached"]) == 3  # Porto then, Porto now, Lisbon now


def test_a_cache_keyed_by_id_overwrites_that_view_with_todays_values(
    apollo: Path, moved: Any
) -> None:
    answer = _run(apollo, moved, "id")
    assert answer["after"]["supersededById"] == answer["now"][1]["id"]
    assert answer["after"]["validUntil"] is not None
    assert len(answer["cached"]) == 2  # one entry per id
