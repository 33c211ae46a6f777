"""GraphQL over HTTP beyond POST: queries over GET (mutations refused), and CORS, off unless
origins are configured."""

from __future__ import annotations

from pathlib import Path

from graphmem import Settings
from resolvers import create_app

from .api import InProcess
from .conftest import Clock


def test_queries_also_work_over_get(service: InProcess) -> None:
    response = service.request("GET", "/graphql", params={"query": "{ namespace }"})
    assert response.json() == {"data": {"namespace": "default"}}
    mutation = service.request("GET", "/graphql", params={"query": "mutation { prune { dryRun } }"})
    assert 400 <= mutation.status_code < 500


def test_cors_is_off_unless_origins_are_configured(data_dir: Path, clock: Clock) -> None:
    preflight = {"Origin": "https://ui.example.com", "Access-Control-Request-Method": "POST"}
    for origins, allowed in (((), None), (("https://ui.example.com",), "https://ui.example.com")):
        settings = Settings(embedder="hash", data_dir=data_dir, cors_origins=origins)
        with InProcess(create_app(settings, clock=clock)) as client:
            response = client.request("OPTIONS", "/graphql", headers=preflight)
            assert response.headers.get("access-control-allow-origin") == allowed
