"""``AsyncClient``: the ``Client`` verbs as coroutines (see :mod:`graphmem.client`)."""

from __future__ import annotations

import functools
import os
from collections.abc import AsyncGenerator, Iterable, Sequence
from typing import Any

import anyio.to_thread
from websockets.asyncio.client import connect
from websockets.exceptions import WebSocketException
from websockets.typing import Subprotocol

from ..capture import CaptureResult
from ..categorize import CategoryInfo, ClassifyReport
from ..checkpoints import Checkpoint
from ..consolidation import ConsolidateReport
from ..documents import DocumentFile
from ..episodes import Episode
from ..erasure import Erasure, PurgeReport
from ..errors import Code, shown_url
from ..graph import Path, Subgraph
from ..models import Change, Fact, Link, MaintenanceRun, SearchHit, StoreResult
from ..prune import PruneReport
from ..recall import RecallResult
from ..reflection import ReflectReport
from ..stats import Stats
from ..storage.interface import FactPage
from .sync import CONNECT_TIMEOUT_S, Client
from .wire import ChangeFeed, ServiceError


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

    async def pin(self, fact_id: str) -> Fact:
        """See ``Client.pin``."""
        fact: Fact = await self._run("pin", fact_id)
        return fact

    async def unpin(self, fact_id: str) -> Fact:
        """See ``Client.unpin``."""
        fact: Fact = await self._run("unpin", fact_id)
        return fact

    async def set_cold(self, fact_id: str, cold: bool = True) -> Fact:
        """See ``Client.set_cold``."""
        fact: Fact = await self._run("set_cold", fact_id, cold)
        return fact

    async def checkpoint(self, intent: str, **options: Any) -> Fact:
        """See ``Client.checkpoint``."""
        fact: Fact = await self._run("checkpoint", intent, **options)
        return fact

    async def restore_checkpoint(self) -> Checkpoint | None:
        """See ``Client.restore_checkpoint``."""
        found: Checkpoint | None = await self._run("restore_checkpoint")
        return found

    async def prune(self, **options: Any) -> PruneReport:
        """See ``Client.prune``."""
        report: PruneReport = await self._run("prune", **options)
        return report

    async def maintain(
        self, jobs: Sequence[str] | None = None, **options: Any
    ) -> list[MaintenanceRun]:
        """See ``Client.maintain``."""
        return list(await self._run("maintain", jobs, **options))

    async def maintenance_runs(self, **options: Any) -> list[MaintenanceRun]:
        """See ``Client.maintenance_runs``."""
        return list(await self._run("maintenance_runs", **options))

    async def reflect(self, **options: Any) -> ReflectReport:
        """See ``Client.reflect``."""
        report: ReflectReport = await self._run("reflect", **options)
        return report

    async def consolidate(self, **options: Any) -> ConsolidateReport:
        """See ``Client.consolidate``."""
        report: ConsolidateReport = await self._run("consolidate", **options)
        return report

    async def auto_classify(self) -> ClassifyReport:
        """See ``Client.auto_classify``."""
        report: ClassifyReport = await self._run("auto_classify")
        return report

    async def categories(self) -> list[CategoryInfo]:
        """See ``Client.categories``."""
        return list(await self._run("categories"))

    async def stats(self) -> Stats:
        """See ``Client.stats``."""
        stats: Stats = await self._run("stats")
        return stats

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
