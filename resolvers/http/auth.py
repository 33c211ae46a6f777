"""Who may reach ``/graphql`` and ``/mcp``, and in which namespace: the gate and the middleware
that applies it.

Requests to ``/graphql`` and ``/mcp`` pass ``AuthMiddleware`` first: the body size limit (413), then the
API key. A server bound beyond loopback needs ``Authorization: Bearer <key>`` with a live key on
every request, for its whole life (401 otherwise, also once its last key is revoked; 503 when
the key store cannot be read). On loopback, requests without a key are let in while no key is
live; once one is, each request needs one. The namespace is the key's first one, or another of
the key's named by the ``X-Graphmem-Namespace`` header (403 for one the key does not hold);
without keys the header may name any namespace. Neither queries nor tool arguments can name a namespace, so none can escape
it. WebSocket clients, which cannot set headers in a browser, may instead send
``{"Authorization": "Bearer <key>"}`` as the connection_init payload. A server bound to loopback
refuses, on every route, requests whose Host or Origin names another site (``LoopbackOnly``).
"""

from __future__ import annotations

import functools
import json
import logging
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

import anyio.to_thread
from anyio import CapacityLimiter
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from graphmem import ApiKey, GraphmemError, InvalidInput, KeyStore, Memory
from graphmem.errors import Code
from graphmem.settings import is_loopback

from ..namespaces import Namespaces
from .answers import JSON, negotiate, refusal

NAMESPACE_HEADER: Final = "x-graphmem-namespace"
#: Brackets a request's JSON may open before it is parsed once here to make sure it is not
#: nested deeper than Python's parser can go (about 1,000 levels).
MAX_JSON_NESTING: Final = 500
GRAPHQL_PATH: Final = "/graphql"
MCP_PATH: Final = "/mcp"
#: Where the gate leaves what it admitted, in the ASGI scope: (Memory, ApiKey | None).
ADMITTED: Final = "graphmem.admitted"
#: JSON-RPC's "Invalid Request" error code, for refusals at /mcp.
INVALID_REQUEST: Final = -32600
_GUARDED: Final = (GRAPHQL_PATH, MCP_PATH)
#: Threads the gate's checks may use at once.
GATE_THREADS: Final = 8
T = TypeVar("T")
_log = logging.getLogger("graphmem.server")
#: What a caller hears when the keys cannot be checked: the reason (a path, a database error)
#: is for the operator's log, not for callers who are not authenticated yet.
KEYS_UNAVAILABLE: Final = "cannot check API keys (the details are in the server's log)"


