"""GraphiQL's page as the service sends it at ``/graphql``: every file it names served here (no
CDN), with its type, its policy, and the versions the Makefile pins and NOTICE records. Its
behaviour in a browser, offline: test_graphiql_browser.py."""

from __future__ import annotations

import re
from pathlib import Path

from graphmem.server.http.explorer import IMMUTABLE, STATIC_DIR

from ..support.graphql_clients import InProcess

ROOT = Path(__file__).resolve().parents[2]
BROWSER = {"Accept": "text/html"}


def test_a_browser_at_graphql_gets_graphiql_with_every_file_from_the_service(
    service: InProcess,
) -> None:
    page = service.request("GET", "/graphql", headers=BROWSER)
    assert page.status_code == 200
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    assert "<title>graphmem GraphiQL</title>" in page.text
    assert not re.search(r"(https?:)?//[\w.-]+\.\w+/", page.text), "the page names a remote URL"
    assert '<base href="explore/">' in page.text  # its files are named relative to /explore/
    named = re.findall(r'(?:src|href)="([^"#:]+)"', page.text.replace('"explore/"', ""))
    types = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
    assert {Path(name).suffix for name in named} == set(types)
    for name in named:
        response = service.request("GET", f"/explore/{name}")
        assert response.status_code == 200, name
        assert response.headers["content-type"] == types[Path(name).suffix], name
        if name.startswith("vendor/"):
            assert response.headers["cache-control"] == IMMUTABLE, name
    again = service.request(
        "GET", "/graphql", headers={**BROWSER, "If-None-Match": page.headers["etag"]}
    )
    assert again.status_code == 304


def test_the_page_may_load_and_call_nothing_but_this_server(service: InProcess) -> None:
    policy = service.request("GET", "/graphql", headers=BROWSER).headers["content-security-policy"]
    directives = dict(d.strip().split(" ", 1) for d in policy.split(";"))
    assert directives["default-src"] == "'self'"
    assert directives["script-src"] == "'self'"  # no inline script, no eval
    assert directives["connect-src"] == "'self'"  # the API and its socket, here
    assert directives["font-src"] == "'self' data:"  # GraphiQL's fonts are in its stylesheet
    assert directives["frame-ancestors"] == "'none'"


def test_the_page_is_not_one_of_the_explorers_files(service: InProcess) -> None:
    assert service.request("GET", "/explore/graphiql.html").status_code == 404


def test_the_vendored_files_are_the_versions_the_makefile_pins_and_notice_records() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    pinned = dict(re.findall(r"^(REACT|GRAPHIQL|GRAPHIQL_EXPLORER)\s*:=\s*(\S+)$", makefile, re.M))
    react, graphiql, explorer = pinned["REACT"], pinned["GRAPHIQL"], pinned["GRAPHIQL_EXPLORER"]
    files = {
        f"react-{react}.production.min.js",
        f"react-dom-{react}.production.min.js",
        f"graphiql-{graphiql}.min.js",
        f"graphiql-{graphiql}.min.css",
        f"graphiql-plugin-explorer-{explorer}.umd.js",
        f"graphiql-plugin-explorer-{explorer}.css",
    }
    vendor = STATIC_DIR / "vendor"
    present = {p.name for p in vendor.glob("*") if p.name.startswith(("react", "graphiql"))}
    licences = {"react.LICENSE.txt", "react-dom.LICENSE.txt", "graphiql.LICENSE.txt"}
    assert present == files | licences  # no file of another version left behind
    page = (STATIC_DIR / "graphiql.html").read_text(encoding="utf-8")
    assert {name for name in files if f'"vendor/{name}"' in page} == files
    notice = (vendor / "NOTICE").read_text(encoding="utf-8")
    for package in (
        f"react@{react}",
        f"react-dom@{react}",
        f"graphiql@{graphiql}",
        f"@graphiql/plugin-explorer@{explorer}",
    ):
        recorded = re.search(
            rf"npm package {re.escape(package)}\n\(.*?\), npm integrity (sha512-\S+)", notice
        )
        assert recorded, f"NOTICE records no integrity for {package}"
    assert f'.version="{react}"' in (vendor / f"react-{react}.production.min.js").read_text()
