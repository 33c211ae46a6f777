"""The MCP server: one server object (``build_server``) for both transports, a call's
arguments validated and its cost charged, and expected failures answered as tool results.

Where a call's namespace comes from (``Caller``) is what differs:

- stdio (``graphmem mcp``, ``serve_stdio``): the one namespace the command opened;
- streamable HTTP at ``/mcp`` in ``graphmem serve`` (``HttpEndpoint``): the namespace the
  service's gate admitted for that HTTP request (the bearer key, ``X-Graphmem-Namespace``; see
  ``resolvers.auth``). The endpoint is stateless and answers JSON: every request is admitted on
  its own, so no session outlives its key, and the tools need no server-to-client messages.

Expected failures (arguments the schema or graphmem refuses, unknown ids, conflicts, a
read-only key) are tool results with ``isError`` set, text ``CODE: message`` and
``structuredContent`` ``{"error": {"code", "message"}}``, so a model can correct itself. An
unexpected exception is answered the same way, code ``INTERNAL_ERROR``, and its traceback logged
(once a minute for each kind, as GraphQL's: ``resolvers.schema.unexpected_log``); neither ends
the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import weakref
from collections.abc import AsyncIterator, Callable, Mapping
from importlib.metadata import version
from typing import Any, Final

import anyio
import anyio.to_thread
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import (
    CallToolRequestParams,
    CallToolResult,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
)
from pydantic import (
    BaseModel,
    ValidationError,
)
from starlette.responses import PlainTextResponse, Response
from starlette.types import Receive, Scope, Send

from graphmem import ApiKey, Forbidden, GraphmemError, InvalidInput, Memory, Settings, tracing
from graphmem.consolidation import MAX_CONSIDERED
from graphmem.errors import Code, QueryTimeout

from ..auth import ADMITTED, INVALID_REQUEST
from ..cost import HEAVY_COST, CostError, capture_points
from ..fairness import Admission
from ..inputs import check_arguments
from ..schema import unexpected_log
from .tools import (
    BY_NAME,
    TOOLS,
    CaptureArgs,
    ConsolidateArgs,
    MaintainArgs,
    ReflectArgs,
    Result,
    Tool,
)

#: The server's name in the MCP handshake.
SERVER_NAME: Final = "graphmem"


#: What a client may show the model about the server as a whole.
INSTRUCTIONS: Final = (
    "Long-term memory that persists across conversations. Facts have ids, a category and a "
    "validity period; a newer fact about the same entity and key supersedes the older one, which "
    "stays readable as history (as_of). Recall before answering from memory; store what the user "
    "wants remembered or what will matter later; forget what is wrong."
)


_log = logging.getLogger("graphmem.mcp")

#: Tools whose work is far more than their results, with the points it counts as (as GraphQL's
#: ``resolvers.cost.WORK``); a call of HEAVY_COST or more runs on the lane, as heavy GraphQL
#: documents do.
TOOL_WORK: Final[Mapping[type[BaseModel], int]] = {
    ConsolidateArgs: MAX_CONSIDERED,
    MaintainArgs: MAX_CONSIDERED,
    ReflectArgs: HEAVY_COST,
}
#: Arguments whose items a call does work for, each counting a point: a purge of 1,000 ids
#: costs 1,000. A capture's ``messages`` count as GraphQL counts ``captureMessages``' (a point
#: per turn part, ``resolvers.cost.capture_points``), the same over either face.
COUNTED_ITEMS: Final = ("ids", "working_files")
#: The admission of each event loop for calls made without one (the pools' turns belong to
#: the loop they are used in).
_unshared: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Admission] = (
    weakref.WeakKeyDictionary()
)


#: Where a call's namespace comes from: the Memory to use and the API key (None: no key).
Caller = Callable[[ServerRequestContext[Any, Any]], tuple[Memory, ApiKey | None]]


def build_server(caller: Caller, *, admission: Admission | None = None) -> Server[Any]:
    """The MCP server offering ``TOOLS``, each call on the Memory that ``caller`` names, paid
    for from its key's points and server time and run in its key's share of the threads of
    ``admission`` (the GraphQL schema's, so both faces share one per key; None: one of this
    server's own)."""
    specs = [tool.spec() for tool in TOOLS]

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        return ListToolsResult(tools=specs)

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams
    ) -> CallToolResult:
        tool = params.name if params.name in BY_NAME else "unknown"  # not the client's text
        with tracing.span(f"mcp.tools/call {tool}", {"gen_ai.tool.name": tool}) as span:
            result = await call(
                caller, ctx, params.name, params.arguments or {}, admission=admission
            )
            if result.is_error:
                error = (result.structured_content or {}).get("error", {})
                tracing.failed(span, error.get("code", Code.INTERNAL_ERROR))
            return result

    return Server(
        SERVER_NAME,
        version=version("graphmem"),
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def call(
    caller: Caller,
    ctx: ServerRequestContext[Any, Any],
    name: str,
    arguments: dict[str, Any],
    *,
    admission: Admission | None = None,
) -> CallToolResult:
    """Run one tool call; every failure becomes a tool error (see the module docstring). The
    call is answered ``TIMEOUT`` past the ``request_timeout`` setting (its work, already in a
    thread, finishes there)."""
    tool = BY_NAME.get(name)
    try:
        if tool is None:
            raise InvalidInput(f"unknown tool {name!r}; the tools are {', '.join(BY_NAME)}")
        args = _validated(tool.args, arguments)
        memory, key = caller(ctx)
        if tool.writes(args) and key is not None and key.read_only:
            raise Forbidden(f"API key {key.id} is read-only")
        admission = admission or _own_admission(memory.settings)
        key_id = None if key is None else key.id
        cost = tool_cost(args)
        tracing.annotate({tracing.NAMESPACE: memory.namespace, tracing.COST: cost})
        admission.spend(key_id, cost)
        pool = admission.lane if cost >= HEAVY_COST else admission.reads
        timeout = memory.settings.request_timeout
        try:
            async with admission.requests.held(key_id):
                text, data = await asyncio.wait_for(
                    pool.run(key_id, lambda: _limited(tool, memory, args)), timeout
                )
        except QueryTimeout:  # the call's own reads, past sql_time_limit
            raise
        except TimeoutError:  # the whole call, past request_timeout
            raise QueryTimeout(
                f"the call took longer than {timeout:g} s (setting request_timeout)"
            ) from None
    except GraphmemError as exc:
        return _error(exc.code, exc.message)
    except CostError as exc:
        return _error(exc.code, exc.message)
    except Exception as exc:
        if unexpected_log.first(exc):  # once a minute per kind: a loop of them floods nothing
            _log.exception("tool %s failed", name)
        return _error(
            Code.INTERNAL_ERROR, "the tool failed unexpectedly; the server's log has the details"
        )
    return CallToolResult(content=[TextContent(text=text)], structured_content=data)


def tool_cost(args: BaseModel) -> int:
    """What a tool call spends of its key's points: the most results it may return (its
    ``limit`` or ``max_nodes``), the items it works on (``COUNTED_ITEMS``; a capture's turn
    parts), or its work (``TOOL_WORK``; listing maintenance runs is not work), at least 1."""
    sizes = [getattr(args, name, None) for name in ("limit", "max_nodes")]
    items = [getattr(args, name, None) for name in COUNTED_ITEMS]
    work = 0 if getattr(args, "list_runs", False) else TOOL_WORK.get(type(args), 0)
    if isinstance(args, CaptureArgs):
        work = capture_points(m.content for m in args.messages)
    return max(
        [
            1,
            work,
            *(size for size in sizes if isinstance(size, int)),
            *(len(listed) for listed in items if isinstance(listed, list)),
        ]
    )


def _own_admission(settings: Settings) -> Admission:
    """The admission of calls made without the service's (``graphmem mcp`` on stdio, tests):
    the same pools and deadlines, no cost points (the caller has no key)."""
    loop = asyncio.get_running_loop()
    admission = _unshared.get(loop)
    if admission is None:
        admission = _unshared[loop] = Admission(
            settings.graphql_max_cost,
            0,
            read_threads=settings.read_threads or os.cpu_count() or 1,
        )
    return admission


def _limited(tool: Tool, memory: Memory, args: Any) -> Result:
    """``tool.run(memory, args)`` with its reads stopped past ``sql_time_limit`` (TIMEOUT)."""
    with memory.time_limit():
        return tool.run(memory, args)


def serve_stdio(memory: Memory) -> None:
    """Serve the tools on stdin/stdout for ``memory`` until the client closes stdin.

    While it serves, the SDK points file descriptor 1 at stderr, so nothing but the protocol
    reaches stdout, whatever a library prints.
    """
    server = build_server(lambda ctx: (memory, None))

    async def run() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(run)


class HttpEndpoint:
    """The ASGI app at ``/mcp``: streamable HTTP, stateless, JSON responses.

    ``running()`` belongs in the app's lifespan; it starts a fresh SDK session manager each time
    (one cannot be restarted), so an app may be started more than once. When the service binds
    to ``loopback``, requests whose Host or Origin header names another host are refused (DNS
    rebinding: a web page must not reach a keyless local server through a name of its own).
    A GET, which would open an event stream, is answered 405: every request is one POST, so
    nothing stays open to outlive its key.
    """

    def __init__(
        self,
        server: Server[Any],
        *,
        loopback: bool,
        max_body_bytes: int,
        admission: Admission | None = None,
    ) -> None:
        self.server = server
        self.max_body_bytes = max_body_bytes
        self.admission = admission
        self.security = _rebinding_protection(loopback)
        self._manager: StreamableHTTPSessionManager | None = None

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        manager = StreamableHTTPSessionManager(
            self.server,
            stateless=True,
            json_response=True,
            security_settings=self.security,
            max_request_body_size=self.max_body_bytes,
        )
        async with manager.run():
            self._manager = manager
            try:
                yield
            finally:
                self._manager = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._manager is None:
            await PlainTextResponse("the MCP endpoint is not running", 503)(scope, receive, send)
            return
        if scope.get("method") == "GET":
            # A GET would open an event stream for server-to-client messages, which the tools
            # never send: held open, such streams would only tie up the server (and outlive a
            # revoked key). The transport lets a server decline them with 405.
            await PlainTextResponse(
                "this MCP endpoint answers POSTed requests only (no event stream)",
                405,
                headers={"Allow": "POST"},
            )(scope, receive, send)
            return
        refused = self._over_budget(scope)
        if refused is not None:
            await refused(scope, receive, send)
            return
        await self._manager.handle_request(scope, receive, send)

    def _over_budget(self, scope: Scope) -> Response | None:
        """HTTP 429 with ``Retry-After`` for a key that has used its server time, as GraphQL
        answers it (the call's own points are spent, or refused, as it is made)."""
        admitted = scope.get(ADMITTED)
        key = admitted[1] if admitted else None
        if self.admission is None or key is None:
            return None
        try:
            self.admission.server_time.check(key.id)
        except CostError as exc:
            body = {
                "jsonrpc": "2.0",
                "id": None,
                "error": {
                    "code": INVALID_REQUEST,
                    "message": exc.message,
                    "data": {"code": exc.code},
                },
            }
            return Response(
                json.dumps(body),
                429,
                headers={"Retry-After": str(exc.retry_after or 1)},
                media_type="application/json",
            )
        return None


def _validated(model: type[BaseModel], arguments: dict[str, Any]) -> BaseModel:
    check_arguments(arguments)
    try:
        return model.model_validate(arguments)
    except ValidationError as exc:
        problems = [
            f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in exc.errors()
        ]
        raise InvalidInput("; ".join(problems)) from None


def _error(code: str, message: str) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(text=f"{code}: {message}")],
        structured_content={"error": {"code": code, "message": message}},
        is_error=True,
    )


def _rebinding_protection(loopback: bool) -> TransportSecuritySettings | None:
    """Host and Origin checks for a server bound to loopback; none otherwise (then API keys are
    required, and a page in a browser has none to send)."""
    if not loopback:
        return None
    names = ("127.0.0.1", "localhost", "[::1]")
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[*names, *(f"{n}:*" for n in names)],
        allowed_origins=[o for n in names for o in (f"http://{n}", f"http://{n}:*")],
    )