class Denied(Exception):
    """A request the gate turns away: HTTP ``status``, a code and a message."""

    def __init__(
        self, status: int, code: str, message: str, *, bearer_error: str | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        #: RFC 6750's error code for the 401's challenge: ``invalid_token`` for a key that was
        #: presented and refused; None when none was (the RFC asks for no error then).
        self.bearer_error = bearer_error

    def response(self, *, jsonrpc: bool = False, media_type: str = JSON) -> Response:
        """The refusal as GraphQL errors in ``media_type`` (``answers.refusal``), or as a
        JSON-RPC error (what MCP clients read and show; its id is null, as the request was
        never read)."""
        headers = {"WWW-Authenticate": self._challenge()} if self.status == 401 else None
        if not jsonrpc:
            return refusal(
                self.status, self.code, self.message, media_type=media_type, headers=headers
            )
        body: dict[str, Any] = {
            "jsonrpc": "2.0",
            "id": None,
            "error": {
                "code": INVALID_REQUEST,
                "message": self.message,
                "data": {"code": self.code},
            },
        }
        return JSONResponse(body, status_code=self.status, headers=headers)

    def _challenge(self) -> str:
        """The 401's ``WWW-Authenticate``: the Bearer scheme of RFC 6750 for an API key, with no
        ``resource_metadata`` (RFC 9728), which tells MCP clients there is no OAuth to run."""
        if self.bearer_error is None:
            return 'Bearer realm="graphmem"'
        return (
            f'Bearer realm="graphmem", error="{self.bearer_error}", '
            f'error_description="{self.message}"'
        )


@dataclass
class Authenticator:
    """Who may use which namespace (see the module docstring).

    ``keyless`` says whether requests without a key may be let in while no key is live: only a
    server bound to loopback. One bound elsewhere refuses them for its whole life, also after
    its last key is revoked or its key file disappears.
    """

    keys: KeyStore
    namespaces: Namespaces
    keyless: bool = True
    #: The threads the gate's own checks (keys, opening a namespace) run in: threads of their
    #: own, so that a request is let in however busy the pools of admitted work are.
    _threads: CapacityLimiter | None = field(default=None, init=False, repr=False)

    async def _checked(self, fn: Callable[..., T], *args: Any) -> T:
        if self._threads is None:  # made in the event loop that uses it
            self._threads = CapacityLimiter(GATE_THREADS)
        return await anyio.to_thread.run_sync(fn, *args, limiter=self._threads)

    async def admit(
        self, authorization: str | None, requested: str | None
    ) -> tuple[Memory, ApiKey | None]:
        key = None
        try:
            active = await self.keys_required()
            if active:
                token = _bearer(authorization)
                if token is None:
                    raise Denied(
                        401,
                        Code.UNAUTHENTICATED,
                        "an API key is required: Authorization: Bearer <key>",
                    )
                key = await self._checked(self.keys.authenticate, token)
                if key is None:
                    raise Denied(
                        401,
                        Code.UNAUTHENTICATED,
                        "unknown or revoked API key",
                        bearer_error="invalid_token",
                    )
        except GraphmemError as exc:  # the key file cannot be read: refuse, never let in
            _log.error("cannot check API keys: %s", exc.message)
            raise Denied(503, exc.code, KEYS_UNAVAILABLE) from None
        except OSError as exc:  # e.g. the key file's folder can no longer be searched
            _log.error("cannot check API keys: %s", exc)
            raise Denied(503, Code.STORAGE_ERROR, KEYS_UNAVAILABLE) from None
        name = requested or (key.namespaces[0] if key else self.namespaces.settings.namespace)
        if key is not None and name not in key.namespaces:
            raise Denied(403, Code.FORBIDDEN, f"this API key has no access to namespace {name!r}")
        try:
            memory = self.namespaces.if_open(name)
            if memory is None:
                memory = await self._checked(self.namespaces.get, name)
        except InvalidInput as exc:
            raise Denied(400, exc.code, exc.message) from None
        except GraphmemError as exc:  # the namespace's files cannot be opened (disk, damage)
            _log.error("cannot open namespace %r: %s", name, exc.message)
            raise Denied(503, exc.code, exc.message) from None
        return memory, key

    async def keys_required(self) -> bool:
        """Whether a request must present a live key: always beyond loopback; on loopback,
        while at least one key is live. StorageError when the key store cannot be read."""
        if not self.keyless:
            return True
        active = self.keys.known_any_active()  # one stat of the key file
        if active is None:
            active = await self._checked(self.keys.any_active)
        return active

    async def still_admitted(self, key: ApiKey | None) -> bool:
        """Whether a caller admitted earlier with ``key`` (None: without one) would be admitted
        now: its key is still live, or keyless access still holds. False when the key store
        cannot be read (logged)."""
        try:
            if key is None:
                return not await self.keys_required()
            return bool(await self._checked(self.keys.is_active, key.id))
        except (GraphmemError, OSError) as exc:
            _log.error("cannot check API keys: %s", exc)
            return False


class LoopbackOnly:
    """ASGI middleware of a server bound to loopback: every request must name this machine.

    A page on another site can make its own host name resolve to 127.0.0.1 (DNS rebinding) and
    then read this server's answers as same-origin, in a browser on the machine. Such requests
    carry that site's name, so a ``Host`` other than a loopback name (any port), or an
    ``Origin`` other than a loopback one or one of ``cors_origins``, is refused with 403 before
    anything runs. A server bound elsewhere needs API keys, which such a page does not have.
    """

    def __init__(self, app: ASGIApp, allowed_origins: tuple[str, ...] = ()) -> None:
        self.app = app
        self.allowed_origins = frozenset(allowed_origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        host, origin = headers.get("host"), headers.get("origin")
        if host is not None and not _host_is_loopback(host):
            problem = f"this server answers only requests for a loopback name, not {host!r}"
        elif (
            origin is not None
            and origin not in self.allowed_origins
            and not _names_loopback(urllib.parse.urlsplit(origin), schemes=("http", "https"))
        ):
            problem = f"requests from pages at {origin!r} are not accepted (see cors_origins)"
        else:
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 4403, "reason": problem[:120]})
            return
        denied = Denied(403, Code.FORBIDDEN, problem)
        await _refusal(denied, scope, headers)(scope, receive, send)


