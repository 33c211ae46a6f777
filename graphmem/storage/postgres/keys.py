"""API keys in a PostgreSQL database (``gm_api_keys``), shared by every replica."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import pq
from psycopg.rows import dict_row

from ...errors import InvalidInput, StorageError
from ..keys import KeyStore
from . import is_postgres_url, redacted
from . import schema as pgschema
from .dialect import message
from .store import server_connection


class PostgresKeyStore(KeyStore):
    """The API keys in a PostgreSQL database (``gm_api_keys``), shared by every replica: a key
    made or revoked through one is seen by the next request to any other. Every check is one
    query on one connection of its own (reconnected when the server dropped it)."""

    _table = "gm_api_keys"
    _arg = "%s"

    def __init__(self, url: str) -> None:
        if not is_postgres_url(url):
            raise InvalidInput(f"not a PostgreSQL URL: {redacted(url)!r}")
        self.url = url
        self.where = redacted(url)
        self._lock = threading.Lock()
        self._conn: psycopg.Connection[Any] | None = None
        self._closed = False

    def known_any_active(self) -> bool | None:
        return None  # only the database knows (another replica may have made a key)

    def _exists(self) -> bool:
        return True

    @contextmanager
    def _connect(self) -> Iterator[Any]:
        with self._lock:
            if self._closed:  # a late check (a socket's, as the server stops) opens nothing
                raise StorageError(f"the API keys in {self.where} are closed")
            try:
                conn = self._begin()
                try:
                    yield conn.cursor(row_factory=dict_row)
                    conn.execute("COMMIT")
                finally:
                    if conn.info.transaction_status != pq.TransactionStatus.IDLE:
                        with contextlib.suppress(psycopg.Error):
                            conn.execute("ROLLBACK")
            except psycopg.Error as exc:
                raise StorageError(
                    f"cannot use the API keys in {self.where}: {message(exc)}"
                ) from None

    def _begin(self) -> psycopg.Connection[Any]:
        """The key store's connection with a transaction begun: a new connection when there is
        none, and once more when the server dropped the one there was while it sat idle (the
        BEGIN never ran), so the first request after a restart is admitted."""
        if self._conn is not None and not (self._conn.closed or self._conn.broken):
            try:
                self._conn.execute("BEGIN")
                return self._conn
            except psycopg.OperationalError:
                if not self._conn.broken:
                    raise
        if self._conn is not None:
            self._conn.close()
        self._conn = server_connection(self.url)
        pgschema.apply(self._conn)
        self._conn.execute("BEGIN")
        return self._conn

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._conn is not None:
                self._conn.close()
