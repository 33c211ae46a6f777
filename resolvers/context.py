"""Per-request context: the namespace's Memory, the caller's key, and the request's DataLoaders.

The loaders return graphmem's own facts and links; the resolvers (``resolvers.types``) wrap them
in GraphQL types, so this module knows nothing of the schema.

Memory's methods block (SQLite, embedding), so every call runs in a worker thread. Nested fields
go through DataLoaders, which gather the loads of one execution step into a single call: a list
of 50 facts with their links and neighbours costs a few queries, not 50 of each.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import anyio.to_thread
from graphql import GraphQLError
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.websockets import WebSocket
from strawberry.dataloader import DataLoader

from graphmem import ApiKey, Fact, Forbidden, KeyStore, Link, Memory
from graphmem.graph import LinkPosition

from .cost import CostError

if TYPE_CHECKING:
    from .events import Broadcaster
    from .fairness import Admission, Turns

#: A read's time scope as the client gave it: (as_of, known_at), None = now.
Scope = tuple[datetime | None, datetime | None]
#: Where ``Fact.links`` pages start and what they hold (see ``Context.links``).
LinksKey = tuple[str, Scope, str, tuple[str, ...] | None, int, LinkPosition | None]
LinksPage = tuple[list[tuple[LinkPosition, Link]], bool]

T = TypeVar("T")
P = ParamSpec("P")


@dataclass
class Context:
    """What every resolver of one request (or one subscription) can use."""

    _memory: Memory | None
    key: ApiKey | None
    request: Request | WebSocket
    broadcaster: Broadcaster
    #: A WebSocket's connection_init payload (where browsers send their key).
    connection_params: dict[str, Any] | None = None
    #: The server's key store, to see a key revoked while a subscription is open.
    keys: KeyStore | None = None
    #: The pools of threads the request's reads and writes run in, shared fairly between keys
    #: (None: anyio's default pool of threads).
    admission: Admission | None = None
    #: The HTTP response whose status and headers the answer takes (a rate limit's 429).
    response: Any = None
    #: Reads run in the calling thread (a thread of the cost lane, itself off the event loop).
    inline: bool = False
    #: The most bytes an answer may come to (``graphql_max_response_bytes``; None: no limit).
    answer_limit: int | None = None
    #: What each event of a subscription spends from its key's points (None: nothing).
    per_event: Callable[[], object] | None = None
    #: Closes the caller's socket without waiting for it to read (a WebSocket's: set by its
    #: handler), for a subscription ended because its subscriber fell behind.
    close_socket: Callable[[], None] | None = None
    _deadline: float | None = field(default=None, init=False)

    # The request's DataLoaders are made on first use: most requests need none of them, and
    # making the four cost about as much as the rest of the context.
    @cached_property
    def _facts(self) -> DataLoader[tuple[str, Scope], Fact | None]:
        return DataLoader(self._load_facts)

    @cached_property
    def _known_now(self) -> DataLoader[str, Fact | None]:
        return DataLoader(self._load_known_now)

    @cached_property
    def _links(self) -> DataLoader[LinksKey, LinksPage]:
        return DataLoader(self._load_links)

    @cached_property
    def _history(self) -> DataLoader[tuple[str, Scope], list[Fact]]:
        return DataLoader(self._load_history)

    @property
    def memory(self) -> Memory:
        if self._memory is None:  # a WebSocket that has not sent its key yet
            raise Forbidden("not authenticated")
        return self._memory

    @memory.setter
    def memory(self, memory: Memory) -> None:
        self._memory = memory

    @property
    def admitted(self) -> bool:
        return self._memory is not None

    def forget_reads(self) -> None:
        """Drop what the DataLoaders have read, so the next reads see memory as it is now
        (before each event of a subscription, whose context lives as long as it does)."""
        for loader in ("_facts", "_known_now", "_links", "_history"):
            self.__dict__.pop(loader, None)

    def for_operation(self, *, own_loop: bool = False) -> Context:
        """A context for one operation of this caller: its own DataLoaders (so nothing read
        by an earlier operation of a socket is served stale) and its own time budget. With
        ``own_loop`` (an operation on the cost lane, which runs on an event loop of its own,
        where this one's pools cannot be awaited) its reads run in the lane's thread instead."""
        if own_loop:
            return dataclasses.replace(self, admission=None, inline=True)
        return dataclasses.replace(self)

    async def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """``fn(*args, **kwargs)``, a read, in a read thread (Memory's calls block) once the
        caller's key has its turn (``resolvers.fairness``); its reads limited by the request's
        time budget (``sql_time_limit``; shared by every field of an HTTP request from its first
        read on, counted afresh per call on a WebSocket, where a subscription lives on)."""
        pool = None if self.admission is None else self.admission.reads
        return await self._call(functools.partial(fn, *args, **kwargs), pool)

    async def write(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """``run`` for a write, in a write thread: it does not wait for a reader's (writes wait
        for their group commit, in the writer's queue)."""
        pool = None if self.admission is None else self.admission.writes
        return await self._call(functools.partial(fn, *args, **kwargs), pool)

    async def _call(self, call: Callable[[], T], pool: Turns | None) -> T:
        memory = self._memory
        limit = 0.0 if memory is None else memory.settings.sql_time_limit
        if memory is None or not limit:
            return call() if self.inline else await self._in_thread(call, pool)

        def limited() -> T:
            if isinstance(self.request, WebSocket):
                seconds = limit
            else:  # counted from when the request's first call starts, not while it waits
                if self._deadline is None:
                    self._deadline = time.monotonic() + limit
                seconds = self._deadline - time.monotonic()
            with memory.time_limit(seconds=seconds):
                return call()

        if self.inline:
            return limited()
        return await self._in_thread(limited, pool)

    async def _in_thread(self, call: Callable[[], T], pool: Turns | None) -> T:
        if pool is None:
            return await anyio.to_thread.run_sync(call)
        try:
            return await pool.run(None if self.key is None else self.key.id, call)
        except CostError as exc:  # too many of the key's calls waiting already
            raise GraphQLError(exc.message, extensions={"code": exc.code}) from None

    @property
    def request_timeout(self) -> float | None:
        """Seconds the request may take in all (the ``request_timeout`` setting; None before a
        socket has presented its key)."""
        return None if self._memory is None else self._memory.settings.request_timeout

    @property
    def may_write(self) -> bool:
        """Whether the caller may write: no key (on loopback), or a read-write key."""
        return self.key is None or not self.key.read_only

    async def require_live_key(self) -> None:
        """Forbidden once the caller's key has been revoked (checked per subscription event)."""
        key, keys = self.key, self.keys
        if (
            key is not None
            and keys is not None
            and not await run_in_threadpool(keys.is_active, key.id)
        ):
            raise Forbidden(f"API key {key.id} has been revoked")

    async def pace_event(self) -> None:
        """Wait until the caller's key may be sent one more subscription event (the setting
        subscription_events_per_second, all the key's subscriptions together)."""
        if self.admission is None:
            return
        wait = self.admission.events.wait(None if self.key is None else self.key.id)
        if wait > 0:
            await asyncio.sleep(wait)

    def charge_event(self) -> None:
        """Spend one subscription event's cost from the caller's points: RATE_LIMITED (which
        ends the subscription) when too few are left."""
        if self.per_event is None:
            return
        try:
            self.per_event()
        except CostError as exc:
            raise GraphQLError(exc.message, extensions={"code": exc.code}) from None

    def require_admin(self) -> None:
        """Forbidden unless the caller may read administrative records: no key (on loopback),
        or an admin key."""
        if self.key is not None and not self.key.admin:
            raise Forbidden(f"API key {self.key.id} is not an admin key")

    def require_write(self) -> None:
        """Forbidden unless the caller may write (see ``may_write``)."""
        if self.key is not None and not self.may_write:
            raise Forbidden(f"API key {self.key.id} is read-only")

    async def fact(self, fact_id: str, scope: Scope) -> Fact | None:
        """The fact (superseded versions included) as seen at ``scope``, or None."""
        return await self._facts.load((fact_id, scope))

    async def known_now(self, fact_id: str) -> Fact | None:
        """The fact as memory knows it now, whatever its state (``Memory.known_now``)."""
        return await self._known_now.load(fact_id)

    async def links(
        self,
        fact_id: str,
        scope: Scope,
        direction: str,
        types: tuple[str, ...] | None,
        first: int,
        after: LinkPosition | None,
    ) -> LinksPage:
        return await self._links.load((fact_id, scope, direction, types, first, after))

    async def history(self, fact_id: str, scope: Scope) -> list[Fact]:
        """The fact's supersession chain as seen at ``scope``, oldest first."""
        return await self._history.load((fact_id, scope))

    async def _load_facts(self, keys: list[tuple[str, Scope]]) -> list[Fact | None]:
        def load() -> dict[tuple[str, Scope], Fact]:
            by_scope: dict[Scope, list[str]] = defaultdict(list)
            for fact_id, scope in keys:
                by_scope[scope].append(fact_id)
            found = {}
            for scope, ids in by_scope.items():
                as_of, known_at = scope
                facts = self.memory.get_many(
                    ids, as_of=as_of, known_at=known_at, include_superseded=True
                )
                found.update({(i, scope): f for i, f in facts.items()})
            return found

        found = await self.run(load)
        return [found.get(k) for k in keys]

    async def _load_known_now(self, ids: list[str]) -> list[Fact | None]:
        found = await self.run(self.memory.known_now, ids)
        return [found.get(i) for i in ids]

    async def _load_links(self, keys: list[LinksKey]) -> list[LinksPage]:
        def load() -> dict[LinksKey, LinksPage]:
            by_args: dict[tuple[Any, ...], list[str]] = defaultdict(list)
            for key in keys:
                by_args[key[1:]].append(key[0])
            pages: dict[LinksKey, LinksPage] = {}
            for args, ids in by_args.items():
                scope, direction, types, first, after = args
                as_of, known_at = scope
                found = self.memory.links_page(
                    ids,
                    direction=direction,
                    types=types,
                    first=first,
                    after=after,
                    as_of=as_of,
                    known_at=known_at,
                )
                pages.update({(i, *args): found[i] for i in ids})
            return pages

        pages = await self.run(load)
        return [pages[k] for k in keys]

    async def _load_history(self, keys: list[tuple[str, Scope]]) -> list[list[Fact]]:
        return await self.run(
            lambda: [self.memory.history(i, as_of=s[0], known_at=s[1]) for i, s in keys]
        )
