"""GraphQL over HTTP as its spec says: the media type negotiated from ``Accept`` and the status
that goes with it, queries over GET (mutations 405), every refusal a GraphQL error with its
code, no ``data`` on a request refused before it ran; and CORS, off unless origins are
configured."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from graphmem.server import create_app
from graphmem.server.http import sockets
from starlette.testclient import TestClient, WebSocketDenialResponse

from graphmem import KeyStore, Settings

from ..support.clock import Clock
from ..support.graphql_clients import STORE, WS, WS_URL, InProcess, bearer

GRAPHQL_RESPONSE = "application/graphql-response+json"
#: What a client of the spec's own media type sends (the spec's example).
PREFERS_GRAPHQL_RESPONSE = {"Accept": f"{GRAPHQL_RESPONSE}, application/json;q=0.9"}
#: Documents refused before they run: one that does not parse, one that does not validate,
#: variables that do not fit.
REQUEST_ERRORS = {
    "parse": ({"query": "{"}, "Syntax Error"),
    "validation": ({"query": "{ noSuchField }"}, "Cannot query field"),
    "variables": (
        {"query": "query($q: String!) { search(query: $q) { fact { id } } }", "variables": {}},
        "has invalid value",
    ),
}


def _post(service: InProcess, body: Any, **headers: str) -> Any:
    return service.request("POST", "/graphql", json=body, headers=headers)


@pytest.mark.parametrize(
    ("accept", "media_type"),
    [
        (None, "application/json"),
        ("*/*", "application/json"),
        ("application/json", "application/json"),
        (GRAPHQL_RESPONSE, GRAPHQL_RESPONSE),
        (PREFERS_GRAPHQL_RESPONSE["Accept"], GRAPHQL_RESPONSE),
        (f"{GRAPHQL_RESPONSE};q=0.5, application/json", "application/json"),
        (f"application/json;q=0, {GRAPHQL_RESPONSE};q=0.1", GRAPHQL_RESPONSE),
        ("application/*", "application/json"),
        ("text/csv", "application/json"),  # names neither: disregarded, as the spec allows
    ],
)
def test_an_answer_takes_the_media_type_its_accept_header_prefers(
    service: InProcess, accept: str | None, media_type: str
) -> None:
    headers = {} if accept is None else {"Accept": accept}
    for method, request in (
        ("POST", {"json": {"query": "{ namespace }"}}),
        ("GET", {"params": {"query": "{ namespace }"}}),
    ):
        answer = service.request(method, "/graphql", headers=headers, **request)
        assert answer.status_code == 200, (method, answer.text)
        assert answer.headers["content-type"] == media_type, method
        assert answer.headers["vary"] == "Accept"
        assert answer.json()["data"] == {"namespace": "default"}


@pytest.mark.parametrize("kind", REQUEST_ERRORS)
def test_a_request_error_has_no_data_and_is_400_in_graphql_response_json(
    service: InProcess, kind: str
) -> None:
    body, says = REQUEST_ERRORS[kind]
    for _ in range(2):  # the second time, a document the server has validated before
        answer = _post(service, body, **PREFERS_GRAPHQL_RESPONSE)
        assert answer.status_code == 400 and answer.headers["content-type"] == GRAPHQL_RESPONSE
        assert "data" not in answer.json()
        [error] = answer.json()["errors"]
        assert error["extensions"]["code"] == "INVALID_QUERY" and says in error["message"]


@pytest.mark.parametrize("kind", REQUEST_ERRORS)
def test_a_request_error_has_no_data_and_is_200_in_application_json(
    service: InProcess, kind: str
) -> None:
    body, says = REQUEST_ERRORS[kind]
    answer = _post(service, body, Accept="application/json")
    assert answer.status_code == 200 and answer.headers["content-type"] == "application/json"
    assert "data" not in answer.json() and says in answer.json()["errors"][0]["message"]


def test_an_operation_that_ran_keeps_its_data_and_200_even_when_it_failed(
    service: InProcess,
) -> None:
    answer = _post(
        service, {"query": '{ documentLines(path: "/nowhere.md") }'}, Accept=GRAPHQL_RESPONSE
    )
    assert answer.status_code == 200 and answer.headers["content-type"] == GRAPHQL_RESPONSE
    body = answer.json()
    assert "data" in body and body["data"] is None
    assert body["errors"][0]["extensions"]["code"] == "NOT_FOUND"


def test_a_cost_over_the_budget_is_refused_before_it_runs_without_data(
    settings: Settings, clock: Clock
) -> None:
    tight = settings.model_copy(update={"graphql_max_cost": 10})
    query = {"query": '{ search(query: "x", limit: 40) { fact { id } } }'}
    with InProcess(create_app(tight, clock=clock)) as service:
        for accept, status in (("application/json", 200), (GRAPHQL_RESPONSE, 400)):
            answer = _post(service, query, Accept=accept)
            assert answer.status_code == status and "data" not in answer.json()
            assert answer.json()["errors"][0]["extensions"]["code"] == "TOO_COSTLY"


def test_a_mutation_over_get_is_405_and_allows_post(service: InProcess) -> None:
    for accept in ("application/json", GRAPHQL_RESPONSE):
        answer = service.request(
            "GET",
            "/graphql",
            params={"query": STORE, "variables": '{"t": "Sent over GET"}'},
            headers={"Accept": accept},
        )
        assert answer.status_code == 405 and answer.headers["allow"] == "POST"
        assert answer.headers["content-type"] == accept
        assert answer.json()["errors"][0]["extensions"]["code"] == "INVALID_QUERY"
    assert service.data("{ stats { data } }")["stats"]["data"]["facts"] == 0


def test_queries_also_work_over_get(service: InProcess) -> None:
    response = service.request("GET", "/graphql", params={"query": "{ namespace }"})
    assert response.json()["data"] == {"namespace": "default"}


@pytest.mark.parametrize(
    ("method", "request_", "status"),
    [
        ("POST", {"content": b'{ "not JSON', "headers": {"content-type": "application/json"}}, 400),
        ("POST", {"json": {"notquery": "{ namespace }"}}, 400),
        ("POST", {"json": {"query": ["{ namespace }"]}}, 400),
        ("POST", {"json": [{"query": "{ namespace }"}]}, 400),  # no batches
        ("POST", {"content": b'{"query": "{ namespace }"}'}, 415),  # no content type
        ("POST", {"content": b"{ namespace }", "headers": {"content-type": "text/plain"}}, 415),
        ("GET", {"headers": {"Accept": "application/json"}}, 400),  # no query
        ("PUT", {"json": {"query": "{ namespace }"}}, 405),
        ("DELETE", {}, 405),
    ],
    ids=[
        "bad JSON",
        "no query",
        "query not a string",
        "batch",
        "no content type",
        "text/plain",
        "GET without a query",
        "PUT",
        "DELETE",
    ],
)
def test_a_malformed_request_is_refused_with_a_graphql_error_not_plain_text(
    service: InProcess, method: str, request_: dict[str, Any], status: int
) -> None:
    headers = {**request_.pop("headers", {}), "Accept": GRAPHQL_RESPONSE}
    answer = service.request(method, "/graphql", headers=headers, **request_)
    assert answer.status_code == status and answer.headers["content-type"] == GRAPHQL_RESPONSE
    [error] = answer.json()["errors"]
    assert error["extensions"]["code"] == "INVALID_QUERY" and error["message"]
    if status == 405:
        assert answer.headers["allow"] == "GET, POST"


def test_the_gates_refusals_are_graphql_errors_with_their_codes(
    settings: Settings, clock: Clock, keys: KeyStore
) -> None:
    token, _ = keys.create(["default"])
    small = settings.model_copy(update={"max_body_bytes": 1_000})
    with InProcess(create_app(small, clock=clock)) as service:
        refusals = {
            "UNAUTHENTICATED": _post(service, {"query": "{ namespace }"}, Accept=GRAPHQL_RESPONSE),
            "FORBIDDEN": _post(
                service,
                {"query": "{ namespace }"},
                Accept=GRAPHQL_RESPONSE,
                **bearer(token),
                **{"X-Graphmem-Namespace": "elsewhere"},
            ),
            "PAYLOAD_TOO_LARGE": _post(
                service, {"query": STORE, "variables": {"t": "x" * 2_000}}, Accept=GRAPHQL_RESPONSE
            ),
        }
        for code, answer in refusals.items():
            assert answer.headers["content-type"] == GRAPHQL_RESPONSE, code
            assert answer.json()["errors"][0]["extensions"]["code"] == code
            assert "data" not in answer.json()
        assert [a.status_code for a in refusals.values()] == [401, 403, 413]
        assert refusals["UNAUTHENTICATED"].headers["www-authenticate"].startswith("Bearer")
        legacy = _post(service, {"query": "{ namespace }"})
        assert legacy.status_code == 401 and legacy.headers["content-type"] == "application/json"


def test_a_rate_limited_request_is_429_with_retry_after_and_no_data(
    settings: Settings, clock: Clock, keys: KeyStore
) -> None:
    token, _ = keys.create(["default"])
    limited = settings.model_copy(update={"rate_limit_per_minute": 100, "graphql_max_cost": 100})
    query = {"query": '{ search(query: "x", limit: 40) { fact { id } } }'}  # 40 points
    with InProcess(create_app(limited, clock=clock)) as service:
        answers = [_post(service, query, Accept=GRAPHQL_RESPONSE, **bearer(token)) for _ in "abc"]
    assert [a.status_code for a in answers] == [200, 200, 429]
    refused = answers[2]
    assert refused.headers["content-type"] == GRAPHQL_RESPONSE and refused.headers["retry-after"]
    assert "data" not in refused.json()
    assert refused.json()["errors"][0]["extensions"]["code"] == "RATE_LIMITED"


@pytest.mark.parametrize(
    ("limit", "status", "code"),
    [
        ("MAX_UNACKNOWLEDGED_PER_ADDRESS", 429, "RATE_LIMITED"),
        ("MAX_UNACKNOWLEDGED_SOCKETS", 503, "UNAVAILABLE"),
    ],
)
def test_a_refused_websocket_upgrade_is_answered_with_a_graphql_error(
    settings: Settings,
    clock: Clock,
    monkeypatch: pytest.MonkeyPatch,
    limit: str,
    status: int,
    code: str,
) -> None:
    monkeypatch.setattr(sockets, limit, 0)
    with (
        TestClient(create_app(settings, clock=clock), base_url="http://127.0.0.1") as client,
        pytest.raises(WebSocketDenialResponse) as refused,
        client.websocket_connect(WS_URL, subprotocols=[WS]),
    ):
        pass
    answer = refused.value
    assert answer.status_code == status and answer.headers["content-type"] == "application/json"
    assert answer.json()["errors"][0]["extensions"]["code"] == code
    assert answer.headers["retry-after"] == "10"


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
