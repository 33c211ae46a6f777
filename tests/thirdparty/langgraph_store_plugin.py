"""A pytest plugin that points LangGraph's own store tests at ``GraphmemStore``.

``tests/thirdparty/test_langgraph_store.py`` loads it (``-p langgraph_store_plugin``) into a
pytest run inside an unpacked sdist of langgraph-checkpoint or langgraph-checkpoint-sqlite,
whose test files are run as shipped. Those files build their stores themselves, from the
classes they import (``InMemoryStore()``, ``SqliteStore.from_conn_string(...)``,
``AsyncSqliteStore.from_conn_string(...)``); once they are collected, this plugin puts in
their place subclasses of ``GraphmemStore`` that each open a new graphmem namespace:

- over a ``Client`` of the live service at ``GRAPHMEM_LANGGRAPH_URL`` when it is set,
- else over a ``Memory`` in a temporary folder (on the PostgreSQL store ``GRAPHMEM_STORE``
  names, when it is set), with the hash embedder.

``index`` is passed on (``text_fields``, the SQLite stores' name for ``fields``, too); the
connection string is not used. Every store a test opens is closed when the test ends.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest

from graphmem import Client, Memory, Settings
from graphmem.integrations.langgraph import GraphmemStore

#: Where the stores are: a live service's URL (a namespace of it each), else in process.
URL_VARIABLE = "GRAPHMEM_LANGGRAPH_URL"

_opened: list[Memory | Client] = []
_folder: list[Path] = []


def _open() -> Memory | Client:
    name = f"lg-{uuid.uuid4().hex[:16]}"
    url = os.environ.get(URL_VARIABLE)
    if url:
        opened: Memory | Client = Client(url, namespace=name)
    else:
        settings = Settings.load(embedder="hash", data_dir=_folder[0])  # GRAPHMEM_STORE too
        opened = Memory.open(_folder[0], namespace=name, settings=settings)
    _opened.append(opened)
    return opened


def _index(index: Any) -> Any:
    """LangGraph's index config with the SQLite stores' ``text_fields`` as ``fields``."""
    if not index or "text_fields" not in index:
        return index
    index = dict(index)
    fields = index.pop("text_fields")
    if fields is not None:
        index["fields"] = fields
    return index


class InMemoryStore(GraphmemStore):
    """In place of ``langgraph.store.memory.InMemoryStore``."""

    def __init__(self, *, index: Any = None) -> None:
        super().__init__(_open(), index=_index(index))


class SqliteStore(GraphmemStore):
    """In place of ``langgraph.store.sqlite.SqliteStore``."""

    @classmethod
    @contextmanager
    def from_conn_string(
        cls, conn_string: str, *, index: Any = None, ttl: Any = None
    ) -> Iterator[SqliteStore]:
        del conn_string, ttl
        yield cls(_open(), index=_index(index))

    def setup(self) -> None:
        """Nothing to create: graphmem's namespace is ready when opened."""


class AsyncSqliteStore(GraphmemStore):
    """In place of ``langgraph.store.sqlite.AsyncSqliteStore``."""

    @classmethod
    @asynccontextmanager
    async def from_conn_string(
        cls, conn_string: str, *, index: Any = None, ttl: Any = None
    ) -> AsyncIterator[AsyncSqliteStore]:
        del conn_string, ttl
        yield cls(_open(), index=_index(index))

    async def setup(self) -> None:
        """Nothing to create: graphmem's namespace is ready when opened."""


REPLACEMENTS: dict[str, type[GraphmemStore]] = {
    "InMemoryStore": InMemoryStore,
    "SqliteStore": SqliteStore,
    "AsyncSqliteStore": AsyncSqliteStore,
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Swap the store classes each collected test module imported for graphmem's."""
    modules = {id(m): m for item in items if (m := getattr(item, "module", None)) is not None}
    for module in modules.values():
        for name, replacement in REPLACEMENTS.items():
            if hasattr(module, name):
                setattr(module, name, replacement)


@pytest.fixture(autouse=True)
def _graphmem_stores(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The test's stores, in a folder of their own, closed when it ends."""
    _folder[:] = [tmp_path_factory.mktemp("graphmem")]
    try:
        yield
    finally:
        while _opened:
            _opened.pop().close()