class AuthMiddleware:
    """ASGI middleware in front of ``/graphql`` and ``/mcp``: body size limit, then the gate."""

    def __init__(self, app: ASGIApp, gate: Authenticator, max_body_bytes: int) -> None:
        self.app = app
        self.gate = gate
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or not scope["path"].startswith(_GUARDED):
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if (
            scope["type"] == "http"
            and scope["method"] == "GET"
            and scope["path"].startswith(GRAPHQL_PATH)
            and "text/html" in headers.get("accept", "")
        ):
            # GraphiQL: a page, no data. Without its query string the view cannot run a query
            # for a browser that has no key (the page reads its own URL to fill the editor).
            await self.app({**scope, "query_string": b""}, receive, send)
            return
        try:
            if scope["type"] == "http":
                receive = await self._limited(headers, receive)
                _check_query_string(scope.get("query_string", b""))
            scope[ADMITTED] = await self.gate.admit(
                headers.get("authorization"), headers.get(NAMESPACE_HEADER)
            )
        except Denied as exc:
            if scope["type"] == "websocket":
                if exc.status == 401 and "authorization" not in headers:
                    # It may authenticate in connection_init; until then it is bounded as a
                    # socket without a key (resolvers.sockets: how many, how large, how long).
                    await self.app(scope, receive, send)
                else:
                    await send(
                        {"type": "websocket.close", "code": 4403, "reason": exc.message[:120]}
                    )
                return
            await _refusal(exc, scope, headers)(scope, receive, send)
            return
        await self.app(scope, receive, send)

    async def _limited(self, headers: Mapping[str, str], receive: Receive) -> Receive:
        """Read the body (at most ``max_body_bytes``) and hand it on; Denied(413) beyond."""
        too_large = Denied(
            413, Code.PAYLOAD_TOO_LARGE, f"request body larger than {self.max_body_bytes} bytes"
        )
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_body_bytes:
            raise too_large
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                raise too_large
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        _check_json(body)
        return replaying(body, receive)


def replaying(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives a request's body, read already, once more (then ``receive``'s
    own messages: a disconnect)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


def _refusal(denied: Denied, scope: Scope, headers: Mapping[str, str]) -> Response:
    """``denied`` as the client of the path asked: a JSON-RPC error at ``/mcp``, else GraphQL
    errors in the media type its ``Accept`` header prefers."""
    if scope["path"].startswith(MCP_PATH):
        return denied.response(jsonrpc=True)
    return denied.response(media_type=negotiate(headers.get("accept")))


def _check_json(data: bytes) -> None:
    """Denied(400) for a body that is not UTF-8, or whose JSON nests deeper than the parser can
    go (Python's json raises RecursionError past about a thousand levels, which would be a 500).
    A body with fewer brackets than that cannot nest so deep and is left to strawberry."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Denied(
            400,
            Code.INVALID_QUERY,
            f"the request body is not UTF-8 ({exc.reason} at byte {exc.start})",
        ) from None
    if text.count("[") + text.count("{") < MAX_JSON_NESTING:
        return
    try:
        json.loads(text)
    except RecursionError:
        raise Denied(
            400,
            Code.INVALID_QUERY,
            "the request's JSON nests too deep to be parsed (about 1,000 levels)",
        ) from None
    except ValueError:
        return  # malformed: strawberry answers it


def _check_query_string(raw: bytes) -> None:
    """``_check_json`` for the ``variables`` of a GET request."""
    folded = raw.upper()  # %7b is %7B
    if (
        folded.count(b"%5B") + folded.count(b"%7B") + raw.count(b"[") + raw.count(b"{")
        < MAX_JSON_NESTING
    ):
        return
    for value in urllib.parse.parse_qs(raw.decode("latin-1")).get("variables", []):
        _check_json(value.encode("utf-8"))


def _bearer(authorization: str | None) -> str | None:
    if not authorization:
        return None
    scheme, _, token = authorization.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


@functools.lru_cache(maxsize=64)
def _host_is_loopback(host: str) -> bool:
    """Whether a ``Host`` header names this machine's loopback (any port); remembered, as
    clients send the same few."""
    return _names_loopback(urllib.parse.urlsplit(f"//{host}"))


def _names_loopback(url: urllib.parse.SplitResult, schemes: tuple[str, ...] = ("",)) -> bool:
    try:
        url.port  # noqa: B018 - raises for a port that is not a number
    except ValueError:
        return False
    return url.scheme in schemes and url.hostname is not None and is_loopback(url.hostname)
