"""The starlette application: ``/graphql`` (GraphiQL in a browser), ``/mcp`` (the same memory as
MCP tools, see ``resolvers.mcp``), ``/healthz``, ``/metrics``, and the relationship explorer at
``/explore/`` (a static page that calls ``/graphql``).

``/graphql`` and ``/mcp`` are behind the gate (``resolvers.auth``): body size limit, API key,
namespace. The lifespan opens the default namespace (replaying its outbox; an object store that
does not answer then does not stop the server from starting), runs the maintenance jobs due in it, then those due in every open namespace each minute (graphmem.maintenance), and
runs the MCP endpoint.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import os
import sys
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Final

import orjson
from cross_web import HTTPException
from graphql import GraphQLError
from prometheus_client import generate_latest
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket
from strawberry.asgi import GraphQL
from strawberry.exceptions import ConnectionRejectionError, MissingQueryError
from strawberry.http import GraphQLRequestData
from strawberry.http.parse_content_type import parse_content_type
from strawberry.schema.exceptions import CannotGetOperationTypeError, InvalidOperationTypeError
from strawberry.subscriptions import GRAPHQL_TRANSPORT_WS_PROTOCOL
from strawberry.types import ExecutionResult
from strawberry.types.execution import PreExecutionError
from strawberry.types.graphql import OperationType
from strawberry.types.unset import UNSET

from graphmem import ApiKey, Forbidden, GraphmemError, Memory, Settings, tracing
from graphmem.errors import Code, StorageError
from graphmem.limits import MAX_SUBSCRIPTIONS_PER_SOCKET
from graphmem.maintenance import check_every, local_jobs
from graphmem.settings import is_loopback
from graphmem.storage import open_keys
from graphmem.vectors.embedders import Embedder, create_embedder

from ..context import Context
from ..events import Broadcaster
from ..graphql.schema import Schema, build_schema
from ..namespaces import Namespaces
from .answers import GRAPHQL_RESPONSE_JSON, JSON, negotiate, refusal, status_of
from .auth import (
    ADMITTED,
    GRAPHQL_PATH,
    MCP_PATH,
    NAMESPACE_HEADER,
    Authenticator,
    AuthMiddleware,
    Denied,
    LoopbackOnly,
)
from .explorer import explorer_routes, graphiql_page
from .mem0 import mem0_routes
from .metrics import Metrics, Timing
from .sockets import INIT_WAIT_S, SocketHandler, Sockets

if TYPE_CHECKING:
    from cross_web import AsyncHTTPRequestAdapter
    from mcp.server.context import ServerRequestContext
    from strawberry.http import GraphQLHTTPResponse

_log = logging.getLogger("graphmem.server")


#: The environment variable through which ``graphmem serve --workers N`` hands its settings (as
#: JSON) to each worker process.
SETTINGS_ENV: Final = "GRAPHMEM_SERVE_SETTINGS"
#: The members of a POSTed GraphQL request that the prepared path answers (others, e.g.
#: ``extensions``, go through strawberry's view).
_PLAIN_REQUEST: Final = frozenset({"query", "variables", "operationName"})
#: The garbage collector's thresholds in a server process: a young collection per 50,000
#: allocations rather than 700, so that a large answer's objects are not scanned over and over
#: as they are made (each full pass holds the interpreter lock while every request waits).
GC_THRESHOLDS: Final = (50_000, 20, 100)
#: How often the service drains each open namespace's outbox rows left waiting (seconds).
DRAIN_INTERVAL_S: Final = 1.0
#: What a subscription sent over HTTP is answered (INVALID_QUERY).
SUBSCRIPTION_OVER_HTTP: Final = (
    f"subscriptions are served over a WebSocket: open one to {GRAPHQL_PATH} with the "
    "graphql-transport-ws subprotocol"
)
#: What a mutation sent over GET is answered (HTTP 405: GET is for what changes nothing).
MUTATION_OVER_GET: Final = "mutations are sent with POST: GET runs queries only"
#: What a POST of another content type is answered (HTTP 415).
NOT_JSON: Final = "a POST to /graphql sends its request as JSON: Content-Type: application/json"
#: The codes of the errors that end an operation that was running without naming a field:
#: its time limit, its answer's size. Its answer keeps ``data`` (null).
_ENDED: Final = frozenset({Code.TIMEOUT, Code.TOO_COSTLY})


def app_from_environment() -> Starlette:
    """The service for the settings ``graphmem serve`` put in SETTINGS_ENV (a worker's app)."""
    settings = Settings.model_validate_json(os.environ[SETTINGS_ENV])
    tune_process(settings)
    return create_app(settings, own_process=True)


def tune_process(settings: Settings) -> None:
    """Process-wide settings of a server process (not of a library user's process): the
    interpreter's switch interval, and the export of spans (``tracing.configure``)."""
    sys.setswitchinterval(settings.switch_interval_ms / 1000)
    tracing.configure(settings)


def create_app(
    settings: Settings | None = None,
    *,
    embedder: Embedder | None = None,
    clock: Callable[[], float] | None = None,
    own_process: bool = False,
) -> Starlette:
    """The graphmem service for ``settings`` (default: ``Settings.load()``).

    ``embedder`` and ``clock`` replace the settings' embedder and the system clock (tests).
    ``own_process``: serving is the process's whole job (``graphmem serve``), so the app may
    tune what is the process's (its garbage collector).
    """
    settings = settings or Settings.load()
    namespaces = Namespaces(
        settings, embedder or create_embedder(settings.embedder, settings), clock
    )
    gate = Authenticator(open_keys(settings), namespaces, keyless=is_loopback(settings.host))
    # Imported here: the MCP SDK is large, and the CLI's other commands import this module.
    from ..mcp import HttpEndpoint, build_server, no_oauth_routes

    schema = build_schema(settings)
    graphql = GraphQLApp(
        gate,
        max_response_bytes=settings.graphql_max_response_bytes,
        schema=schema,
        graphql_ide="graphiql",
    )
    mcp = HttpEndpoint(
        build_server(_admitted, admission=schema.admission),
        loopback=is_loopback(settings.host),
        max_body_bytes=settings.max_body_bytes,
        admission=schema.admission,
    )
    metrics = Metrics(namespaces)

    async def healthz(request: Request) -> Response:
        opened = namespaces.opened()
        loading = sorted(name for name, memory in opened.items() if memory.graph_loading())
        return JSONResponse({"status": "ok", "namespaces": sorted(opened), "loading": loading})

    async def metrics_text(request: Request) -> Response:
        data = await run_in_threadpool(generate_latest, metrics.registry)
        return Response(data, media_type="text/plain; version=0.0.4; charset=utf-8")

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        namespaces.broadcaster = Broadcaster(asyncio.get_running_loop())
        try:
            default = await run_in_threadpool(namespaces.get, settings.namespace)
        except StorageError as exc:
            if not exc.unreachable:
                raise
            # An object store in an outage does not keep the server from starting: each
            # request to the namespace opens it again, or is refused (503) within s3_timeout,
            # until it answers. Any other failure (a read-only data directory) stops it.
            _log.error("namespace %r cannot be opened now: %s", settings.namespace, exc.message)
        else:
            # The local jobs are quick: done before the first request. The jobs that may ask a
            # model (and wait on it for minutes) run in the background, with every later look.
            await run_in_threadpool(_maintain, default, local_jobs())
        if own_process:
            # What the server has made by now (modules, the schema, the default namespace)
            # lives as long as it does: kept out of the collector's full passes, which hold
            # the interpreter lock for as long as they take (200 ms and more once a large
            # answer has been built), in whichever thread, while every request waits.
            gc.collect()
            gc.freeze()
            gc.set_threshold(*GC_THRESHOLDS)
        background = [
            asyncio.create_task(_maintain_every(namespaces, check_every(settings))),
            asyncio.create_task(_drain_every(namespaces, DRAIN_INTERVAL_S)),
            asyncio.create_task(namespaces.broadcaster.follow()),
            asyncio.create_task(graphql.sockets.watch()),
        ]
        try:
            async with mcp.running():
                yield
        finally:
            for task in background:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await run_in_threadpool(namespaces.close)
            gate.keys.close()
            schema.admission.close()

    middleware = [
        Middleware(Timing, metrics=metrics),
        Middleware(AuthMiddleware, gate=gate, max_body_bytes=settings.max_body_bytes),
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
            Route(GRAPHQL_PATH, graphql),  # every method: the view answers others 405
            Route("/healthz", healthz),
            Route("/metrics", metrics_text),
            Route(MCP_PATH, mcp),
            *no_oauth_routes(),
            WebSocketRoute(GRAPHQL_PATH, graphql),
            *explorer_routes(),
            *mem0_routes(gate, schema.admission, settings),
        ],
        middleware=middleware,
        lifespan=lifespan,
    )
    app.state.namespaces = namespaces
    return app


