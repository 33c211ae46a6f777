"""The starlette application: ``/graphql`` (GraphiQL in a browser), ``/mcp`` (the same memory as
MCP tools, see ``resolvers.tools``), ``/healthz``, ``/metrics``, and the relationship explorer at
``/explore/`` (a static page that calls ``/graphql``).

Requests to ``/graphql`` and ``/mcp`` pass a gate first: the body size limit (413), then the API
key. With no key configured every request is let in (``graphmem serve`` then binds to loopback
only); once a key exists, each request needs ``Authorization: Bearer <key>`` (401 otherwise).
The namespace is the key's first one, or another of the key's named by the
``X-Graphmem-Namespace`` header (403 for one the key does not hold); without keys the header may
name any namespace. Neither queries nor tool arguments can name a namespace, so none can escape
it. WebSocket clients, which cannot set headers in a browser, may instead send
``{"Authorization": "Bearer <key>"}`` as the connection_init payload. A server bound to loopback
refuses, on every route, requests whose Host or Origin names another site (``LoopbackOnly``).

The lifespan opens the default namespace (replaying its outbox), prunes it, prunes every open
namespace each ``prune_interval`` seconds, and runs the MCP endpoint.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import logging
import threading
import time
import urllib.parse
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from starlette.websockets import WebSocket
from strawberry.asgi import GraphQL
from strawberry.exceptions import ConnectionRejectionError
from strawberry.types import ExecutionResult

from graphmem import ApiKey, Forbidden, GraphmemError, InvalidInput, KeyStore, Memory, Settings
from graphmem.embedders import Embedder, create_embedder
from graphmem.llm import ChatClient
from graphmem.namespace import check_namespace

from .context import Context
from .events import Broadcaster
from .explorer import EXPLORE_PATH, explorer_routes
from .schema import build_schema

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext

NAMESPACE_HEADER: Final = "x-graphmem-namespace"
#: Brackets a request's JSON may open before it is parsed once here to make sure it is not
#: nested deeper than Python's parser can go.
MAX_JSON_NESTING: Final = 500
GRAPHQL_PATH: Final = "/graphql"
MCP_PATH: Final = "/mcp"
#: Where the gate leaves what it admitted, in the ASGI scope: (Memory, ApiKey | None).
ADMITTED: Final = "graphmem.admitted"
#: JSON-RPC's "Invalid Request" error code, for refusals at /mcp.
INVALID_REQUEST: Final = -32600
_log = logging.getLogger("graphmem.server")


class Denied(Exception):
    """A request the gate turns away: HTTP ``status``, a code and a message."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message

    def response(self, *, jsonrpc: bool = False) -> JSONResponse:
        """The refusal as GraphQL errors, or as a JSON-RPC error (what MCP clients read and show;
        its id is null, as the request was never read)."""
        headers = {"WWW-Authenticate": 'Bearer realm="graphmem"'} if self.status == 401 else None
        body: dict[str, Any] = (
            {
                "jsonrpc": "2.0",
                "id": None,
                "error": {
                    "code": INVALID_REQUEST,
                    "message": self.message,
                    "data": {"code": self.code},
                },
            }
            if jsonrpc
            else {"errors": [{"message": self.message, "extensions": {"code": self.code}}]}
        )
        return JSONResponse(body, status_code=self.status, headers=headers)


class Namespaces:
    """The namespaces this server has opened, each opened once on first use, sharing one
    embedder and (with the LLM classifier) one chat model; every Memory's changes feed the
    broadcaster."""

    def __init__(
        self,
        settings: Settings,
        embedder: Embedder,
        clock: Callable[[], float] | None,
    ) -> None:
        self.settings = settings
        self.embedder = embedder
        self.llm = ChatClient.from_settings(settings) if settings.classifier == "llm" else None
        self.clock = clock
        self.broadcaster: Broadcaster | None = None
        self._open: dict[str, Memory] = {}
        self._lock = threading.Lock()

    def get(self, name: str) -> Memory:
        """The open Memory of ``name``, opening it (in this thread) if needed."""
        check_namespace(name)
        with self._lock:
            memory = self._open.get(name)
            if memory is None:
                memory = Memory.open(
                    self.settings.data_dir,
                    namespace=name,
                    embedder=self.embedder,
                    settings=self.settings,
                    clock=self.clock,
                    llm=self.llm,
                )
                if self.broadcaster is not None:
                    self.broadcaster.watch(memory)
                self._open[name] = memory
            return memory

    def opened(self) -> dict[str, Memory]:
        with self._lock:
            return dict(self._open)

    def close(self) -> None:
        with self._lock:
            for memory in self._open.values():
                memory.close()
            self._open.clear()


