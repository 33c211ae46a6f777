"""Fan-out of memory changes to ``memoryChanged`` subscribers.

Memory announces each committed write in the writing thread; the broadcaster hands the changes
to the event loop, which puts them in every subscriber's queue for that namespace. The changes
other processes commit (other workers, other servers on the data directory or the database, a
CLI) are read from the namespace's change log every FOLLOW_CHANGES_EVERY seconds while it has
subscribers (``follow``). A subscriber that falls more than SUBSCRIBER_BACKLOG changes behind (or
whose key's subscriptions hold that many changes waiting between them), or whose namespace's
log dropped changes before they were read, is ended with an error rather than let the server's
memory grow or changes go unheard: the changes it holds are dropped and the error is next. One
that has not taken the error END_WAIT_S later is not reading (its socket's writes wait on the
client): its ``on_end`` is called then, which closes its socket.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Final

from starlette.concurrency import run_in_threadpool

from graphmem import Change, Memory
from graphmem.errors import SubscriberTooSlow
from graphmem.limits import SUBSCRIBER_BACKLOG

_log = logging.getLogger("graphmem")

#: Seconds between two reads of the change log of a namespace with subscribers.
FOLLOW_CHANGES_EVERY: Final = 0.25
#: Seconds a subscription ended for falling behind has to take its error before its ``on_end``
#: is called (its client is not reading).
END_WAIT_S: Final = 5.0


@dataclass(eq=False)
class _Subscriber:
    """One subscription's queue of changes, the key it is counted against, and what to do when
    it is ended for falling behind."""

    key: str | None
    on_end: Callable[[], None] | None
    queue: asyncio.Queue[Change | None] = field(
        default_factory=lambda: asyncio.Queue(SUBSCRIBER_BACKLOG)
    )
    ended: bool = False
    #: It has taken its end marker.
    told: bool = False


class Broadcaster:
    """Subscribers per namespace, fed from the Memory listeners this registers and from the
    namespaces' change logs."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._queues: dict[str, set[_Subscriber]] = defaultdict(set)
        #: Changes waiting in the queues of each key's subscriptions (None: keyless).
        self._backlog: Counter[str | None] = Counter()
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

    async def changes(
        self,
        namespace: str,
        *,
        key: str | None = None,
        on_end: Callable[[], None] | None = None,
    ) -> AsyncIterator[Change]:
        """The changes committed in ``namespace`` from now on, until the caller stops; counted
        against ``key``'s backlog; ``on_end`` called if it is ended for falling behind."""
        subscriber = _Subscriber(key, on_end)
        queue = subscriber.queue
        if namespace not in self._positions:
            # Where the other processes' changes are read from: the log as the subscription
            # starts (read before the queue is added, so none committed after it is missed).
            position = await run_in_threadpool(self._memories[namespace].change_position)
            self._positions.setdefault(namespace, position)
        self._queues[namespace].add(subscriber)
        try:
            while True:
                change = await queue.get()
                if change is not None:
                    self._backlog[key] -= 1
                if change is None:
                    subscriber.told = True
                    raise SubscriberTooSlow(
                        "this subscription fell behind the changes and was ended (more than "
                        f"{SUBSCRIBER_BACKLOG} waiting, or dropped from the namespace's change log "
                        "before it was read); subscribe again and re-read what you need"
                    )
                yield change
        finally:
            subscriber.told = True  # gone: nothing left to close
            self._drop(subscriber)
            self._queues[namespace].discard(subscriber)
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
        for subscriber in list(self._queues.get(namespace, ())):
            self._end(subscriber)

    def _deliver(self, changes: list[Change]) -> None:
        for change in changes:
            for subscriber in list(self._queues.get(change.namespace, ())):
                if subscriber.ended:
                    continue
                if (
                    subscriber.queue.qsize() >= SUBSCRIBER_BACKLOG - 1
                    or self._backlog[subscriber.key] >= SUBSCRIBER_BACKLOG
                ):
                    self._end(subscriber)
                    continue
                subscriber.queue.put_nowait(change)
                self._backlog[subscriber.key] += 1

    def _end(self, subscriber: _Subscriber) -> None:
        """Drop the changes ``subscriber`` holds (it missed others: it must read afresh) and
        queue its end marker; END_WAIT_S later, call its ``on_end`` unless it has taken it."""
        if subscriber.ended:
            return
        self._drop(subscriber)
        subscriber.queue.put_nowait(None)
        subscriber.ended = True
        if subscriber.on_end is not None:
            self._loop.call_later(END_WAIT_S, self._not_reading, subscriber)

    def _not_reading(self, subscriber: _Subscriber) -> None:
        if subscriber.told or subscriber.on_end is None:
            return
        try:
            subscriber.on_end()
        except Exception:  # its socket closes when it next reads or writes
            _log.warning("closing a subscriber that does not read failed", exc_info=True)

    def _drop(self, subscriber: _Subscriber) -> None:
        """Take the changes left in ``subscriber``'s queue (and out of its key's backlog)."""
        queue = subscriber.queue
        while not queue.empty():
            if queue.get_nowait() is not None:
                self._backlog[subscriber.key] -= 1
        if subscriber.key in self._backlog and self._backlog[subscriber.key] <= 0:
            del self._backlog[subscriber.key]
