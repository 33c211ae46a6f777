"""The explorer's page as the server sends it: no key needed for the page (the API still needs
one), content types, caching, everything shipped in the package (no CDN), the vendored graph
library, and ``canWrite``. Its behaviour in a browser: test_explorer_browser.py."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from graphmem.server.http.explorer import GRAPHIQL_PAGE, STATIC_DIR

from graphmem.storage.sqlite.keys import KeyFile

from ..support.graphql_clients import InProcess

ROOT = Path(__file__).resolve().parents[2]


def test_the_page_loads_without_a_key_while_its_api_calls_need_one(
    service: InProcess, data_dir: Path
) -> None:
    KeyFile(data_dir).create(["default"])
    moved = service.request("GET", "/explore", follow_redirects=False)
    assert moved.status_code == 308 and moved.headers["location"] == "explore/"
    page = service.request("GET", "/explore/")
    assert page.status_code == 200
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    assert "<title>graphmem explorer</title>" in page.text
    assert service.post("{ namespace }")[0] == 401


def test_assets_are_sent_with_their_type_and_revalidated_by_etag(service: InProcess) -> None:
    expected = {
        "/explore/": "text/html; charset=utf-8",
        "/explore/explorer.js": "text/javascript; charset=utf-8",
        "/explore/explorer.css": "text/css; charset=utf-8",
        "/explore/vendor/cytoscape.LICENSE.txt": "text/plain; charset=utf-8",
    }
    for path, content_type in expected.items():
        response = service.request("GET", path)
        assert response.status_code == 200, path
        assert response.headers["content-type"] == content_type, path
        assert response.headers["cache-control"] == "no-cache", path
        assert response.headers["x-content-type-options"] == "nosniff", path
        again = service.request("GET", path, headers={"If-None-Match": response.headers["etag"]})
        assert again.status_code == 304 and again.content == b"", path
    page = service.request("GET", "/explore/")
    policy = page.headers["content-security-policy"]
    assert "default-src 'self'" in policy and "connect-src 'self'" in policy
    for missing in (
        "/explore/nothing.js",
        "/explore/../resolvers/http/app.py",
        "/explore/%2e%2e/app.py",
    ):
        assert service.request("GET", missing).status_code == 404, missing


def test_the_vendored_library_is_cached_for_good_as_its_name_carries_its_version(
    service: InProcess,
) -> None:
    version = re.search(r"^CYTOSCAPE\s*:=\s*(\S+)$", (ROOT / "Makefile").read_text(), re.M)
    assert version, "the Makefile pins the Cytoscape.js version"
    name = f"vendor/cytoscape-{version[1]}.esm.min.mjs"
    assert [p.name for p in (STATIC_DIR / "vendor").glob("cytoscape-*")] == [Path(name).name]
    assert f'from "./{name}"' in (STATIC_DIR / "graph.js").read_text(encoding="utf-8")
    assert f"cytoscape@{version[1]}" in (STATIC_DIR / "vendor" / "NOTICE").read_text()
    response = service.request("GET", f"/explore/{name}")
    assert response.headers["content-type"] == "text/javascript; charset=utf-8"
    assert response.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert f'.version="{version[1]}"' in response.text


def test_the_page_loads_nothing_from_elsewhere(service: InProcess) -> None:
    """Offline use: every script, stylesheet and module the page names is served here."""
    own = [p for p in STATIC_DIR.glob("*") if p.suffix in (".html", ".js", ".css")]
    own.remove(STATIC_DIR / GRAPHIQL_PAGE)  # served at /graphql: test_graphiql.py
    assert {p.name for p in own} >= {"index.html", "explorer.js", "api.js", "graph.js"}
    for path in own:
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"(https?:)?//[\w.-]+\.\w+/", text), f"{path.name} names a remote URL"
        named = re.findall(r'(?:src|href)="([^"#:]+)"', text) + re.findall(
            r'from "\./([^"]+)"', text
        )
        for reference in named:
            if reference.startswith("../"):
                continue  # the API and GraphiQL, beside the page
            assert service.request("GET", f"/explore/{reference}").status_code == 200, reference


def test_every_file_of_the_page_is_package_data() -> None:
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"
    ]["graphmem.server"]
    package = STATIC_DIR.parent
    shipped = {p for pattern in patterns for p in package.glob(pattern) if p.is_file()}
    assert {p for p in STATIC_DIR.rglob("*") if p.is_file()} == shipped


def test_can_write_tells_a_ui_whether_to_offer_writes(service: InProcess, data_dir: Path) -> None:
    assert service.data("{ canWrite }") == {"canWrite": True}  # loopback, no keys
    keys = KeyFile(data_dir)
    writer, _ = keys.create(["default"])
    reader, _ = keys.create(["default"], read_only=True)
    assert service.data("{ canWrite }", Authorization=f"Bearer {writer}") == {"canWrite": True}
    assert service.data("{ canWrite }", Authorization=f"Bearer {reader}") == {"canWrite": False}


def test_explorer_requests_are_counted_under_their_own_route(service: InProcess) -> None:
    service.request("GET", "/explore/explorer.js")
    metrics = service.request("GET", "/metrics").text
    assert 'graphmem_http_requests_total{method="GET",route="/explore",status="200"} 1.0' in metrics


def test_the_explorer_is_documented_with_a_screenshot() -> None:
    text = (ROOT / "docs" / "explorer.md").read_text(encoding="utf-8")
    assert "](explorer.png)" in text and "make vendor" in text
    assert (ROOT / "docs" / "explorer.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "docs/explorer.md" in (ROOT / "README.md").read_text(encoding="utf-8")