#: What a browser gets at /graphql: GraphiQL from the service's own files (strawberry's page
#: loads React and GraphiQL from unpkg.com, so offline it never gets past "Loading").
_GRAPHIQL: Final = graphiql_page()


class GraphQLApp(GraphQL[Context, None]):
    """strawberry's ASGI view with graphmem's context and WebSocket authentication (sockets
    speak graphql-transport-ws only, each operation admitted on its own: ``resolvers.sockets``),
    answering HTTP as the GraphQL-over-HTTP spec says (``resolvers.answers``)."""

    graphql_transport_ws_handler_class = SocketHandler

    async def render_graphql_ide(self, request: Request) -> Response:
        return _GRAPHIQL(request)

    def __init__(self, gate: Authenticator, *, max_response_bytes: int, **kwargs: Any) -> None:
        super().__init__(
            subscription_protocols=(GRAPHQL_TRANSPORT_WS_PROTOCOL,),
            max_subscriptions_per_connection=MAX_SUBSCRIPTIONS_PER_SOCKET,
            connection_init_wait_timeout=timedelta(seconds=INIT_WAIT_S),
            **kwargs,
        )
        self.gate = gate
        self.sockets = Sockets(gate)
        self.max_response_bytes = max_response_bytes

    async def run(  # type: ignore[override]  # strawberry's overloads, one implementation
        self, request: Request | WebSocket, context: Any = UNSET, root_value: Any = UNSET
    ) -> Response | WebSocket:
        if isinstance(request, WebSocket):
            return await self._socket(request, context, root_value)
        try:
            if request.method == "POST":
                response = await self._prepared(request)
                if response is not None:
                    return response
            return await super().run(request, context, root_value)
        except HTTPException as exc:  # strawberry's view would answer it in plain text
            return _refused(request, exc)

    async def _socket(self, websocket: WebSocket, context: Any, root_value: Any) -> WebSocket:
        """strawberry's run of a socket, if the sockets that have not presented a key yet
        leave room for one more (``Sockets.arrive``); else its upgrade refused."""
        refusal = self.sockets.arrive(websocket.scope)
        if refusal is not None:
            await websocket.send_denial_response(refusal)
            return websocket
        try:
            return await super().run(websocket, context, root_value)
        finally:
            self.sockets.acknowledged(websocket.scope)  # closed before it was: waits no more

    async def _prepared(self, request: Request) -> Response | None:
        """The answer to a POSTed JSON query or mutation whose document the schema has
        validated before, executed without strawberry's per-request pipeline; None for any
        other request (strawberry's view answers it: the same rules, the same errors)."""
        schema = self.schema
        if not isinstance(schema, Schema):
            return None
        if not request.headers.get("content-type", "").startswith("application/json"):
            return None
        try:
            data = json.loads(await request.body())  # kept: the view reads it again
        except ValueError:
            return None
        if type(data) is not dict or not data.keys() <= _PLAIN_REQUEST:
            return None
        query, variables, name = data.get("query"), data.get("variables"), data.get("operationName")
        if (
            type(query) is not str
            or (variables is not None and type(variables) is not dict)
            or (name is not None and type(name) is not str)
        ):
            return None
        prepared = schema.prepared.get(query)
        if prepared is None:
            return None
        document, operation = prepared
        if name is not None and (operation.name is None or operation.name.value != name):
            return None
        answer = await self.get_sub_response(request)
        context = await self.get_context(request, answer)
        result = await schema.execute_prepared(
            document, operation, variables=variables, operation_name=name, context=context
        )
        body = await self.process_result(request, result)
        return self.create_response(body, answer)

    async def get_sub_response(self, request: Request | WebSocket) -> Response:
        """strawberry's, with the media type the answer takes (``answers.negotiate``)."""
        response = await super().get_sub_response(request)
        response.media_type = negotiate(request.headers.get("accept"))
        return response

    async def parse_http_body(self, request: AsyncHTTPRequestAdapter) -> Any:
        """strawberry's, refusing a POST that is not JSON with 415, as HTTP says."""
        content_type, _ = parse_content_type(request.content_type or "")
        if request.method == "POST" and "application/json" not in content_type:
            raise HTTPException(415, NOT_JSON)
        return await super().parse_http_body(request)

    async def execute_single(
        self,
        request: Request,
        request_adapter: AsyncHTTPRequestAdapter,
        sub_response: Response,
        context: Context,
        root_value: None,
        request_data: GraphQLRequestData,
    ) -> ExecutionResult:
        """strawberry's, except that a subscription is refused (INVALID_QUERY): strawberry would
        run it as a query, which fails in its resolver (an INTERNAL_ERROR); and a mutation over
        GET with 405, as the GraphQL-over-HTTP spec says."""
        allowed = OperationType.from_http(request_adapter.method) - {OperationType.SUBSCRIPTION}
        try:
            return await self.schema.execute(
                request_data.query,
                root_value=root_value,
                variable_values=request_data.variables,
                context_value=context,
                operation_name=request_data.operation_name,
                allowed_operation_types=allowed,
                operation_extensions=request_data.extensions,
            )
        except (CannotGetOperationTypeError, InvalidOperationTypeError, MissingQueryError) as exc:
            if isinstance(exc, InvalidOperationTypeError):
                if exc.operation_type is OperationType.SUBSCRIPTION:
                    error = GraphQLError(
                        SUBSCRIPTION_OVER_HTTP, extensions={"code": Code.INVALID_QUERY}
                    )
                    return ExecutionResult(data=None, errors=[error])
                if exc.operation_type is OperationType.MUTATION:
                    raise HTTPException(405, MUTATION_OVER_GET) from None
        # Refused before anything ran: strawberry's view says why, as it does (HTTP 400).
        return await super().execute_single(
            request, request_adapter, sub_response, context, root_value, request_data
        )

    def decode_json(self, data: str | bytes) -> object:
        try:
            return json.loads(data)
        except json.JSONDecodeError:
            raise  # strawberry's view answers it (HTTP 400)
        except RecursionError:  # a socket's message (bodies were checked by the gate): 4400
            raise json.JSONDecodeError("nested too deep to be parsed", "", 0) from None
        except ValueError as exc:  # an integer of more digits than Python converts (4,300)
            raise HTTPException(400, f"Unable to parse request body as JSON: {exc}") from None

    def encode_json(self, data: object) -> str:
        return self._bounded(data).decode()

    def create_response(self, response_data: Any, sub_response: Response) -> Response:
        """The answer as JSON bytes (not text encoded again) in the media type negotiated,
        with the status and headers the execution set (a rate limit's 429 and
        ``Retry-After``); else, for an answer without ``data`` in
        ``application/graphql-response+json``, the status of its error (``answers.status_of``),
        and 200 for any other."""
        media_type = sub_response.media_type or JSON
        status = sub_response.status_code
        if status is None:
            status = 200
            if media_type == GRAPHQL_RESPONSE_JSON and "data" not in response_data:
                errors = response_data.get("errors") or [{}]
                status = status_of((errors[0].get("extensions") or {}).get("code"))
        response = Response(self._bounded(response_data), status, media_type=media_type)
        for name, value in sub_response.headers.items():
            if name not in ("content-length", "content-type"):
                response.headers[name] = value
        response.headers["vary"] = "Accept"  # the media type, and so the status, follow it
        return response

    def _bounded(self, data: object) -> bytes:
        """``data`` as JSON, or, when that is over ``max_response_bytes``, an answer (or a
        WebSocket message) whose only error says so. Most answers that large were refused
        before they were encoded (``resolvers.schema.run_admitted``); this exact check meets
        the rest, whose characters take several bytes each."""
        encoded = _json(data)
        if len(encoded) <= self.max_response_bytes:
            return encoded
        error = {
            "message": f"the answer came to {len(encoded):,} bytes, more than the limit of "
            f"{self.max_response_bytes:,} (setting graphql_max_response_bytes): ask for "
            "smaller pages or fewer fields",
            "extensions": {"code": Code.TOO_COSTLY},
        }
        answer = {"data": None, "errors": [error]}
        if isinstance(data, dict) and "type" in data and "payload" in data:  # a socket's message
            return _json({**data, "payload": answer})
        return _json(answer)

    async def get_context(self, request: Request | WebSocket, response: Any) -> Context:
        admitted = request.scope.get(ADMITTED)
        memory, key = admitted if admitted else (None, None)
        broadcaster = self.gate.namespaces.broadcaster
        assert broadcaster is not None, "the app's lifespan has not started"
        return Context(
            memory,
            key,
            request,
            broadcaster,
            keys=self.gate.keys,
            admission=self.schema.admission if isinstance(self.schema, Schema) else None,
            response=response,
            answer_limit=self.max_response_bytes,
        )

    async def process_result(self, request: Request, result: ExecutionResult) -> Any:
        # A document refused before execution (over the token limit) bypasses ErrorCodes.
        for error in result.errors or []:
            if not (error.extensions or {}).get("code"):
                error.extensions = {**(error.extensions or {}), "code": Code.INVALID_QUERY}
        admitted = request.scope.get(ADMITTED)
        degraded = admitted[0].degraded if admitted else None
        if degraded:  # e.g. the object store is down: answers may miss vector matches
            result.extensions = {**(result.extensions or {}), "degraded": degraded}
        answer: GraphQLHTTPResponse = await super().process_result(request, result)
        if not _ran(result):  # a request error: the spec's answer has no data entry
            del answer["data"]
        return answer

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


