"""Shared fixtures: a Memory on the hash embedder with a controllable clock."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from graphmem import Memory, Settings
from graphmem.sqlitestore import SQLiteStore


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
def settings() -> Settings:
    return Settings(embedder="hash")


@pytest.fixture
def mem(tmp_path: Path, clock: Clock, settings: Settings) -> Iterator[Memory]:
    with Memory.open(tmp_path / "data", settings=settings, clock=clock) as memory:
        yield memory
