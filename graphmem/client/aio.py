"""``AsyncClient``: the ``Client`` verbs as coroutines (see :mod:`graphmem.client`)."""

from __future__ import annotations

import functools
import os
from collections.abc import AsyncGenerator, Iterable, Sequence
from typing import Any

import anyio.to_thread

from ..capture import CaptureResult
from ..documents import DocumentFile
from ..episodes import Episode
from ..erasure import Erasure, PurgeReport
from ..graph import Path, Subgraph
from ..models import Change, Fact, Link, SearchHit, StoreResult
from ..recall import RecallResult
from ..stats import Stats
from ..storage.interface import FactPage
from .sync import Client


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

    async def _run(self, verb: str, *args: Any, **kwargs: Any) -> Any:
        return await anyio.to_thread.run_sync(
            functools.partial(getattr(self.sync, verb), *args, **kwargs)
        )

    async def store(self, text: str, **fields: Any) -> StoreResult:
        """See ``Client.store``."""
        result: StoreResult = await self._run("store", text, **fields)
        return result

    async def store_many(self, items: Sequence[Any], **options: Any) -> list[StoreResult]:
        """See ``Client.store_many``."""
        return list(await self._run("store_many", items, **options))

    async def capture(self, messages: Sequence[Any], **options: Any) -> list[CaptureResult]:
        """See ``Client.capture``."""
        return list(await self._run("capture", messages, **options))

    async def search(self, query: str, **options: Any) -> list[SearchHit]:
        """See ``Client.search``."""
        return list(await self._run("search", query, **options))

    async def recall(self, prompt: str, **options: Any) -> RecallResult:
        """See ``Client.recall``."""
        result: RecallResult = await self._run("recall", prompt, **options)
        return result

    async def get(self, fact_id: str, **options: Any) -> Fact | None:
        """See ``Client.get``."""
        found: Fact | None = await self._run("get", fact_id, **options)
        return found

    async def get_many(self, ids: Iterable[str], **options: Any) -> dict[str, Fact]:
        """See ``Client.get_many``."""
        return dict(await self._run("get_many", list(ids), **options))

    async def facts(self, **options: Any) -> FactPage:
        """See ``Client.facts``."""
        page: FactPage = await self._run("facts", **options)
        return page

    async def lookup(self, entity: str, **options: Any) -> list[Fact]:
        """See ``Client.lookup``."""
        return list(await self._run("lookup", entity, **options))

    async def history(self, fact_id: str, **options: Any) -> list[Fact]:
        """See ``Client.history``."""
        return list(await self._run("history", fact_id, **options))

    async def link(self, source_id: str, target_id: str, type: str, **options: Any) -> Link:
        """See ``Client.link``."""
        made: Link = await self._run("link", source_id, target_id, type, **options)
        return made

    async def unlink(self, link_id: str) -> Link:
        """See ``Client.unlink``."""
        removed: Link = await self._run("unlink", link_id)
        return removed

    async def links(self, fact_id: str, **options: Any) -> list[Link]:
        """See ``Client.links``."""
        return list(await self._run("links", fact_id, **options))

    async def traverse(self, ids: Iterable[str] | str, **options: Any) -> Subgraph:
        """See ``Client.traverse``."""
        sub: Subgraph = await self._run("traverse", ids, **options)
        return sub

    async def path(self, source_id: str, target_id: str, **options: Any) -> Path | None:
        """See ``Client.path``."""
        found: Path | None = await self._run("path", source_id, target_id, **options)
        return found

    async def forget(self, fact_id: str) -> Fact:
        """See ``Client.forget``."""
        fact: Fact = await self._run("forget", fact_id)
        return fact

    async def purge(self, fact_id: str | None = None, **options: Any) -> PurgeReport:
        """See ``Client.purge``."""
        report: PurgeReport = await self._run("purge", fact_id, **options)
        return report

    async def episode(self, episode_id: str) -> Episode | None:
        """See ``Client.episode``."""
        found: Episode | None = await self._run("episode", episode_id)
        return found

    async def episodes(self, **options: Any) -> list[Episode]:
        """See ``Client.episodes``."""
        return list(await self._run("episodes", **options))

    async def episode_facts(self, episode_id: str, **options: Any) -> list[Fact]:
        """See ``Client.episode_facts``."""
        return list(await self._run("episode_facts", episode_id, **options))

    async def documents(self, **options: Any) -> list[DocumentFile]:
        """See ``Client.documents``."""
        return list(await self._run("documents", **options))

    async def read_lines(self, path: str | os.PathLike[str], start: int, end: int | None) -> str:
        """See ``Client.read_lines``."""
        text: str = await self._run("read_lines", path, start, end)
        return text

    async def erasures(self, **options: Any) -> list[Erasure]:
        """See ``Client.erasures``."""
        return list(await self._run("erasures", **options))

    async def stats(self) -> Stats:
        """See ``Client.stats``."""
        stats: Stats = await self._run("stats")
        return stats

    async def changes(self, **options: Any) -> AsyncGenerator[Change, None]:
        """See ``Client.changes``: the changes as they are committed; leaving the loop ends the
        subscription."""
        stream = self.sync.changes(**options)
        done = object()
        try:
            while True:
                change = await anyio.to_thread.run_sync(next, stream, done)
                if not isinstance(change, Change):  # the end
                    return
                yield change
        finally:
            await anyio.to_thread.run_sync(stream.close)
