"""The WebSockets of ``/graphql`` (graphql-transport-ws): keys checked per operation.

1. A socket presents its key once (a header, or its connection_init payload), but each
   operation it starts (query, mutation or subscription) is let in only while that key still
   admits it (``Authenticator.still_admitted``); else the socket is closed with 4403. Each
   subscription event checks again (``resolvers.subscriptions``).
2. :meth:`Sockets.watch` closes (4403) every socket of a key revoked since, whether or not it
   sends anything: a revoked key loses its sockets within a second, on every replica.
3. Each operation runs with a context of its own (its own DataLoaders), so an answer never
   comes from what an earlier operation on the socket read.
4. Limits: ``MAX_SUBSCRIPTIONS_PER_SOCKET`` operations at once per socket; ``MAX_SOCKETS_PER_KEY``
   sockets per key in a process (one more is closed with 4429); ``INIT_WAIT_S`` to present the
   key (4408).
5. Before its key is acknowledged a socket is cheap to open and costs nobody, so such sockets
   are bounded apart: ``MAX_UNACKNOWLEDGED_SOCKETS`` in a process and
   ``MAX_UNACKNOWLEDGED_PER_ADDRESS`` from one client address (one more is refused at the
   upgrade with HTTP 503 or 429), and ``WebSocketProtocol`` (what ``graphmem serve`` runs) holds
   their messages to ``MAX_INIT_MESSAGE_BYTES`` and ends them at their deadline even when they
   do not read.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter, defaultdict
from enum import IntEnum
from typing import TYPE_CHECKING, Any, Final

from cross_web import HTTPException
from starlette.responses import Response
from starlette.types import Scope
from strawberry.http.exceptions import WebSocketDisconnected
from strawberry.subscriptions.protocols.graphql_transport_ws.handlers import (
    BaseGraphQLTransportWSHandler,
    Operation,
)
from strawberry.subscriptions.protocols.graphql_transport_ws.types import (
    CompleteMessage,
    ConnectionInitMessage,
    SubscribeMessage,
)
from strawberry.utils.aio import aclosing
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

from graphmem import ApiKey
from graphmem.errors import Code
from graphmem.limits import MAX_SOCKETS_PER_KEY

from ..context import Context
from ..graphql.fastpaths import OperationStreamClosed, send_result_stream
from .answers import refusal

if TYPE_CHECKING:
    from uvicorn._types import ASGIReceiveEvent, ASGISendEvent
    from websockets.http11 import Request

    from .auth import Authenticator

_log = logging.getLogger("graphmem.server")

#: Seconds between two looks at the keys of the open sockets.
REVOCATION_CHECK_EVERY: Final = 0.5
#: Seconds a socket being closed may take to take its close frame.
CLOSE_WAIT_S: Final = 5.0
#: Seconds a socket may stay open before it presents its key (connection_init).
INIT_WAIT_S: Final = 10.0
#: Sockets not yet acknowledged (connection_init not yet answered with connection_ack) in one
#: server process, and from one client address: one more is refused at the upgrade with HTTP
#: 503 or 429 respectively, with Retry-After.
MAX_UNACKNOWLEDGED_SOCKETS: Final = 512
MAX_UNACKNOWLEDGED_PER_ADDRESS: Final = 32
#: Bytes a message may hold before its socket is acknowledged (connection_init needs a few
#: hundred); a larger one closes the socket with 1009 before its payload is read. After the
#: acknowledgement the server's ``ws_max_size`` holds (``graphmem serve``: ``max_body_bytes``).
MAX_INIT_MESSAGE_BYTES: Final = 65_536
#: The ASGI scope extension by which ``WebSocketProtocol`` lets the app lift the limit above.
ACKNOWLEDGED_EXTENSION: Final = "graphmem.websocket.acknowledged"
#: Where ``Sockets.arrive`` marks, in the scope, a socket it counts as unacknowledged.
_WAITING: Final = "graphmem.waiting"


class Close(IntEnum):
    """The WebSocket close codes of the server's own refusals."""

    #: The key no longer admits the socket.
    FORBIDDEN = 4403
    #: Too many sockets for its key.
    TOO_MANY = 4429
    #: A subscription on it fell too far behind and its client is not reading.
    NOT_READING = 4413


