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
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict
from typing import TYPE_CHECKING, Final

from strawberry.subscriptions.protocols.graphql_transport_ws.handlers import (
    BaseGraphQLTransportWSHandler,
    Operation,
    _OperationStreamClosed,
)
from strawberry.subscriptions.protocols.graphql_transport_ws.types import (
    CompleteMessage,
    ConnectionInitMessage,
    SubscribeMessage,
)
from strawberry.utils.aio import aclosing

from graphmem import ApiKey
from graphmem.limits import MAX_SOCKETS_PER_KEY

from .context import Context

if TYPE_CHECKING:
    from .auth import Authenticator

_log = logging.getLogger("graphmem.server")

#: Seconds between two looks at the keys of the open sockets.
REVOCATION_CHECK_EVERY: Final = 0.5
#: WebSocket close codes: the key no longer admits the socket; too many sockets for its key.
CLOSE_FORBIDDEN: Final = 4403
CLOSE_TOO_MANY: Final = 4429
#: Seconds a socket being closed may take to take its close frame.
CLOSE_WAIT_S: Final = 5.0
#: Seconds a socket may stay open before it presents its key (connection_init).
INIT_WAIT_S: Final = 10.0


class Sockets:
    """The open sockets of one server process, by the key that admitted them (None: none)."""

    def __init__(self, gate: Authenticator, per_key: int | None = None) -> None:
        self.gate = gate
        self.per_key = MAX_SOCKETS_PER_KEY if per_key is None else per_key
        self._by_key: dict[ApiKey | None, set[SocketHandler]] = defaultdict(set)
        self._closing: set[asyncio.Task[None]] = set()

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
        try:
            await super().handle()
        finally:
            self.sockets.discard(self)

    async def handle_connection_init(self, message: ConnectionInitMessage) -> None:
        await super().handle_connection_init(message)
        if self.connection_acknowledged and not self.sockets.add(self, self.context.key):
            await self.refuse(
                f"this API key has {self.sockets.per_key} sockets open already",
                code=CLOSE_TOO_MANY,
            )

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
                await self._send_result_stream(operation, result_source)
            await operation.send_operation_message(
                CompleteMessage(id=operation.id, type="complete")
            )
        except _OperationStreamClosed:
            return
        except Exception as error:
            await self.handle_task_exception(error)
            with contextlib.suppress(Exception):
                await operation.send_operation_message({"id": operation.id, "type": "complete"})
            self.operations.pop(operation.id, None)
            raise

    #: The server closed the socket: it starts nothing more.
    refused = False

    async def refuse(self, reason: str, *, code: int = CLOSE_FORBIDDEN) -> None:
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


def _refusal(key: ApiKey | None) -> str:
    if key is None:
        return "API keys are now required: reconnect with one"
    return f"API key {key.id} has been revoked"
