"""Work shared fairly between API keys, and the server time each key may use.

Every blocking call a request makes (a read, a write, a heavy document, an MCP tool call) runs
in one of a few pools of threads, whatever face it came through (GraphQL over HTTP or a
WebSocket, MCP over HTTP or stdio):

1. **Turns** (:class:`Turns`): a pool of ``slots`` threads in which a key runs at most
   ``per_key`` calls at once and queues at most ``queue_per_key`` more (beyond them:
   ``RATE_LIMITED``, try again in a second). When a thread frees, the waiting keys are served in
   turn (the key given a thread longest ago first), so a key with a hundred calls waiting delays
   another key's call by at most one call, never by the hundred. The same turns, without
   threads, bound the requests one key has running at once (``REQUESTS.per_key``), so that the
   short parts requests run on the event loop never line up a thousand deep.
2. **Server time** (:class:`ServerTime`): each key may use ``seconds_per_minute`` of the pools'
   threads, refilled continuously like the cost points (GitHub's secondary rate limits are the
   model). Each call's time is charged to its key when it ends, whatever it cost by estimate; a
   key in debt is refused ``RATE_LIMITED`` (HTTP 429, ``Retry-After``) before it starts anything.
3. **Abandoned work keeps its turn**: a call whose caller stopped waiting (the request's
   deadline passed, the client went away) keeps its thread and its key's turn until it returns,
   so a key cannot pile up work beyond its share by giving up on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import math
import threading
import time
from collections import Counter, deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final, NamedTuple, TypeVar

from graphql import (
    DocumentNode,
    GraphQLSchema,
    OperationDefinitionNode,
    OperationType,
)

from graphmem.errors import Code

from .cost import SUBSCRIPTION_MAX_COST, Buckets, Cost, CostError, cost_of, fragments_of

T = TypeVar("T")

#: What a caller without an API key counts as: one key (keyless access is for one machine's
#: own clients, on loopback).
KEYLESS: Final = "(no key)"
#: Calls one key may have waiting for a thread of one pool; one more is refused RATE_LIMITED.
QUEUE_PER_KEY: Final = 256


class Share(NamedTuple):
    """Places of a pool in one process, and how many of them one key may hold at once."""

    total: int
    per_key: int


#: Heavy documents and heavy MCP calls that run at once (the lane): a key's slow calls (a chat
#: model that answers slowly) hold at most one, and another key's heavy work finds the other.
LANE: Final = Share(total=2, per_key=1)
#: Threads for writes: a write's thread mostly waits for its group commit, so several run at
#: once to be committed together; one key may hold half of them.
WRITES: Final = Share(total=32, per_key=16)
#: Requests (GraphQL queries and mutations on any face, MCP calls) running at once; the others
#: wait their turn. A request's own part on the event loop (completing its answer) is short,
#: but a thousand of one key's at once would each hold every other request up by as much.
REQUESTS: Final = Share(total=512, per_key=32)


class Admission:
    """Who may run what, and where: a schema's cost budget, each key's cost points and server
    time, and the pools of threads their work runs in (reads, writes, the lane), shared by
    GraphQL and MCP."""

    def __init__(
        self,
        budget: int,
        per_minute: int,
        *,
        read_threads: int = 1,
        server_seconds_per_minute: float = 0.0,
        events_per_second: float = 0.0,
        default_rerank: str = "none",
    ) -> None:
        self.budget = budget
        #: The server's ``reranker`` setting: what reranks a search that names no reranker.
        self.default_rerank = default_rerank
        self.buckets = Buckets(per_minute)
        self.server_time = ServerTime(server_seconds_per_minute)
        used = self.server_time
        # A key reads in at most ``read_threads`` threads at once, as one caller always could;
        # the pool has twice that, so another key finds threads free.
        self.reads = Turns("read", 2 * read_threads, read_threads, server_time=used)
        self.writes = Turns("write", *WRITES, server_time=used)
        self.lane = Turns("lane", *LANE, server_time=used)
        self.requests = Turns("request", *REQUESTS)
        self.events = EventRate(events_per_second)

    def admit(
        self,
        schema: GraphQLSchema,
        document: DocumentNode,
        operation: OperationDefinitionNode,
        variables: Mapping[str, Any] | None,
        key_id: str | None,
    ) -> Cost:
        """The document's cost, spent from ``key_id``'s bucket (None: a keyless caller, who
        spends nothing); CostError when over the budget, the bucket or the key's server time."""
        fragments = fragments_of(document)
        cost, unbounded = cost_of(schema, operation, fragments, variables, self.default_rerank)
        budget = self.budget
        if operation.operation is OperationType.SUBSCRIPTION:
            # Each event is answered on the server's event loop, where every request waits.
            budget = min(budget, SUBSCRIPTION_MAX_COST)
            if unbounded:
                raise CostError(
                    Code.TOO_COSTLY,
                    "a subscription's events may not select a list of no bound (a version "
                    "chain, an episode's facts, a traversal): read those with a query when an "
                    "event says something changed",
                )
        if cost > budget:
            raise CostError(
                Code.TOO_COSTLY,
                f"this document may cost {cost:,} (the most list items its answer may hold: "
                f"each list's page size times the items above it), more than the budget of "
                f"{budget:,} (setting graphql_max_cost; a subscription {SUBSCRIPTION_MAX_COST}"
                "): ask for smaller pages, fewer aliases or less nesting",
            )
        return Cost(cost, budget, self.spend(key_id, cost), unbounded)

    def spend(self, key_id: str | None, cost: int) -> float | None:
        """Take ``cost`` points from ``key_id``'s bucket, after making sure it has server time
        left: what is left of its points (None: no rate limit applies); CostError when either
        is spent."""
        if key_id is None:
            return None
        self.server_time.check(key_id)
        if self.buckets.per_minute <= 0:
            return None
        return self.buckets.spend(key_id, cost)

    async def on_lane(self, key_id: str | None, fn: Callable[[], Awaitable[T]]) -> T:
        """``await fn()`` on the lane, in a thread with an event loop of its own (the caller's
        loop is free meanwhile), once ``key_id`` has its turn."""
        return await self.lane.run(key_id, lambda: asyncio.run(_awaited(fn)))

    def close(self) -> None:
        for pool in (self.reads, self.writes, self.lane, self.requests):
            pool.close()


