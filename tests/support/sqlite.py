"""A look beneath the API at a namespace's SQLite store."""

from __future__ import annotations

import sqlite3

from graphmem import Memory
from graphmem.storage.sqlite.store import SQLiteStore


def read_connection(memory: Memory) -> sqlite3.Connection:
    """This thread's read connection to the namespace's SQLite store, for the few tests that look
    beneath the API (PRAGMAs, time limits, the embedding cache)."""
    store = memory._store
    assert isinstance(store, SQLiteStore)
    return store._read()