@dataclass
class Gate:
    """Who may use which namespace (see the module docstring)."""

    keys: KeyStore
    namespaces: Namespaces

    async def admit(
        self, authorization: str | None, requested: str | None
    ) -> tuple[Memory, ApiKey | None]:
        key = None
        try:
            if await run_in_threadpool(self.keys.any_active):
                token = _bearer(authorization)
                if token is None:
                    raise Denied(
                        401,
                        "UNAUTHENTICATED",
                        "an API key is required: Authorization: Bearer <key>",
                    )
                key = await run_in_threadpool(self.keys.authenticate, token)
                if key is None:
                    raise Denied(401, "UNAUTHENTICATED", "unknown or revoked API key")
        except GraphmemError as exc:  # the key file cannot be read: refuse, never let in
            _log.error("cannot check API keys: %s", exc.message)
            raise Denied(503, exc.code, exc.message) from None
        name = requested or (key.namespaces[0] if key else self.namespaces.settings.namespace)
        if key is not None and name not in key.namespaces:
            raise Denied(403, "FORBIDDEN", f"this API key has no access to namespace {name!r}")
        try:
            memory = await run_in_threadpool(self.namespaces.get, name)
        except InvalidInput as exc:
            raise Denied(400, exc.code, exc.message) from None
        except GraphmemError as exc:  # the namespace's files cannot be opened (disk, damage)
            _log.error("cannot open namespace %r: %s", name, exc.message)
            raise Denied(503, exc.code, exc.message) from None
        return memory, key


