"""``MemoryAPI``: the verbs ``Memory`` offers in-process and ``Client`` over a service, as one
typed protocol. Code written against it runs on either; mypy checks that both satisfy it
(tests/core/test_memory_api.py), and that test checks ``AsyncClient`` offers each verb as a
coroutine with the same parameters."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from .capture import CaptureResult
from .categorize import CategoryInfo, ClassifyReport
from .checkpoints import Checkpoint
from .consolidation import ConsolidateReport
from .documents import DocumentFile
from .entities import Entity
from .episodes import Episode
from .erasure import Erasure, PurgeReport
from .graph import Path, Subgraph
from .models import Fact, FactInput, Keep, Link, MaintenanceRun, SearchHit, StoreResult
from .profiles import Profile
from .prune import PruneReport
from .recall import Format, RecallResult
from .reflection import ReflectReport
from .stats import Stats
from .storage.interface import FactPage
from .temporal import TimeInput


class MemoryAPI(Protocol):
    """What a caller of memory may rely on, in-process (``Memory``) or remote (``Client``);
    each verb is documented on ``Memory``."""

    def store(
        self,
        text: str,
        *,
        entity: str | None = ...,
        key: str | None = ...,
        value: str | None = ...,
        category: str | None = ...,
        tags: Sequence[str] | str | None = ...,
        importance: float | None = ...,
        confidence: float | None = ...,
        decay_class: str | None = ...,
        source: str | None = ...,
        summary: str | None = ...,
        why: str | None = ...,
        context: str | None = ...,
        valid_from: TimeInput | None = ...,
        source_date: TimeInput | None = ...,
        expires_at: TimeInput | None = ...,
        supersedes: str | None = ...,
        classify: bool = ...,
        autolink: bool | None = ...,
        entity_links: bool | None = ...,
    ) -> StoreResult: ...
    def store_many(
        self,
        items: Sequence[Mapping[str, Any] | FactInput],
        *,
        autolink: bool | None = ...,
        episode: str | Mapping[str, Any] | None = ...,
    ) -> list[StoreResult]: ...
    def capture(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        episode: str | Mapping[str, Any] | None = ...,
        keep: Keep = ...,
    ) -> list[CaptureResult]: ...
    def forget(self, fact_id: str) -> Fact: ...
    def link(
        self,
        source_id: str,
        target_id: str,
        type: str,
        *,
        strength: float = ...,
        valid_from: TimeInput | None = ...,
        valid_until: TimeInput | None = ...,
        metadata: dict[str, Any] | None = ...,
    ) -> Link: ...
    def unlink(self, link_id: str) -> Link: ...
    def get(
        self, fact_id: str, *, as_of: TimeInput | None = ..., known_at: TimeInput | None = ...
    ) -> Fact | None: ...
    def get_many(
        self,
        ids: Iterable[str],
        *,
        as_of: TimeInput | None = ...,
        known_at: TimeInput | None = ...,
        include_superseded: bool = ...,
    ) -> dict[str, Fact]: ...
    def history(
        self, fact_id: str, *, as_of: TimeInput | None = ..., known_at: TimeInput | None = ...
    ) -> list[Fact]: ...
    def search(
        self,
        query: str,
        *,
        limit: int = ...,
        mode: str = ...,
        tag: str | None = ...,
        category: str | None = ...,
        entity: str | None = ...,
        source: str | None = ...,
        as_of: TimeInput | None = ...,
        known_at: TimeInput | None = ...,
        include_superseded: bool = ...,
        graph_depth: int = ...,
        time_hints: bool = ...,
        episode_links: bool = ...,
    ) -> list[SearchHit]: ...
    def lookup(
        self,
        entity: str,
        *,
        key: str | None = ...,
        tag: str | None = ...,
        as_of: TimeInput | None = ...,
        known_at: TimeInput | None = ...,
        include_superseded: bool = ...,
        limit: int = ...,
    ) -> list[Fact]: ...
    def entities(self, *, known_at: TimeInput | None = ..., limit: int = ...) -> list[Entity]: ...
    def entity(self, name: str, *, known_at: TimeInput | None = ...) -> Entity: ...
    def profile(
        self,
        entity: str,
        *,
        as_of: TimeInput | None = ...,
        known_at: TimeInput | None = ...,
        summary: bool = ...,
    ) -> Profile: ...
    def alias(self, name: str, *, of: str) -> Entity: ...
    def merge_entities(self, a: str, b: str) -> Entity: ...
    def split_alias(self, alias: str) -> Entity: ...
    def rebuild_entities(self) -> int: ...
    def recall(
        self,
        prompt: str,
        *,
        max_tokens: int = ...,
        format: Format = ...,
        graph_depth: int = ...,
        as_of: TimeInput | None = ...,
        known_at: TimeInput | None = ...,
        time_hints: bool = ...,
        episode_links: bool = ...,
        include_cold: bool = ...,
        profile: bool | None = ...,
    ) -> RecallResult: ...
    def links(
        self,
        fact_id: str,
        *,
        direction: str = ...,
        types: Iterable[str] | None = ...,
        as_of: TimeInput | None = ...,
        known_at: TimeInput | None = ...,
    ) -> list[Link]: ...
    def traverse(
        self,
        ids: Iterable[str] | str,
        *,
        depth: int = ...,
        types: Iterable[str] | None = ...,
        direction: str = ...,
        as_of: TimeInput | None = ...,
        known_at: TimeInput | None = ...,
        max_nodes: int = ...,
        min_strength: float = ...,
    ) -> Subgraph: ...
    def path(
        self,
        source_id: str,
        target_id: str,
        *,
        types: Iterable[str] | None = ...,
        direction: str = ...,
        as_of: TimeInput | None = ...,
        known_at: TimeInput | None = ...,
        max_depth: int = ...,
    ) -> Path | None: ...
    def facts(
        self,
        *,
        first: int = ...,
        after: int | None = ...,
        tag: str | None = ...,
        category: str | None = ...,
        entity: str | None = ...,
        source: str | None = ...,
        as_of: TimeInput | None = ...,
        known_at: TimeInput | None = ...,
        include_superseded: bool = ...,
    ) -> FactPage: ...
    def episode(self, episode_id: str) -> Episode | None: ...
    def episodes(
        self,
        *,
        source: str | None = ...,
        after: TimeInput | None = ...,
        before: TimeInput | None = ...,
        limit: int = ...,
    ) -> list[Episode]: ...
    def episode_facts(
        self, episode_id: str, *, as_of: TimeInput | None = ..., known_at: TimeInput | None = ...
    ) -> list[Fact]: ...
    def purge(
        self,
        fact_id: str | None = ...,
        *,
        ids: Iterable[str] | None = ...,
        entity: str | None = ...,
        source: str | None = ...,
        episode: str | None = ...,
        dry_run: bool = ...,
    ) -> PurgeReport: ...
    def erasures(self, *, limit: int = ...) -> list[Erasure]: ...
    def documents(self, *, under: str | os.PathLike[str] | None = ...) -> list[DocumentFile]: ...
    def read_lines(self, path: str | os.PathLike[str], start: int, end: int | None) -> str: ...
    def pin(self, fact_id: str) -> Fact: ...
    def unpin(self, fact_id: str) -> Fact: ...
    def set_cold(self, fact_id: str, cold: bool = ...) -> Fact: ...
    def checkpoint(
        self,
        intent: str,
        *,
        state: Any = ...,
        expected_outcome: str | None = ...,
        working_files: Sequence[str] = ...,
    ) -> Fact: ...
    def restore_checkpoint(self) -> Checkpoint | None: ...
    def prune(self, *, dry_run: bool = ..., soft: bool = ...) -> PruneReport: ...
    def maintain(
        self, jobs: Sequence[str] | None = ..., *, force: bool = ...
    ) -> list[MaintenanceRun]: ...
    def maintenance_runs(
        self, *, job: str | None = ..., limit: int = ...
    ) -> list[MaintenanceRun]: ...
    def reflect(self, *, window_days: float | None = ...) -> ReflectReport: ...
    def consolidate(self, *, dry_run: bool = ...) -> ConsolidateReport: ...
    def auto_classify(self) -> ClassifyReport: ...
    def categories(self) -> list[CategoryInfo]: ...
    def stats(self) -> Stats: ...
