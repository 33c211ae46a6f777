"""GraphQL over HTTP beyond POST: queries over GET (mutations refused), and CORS, off unless
origins are configured."""

from __future__ import annotations

from pathlib import Path

from graphmem import KeyStore, Settings
from resolvers import create_app

from ..support.clock import Clock
from ..support.graphql_clients import InProcess


def test_queries_also_work_over_get(service: InProcess) -> None:
    response = service.request("GET", "/graphql", params={"query": "{ namespace }"})
    assert response.json()["data"] == {"namespace": "default"}
    mutation = service.request("GET", "/graphql", params={"query": "mutation { prune { dryRun } }"})
    assert 400 <= mutation.status_code < 500


def test_cors_is_off_unless_origins_are_configured(data_dir: Path, clock: Clock) -> None:
    preflight = {"Origin": "https://ui.example.com", "Access-Control-Request-Method": "POST"}
    for origins, allowed in (((), None), (("https://ui.example.com",), "https://ui.example.com")):
        settings = Settings(embedder="hash", data_dir=data_dir, cors_origins=origins)
        with InProcess(create_app(settings, clock=clock)) as client:
            response = client.request("OPTIONS", "/graphql", headers=preflight)
            assert response.headers.get("access-control-allow-origin") == allowed


def test_a_get_that_accepts_html_gets_graphiql_and_never_runs_its_query(
    service: InProcess, keys: KeyStore
) -> None:
    keys.create(["default"])
    page = service.request(
        "GET",
        "/graphql",
        params={"query": "{ canWrite __schema { queryType { name } } }"},
        headers={"Accept": "text/html"},
    )
    assert page.status_code == 200 and "graphiql" in page.text.lower()
    assert "canWrite" not in page.text and "queryType" not in page.text
    data = service.request("GET", "/graphql", params={"query": "{ canWrite }"})
    assert data.status_code == 401


def test_a_get_with_deeply_nested_variables_is_refused_not_a_500(service: InProcess) -> None:
    deep = "[" * 3000 + "]" * 3000
    for accept in ("application/json", "text/html"):
        response = service.request(
            "GET",
            "/graphql",
            params={"query": "query($v: JSON) { namespace }", "variables": f'{{"v": {deep}}}'},
            headers={"Accept": accept},
        )
        assert response.status_code in (200, 400), (accept, response.status_code)
        if accept == "application/json":
            assert response.status_code == 400
            assert response.json()["errors"][0]["extensions"]["code"] == "INVALID_QUERY"
