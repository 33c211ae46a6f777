"""Every page of the service in headless Chromium with no host but this machine resolvable (as
offline): no page asks for anything from elsewhere, and GraphiQL, at ``/graphql``, renders from
the service's own files, runs a query, a subscription over graphql-transport-ws, and presents an
API key from its Headers tab. Skipped when Chromium or its driver is missing, as
test_explorer_browser.py is (whose browser this reuses).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import pytest
from graphmem.server import create_app
from graphmem.server.http.explorer import EXPLORE_PATH, load_assets
from starlette.applications import Starlette
from starlette.routing import BaseRoute, Mount, Route

from graphmem import Settings
from graphmem.storage.sqlite.keys import KeyFile

from ..support.graphql_clients import LiveServer, bearer
from .test_explorer_browser import require_chromium, start_browser

WAIT = 15  # seconds for a page to answer an action
#: Every host name resolves to nothing but this machine's, so a page that needs a file from
#: elsewhere fails as it would offline (and its request is still seen, and reported).
OFFLINE = "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost"
LOCAL_HOSTS = {"127.0.0.1", "localhost"}
#: Addresses that carry their content in themselves (GraphiQL's fonts are data: URLs).
INLINE_SCHEMES = {"data", "blob", "about"}

pytestmark = [pytest.mark.browser, pytest.mark.integration]


@dataclass
class Browser:
    """The live service, its data directory, and Chromium, offline, logging its requests."""

    server: LiveServer
    app: Starlette
    data_dir: Path
    driver: Any

    def wait(self, condition: Callable[[Any], object], message: str) -> Any:
        from selenium.webdriver.support.ui import WebDriverWait

        return WebDriverWait(self.driver, WAIT, poll_frequency=0.05).until(condition, message)

    def requested(self) -> list[str]:
        """The addresses the browser asked for (files, API calls, sockets) since last asked."""
        urls = []
        for entry in self.driver.get_log("performance"):
            event = json.loads(entry["message"])["message"]
            if event["method"] == "Network.requestWillBeSent":
                urls.append(event["params"]["request"]["url"])
            elif event["method"] == "Network.webSocketCreated":
                urls.append(event["params"]["url"])
        return urls

    def errors(self) -> list[str]:
        """What the pages logged as errors since last asked (a file that failed to load or was
        blocked by the page's policy, a script that failed), each cut short; not the API's
        401s, which a test without a key expects."""
        return [
            entry["message"][:300]
            for entry in self.driver.get_log("browser")
            if entry["level"] == "SEVERE" and "status of 401" not in entry["message"]
        ]


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    paths = require_chromium()
    data_dir = tmp_path_factory.mktemp("graphiql") / "data"
    app = create_app(Settings(embedder="hash", data_dir=data_dir))
    driver = start_browser(paths, OFFLINE, network_log=True)
    try:
        with LiveServer(app) as server:
            yield Browser(server, app, data_dir, driver)
    finally:
        driver.quit()


@pytest.fixture
def graphiql(browser: Browser) -> Iterator[GraphiQL]:
    """GraphiQL's page for one test; it leaves no headers behind, and the page logs no errors."""
    browser.driver.get("about:blank")
    browser.errors()
    yield GraphiQL(browser)
    browser.driver.execute_script("localStorage.clear()")  # the Headers tab is kept there
    assert browser.errors() == [], "GraphiQL logged errors"


class GraphiQL:
    """GraphiQL at /graphql, driven through its editors (CodeMirror instances) and buttons."""

    def __init__(self, browser: Browser) -> None:
        self.browser = browser

    def open(self, headers: dict[str, str] | None = None) -> None:
        """Open the page (with ``headers`` in its Headers tab) and wait until it has rendered."""
        query = f"?headers={quote(json.dumps(headers))}" if headers else ""
        self.browser.driver.get(f"{self.browser.server.base_url}/graphql{query}")
        self.browser.wait(
            lambda d: d.execute_script("return !!document.querySelector(arguments[0])", _QUERY),
            "GraphiQL never rendered its editor",
        )

    def run(self, document: str) -> None:
        """Put ``document`` in the query editor and run it, once GraphiQL has parsed it (it
        does, 100 ms after an edit, and then keeps it in the page's URL): only then does it
        know a subscription for one, and send it over its socket."""
        driver = self.browser.driver
        driver.execute_script(
            "document.querySelector(arguments[0]).CodeMirror.setValue(arguments[1])",
            _QUERY,
            document,
        )
        self.browser.wait(
            lambda d: d.execute_script(
                "return new URLSearchParams(location.search).get('q') === arguments[0]", document
            ),
            "GraphiQL never took in the edit",
        )
        driver.find_element("css selector", ".graphiql-execute-button").click()

    def result(self, containing: str) -> Any:
        """The result pane's JSON once its text contains ``containing``."""

        def shown(driver: Any) -> str | None:
            text = driver.execute_script(
                "const e = document.querySelector(arguments[0]);"
                "return e ? e.CodeMirror.getValue() : '';",
                ".result-window .CodeMirror",
            )
            return text if containing in text else None

        return json.loads(self.browser.wait(shown, f"the result never showed {containing!r}"))

    def subscribed(self) -> None:
        """Wait until the run button has become the stop button: a subscription is live."""
        self.browser.wait(
            lambda d: d.execute_script(
                "return document.querySelector(arguments[0]).ariaLabel.startsWith('Stop')",
                ".graphiql-execute-button",
            ),
            "the subscription never started",
        )


_QUERY = ".graphiql-query-editor .CodeMirror"


def test_no_page_of_the_service_asks_for_anything_from_another_machine(browser: Browser) -> None:
    from selenium.common.exceptions import TimeoutException

    pages = html_pages(browser)
    assert {"/graphql", "/explore/"} <= set(pages), pages
    browser.requested()
    elsewhere, unfinished = {}, []
    for path in pages:
        browser.driver.get(browser.server.base_url + path)
        try:
            browser.wait(_settled, f"{path} never finished loading")
        except TimeoutException:
            unfinished.append(path)
        remote = [url for url in browser.requested() if not _local(url)]
        if remote:
            elsewhere[path] = remote
    assert elsewhere == {}, "pages asked for files from other machines"
    assert unfinished == [], "pages never finished loading"


def test_graphiql_renders_from_the_service_and_runs_a_query(graphiql: GraphiQL) -> None:
    graphiql.open()
    graphiql.run("{ namespace canWrite }")
    assert graphiql.result('"namespace"')["data"] == {"namespace": "default", "canWrite": True}


def test_a_subscription_in_graphiql_receives_a_change_over_its_socket(graphiql: GraphiQL) -> None:
    server = graphiql.browser.server
    graphiql.open()
    graphiql.run("subscription { memoryChanged { kind fact { text } } }")
    graphiql.subscribed()
    stored = 'mutation { storeFact(input: {text: "The tram leaves at 8"}) { fact { id } } }'
    assert server.post(stored)[0] == 200
    change = graphiql.result("The tram leaves at 8")["data"]["memoryChanged"]
    assert change == {"kind": "FACT_STORED", "fact": {"text": "The tram leaves at 8"}}


def test_graphiql_presents_the_key_in_its_headers_to_queries_and_subscriptions(
    graphiql: GraphiQL,
) -> None:
    keys = KeyFile(graphiql.browser.data_dir)
    token, key = keys.create(["default"], read_only=True, label="GraphiQL test")
    writer, writer_key = keys.create(["default"], label="GraphiQL test writer")
    try:
        graphiql.open()
        graphiql.run("{ canWrite }")
        refused = graphiql.result("UNAUTHENTICATED")["errors"]
        assert [error["extensions"]["code"] for error in refused] == ["UNAUTHENTICATED"]
        graphiql.open(headers={"Authorization": f"Bearer {token}"})
        graphiql.run("{ canWrite }")
        assert graphiql.result('"canWrite"')["data"] == {"canWrite": False}
        graphiql.run("subscription { memoryChanged { kind fact { text } } }")
        graphiql.subscribed()
        stored = 'mutation { storeFact(input: {text: "The ferry leaves at 9"}) { fact { id } } }'
        assert graphiql.browser.server.post(stored, headers=bearer(writer))[0] == 200
        assert graphiql.result("The ferry leaves at 9")["data"]["memoryChanged"]["fact"] == {
            "text": "The ferry leaves at 9"
        }
    finally:
        keys.revoke(key.id)
        keys.revoke(writer_key.id)


def html_pages(browser: Browser) -> list[str]:
    """Every address of the service that answers a browser with a page: each route without
    parameters that answers ``Accept: text/html`` with HTML (where it redirects, the page it
    leads to), and each HTML file among the explorer's."""
    candidates = list(_paths(browser.app.routes))
    candidates += [f"{EXPLORE_PATH}/{name}" for name in load_assets() if name.endswith(".html")]
    pages = []
    for path in candidates:
        answer = browser.server.request("GET", path, headers={"Accept": "text/html"})
        if answer.headers.get("content-type", "").startswith("text/html"):
            pages.append(answer.url.path)
    return list(dict.fromkeys(pages))


def _paths(routes: list[BaseRoute], prefix: str = "") -> Iterator[str]:
    """The paths of the routes that take no parameters and may answer a GET."""
    for route in routes:
        if isinstance(route, Mount):
            yield from _paths(route.routes, prefix + route.path)
        elif (
            isinstance(route, Route)
            and "{" not in route.path
            and "GET" in (route.methods or {"GET"})
        ):
            yield prefix + route.path


def _settled(driver: Any) -> bool:
    """Whether the page has loaded and done what it does first: GraphiQL has drawn its editor,
    the explorer has read its namespace from the API."""
    return bool(
        driver.execute_script(
            """if (document.readyState !== "complete") return false;
            if (document.getElementById("graphiql")) return !!document.querySelector(arguments[0]);
            const namespace = document.getElementById("namespace");
            return !namespace || namespace.textContent !== "…";""",
            _QUERY,
        )
    )


def _local(url: str) -> bool:
    parts = urlsplit(url)
    return parts.scheme in INLINE_SCHEMES or parts.hostname in LOCAL_HOSTS
