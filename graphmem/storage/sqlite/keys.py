"""API keys in a file of the data directory, ``_keys.sqlite`` (no namespace can be called that:
names start with a letter or digit)."""

from __future__ import annotations

import sqlite3
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