class Sockets:
    """The open sockets of one server process: by the key that admitted them (None: none),
    and, by client address, those whose key is not acknowledged yet."""

    def __init__(self, gate: Authenticator, per_key: int | None = None) -> None:
        self.gate = gate
        self.per_key = MAX_SOCKETS_PER_KEY if per_key is None else per_key
        self.unacknowledged = MAX_UNACKNOWLEDGED_SOCKETS
        self.per_address = MAX_UNACKNOWLEDGED_PER_ADDRESS
        self._by_key: dict[ApiKey | None, set[SocketHandler]] = defaultdict(set)
        self._waiting: Counter[str] = Counter()
        self._closing: set[asyncio.Task[None]] = set()

    def arrive(self, scope: Scope) -> Response | None:
        """Count the socket of ``scope`` as waiting for its acknowledgement, until
        ``acknowledged``; or, counting nothing, the HTTP answer that refuses its upgrade when
        the process (503) or its client address (429) holds as many such sockets as it may."""
        address = scope["client"][0] if scope.get("client") else ""
        if self._waiting.total() >= self.unacknowledged:
            held = f"this server holds {self.unacknowledged} sockets that have not presented a key"
            return _busy(503, held)
        if self._waiting[address] >= self.per_address:
            held = f"{self.per_address} sockets from {address} have not presented a key yet"
            return _busy(429, held)
        self._waiting[address] += 1
        scope[_WAITING] = address
        return None

    def acknowledged(self, scope: Scope) -> None:
        """The socket of ``scope`` no longer waits (acknowledged, or closed); once only."""
        address = scope.pop(_WAITING, None)
        if address is None:
            return
        self._waiting[address] -= 1
        if not self._waiting[address]:
            del self._waiting[address]

    def add(self, socket: SocketHandler, key: ApiKey | None) -> bool:
        """Count ``socket`` as open with ``key``; False (nothing counted) when the key holds
        ``per_key`` sockets already."""
        held = self._by_key[key]
        if key is not None and len(held) >= self.per_key:
            return False
        held.add(socket)
        return True

    def discard(self, socket: SocketHandler) -> None:
        for key, held in list(self._by_key.items()):
            held.discard(socket)
            if not held:
                del self._by_key[key]

    async def watch(self, every: float = REVOCATION_CHECK_EVERY) -> None:
        """Every ``every`` seconds, until cancelled: close the sockets whose key (or keyless
        access) no longer admits them. Each replica asks the key store its replicas share."""
        while True:
            await asyncio.sleep(every)
            try:
                await self.check()
            except Exception:  # looked at again next time; the loop must go on
                _log.warning("checking the keys of open sockets failed", exc_info=True)

    async def check(self) -> None:
        for key, held in list(self._by_key.items()):
            if not held or await self.gate.still_admitted(key):
                continue
            for socket in list(held):
                # Each closed on its own: a client that stops reading must not hold up the
                # closing of another's socket.
                task = asyncio.create_task(socket.refuse(_refusal(key)))
                self._closing.add(task)
                task.add_done_callback(self._closing.discard)