def _ran(result: ExecutionResult) -> bool:
    """Whether the operation was executed, so that its answer keeps ``data`` (null or not).
    Not when it was refused before: by strawberry (a PreExecutionError: parse, validation, the
    cost admission), on the prepared path (its refusals carry no cost), by graphql-core (its
    variables or operation name: errors without a path), or by its key's turn."""
    if result.data is not None:
        return True
    if isinstance(result, PreExecutionError) or "cost" not in (result.extensions or {}):
        return False
    return any(
        error.path is not None or (error.extensions or {}).get("code") in _ENDED
        for error in result.errors or ()
    )


def _refused(request: Request, exc: HTTPException) -> Response:
    """A request strawberry's view refuses as it stands (not JSON, no query, a mutation over
    GET, a method other than GET and POST) as a GraphQL error (INVALID_QUERY), with ``Allow``
    on a 405."""
    headers = {"vary": "Accept"}
    if exc.status_code == 405:
        headers["allow"] = "POST" if request.method == "GET" else "GET, POST"
    return refusal(
        exc.status_code,
        Code.INVALID_QUERY,
        exc.reason,
        media_type=negotiate(request.headers.get("accept")),
        headers=headers,
    )


def _json(data: object) -> bytes:
    """``data`` as JSON: by orjson (several times faster than json on a large answer), or by
    json for what orjson refuses (an integer beyond 64 bits in a JSON scalar)."""
    try:
        return orjson.dumps(data)
    except TypeError:  # orjson.JSONEncodeError
        return json.dumps(data, separators=(",", ":")).encode()


