"""``AsyncClient``: the ``Client`` verbs as coroutines (see :mod:`graphmem.client`)."""

from __future__ import annotations

import functools
from collections.abc import AsyncGenerator, Callable, Coroutine, Iterable
from typing import Any, Concatenate, ParamSpec, TypeVar

import anyio.to_thread
from websockets.asyncio.client import connect
from websockets.exceptions import WebSocketException
from websockets.typing import Subprotocol

from ..errors import Code, shown_url
from ..models import Change
from .sync import CONNECT_TIMEOUT_S, Client
from .wire import ChangeFeed, ServiceError

_P = ParamSpec("_P")
_R = TypeVar("_R")


def in_thread(
    verb: Callable[Concatenate[Client, _P], _R],
) -> Callable[Concatenate[AsyncClient, _P], Coroutine[Any, Any, _R]]:
    """``Client``'s ``verb`` as a coroutine with its signature, run by the AsyncClient's
    ``Client`` in a worker thread."""

    async def run(client: AsyncClient, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        return await anyio.to_thread.run_sync(lambda: verb(client.sync, *args, **kwargs))

    functools.update_wrapper(run, verb, updated=())
    run.__qualname__ = f"AsyncClient.{verb.__name__}"
    run.__doc__ = f"See ``Client.{verb.__name__}``."
    return run


class AsyncClient:
    """``Client`` for asyncio code: the same verbs as coroutines, each run by a ``Client`` in a
    worker thread (the event loop never waits on the network), and ``changes`` as an async
    iterator. An async context manager that closes its connections on exit."""

    def __init__(self, url: str | None = None, **options: Any) -> None:
        self.sync = Client(url, **options)

    async def aclose(self) -> None:
        """Close the client's connections to the service."""
        await anyio.to_thread.run_sync(self.sync.close)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # Each verb is Client's, with its signature, run in a worker thread.
    store = in_thread(Client.store)
    store_many = in_thread(Client.store_many)
    capture = in_thread(Client.capture)
    search = in_thread(Client.search)
    recall = in_thread(Client.recall)
    get = in_thread(Client.get)
    get_many = in_thread(Client.get_many)
    facts = in_thread(Client.facts)
    lookup = in_thread(Client.lookup)
    entities = in_thread(Client.entities)
    entity = in_thread(Client.entity)
    profile = in_thread(Client.profile)
    alias = in_thread(Client.alias)
    merge_entities = in_thread(Client.merge_entities)
    split_alias = in_thread(Client.split_alias)
    rebuild_entities = in_thread(Client.rebuild_entities)
    history = in_thread(Client.history)
    link = in_thread(Client.link)
    unlink = in_thread(Client.unlink)
    links = in_thread(Client.links)
    traverse = in_thread(Client.traverse)
    path = in_thread(Client.path)
    forget = in_thread(Client.forget)
    purge = in_thread(Client.purge)
    episode = in_thread(Client.episode)
    episodes = in_thread(Client.episodes)
    episode_facts = in_thread(Client.episode_facts)
    documents = in_thread(Client.documents)
    read_lines = in_thread(Client.read_lines)
    erasures = in_thread(Client.erasures)
    pin = in_thread(Client.pin)
    unpin = in_thread(Client.unpin)
    set_cold = in_thread(Client.set_cold)
    checkpoint = in_thread(Client.checkpoint)
    restore_checkpoint = in_thread(Client.restore_checkpoint)
    prune = in_thread(Client.prune)
    maintain = in_thread(Client.maintain)
    maintenance_runs = in_thread(Client.maintenance_runs)
    reflect = in_thread(Client.reflect)
    consolidate = in_thread(Client.consolidate)
    auto_classify = in_thread(Client.auto_classify)
    categories = in_thread(Client.categories)
    stats = in_thread(Client.stats)

    async def changes(self, *, kinds: Iterable[str] | None = None) -> AsyncGenerator[Change, None]:
        """See ``Client.changes``: the changes as they are committed, over an asyncio
        WebSocket (cancelling the task that waits ends it at once); leaving the loop ends the
        subscription."""
        feed = await anyio.to_thread.run_sync(self.sync._feed, kinds)
        try:
            socket = await connect(
                feed.url,
                subprotocols=[Subprotocol(ChangeFeed.SUBPROTOCOL)],
                additional_headers=feed.headers,
                proxy=None,
                open_timeout=min(CONNECT_TIMEOUT_S, self.sync.timeout),
            )
        except (OSError, WebSocketException) as exc:
            raise ServiceError(
                Code.UNAVAILABLE, f"cannot reach {shown_url(feed.url)}: {exc}"
            ) from exc
        async with socket:
            await socket.send(feed.opening)
            async for raw in socket:
                replies, change, ended = feed.receive(raw)
                for reply in replies:
                    await socket.send(reply)
                if change is not None:
                    yield change
                if ended:
                    return