class SocketHandler(BaseGraphQLTransportWSHandler[Context, None]):
    """strawberry's graphql-transport-ws handler, admitting each operation on its own: while
    its socket's key is live, or, for a socket let in without a key, while keyless access
    still holds."""

    @property
    def sockets(self) -> Sockets:
        sockets: Sockets = self.view.sockets  # type: ignore[attr-defined]
        return sockets

    async def handle(self) -> None:
        # Each operation's context is a copy of this one: a subscription that falls behind
        # while its client does not read closes the socket (resolvers.events).
        self.context.close_socket = self._not_reading
        try:
            await super().handle()
        except HTTPException:  # JSON that json cannot convert (GraphQLApp.decode_json)
            with contextlib.suppress(Exception):  # already closed by the client
                await self.handle_invalid_message("WebSocket message must be valid JSON")
        finally:
            self.sockets.discard(self)

    async def handle_connection_init(self, message: ConnectionInitMessage) -> None:
        await super().handle_connection_init(message)
        if not self.connection_acknowledged:
            return
        scope = self.context.request.scope
        self.sockets.acknowledged(scope)
        if not self.sockets.add(self, self.context.key):
            await self.refuse(
                f"this API key has {self.sockets.per_key} sockets open already",
                code=Close.TOO_MANY,
            )
            return
        lift = (scope.get("extensions") or {}).get(ACKNOWLEDGED_EXTENSION)
        if lift is not None:  # served by WebSocketProtocol: messages up to ws_max_size now
            lift["lift"]()

    async def handle_subscribe(self, message: SubscribeMessage) -> None:
        key = self.context.key
        if self.connection_acknowledged and not await self.sockets.gate.still_admitted(key):
            await self.refuse(_refusal(key))
            return
        if not self.refused:  # not closed by the server's look at its keys meanwhile
            await super().handle_subscribe(message)

    async def run_operation(self, operation: Operation[Context, None]) -> None:
        """strawberry's, with a context of the operation's own."""
        try:
            result_source = await self.schema.stream(
                operation.query,
                variable_values=operation.variables,
                context_value=self.context.for_operation(),
                root_value=self.root_value,
                operation_name=operation.operation_name,
            )
            async with aclosing(result_source):
                await send_result_stream(self, operation, result_source)
            await operation.send_operation_message(
                CompleteMessage(id=operation.id, type="complete")
            )
        except OperationStreamClosed:
            return
        except WebSocketDisconnected:  # the client went away mid-stream: nothing to say
            self.operations.pop(operation.id, None)
            return
        except Exception as error:
            await self.handle_task_exception(error)
            with contextlib.suppress(Exception):
                await operation.send_operation_message({"id": operation.id, "type": "complete"})
            self.operations.pop(operation.id, None)
            raise

    #: The server closed the socket: it starts nothing more.
    refused = False
    _closing: asyncio.Task[None] | None = None

    def _not_reading(self) -> None:
        if self._closing is None and not self.refused:
            self._closing = asyncio.create_task(
                self.refuse(
                    "a subscription fell too far behind while the client read nothing",
                    code=Close.NOT_READING,
                )
            )

    async def refuse(self, reason: str, *, code: int = Close.FORBIDDEN) -> None:
        """Close the socket with ``code``, ending every operation on it (at most
        CLOSE_WAIT_S spent on a client that does not read the close)."""
        self.refused = True
        self.sockets.discard(self)
        for operation_id in list(self.operations):
            await self.cleanup_operation(operation_id)
        with contextlib.suppress(Exception):  # already closed by the client, or not reading
            await asyncio.wait_for(
                self.websocket.close(code=code, reason=reason[:120]), CLOSE_WAIT_S
            )


