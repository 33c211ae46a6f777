"""A look beneath the API at a namespace's store, in SQL (either engine)."""

from __future__ import annotations

from graphmem import Memory
from graphmem.storage.sql.connections import SQLConnection
from graphmem.storage.sql.store import SQLStore


def read_connection(memory: Memory) -> SQLConnection:
    """This thread's read connection to the namespace's store, for the few tests that look
    beneath the API (PRAGMAs, time limits, the embedding cache): sqlite3's, or on PostgreSQL a
    connection with its surface."""
    store = memory._store
    assert isinstance(store, SQLStore)
    return store._read()
