"""The relationship explorer: a page at ``/explore/`` for browsing memory as a graph; and
GraphiQL's page, which ``/graphql`` sends a browser (``resolvers.app``), from the same files.

The pages are static (``resolvers/static``: HTML, CSS, JavaScript and the vendored Cytoscape.js,
React and GraphiQL) and read and write memory only through ``/graphql``, like any other client.
They hold no data, so they load without a key; their API calls pass the same gate as everyone's.
The explorer asks for a key when it is answered 401 and keeps it in the tab's sessionStorage;
GraphiQL sends what its Headers tab holds.

Assets are read once, when the app is built. Every response names its content type explicitly
(not from the machine's mimetypes table), carries a strong ETag (a reload costs a 304) and
``no-cache``, except files whose names carry their version (the vendored libraries), which are
cached for a year. Each page's Content-Security-Policy lets it load and call nothing but this
server (GraphiQL's also allows the style elements its bundle adds as it renders).
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

EXPLORE_PATH: Final = "/explore"
#: Where the page and its assets live inside the package.
STATIC_DIR: Final = Path(__file__).parents[1] / "static"
#: Content types by file suffix; anything else is not served.
CONTENT_TYPES: Final = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".txt": "text/plain; charset=utf-8",
    "": "text/plain; charset=utf-8",  # NOTICE
}
#: A file whose name carries a version (``cytoscape-3.34.4.esm.min.mjs``) never changes.
VERSIONED: Final = re.compile(r"-\d+(\.\d+)+\.[^/]+$")
REVALIDATE: Final = "no-cache"
IMMUTABLE: Final = "public, max-age=31536000, immutable"
#: The one <style> element Cytoscape.js adds to the page; the policy allows it by its hash.
CYTOSCAPE_STYLE: Final = ".__________cytoscape_container { position: relative; }"
_CYTOSCAPE_STYLE_HASH: Final = base64.b64encode(hashlib.sha256(CYTOSCAPE_STYLE.encode()).digest())
CONTENT_SECURITY_POLICY: Final = (
    "default-src 'self'; script-src 'self'; "
    f"style-src 'self' 'sha256-{_CYTOSCAPE_STYLE_HASH.decode()}'; "
    "img-src 'self' data:; connect-src 'self'; base-uri 'self'; form-action 'self'; "
    "frame-ancestors 'none'"
)
#: GraphiQL's page, sent at ``/graphql`` rather than among the explorer's files (its files are
#: named relative to ``explore/``, beside it).
GRAPHIQL_PAGE: Final = "graphiql.html"
#: GraphiQL's stylesheet embeds its fonts as data: URLs, and its dialogs add a <style> element
#: whose text depends on the window (the scrollbar's width): both allowed on its page only.
GRAPHIQL_POLICY: Final = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "font-src 'self' data:; img-src 'self' data:; connect-src 'self'; base-uri 'self'; "
    "form-action 'self'; frame-ancestors 'none'"
)


@dataclass(frozen=True)
class Asset:
    """One file of the page, ready to send."""

    body: bytes
    content_type: str
    etag: str
    cache_control: str


def explorer_routes(static_dir: Path = STATIC_DIR) -> list[BaseRoute]:
    """The routes of the explorer: ``/explore`` (redirects to ``/explore/``), the page, and its
    assets at ``/explore/<path>``."""
    assets = load_assets(static_dir)
    assets.pop(GRAPHIQL_PAGE, None)

    async def to_page(request: Request) -> Response:
        # Relative, so the page still works behind a proxy that mounts the service on a prefix.
        return RedirectResponse("explore/", status_code=308)

    async def page(request: Request) -> Response:
        return _send(assets["index.html"], request)

    async def asset(request: Request) -> Response:
        found = assets.get(request.path_params["path"])
        if found is None:
            return PlainTextResponse("not found", status_code=404)
        return _send(found, request)

    return [
        Route(EXPLORE_PATH, to_page),
        Route(EXPLORE_PATH + "/", page),
        Route(EXPLORE_PATH + "/{path:path}", asset),
    ]


def graphiql_page(static_dir: Path = STATIC_DIR) -> Callable[[Request], Response]:
    """What answers a browser's ``GET /graphql``: GraphiQL, whose scripts and styles are this
    service's files under ``/explore/`` (not strawberry's page, which loads them from unpkg.com)."""
    page = _asset(static_dir / GRAPHIQL_PAGE, GRAPHIQL_PAGE)
    return lambda request: _send(page, request, policy=GRAPHIQL_POLICY)


def load_assets(static_dir: Path = STATIC_DIR) -> dict[str, Asset]:
    """Every servable file under ``static_dir``, by its path relative to it."""
    assets = {}
    for path in sorted(static_dir.rglob("*")):
        name = path.relative_to(static_dir).as_posix()
        if path.is_file() and path.suffix in CONTENT_TYPES and "/." not in "/" + name:
            assets[name] = _asset(path, name)
    return assets


def _asset(path: Path, name: str) -> Asset:
    body = path.read_bytes()
    return Asset(
        body=body,
        content_type=CONTENT_TYPES[path.suffix],
        etag='"' + hashlib.sha256(body).hexdigest()[:32] + '"',
        cache_control=IMMUTABLE if VERSIONED.search(name) else REVALIDATE,
    )


def _send(asset: Asset, request: Request, *, policy: str = CONTENT_SECURITY_POLICY) -> Response:
    headers = {
        "ETag": asset.etag,
        "Cache-Control": asset.cache_control,
        "X-Content-Type-Options": "nosniff",
    }
    if asset.content_type.startswith("text/html"):
        headers["Content-Security-Policy"] = policy
        headers["Referrer-Policy"] = "no-referrer"
    if asset.etag in _etags(request.headers.get("if-none-match", "")):
        return Response(status_code=304, headers=headers)
    return Response(asset.body, media_type=asset.content_type, headers=headers)


def _etags(header: str) -> set[str]:
    return {tag.strip().removeprefix("W/") for tag in header.split(",") if tag.strip()}
