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
the server. A tool that does not exist is not a tool's failure but the request's: a JSON-RPC
error -32602 (Invalid params, ``data.code`` ``INVALID_INPUT``), as the protocol asks of an
error in finding the tool.

JSON can spell a lone UTF-16 surrogate (``"\\ud800"``), which the SDK's parser (pydantic's)
refuses: over HTTP it would answer a parse error, on stdio nothing at all. Such a request is
read here with the standard parser (``lenient_request``) and answered as the same call made in
process is: ``INVALID_INPUT`` naming the argument (``not_text_answer``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import weakref
from collections.abc import AsyncIterator, Callable, Mapping
from importlib.metadata import version
from typing import Any, Final, Self

import anyio
import anyio.to_thread
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp.shared.message import SessionMessage
from mcp_types import (
    DEFAULT_NEGOTIATED_VERSION,
    INVALID_PARAMS,
    CallToolRequestParams,
    CallToolResult,
    ErrorData,
    JSONRPCError,
    JSONRPCRequest,
    JSONRPCResponse,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
)
from mcp_types.methods import serialize_server_result
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import (
    BaseModel,
    ValidationError,
)
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from graphmem import ApiKey, Forbidden, GraphmemError, InvalidInput, Memory, Settings, tracing
from graphmem.consolidation import MAX_CONSIDERED
from graphmem.errors import Code, QueryTimeout

from ..cost import HEAVY_COST, CostError, capture_points, rerank_work
from ..fairness import Admission
from ..graphql.schema import unexpected_log
from ..http.auth import ADMITTED, INVALID_REQUEST, replaying
from ..inputs import check_arguments, problem
from .tools import (
    BY_NAME,
    TOOLS,
    CaptureArgs,
    ConsolidateArgs,
    MaintainArgs,
    ProfileArgs,
    RecallArgs,
    ReflectArgs,
    Result,
    SearchArgs,
    Tool,
)

#: The tools the rerank stage runs in: a search (its ``rerank``, else the server's setting) and
#: recall (the setting's).
RERANKED_ARGS: Final = (SearchArgs, RecallArgs)
#: The server's name in the MCP handshake.
SERVER_NAME: Final = "graphmem"
#: Where a client that meets a 401 looks for OAuth: the protected resource's metadata (RFC 9728,
#: at the root and for /mcp), the authorization server's (RFC 8414, OpenID discovery) and, with
#: neither, registration at its default path (RFC 7591). graphmem has no OAuth, only API keys;
#: these answer 404 at once with a body saying so, which such a client shows when it gives up.
OAUTH_PATHS: Final = (
    "/.well-known/oauth-protected-resource",
    "/.well-known/oauth-protected-resource/mcp",
    "/.well-known/oauth-authorization-server",
    "/.well-known/oauth-authorization-server/mcp",
    "/.well-known/openid-configuration",
    "/register",
)
NO_OAUTH: Final = (
    "graphmem has no OAuth: /mcp takes an API key, sent as 'Authorization: Bearer <key>' "
    "(graphmem create-key makes one)"
)
#: The JSON escape of a UTF-16 surrogate (``\ud800`` to ``\udfff``): a body without one holds
#: no lone surrogate, and is left to the SDK at no cost.
_SURROGATE_ESCAPE: Final = re.compile(rb"\\u[dD][89abcdefABCDEF]")


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
    """Run one tool call; every failure becomes a tool error (see the module docstring), but
    for a tool that does not exist: MCPError -32602. The call is answered ``TIMEOUT`` past the
    ``request_timeout`` setting (its work, already in a thread, finishes there)."""
    tool = BY_NAME.get(name)
    if tool is None:
        raise MCPError(
            INVALID_PARAMS,
            f"unknown tool {name!r}; the tools are {', '.join(BY_NAME)}",
            {"code": Code.INVALID_INPUT},
        )
    try:
        args = _validated(tool.args, arguments)
        memory, key = caller(ctx)
        if tool.writes(args) and key is not None and key.read_only:
            raise Forbidden(f"API key {key.id} is read-only")
        admission = admission or _own_admission(memory.settings)
        key_id = None if key is None else key.id
        cost = tool_cost(args, memory.settings.reranker)
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


def tool_cost(args: BaseModel, default_rerank: str = "none") -> int:
    """What a tool call spends of its key's points: the most results it may return (its
    ``limit`` or ``max_nodes``), the items it works on (``COUNTED_ITEMS``; a capture's turn
    parts), or its work (``TOOL_WORK``; listing maintenance runs is not work), at least 1;
    a search or recall reranked by a reranker that sends a request (the one it names, else
    ``default_rerank``, the server's setting) HEAVY_COST more."""
    sizes = [getattr(args, name, None) for name in ("limit", "max_nodes")]
    items = [getattr(args, name, None) for name in COUNTED_ITEMS]
    work = 0 if getattr(args, "list_runs", False) else TOOL_WORK.get(type(args), 0)
    if isinstance(args, CaptureArgs):
        work = capture_points(m.content for m in args.messages)
    if isinstance(args, RERANKED_ARGS):  # a request to a reranker, as in GraphQL
        work += rerank_work(getattr(args, "rerank", None), default_rerank)
    if isinstance(args, ProfileArgs) and args.summary:  # a request to the chat model
        work += HEAVY_COST
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
            readable = _LenientLines(read, write)
            await server.run(readable, write, server.create_initialization_options())

    anyio.run(run)


def no_oauth_routes() -> list[Route]:
    """The routes of ``OAUTH_PATHS``: 404, with ``NO_OAUTH`` as the error's description."""

    async def refuse(request: Request) -> Response:
        return JSONResponse({"error": "not_found", "error_description": NO_OAUTH}, 404)

    return [Route(path, refuse, methods=["GET", "POST"]) for path in OAUTH_PATHS]


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
        body, receive = await _buffered(receive)
        answer = _surrogate_reply(scope, body)
        if answer is not None:
            await answer(scope, receive, send)
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


def lenient_request(raw: str | bytes) -> dict[str, Any] | None:
    """The request in ``raw``, read by the standard JSON parser, when a string of its params is
    not text (a lone surrogate, which the SDK's parser refuses; or NUL); None otherwise, and for
    what is not a request with a text id and method (the SDK's own answer stands)."""
    try:
        message = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return None
    request_id, method, params = message.get("id"), message.get("method"), message.get("params")
    if isinstance(request_id, bool) or not isinstance(request_id, int | str):
        return None
    if not isinstance(method, str) or problem([request_id, method]) is not None:
        return None
    if not isinstance(params, dict) or problem(params) is None:
        return None
    return message


def not_text_answer(message: dict[str, Any]) -> CallToolResult | JSONRPCError:
    """How the server answers a request from ``lenient_request``: a call of a known tool whose
    arguments alone hold the string that is not text is that tool's ``INVALID_INPUT`` error
    naming the argument, as the same call made in process gets; any other request -32602
    (Invalid params, ``data.code`` ``INVALID_INPUT``) naming where the string is."""
    params = message["params"]
    arguments = params.get("arguments")
    rest = {key: value for key, value in params.items() if key != "arguments"}
    if (
        message["method"] == "tools/call"
        and params.get("name") in BY_NAME
        and isinstance(arguments, dict)
        and problem(rest) is None
    ):
        try:
            check_arguments(arguments)
        except InvalidInput as exc:
            return _error(exc.code, exc.message)
    where, found = problem(params, "params") or ("params", "a string that is not text")
    return JSONRPCError(
        jsonrpc="2.0",
        id=message["id"],
        error=ErrorData(
            code=INVALID_PARAMS,
            message=f"`{where}` contains {found}",
            data={"code": Code.INVALID_INPUT},
        ),
    )


class _LenientLines:
    """The stdio transport's stream of received messages, with the lines its parser refused
    read again by ``lenient_request``: a tool call whose arguments are not text goes on to the
    server as a request (whose answer is the tool's error, in the protocol the session speaks),
    any other such request is answered -32602 here (``not_text_answer``); the rest is passed on
    as it came."""

    def __init__(self, inner: Any, write: Any) -> None:
        self.inner = inner
        self.write = write

    @property
    def last_context(self) -> Any:  # the sender's context, which the SDK reads of a stream
        return getattr(self.inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        while True:
            item: SessionMessage | Exception = await self.inner.receive()
            message = _refused_line(item)
            if message is None:
                return item
            answer = not_text_answer(message)
            if isinstance(answer, CallToolResult):
                return SessionMessage(JSONRPCRequest.model_validate(message))
            await self.write.send(SessionMessage(answer))

    async def aclose(self) -> None:
        await self.inner.aclose()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _refused_line(item: SessionMessage | Exception) -> dict[str, Any] | None:
    """The request of a line the stdio transport's parser refused (its error keeps the line)
    that ``lenient_request`` reads; None for anything else."""
    if not isinstance(item, ValidationError):
        return None
    errors = item.errors(include_url=False)
    if len(errors) != 1 or errors[0]["type"] != "json_invalid":
        return None
    line = errors[0].get("input")
    return lenient_request(line) if isinstance(line, str) else None


def _surrogate_reply(scope: Scope, body: bytes) -> Response | None:
    """The answer to a request of the handshake protocols (2025-11-25 and before) that the
    SDK's transport cannot parse for a lone surrogate (see the module docstring). Requests
    of 2026-07-28, which the SDK parses with the standard parser, are its own."""
    headers = dict(scope.get("headers", ()))
    named = headers.get(MCP_PROTOCOL_VERSION_HEADER.encode("latin-1"))
    version = DEFAULT_NEGOTIATED_VERSION if named is None else named.decode("latin-1")
    if version not in HANDSHAKE_PROTOCOL_VERSIONS or not _SURROGATE_ESCAPE.search(body):
        return None
    message = lenient_request(body)
    if message is None:
        return None
    answer = not_text_answer(message)
    if isinstance(answer, JSONRPCError):
        reply: JSONRPCError | JSONRPCResponse = answer
    else:  # shaped for the request's protocol version, as the SDK shapes a result
        result = answer.model_dump(by_alias=True, mode="json", exclude_none=True)
        reply = JSONRPCResponse(
            jsonrpc="2.0",
            id=message["id"],
            result=serialize_server_result("tools/call", version, result),
        )
    return Response(
        reply.model_dump_json(by_alias=True, exclude_none=True),
        200,
        media_type="application/json",
    )


async def _buffered(receive: Receive) -> tuple[bytes, Receive]:
    """The request's whole body (the gate has read it already, within ``max_body_bytes``), and
    a ``receive`` that gives it again."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    body = b"".join(chunks)
    return body, replaying(body, receive)


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