class WebSocketProtocol(WebSocketsSansIOProtocol):
    """uvicorn's websockets-sansio protocol (``ws=`` of ``graphmem serve``), made to hold
    against a client that sends without reading:

    1. While the socket's write buffer is over its high-water mark (the client is not reading
       the pongs of its pings, or the answers it asked for), nothing more is read from it: its
       frames wait in its own kernel buffers, not in the server's memory. uvicorn's answers
       every ping whatever the buffer holds.
    2. A close the client cannot take (its writes are paused) aborts the connection at once,
       and one it has not finished ``CLOSE_WAIT_S`` after the app ended is aborted then (as is
       a socket that failed uvicorn's keepalive): a deadline (connection_init's 4408, a
       revoked key's 4403) ends the socket whether or not the client reads.
    3. Until the app says the socket is acknowledged (``ACKNOWLEDGED_EXTENSION``), a message may
       hold at most ``MAX_INIT_MESSAGE_BYTES``: a larger one is refused with 1009 from its
       frame's header, before its payload is read. Then ``ws_max_size`` holds.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.conn.max_message_size = min(MAX_INIT_MESSAGE_BYTES, self.config.ws_max_size)
        # uvicorn types its logger as a Logger; the adapter answers every call it makes of it.
        self.logger = _Refusals(self.logger, self)  # type: ignore[assignment]

    def handle_connect(self, event: Request) -> None:
        super().handle_connect(event)
        if self.response.status_code == 101:  # the app runs (not yet: the task is scheduled)
            extensions = self.scope["extensions"]
            assert extensions is not None
            extensions[ACKNOWLEDGED_EXTENSION] = {"lift": self._lift}

    def _lift(self) -> None:
        self.conn.max_message_size = self.config.ws_max_size

    def pause_writing(self) -> None:
        super().pause_writing()
        self.transport.pause_reading()

    def resume_writing(self) -> None:
        super().resume_writing()
        if not self.read_paused:  # else the app has a message to take first
            self.transport.resume_reading()

    async def receive(self) -> ASGIReceiveEvent:
        message = await super().receive()
        if not self.writable.is_set():  # uvicorn resumed reading for the app: not while writes wait
            self.transport.pause_reading()
        return message

    async def send(self, message: ASGISendEvent) -> None:
        if (
            message["type"] == "websocket.close"
            and self.handshake_complete
            and not self.writable.is_set()
        ):
            self.close_sent = True
            self.transport.abort()  # the close frame would wait behind what it does not read
            return
        await super().send(message)

    async def run_asgi(self) -> None:
        await super().run_asgi()
        self.loop.call_later(CLOSE_WAIT_S, self.transport.abort)  # no-op once it has closed

    def keepalive_timeout(self) -> None:
        super().keepalive_timeout()
        self.transport.abort()  # unanswered pings for ws_ping_timeout: nothing left to flush


class _Refusals(logging.LoggerAdapter[logging.Logger]):
    """uvicorn's log of a socket, without the error it logs for every upgrade the app refused
    with an HTTP answer (a denial response, as ``Sockets.arrive``'s 429 and 503): that is not
    an error, and a client refused in a loop would fill the log with it."""

    def __init__(self, logger: logging.Logger, protocol: WebSocketProtocol) -> None:
        super().__init__(logger, {})
        self.protocol = protocol

    @property
    def level(self) -> int:  # uvicorn reads its logger's level
        level: int = self.logger.level
        return level

    def error(self, msg: object, *args: Any, **kwargs: Any) -> None:
        if self.protocol.initial_response is not None and msg == DENIED_WITHOUT_HANDSHAKE:
            return
        super().error(msg, *args, **kwargs)


#: What uvicorn logs when the app answered an upgrade with HTTP instead of accepting it.
DENIED_WITHOUT_HANDSHAKE: Final = "ASGI callable returned without completing handshake."


def _busy(status: int, problem: str) -> Response:
    """The refusal of an upgrade (RATE_LIMITED for one address's sockets, UNAVAILABLE for the
    process's; a browser never shows it: it sees the socket fail), to be tried again once the
    sockets waiting now have presented their key or been closed."""
    code = Code.RATE_LIMITED if status == 429 else Code.UNAVAILABLE
    retry = {"Retry-After": str(int(INIT_WAIT_S))}
    return refusal(status, code, f"{problem}: retry later", headers=retry)


def _refusal(key: ApiKey | None) -> str:
    if key is None:
        return "API keys are now required: reconnect with one"
    return f"API key {key.id} has been revoked"
