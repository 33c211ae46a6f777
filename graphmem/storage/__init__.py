"""Storage: where a namespace's facts, links and keyword index live, behind one interface.

* :mod:`.interface` — ``Store`` and ``Transaction``, everything the engine asks of storage, and
  the types they return.
* :mod:`.sql` — the SQL both engines run (each in its dialect): reads, links, walks, episodes,
  erasure, export, and ``SQLStore``, the store built on it.
* :mod:`.sqlite` — the embedded engine: one SQLite file per namespace (WAL, FTS5), the key file.
* :mod:`.postgres` — one PostgreSQL database every replica shares: the dialect, the schema,
  bm25 from postings, the keys table.
* :mod:`.keys` — API keys, whichever engine keeps them.

Nothing outside this package imports ``sqlite3`` or ``psycopg``, nor the engines' modules
(``tests/project/test_structure.py``): the rest of graphmem opens a store, the keys, a backup
here and speaks to a store through the interface.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import InvalidInput, StorageError
from .postgres import is_postgres_url, redacted

if TYPE_CHECKING:
    from ..settings import Settings
    from .interface import Store
    from .keys import KeyStore


def open_store(
    url: str | None,
    directory: Path,
    namespace: str,
    clock: Callable[[], float] | None,
    settings: Settings,
) -> Store:
    """The store of a namespace: a SQLite file in its directory, or (``url``) a PostgreSQL
    database, on ``clock`` (default: the system's; the database's for PostgreSQL)."""
    if not url:
        from .sqlite.store import SQLITE_FILE, SQLiteStore

        return SQLiteStore(
            directory / SQLITE_FILE, clock or time.time, graph_in_memory=settings.graph_in_memory
        )
    _check_store_url(url)
    with _driver():
        from .postgres.store import PostgresStore  # psycopg is needed only here

    return PostgresStore(url, namespace, clock, graph_in_memory=settings.graph_in_memory)


def open_keys(settings: Settings) -> KeyStore:
    """The API keys of ``settings``: in the PostgreSQL store when there is one (shared by every
    replica), else in the data directory's key file."""
    if settings.store:
        _check_store_url(settings.store)
        with _driver():
            from .postgres.keys import PostgresKeyStore

        return PostgresKeyStore(settings.store)
    from .sqlite.keys import KeyFile

    return KeyFile(settings.data_dir)


def backup(data_dir: Path, destination: Path) -> list[str]:
    """Copy every namespace of the data directory ``data_dir`` (SQLite files) and its key file
    into ``destination`` (:func:`graphmem.storage.sqlite.backup.backup`); the namespaces copied."""
    from .sqlite import backup as files

    return files.backup(data_dir, destination)


def restore(source: Path, data_dir: Path, *, replace: bool = False) -> list[str]:
    """Copy a backup's namespaces and key file into ``data_dir``
    (:func:`graphmem.storage.sqlite.backup.restore`); the namespaces restored."""
    from .sqlite import backup as files

    return files.restore(source, data_dir, replace=replace)


@contextmanager
def _driver() -> Iterator[None]:
    """Imports of the PostgreSQL engine: without its driver, a StorageError saying how to
    install it (the embedded default needs none)."""
    try:
        yield
    except ModuleNotFoundError as exc:
        if not (exc.name or "").startswith("psycopg"):
            raise
        raise StorageError(
            "a postgresql:// store needs the PostgreSQL driver: "
            "pip install 'graphmem[postgres]' (psycopg)"
        ) from exc


def _check_store_url(url: str) -> None:
    if not is_postgres_url(url):
        raise InvalidInput(
            f"store must be a postgresql:// URL (or unset for SQLite files), not {redacted(url)!r}"
        )
