"""Shared fixtures: a Memory, or the GraphQL service, on a temporary data directory with the hash
embedder and a controllable clock; and the OpenAI-compatible stub. A test file that needs other
settings overrides ``settings``, and ``mem``, ``app`` and ``service`` follow."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from starlette.applications import Starlette

from graphmem import Memory, Settings
from graphmem.sqlitestore import SQLiteStore
from resolvers import create_app

from .api import InProcess
from .openai_stub import OpenAIStub


class Clock:
    """A settable clock: ``clock()`` returns epoch seconds; ``advance`` moves it forward."""

    def __init__(self, start: str = "2026-01-01T00:00:00+00:00") -> None:
        self.now = datetime.fromisoformat(start).astimezone(UTC).timestamp()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        self.now += seconds
        return self.now

    def set(self, iso: str) -> float:
        self.now = datetime.fromisoformat(iso).astimezone(UTC).timestamp()
        return self.now


def read_connection(memory: Memory) -> sqlite3.Connection:
    """This thread's read connection to the namespace's SQLite store, for the few tests that look
    beneath the API (PRAGMAs, time limits, the embedding cache)."""
    store = memory._store
    assert isinstance(store, SQLiteStore)
    return store._read()


@pytest.fixture(autouse=True)
def _isolated_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Keep the developer's GRAPHMEM_* environment and ./graphmem.toml out of the tests."""
    import os

    for name in list(os.environ):
        if name.startswith("GRAPHMEM_") or name == "OPENAI_API_KEY":
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """The test's data directory: one folder per namespace, and the API keys."""
    return tmp_path / "data"


@pytest.fixture
def settings(data_dir: Path) -> Settings:
    return Settings(embedder="hash", data_dir=data_dir)


@pytest.fixture
def mem(data_dir: Path, clock: Clock, settings: Settings) -> Iterator[Memory]:
    with Memory.open(data_dir, settings=settings, clock=clock) as memory:
        yield memory


@pytest.fixture
def app(settings: Settings, clock: Clock) -> Starlette:
    """The service on ``settings``: keyless (loopback) until the test creates a key."""
    return create_app(settings, clock=clock)


@pytest.fixture
def service(app: Starlette) -> Iterator[InProcess]:
    """A client of ``app`` in this process."""
    with InProcess(app) as client:
        yield client


@pytest.fixture
def stub() -> Iterator[OpenAIStub]:
    """The OpenAI-compatible stub (embeddings and chat) serving on a loopback port."""
    server = OpenAIStub()
    with server:
        yield server
