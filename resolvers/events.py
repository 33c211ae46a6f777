"""Fan-out of memory changes to ``memoryChanged`` subscribers.

Memory announces each committed write in the writing thread; the broadcaster hands the changes
to the event loop, which puts them in every subscriber's queue for that namespace. A subscriber
that falls more than SUBSCRIBER_BACKLOG changes behind is ended with an error rather than let the
server's memory grow.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import AsyncIterator

from graphmem import Change, Memory
from graphmem.errors import SubscriberTooSlow
from graphmem.limits import SUBSCRIBER_BACKLOG


class Broadcaster:
    """Subscribers per namespace, fed from the Memory listeners this registers."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._queues: dict[str, set[asyncio.Queue[Change | None]]] = defaultdict(set)

    def watch(self, memory: Memory) -> None:
        """Forward ``memory``'s changes to its namespace's subscribers (call once per Memory)."""

        namespace = memory.namespace

        def forward(changes: list[Change]) -> None:
            # Without subscribers the event loop is not woken: each wake-up is a write to its
            # pipe, and under load the writing thread then waits for the interpreter lock.
            # A subscription that starts later is owed only the changes committed after it.
            if self._queues.get(namespace):
                self._loop.call_soon_threadsafe(self._deliver, changes)

        memory.subscribe(forward)

    async def changes(self, namespace: str) -> AsyncIterator[Change]:
        """The changes committed in ``namespace`` from now on, until the caller stops."""
        queue: asyncio.Queue[Change | None] = asyncio.Queue(SUBSCRIBER_BACKLOG)
        self._queues[namespace].add(queue)
        try:
            while True:
                change = await queue.get()
                if change is None:
                    raise SubscriberTooSlow(
                        f"this subscription fell more than {SUBSCRIBER_BACKLOG} changes behind and was "
                        "ended; subscribe again and re-read what you need"
                    )
                yield change
        finally:
            self._queues[namespace].discard(queue)

    def subscribers(self, namespace: str) -> int:
        return len(self._queues.get(namespace, ()))

    def _deliver(self, changes: list[Change]) -> None:
        for change in changes:
            for queue in list(self._queues.get(change.namespace, ())):
                if queue.full():
                    continue  # already cut off: its last slot holds the end marker
                if queue.qsize() == SUBSCRIBER_BACKLOG - 1:
                    queue.put_nowait(None)
                    continue
                queue.put_nowait(change)