def _admitted(ctx: ServerRequestContext[Any, Any]) -> tuple[Memory, ApiKey | None]:
    """The namespace and key the gate admitted for the HTTP request that carries a tool call."""
    request = ctx.request
    admitted = request.scope.get(ADMITTED) if isinstance(request, Request) else None
    if admitted is None:
        raise Forbidden("the request was not admitted by the gate")
    memory, key = admitted
    return memory, key


def _maintain(memory: Memory, jobs: tuple[str, ...] | None = None) -> None:
    """Run the maintenance jobs due in ``memory``'s namespace (``jobs`` only, if given; each run
    is recorded and logged by graphmem.maintenance; one that fails is tried again at its next
    period)."""
    try:
        memory.maintain(jobs)
    except GraphmemError as exc:  # the run records could not be read or written
        _log.warning("maintenance of %s failed: %s", memory.namespace, exc.message)


async def _drain_every(namespaces: Namespaces, interval: float) -> None:
    """Every ``interval`` seconds, each namespace held open writes to its vector index the
    outbox rows left waiting (by a process that died mid-write, or while the index could not
    be written): so when a replica dies, the one that takes its namespaces over catches up."""
    while True:
        await asyncio.sleep(interval)
        for memory in namespaces.opened().values():
            try:
                await _to_the_end(memory.drain_outbox)
            except GraphmemError as exc:
                _log.warning("outbox drain of %s failed: %s", memory.namespace, exc.message)


async def _maintain_every(namespaces: Namespaces, interval: float) -> None:
    """Run what is due in each namespace held open: at once, then every ``interval`` seconds."""
    while True:
        for memory in namespaces.opened().values():
            await _to_the_end(_maintain, memory)
        await asyncio.sleep(interval)


async def _to_the_end(fn: Callable[..., object], *args: Any) -> None:
    """``fn(*args)`` in a thread, awaited to its end even when the task is cancelled, and the
    cancellation raised after: the lifespan closes the namespaces once its background tasks
    are over, and a store closed while a thread still reads it crashes the process."""
    work = asyncio.ensure_future(run_in_threadpool(fn, *args))
    try:
        await asyncio.shield(work)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            await work
        raise