class EventRate:
    """Subscription events per key per second: ``per_second`` (0: no limit), at most a
    second's worth at once. ``wait`` says how long the next event must wait. Used from one event
    loop."""

    def __init__(self, per_second: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_second = per_second
        self.clock = clock
        #: Per key: (events that may go at once, when last counted).
        self._left: dict[str, tuple[float, float]] = {}

    def wait(self, key_id: str | None) -> float:
        """Take one event from ``key_id``'s allowance: the seconds to wait before sending it."""
        if self.per_second <= 0:
            return 0.0
        key = KEYLESS if key_id is None else key_id
        now = self.clock()
        left, then = self._left.get(key, (self.per_second, now))
        left = min(self.per_second, left + (now - then) * self.per_second) - 1
        self._left[key] = (left, now)
        if len(self._left) > 10_000:
            self._left = {k: v for k, v in self._left.items() if v[0] < self.per_second - 1}
        return 0.0 if left >= 0 else -left / self.per_second


async def _awaited(fn: Callable[[], Awaitable[T]]) -> T:
    return await fn()


class ServerTime:
    """Seconds of server threads' time per key: ``seconds_per_minute``, refilled continuously,
    spent when each call ends (a key may go into debt by at most a minute's worth). Keys with
    no limit (``seconds_per_minute`` 0) are never refused. Thread-safe."""

    def __init__(
        self, seconds_per_minute: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.per_minute = seconds_per_minute
        self.clock = clock
        self._lock = threading.Lock()
        #: Per key: (seconds left, when last counted).
        self._left: dict[str, tuple[float, float]] = {}

    def check(self, key_id: str | None) -> None:
        """CostError(RATE_LIMITED) when ``key_id`` has used more than its server time."""
        if key_id is None or self.per_minute <= 0:
            return
        with self._lock:
            left = self._refilled(key_id)
        if left < 0:
            wait = math.ceil(-left / self._rate)
            raise CostError(
                Code.RATE_LIMITED,
                f"this API key has used its {self.per_minute:g} s of server time of the minute "
                f"(the time its requests took in the server's threads); try again in {wait} s "
                "(setting server_seconds_per_minute)",
                retry_after=wait,
            )

    def charge(self, key_id: str | None, seconds: float) -> None:
        """Spend ``seconds`` of ``key_id``'s server time."""
        if key_id is None or self.per_minute <= 0 or seconds <= 0:
            return
        with self._lock:
            left = self._refilled(key_id) - seconds
            self._left[key_id] = (max(left, -self.per_minute), self.clock())
            if len(self._left) > 10_000:  # keys long idle are full again: forget them
                now = self.clock()
                for key, (kept, then) in list(self._left.items()):
                    if kept + (now - then) * self._rate >= self.per_minute:
                        del self._left[key]

    def left(self, key_id: str) -> float:
        """The seconds ``key_id`` has left (negative: in debt)."""
        with self._lock:
            return self._refilled(key_id)

    @property
    def _rate(self) -> float:
        return self.per_minute / 60.0

    def _refilled(self, key_id: str) -> float:
        now = self.clock()
        left, then = self._left.get(key_id, (self.per_minute, now))
        left = min(self.per_minute, left + (now - then) * self._rate)
        self._left[key_id] = (left, now)
        return left


class Turns:
    """A pool of ``slots`` threads served to keys in turn, at most ``per_key`` calls of one key
    at once (see the module docstring). Used from one event loop, the one it is first used in."""

    def __init__(
        self,
        name: str,
        slots: int,
        per_key: int,
        *,
        queue_per_key: int = QUEUE_PER_KEY,
        server_time: ServerTime | None = None,
    ) -> None:
        if slots < 1 or per_key < 1:
            raise ValueError("a pool needs at least one thread, and each key at least one")
        self.name = name
        self.slots = slots
        self.per_key = min(per_key, slots)
        self.queue_per_key = queue_per_key
        self.server_time = server_time
        self._executor: ThreadPoolExecutor | None = None  # made when first needed
        self._free = slots
        self._running: Counter[str] = Counter()
        #: The keys with calls waiting, and when each running or waiting key was last given a
        #: thread (a count of the turns given).
        self._waiting: dict[str, deque[asyncio.Future[None]]] = {}
        self._served: dict[str, int] = {}
        self._turns = 0

    async def run(self, key_id: str | None, fn: Callable[[], T]) -> T:
        """``fn()`` in one of the pool's threads once ``key_id`` (None: a keyless caller) has
        its turn; its time charged to the key (whose server time the caller checked as it
        admitted the request); CostError(RATE_LIMITED) when the key has too many calls waiting.
        Cancelling the wait leaves ``fn`` running, its turn held until it returns."""
        key = KEYLESS if key_id is None else key_id
        await self._turn(key)
        loop = asyncio.get_running_loop()
        started = time.monotonic()

        def ended(_: object) -> None:
            elapsed = time.monotonic() - started
            with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits
                loop.call_soon_threadsafe(self._release, key, key_id, elapsed)

        try:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(
                    self.slots, thread_name_prefix=f"graphmem-{self.name}"
                )
            future = self._executor.submit(contextvars.copy_context().run, fn)
        except BaseException:
            self._release(key, key_id, 0.0)
            raise
        future.add_done_callback(ended)
        return await asyncio.wrap_future(future)

    @contextlib.asynccontextmanager
    async def held(self, key_id: str | None) -> AsyncIterator[None]:
        """A turn without a thread, for the block: for the part of a request done on the event
        loop (counted, not charged as server time)."""
        key = KEYLESS if key_id is None else key_id
        await self._turn(key)
        try:
            yield
        finally:
            self._release(key, None, 0.0)

    def busy(self, key_id: str | None) -> int:
        """The calls of ``key_id`` running now."""
        return self._running[KEYLESS if key_id is None else key_id]

    def waiting(self) -> int:
        return sum(len(queue) for queue in self._waiting.values())

    def close(self) -> None:
        """Stop the threads once their calls return (the server is stopping)."""
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)

    async def _turn(self, key: str) -> None:
        if self._free > 0 and self._running[key] < self.per_key and key not in self._waiting:
            self._take(key)
            return
        queue = self._waiting.get(key)
        if queue is None:
            queue = self._waiting[key] = deque()
        if len(queue) >= self.queue_per_key:
            raise CostError(
                Code.RATE_LIMITED,
                f"this API key has {self.queue_per_key} calls waiting for the server's "
                f"{self.name} threads already (at most {self.per_key} of its calls run at "
                "once): wait for their answers before sending more",
                retry_after=1,
            )
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        queue.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():  # given its turn as it was cancelled
                self._release(key, None, 0.0)
            else:
                with contextlib.suppress(ValueError):
                    queue.remove(waiter)
                if not queue and self._waiting.get(key) is queue:
                    del self._waiting[key]
                    if not self._running[key]:
                        self._served.pop(key, None)
            raise

    def _take(self, key: str) -> None:
        self._free -= 1
        self._running[key] += 1
        self._turns += 1
        self._served[key] = self._turns

    def _release(self, key: str, key_id: str | None, elapsed: float) -> None:
        self._free += 1
        self._running[key] -= 1
        if self._running[key] <= 0:
            del self._running[key]
            if key not in self._waiting:
                self._served.pop(key, None)
        if self.server_time is not None:
            self.server_time.charge(key_id, elapsed)
        self._hand_on()

    def _hand_on(self) -> None:
        """Give free threads to waiting keys, in turn: the key served longest ago first."""
        while self._free > 0:
            eligible = [key for key in self._waiting if self._running[key] < self.per_key]
            if not eligible:
                return
            chosen = min(eligible, key=lambda key: self._served.get(key, 0))
            queue = self._waiting[chosen]
            while queue and queue[0].cancelled():
                queue.popleft()
            if queue:
                self._take(chosen)
                queue.popleft().set_result(None)
            if not queue:
                del self._waiting[chosen]
                if not self._running[chosen]:
                    self._served.pop(chosen, None)
