"""Fan-out of memory changes to ``memoryChanged`` subscribers.

Memory announces each committed write in the writing thread; the broadcaster hands the changes
to the event loop, which puts them in every subscriber's queue for that namespace. The changes
other processes commit (other workers, other servers on the data directory or the database, a
CLI) are read from the namespace's change log every FOLLOW_CHANGES_EVERY seconds while it has
subscribers (``follow``). A subscriber that falls more than SUBSCRIBER_BACKLOG changes behind,
or whose namespace's log dropped changes before they were read, is ended with an error rather
than let the server's memory grow or changes go unheard.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import AsyncIterator
from typing import Final

from starlette.concurrency import run_in_threadpool

from graphmem import Change, Memory
from graphmem.errors import SubscriberTooSlow
from graphmem.limits import SUBSCRIBER_BACKLOG

_log = logging.getLogger("graphmem")

#: Seconds between two reads of the change log of a namespace with subscribers.
FOLLOW_CHANGES_EVERY: Final = 0.25


class Broadcaster:
    """Subscribers per namespace, fed from the Memory listeners this registers and from the
    namespaces' change logs."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._queues: dict[str, set[asyncio.Queue[Change | None]]] = defaultdict(set)
        self._memories: dict[str, Memory] = {}
        #: Per namespace with subscribers: how far its change log has been read.
        self._positions: dict[str, int] = {}

    def watch(self, memory: Memory) -> None:
        """Forward ``memory``'s changes to its namespace's subscribers (call once per Memory)."""

        namespace = memory.namespace
        self._memories[namespace] = memory

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
        if namespace not in self._positions:
            # Where the other processes' changes are read from: the log as the subscription
            # starts (read before the queue is added, so none committed after it is missed).
            position = await run_in_threadpool(self._memories[namespace].change_position)
            self._positions.setdefault(namespace, position)
        self._queues[namespace].add(queue)
        try:
            while True:
                change = await queue.get()
                if change is None:
                    raise SubscriberTooSlow(
                        "this subscription fell behind the changes and was ended (more than "
                        f"{SUBSCRIBER_BACKLOG} waiting, or dropped from the namespace's change log "
                        "before it was read); subscribe again and re-read what you need"
                    )
                yield change
        finally:
            self._queues[namespace].discard(queue)
            if not self._queues[namespace]:
                self._positions.pop(namespace, None)

    def subscribers(self, namespace: str) -> int:
        return len(self._queues.get(namespace, ()))

    async def follow(self, every: float = FOLLOW_CHANGES_EVERY) -> None:
        """Every ``every`` seconds, until cancelled: hand each namespace's subscribers the
        changes other processes committed since the last look."""
        while True:
            await asyncio.sleep(every)
            for namespace in [n for n, queues in self._queues.items() if queues]:
                try:
                    await self._follow(namespace)
                except Exception:  # tried again at the next look; the loop must go on
                    _log.warning("reading the change log of %s failed", namespace, exc_info=True)

    async def _follow(self, namespace: str) -> None:
        memory = self._memories[namespace]
        while (position := self._positions.get(namespace)) is not None:
            page = await run_in_threadpool(memory.changes_since, position, others_only=True)
            if self._positions.get(namespace) != position:
                return  # everyone left meanwhile (and perhaps someone came back)
            if page.missed:  # its subscriptions end, and the next one starts afresh
                self._end_all(namespace)
                return
            self._positions[namespace] = page.position
            self._deliver(page.changes)
            if not page.more:
                return

    def _end_all(self, namespace: str) -> None:
        """End every subscription of ``namespace`` with the error of one that fell behind."""
        for queue in list(self._queues.get(namespace, ())):
            while not queue.empty():
                queue.get_nowait()
            queue.put_nowait(None)

    def _deliver(self, changes: list[Change]) -> None:
        for change in changes:
            for queue in list(self._queues.get(change.namespace, ())):
                if queue.full():
                    continue  # already cut off: its last slot holds the end marker
                if queue.qsize() == SUBSCRIBER_BACKLOG - 1:
                    queue.put_nowait(None)
                    continue
                queue.put_nowait(change)
