"""API keys in a file of the data directory, ``_keys.sqlite`` (no namespace can be called that:
names start with a letter or digit)."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any, Final

from ...errors import StorageError
from ...files import private_file, private_folder
from ..keys import KeyStore

KEYS_FILE: Final = "_keys.sqlite"
_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS api_keys (
    id          TEXT PRIMARY KEY,
    secret_hash TEXT NOT NULL,
    namespaces  TEXT NOT NULL,
    read_only   INTEGER NOT NULL DEFAULT 0,
    label       TEXT,
    created_at  REAL NOT NULL,
    revoked_at  REAL,
    admin       INTEGER NOT NULL DEFAULT 0
)
"""


class KeyFile(KeyStore):
    """The API keys of a data directory."""

    def __init__(self, data_dir: str | Path) -> None:
        self.path = Path(data_dir) / KEYS_FILE
        #: The key file's state when ``any_active`` last read it, and what it found then.
        self._seen: tuple[tuple[int, int, int] | None, bool] | None = None
        #: Each thread's read connection for ``is_active``, with the file it reads (device,
        #: inode and change time: a file made anew may reuse the inode of one removed).
        self._readers = threading.local()
        self._opened: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._closed = False

    def is_active(self, key_id: str) -> bool:
        """Whether the key with this id exists and is not revoked, read afresh each call (a
        subscription asks at every event) on a connection the thread keeps open: SQLite reads
        what was committed since, by any process. A key file removed or replaced is never read
        through a connection to the old one."""
        if self._closed:  # as the server stops, while a socket's last check may still come
            raise StorageError("the key store is closed")
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            return False
        try:
            conn = self._reader((stat.st_dev, stat.st_ino, stat.st_ctime_ns))
            row = conn.execute(
                "SELECT 1 FROM api_keys WHERE id = ? AND revoked_at IS NULL", [key_id]
            ).fetchone()
        except sqlite3.Error as exc:
            raise StorageError(f"cannot use the key file {self.path}: {exc}") from exc
        return row is not None

    def close(self) -> None:
        """Close the threads' read connections; ``is_active`` opens none again."""
        with self._lock:
            self._closed = True
            opened, self._opened = self._opened, []
        for conn in opened:
            conn.close()

    def _reader(self, file: tuple[int, int, int]) -> sqlite3.Connection:
        held: tuple[tuple[int, int, int], sqlite3.Connection] | None = getattr(
            self._readers, "held", None
        )
        if held is not None and held[0] == file:
            return held[1]
        if held is not None:  # the file was written or replaced: read it afresh
            with self._lock:
                if held[1] in self._opened:
                    self._opened.remove(held[1])
            held[1].close()
        with self._connect():  # the table, as any first use makes it
            pass
        # Read only and autocommit: each statement is its own read of the committed file.
        conn = sqlite3.connect(
            f"{self.path.resolve().as_uri()}?mode=ro",
            uri=True,
            timeout=30,
            check_same_thread=False,
            isolation_level=None,
        )
        self._readers.held = (file, conn)
        with self._lock:
            if self._closed:  # closed meanwhile
                conn.close()
                raise StorageError("the key store is closed")
            self._opened.append(conn)
        return conn

    def any_active(self) -> bool:
        """Whether at least one unrevoked key exists (then every request needs one)."""
        known = self.known_any_active()
        if known is not None:
            return known
        state = self._state()  # before reading: a write after it changes the state again
        with self._connect() as conn:
            active = (
                conn.execute("SELECT 1 FROM api_keys WHERE revoked_at IS NULL").fetchone()
                is not None
            )
        self._seen = (state, active)
        return active

    def known_any_active(self) -> bool | None:
        """``any_active`` without reading the file, when one look at it settles the answer: no
        file, or a file unchanged since ``any_active`` read it (every write to it changes its
        modification time or size). None when the file must be read."""
        state = self._state()
        if state is None:
            return False
        seen = self._seen
        return seen[1] if seen is not None and seen[0] == state else None

    def _state(self) -> tuple[int, int, int] | None:
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            return None
        return (stat.st_mtime_ns, stat.st_size, stat.st_ino)

    def _exists(self) -> bool:
        """Whether any key was ever made (else there is nothing to read)."""
        return self.path.exists()

    @contextmanager
    def _connect(self) -> Iterator[Any]:
        """A connection in one transaction (committed when the block ends): ``execute(sql,
        params)`` with ``?`` placeholders, rows readable by column name."""
        try:
            if not self.path.exists():  # made private, with its folder, before SQLite writes it
                private_file(private_folder(self.path.parent) / self.path.name)
            with closing(sqlite3.connect(self.path, timeout=30)) as conn:
                conn.row_factory = sqlite3.Row
                with conn:  # one transaction, committed on success
                    conn.execute(_SCHEMA)
                    columns = {r[1] for r in conn.execute("PRAGMA table_info(api_keys)")}
                    if "admin" not in columns:  # a key file from before admin keys
                        conn.execute(
                            "ALTER TABLE api_keys ADD COLUMN admin INTEGER NOT NULL DEFAULT 0"
                        )
                    yield conn
        except (sqlite3.Error, OSError) as exc:
            raise StorageError(f"cannot use the key file {self.path}: {exc}") from exc