class GraphQLApp(GraphQL[Context, None]):
    """strawberry's ASGI view with graphmem's context and WebSocket authentication."""

    def __init__(self, gate: Gate, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.gate = gate

    async def get_context(self, request: Request | WebSocket, response: Any) -> Context:
        admitted = request.scope.get(ADMITTED)
        memory, key = admitted if admitted else (None, None)
        broadcaster = self.gate.namespaces.broadcaster
        assert broadcaster is not None, "the app's lifespan has not started"
        return Context(memory, key, request, broadcaster, keys=self.gate.keys)

    async def process_result(self, request: Request, result: ExecutionResult) -> Any:
        # A document refused before execution (over the token limit) bypasses ErrorCodes.
        for error in result.errors or []:
            if not (error.extensions or {}).get("code"):
                error.extensions = {**(error.extensions or {}), "code": "INVALID_QUERY"}
        return await super().process_result(request, result)

    async def on_ws_connect(self, context: Context) -> Any:
        if context.admitted:
            return await super().on_ws_connect(context)
        params = context.connection_params or {}
        authorization = params.get("Authorization") or params.get("authorization")
        try:
            context.memory, context.key = await self.gate.admit(
                authorization if isinstance(authorization, str) else None,
                context.request.headers.get(NAMESPACE_HEADER),
            )
        except Denied as exc:
            raise ConnectionRejectionError({"code": exc.code, "message": exc.message}) from None
        return await super().on_ws_connect(context)


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
        if host is not None and not _names_loopback(urllib.parse.urlsplit(f"//{host}")):
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
        denied = Denied(403, "FORBIDDEN", problem)
        await denied.response(jsonrpc=scope["path"].startswith(MCP_PATH))(scope, receive, send)


def _names_loopback(url: urllib.parse.SplitResult, schemes: tuple[str, ...] = ("",)) -> bool:
    try:
        url.port  # noqa: B018 - raises for a port that is not a number
    except ValueError:
        return False
    return url.scheme in schemes and url.hostname is not None and is_loopback(url.hostname)


class Guard:
    """ASGI middleware in front of ``/graphql`` and ``/mcp``: body size limit, then the gate."""

    def __init__(self, app: ASGIApp, gate: Gate, max_body_bytes: int) -> None:
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
            await self.app(scope, receive, send)  # GraphiQL: a page, no data
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
                    await self.app(scope, receive, send)  # may authenticate in connection_init
                else:
                    await send(
                        {"type": "websocket.close", "code": 4403, "reason": exc.message[:120]}
                    )
                return
            await exc.response(jsonrpc=scope["path"].startswith(MCP_PATH))(scope, receive, send)
            return
        await self.app(scope, receive, send)

    async def _limited(self, headers: Mapping[str, str], receive: Receive) -> Receive:
        """Read the body (at most ``max_body_bytes``) and hand it on; Denied(413) beyond."""
        too_large = Denied(
            413, "PAYLOAD_TOO_LARGE", f"request body larger than {self.max_body_bytes} bytes"
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
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        return replay


class Metrics:
    """Prometheus metrics of one app: requests by route and status, their latency, facts, links
    and subscribers per open namespace, and the calls and tokens of the model providers."""

    def __init__(self, namespaces: Namespaces) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "graphmem_http_requests",
            "HTTP requests served.",
            ["route", "method", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "graphmem_http_request_seconds",
            "Time to answer an HTTP request.",
            ["route"],
            registry=self.registry,
            buckets=(0.005, 0.01, 0.02, 0.03, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        )
        self.registry.register(_MemoryCollector(namespaces))
        self.registry.register(_UsageCollector(namespaces))


class Timing:
    """ASGI middleware counting and timing every HTTP request into ``metrics``."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        route = (
            path if path in _ROUTES else EXPLORE_PATH if path.startswith(EXPLORE_PATH) else "other"
        )
        status = 500
        start = time.perf_counter()

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            self.metrics.latency.labels(route).observe(time.perf_counter() - start)
            self.metrics.requests.labels(route, scope["method"], str(status)).inc()


class _MemoryCollector(Collector):
    def __init__(self, namespaces: Namespaces) -> None:
        self.namespaces = namespaces

    def collect(self) -> Any:
        facts = GaugeMetricFamily(
            "graphmem_facts", "Facts by state.", labels=["namespace", "state"]
        )
        links = GaugeMetricFamily("graphmem_links", "Live links.", labels=["namespace"])
        pending = GaugeMetricFamily(
            "graphmem_outbox_pending", "Vector writes not yet applied.", labels=["namespace"]
        )
        subscribers = GaugeMetricFamily(
            "graphmem_subscribers", "Open memoryChanged subscriptions.", labels=["namespace"]
        )
        broadcaster = self.namespaces.broadcaster
        for name, memory in self.namespaces.opened().items():
            try:
                stats = memory.stats()
            except GraphmemError:
                continue  # closing
            for state in ("current", "superseded", "retracted"):
                facts.add_metric([name, state], getattr(stats, state))
            links.add_metric([name], stats.links)
            pending.add_metric([name], stats.outbox_pending)
            subscribers.add_metric([name], broadcaster.subscribers(name) if broadcaster else 0)
        yield from (facts, links, pending, subscribers)


class _UsageCollector(Collector):
    """The meters of the shared embedder and chat model (graphmem.usage), as counters."""

    def __init__(self, namespaces: Namespaces) -> None:
        self.namespaces = namespaces

    def collect(self) -> Any:
        labels = ["kind", "provider", "model"]
        counters = {
            name: CounterMetricFamily(f"graphmem_provider_{name}", text, labels=labels)
            for name, text in (
                ("calls", "Calls answered by a model provider (embedder or chat model)."),
                ("failed_calls", "Calls to a model provider that failed after their retries."),
                ("retries", "Retries of calls to a model provider (429, 5xx, timeouts)."),
                ("inputs", "Texts sent to a model provider (chat: one per request)."),
            )
        }
        tokens = CounterMetricFamily(
            "graphmem_provider_tokens",
            "Tokens a model provider reported using.",
            labels=[*labels, "type"],
        )
        meters = [self.namespaces.embedder.meter]
        if self.namespaces.llm is not None:
            meters.append(self.namespaces.llm.meter)
        for meter in meters:
            usage = meter.snapshot()
            key = [usage.kind, usage.provider, usage.model]
            for name, family in counters.items():
                family.add_metric(key, getattr(usage, name))
            tokens.add_metric([*key, "prompt"], usage.prompt_tokens)
            tokens.add_metric([*key, "completion"], usage.completion_tokens)
        yield from (*counters.values(), tokens)


_GUARDED: Final = (GRAPHQL_PATH, MCP_PATH)
_ROUTES: Final = (GRAPHQL_PATH, MCP_PATH, "/healthz", "/metrics")


def create_app(
    settings: Settings | None = None,
    *,
    embedder: Embedder | None = None,
    clock: Callable[[], float] | None = None,
) -> Starlette:
    """The graphmem service for ``settings`` (default: ``Settings.load()``).

    ``embedder`` and ``clock`` replace the settings' embedder and the system clock (tests).
    """
    settings = settings or Settings.load()
    namespaces = Namespaces(
        settings, embedder or create_embedder(settings.embedder, settings), clock
    )
    gate = Gate(KeyStore(settings.data_dir), namespaces)
    # Imported here: the MCP SDK is large, and the CLI's other commands import this module.
    from .tools import HttpEndpoint, build_server

    graphql = GraphQLApp(gate, schema=build_schema(settings), graphql_ide="graphiql")
    mcp = HttpEndpoint(
        build_server(_admitted),
        loopback=is_loopback(settings.host),
        max_body_bytes=settings.max_body_bytes,
    )
    metrics = Metrics(namespaces)

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok", "namespaces": sorted(namespaces.opened())})

    async def metrics_text(request: Request) -> Response:
        data = await run_in_threadpool(generate_latest, metrics.registry)
        return Response(data, media_type="text/plain; version=0.0.4; charset=utf-8")

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        namespaces.broadcaster = Broadcaster(asyncio.get_running_loop())
        default = await run_in_threadpool(namespaces.get, settings.namespace)
        await run_in_threadpool(_prune, default)
        pruner = asyncio.create_task(_prune_every(namespaces, settings.prune_interval))
        try:
            async with mcp.running():
                yield
        finally:
            pruner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pruner
            await run_in_threadpool(namespaces.close)

    middleware = [
        Middleware(Timing, metrics=metrics),
        Middleware(Guard, gate=gate, max_body_bytes=settings.max_body_bytes),
    ]
    if is_loopback(settings.host):
        middleware.insert(1, Middleware(LoopbackOnly, allowed_origins=tuple(settings.cors_origins)))
    if settings.cors_origins:
        middleware.insert(
            1,
            Middleware(
                CORSMiddleware,
                allow_origins=list(settings.cors_origins),
                allow_methods=["GET", "POST"],
                allow_headers=["authorization", "content-type", NAMESPACE_HEADER],
            ),
        )
    app = Starlette(
        routes=[
            Route(GRAPHQL_PATH, graphql, methods=["GET", "POST"]),
            Route("/healthz", healthz),
            Route("/metrics", metrics_text),
            Route(MCP_PATH, mcp),
            WebSocketRoute(GRAPHQL_PATH, graphql),
            *explorer_routes(),
        ],
        middleware=middleware,
        lifespan=lifespan,
    )
    app.state.namespaces = namespaces
    return app


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address to bind) is this machine's loopback."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _admitted(ctx: ServerRequestContext[Any, Any]) -> tuple[Memory, ApiKey | None]:
    """The namespace and key the gate admitted for the HTTP request that carries a tool call."""
    request = ctx.request
    admitted = request.scope.get(ADMITTED) if isinstance(request, Request) else None
    if admitted is None:
        raise Forbidden("the request was not admitted by the gate")
    memory, key = admitted
    return memory, key


def _check_json(data: bytes) -> None:
    """Denied(400) for a body that is not UTF-8, or whose JSON nests deeper than the parser can
    go (Python's json raises RecursionError past about a thousand levels, which would be a 500).
    A body with fewer brackets than that cannot nest so deep and is left to strawberry."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Denied(
            400,
            "INVALID_QUERY",
            f"the request body is not UTF-8 ({exc.reason} at byte {exc.start})",
        ) from None
    if text.count("[") + text.count("{") < MAX_JSON_NESTING:
        return
    try:
        json.loads(text)
    except RecursionError:
        raise Denied(
            400, "INVALID_QUERY", f"the request's JSON nests deeper than {MAX_JSON_NESTING} levels"
        ) from None
    except ValueError:
        return  # malformed: strawberry answers it


def _check_query_string(raw: bytes) -> None:
    """``_check_json`` for the ``variables`` of a GET request."""
    if raw.count(b"%5B") + raw.count(b"%7B") + raw.count(b"[") + raw.count(b"{") < MAX_JSON_NESTING:
        return
    for value in urllib.parse.parse_qs(raw.decode("latin-1")).get("variables", []):
        _check_json(value.encode("utf-8"))


def _bearer(authorization: str | None) -> str | None:
    if not authorization:
        return None
    scheme, _, token = authorization.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def _prune(memory: Memory) -> None:
    try:
        report = memory.prune()
    except GraphmemError as exc:
        _log.warning("prune of %s failed: %s", memory.namespace, exc.message)
        return
    if report.expired or report.decayed or report.low_confidence:
        _log.info("pruned %s: %s", memory.namespace, json.dumps(report.to_dict()))


async def _prune_every(namespaces: Namespaces, interval: float) -> None:
    if interval <= 0:
        return
    while True:
        await asyncio.sleep(interval)
        for memory in namespaces.opened().values():
            await run_in_threadpool(_prune, memory)


def data_dir_has_keys(data_dir: str | Path) -> bool:
    """Whether API keys are configured for ``data_dir`` (then serving beyond loopback is safe)."""
    return KeyStore(data_dir).any_active()
