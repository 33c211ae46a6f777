"""SQLite access: one writer, many readers, WAL, BEGIN IMMEDIATE.

Every write in the process goes through ``Database.write()``, which holds a lock around a single
connection and opens the transaction with ``BEGIN IMMEDIATE`` (a plain BEGIN can fail with
SQLITE_BUSY_SNAPSHOT under concurrency). Readers get a connection of their own per thread.

A failure of the disk (full, read-only, I/O error, damaged file) becomes a StorageError that
says which; the transaction is rolled back, so nothing of it was written. Reads inside
``time_limit`` are interrupted past their deadline (QueryTimeout): SQLite calls a progress
handler every thousand steps of a statement, which stops it once the thread's deadline has
passed.
"""

from __future__ import annotations

import errno
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

from ...errors import QueryTimeout, StorageError
from ...files import private_file
from ..sql.connections import Connections
from ..sql.dialect import SQLITE
from . import migrations

_log = logging.getLogger("graphmem")


#: FULL: an acknowledged write survives a power cut, not only a crash of the process.
_SYNCHRONOUS: Final = "FULL"


#: WAL pages before SQLite copies them into the database file. Larger than the default 1000, so
#: bulk batches (a few MB each) do not each pay for a checkpoint and its fsync.
WAL_AUTOCHECKPOINT_PAGES: Final = 10_000


#: The writer's own threshold: a background thread (``_Checkpointer``) copies the WAL into the
#: database file after commits, off the write path; the writer checkpoints only when the WAL
#: has grown past this many pages anyway (the thread fell behind, or is stopped).
WAL_BACKSTOP_PAGES: Final = 50_000


#: Seconds between two background checkpoints, at least.
CHECKPOINT_EVERY_S: Final = 1.0


#: Bytes of the database file each connection reads through a memory map instead of read calls:
#: graph walks and candidate lookups touch pages all over the file, and mapped pages are shared
#: by every thread's connection (traverse depth 2 at 100k facts: a quarter less CPU). 8 GiB:
#: the whole file of a namespace of a million facts (2.2 GB), whose writes read index pages
#: all over it (with WRITER_CACHE_KIB, a batch's SQL writes at a million facts 455 → 353 ms).
MMAP_BYTES: Final = 1 << 33


#: The writer connection's page cache, in KiB (SQLite's default: 2 MiB). A batch of 1,000 facts
#: dirties thousands of pages of the indexes on random keys; in a larger cache the pages of a
#: large namespace's indexes stay between batches (bench/REPORT.md, "One namespace
#: growing": a batch's SQL writes at a million facts 455 → 380-399 ms; 256 MiB did no better).
WRITER_CACHE_KIB: Final = 65_536


#: How long a connection waits for another process's write lock before failing, in ms.
BUSY_TIMEOUT_MS: Final = 30_000


#: SQLite virtual-machine steps between two checks of a read's deadline (well under 1 ms).
_PROGRESS_STEPS: Final = 1_000


class SQLiteConnection(sqlite3.Connection):
    """sqlite3's connection, with the dialect the shared SQL reads (:mod:`..sql.dialect`)."""

    dialect: Final = SQLITE


class Database(Connections[SQLiteConnection]):
    """A namespace's SQLite file."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        try:
            private_file(path)
        except OSError as exc:
            read_only = exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM)
            reason = "the file or its directory is read-only" if read_only else exc.strerror
            raise StorageError(f"cannot open {path}: {reason}; nothing was written") from exc
        try:
            self._writer = _connect(path)
            migrations.apply(self._writer)
            self._writer.execute(f"PRAGMA wal_autocheckpoint = {WAL_BACKSTOP_PAGES}")
            self._writer.execute(f"PRAGMA cache_size = -{WRITER_CACHE_KIB}")
        except sqlite3.DatabaseError as exc:
            raise storage_error(exc, path, "cannot open") from exc
        self._checkpointer = _Checkpointer(path)

    @contextmanager
    def write(self, *, durable: bool = True) -> Iterator[SQLiteConnection]:
        """A write transaction: commits when the block ends, rolls back if it raises.

        ``durable=False`` commits without flushing to disk (for bookkeeping such as access
        counts): a crash of the process loses nothing, a power cut may lose that commit.
        """
        with self._write_lock:
            self._check_open()
            conn = self._writer
            if conn.in_transaction:  # nested use joins the outer transaction
                yield conn
                return
            try:
                if not durable:
                    conn.execute("PRAGMA synchronous = NORMAL")
                try:
                    conn.execute("BEGIN IMMEDIATE")
                    try:
                        if self.on_write is not None:
                            self.on_write(conn)
                        yield conn
                        conn.execute("COMMIT")
                        self._checkpointer.due()
                    finally:
                        # A failed COMMIT (disk full) can leave the transaction open; the next
                        # write would then join it, and nothing after would ever be committed.
                        if conn.in_transaction:
                            conn.execute("ROLLBACK")
                finally:
                    if not durable:
                        conn.execute(f"PRAGMA synchronous = {_SYNCHRONOUS}")
            except sqlite3.OperationalError as exc:
                raise storage_error(exc, self.path, "cannot write to") from exc

    def analyze(self) -> None:
        with self.write() as conn:
            conn.execute("PRAGMA optimize")

    def scrub(self) -> bool:
        """After deleting data for good: merge the keyword indexes (facts' and windows') into
        one segment each (dropping the deleted entries; ``secure_delete`` zeroes the pages
        freed), then checkpoint the WAL and truncate it, so neither the database nor its WAL
        still holds what was deleted. Returns whether the checkpoint completed (a reader holding
        an older snapshot can delay it)."""
        with self.write() as conn:
            conn.execute("INSERT INTO facts_fts(facts_fts) VALUES ('optimize')")
            conn.execute("INSERT INTO windows_fts(windows_fts) VALUES ('optimize')")
        with self._write_lock, self._checkpointer.paused():
            self._check_open()
            busy, _, _ = self._writer.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        return not busy

    def close(self) -> None:
        self._checkpointer.stop()
        super().close()

    def reader(self) -> SQLiteConnection:
        """This thread's read connection (autocommit: each statement sees the latest commit)."""
        self._check_open()
        conn: SQLiteConnection | None = getattr(self._local, "conn", None)
        if conn is None:
            try:
                conn = _connect(self.path)
            except sqlite3.DatabaseError as exc:
                raise storage_error(exc, self.path, "cannot read") from exc
            conn.execute("PRAGMA query_only = ON")
            conn.set_progress_handler(self._past_deadline, _PROGRESS_STEPS)
            self._local.conn = conn
            with self._readers_lock:
                self._readers.append(conn)
        return conn

    def _end_snapshot(self, conn: SQLiteConnection) -> None:
        conn.execute("COMMIT")

    @contextmanager
    def time_limit(self, deadline: float | None) -> Iterator[None]:
        """Stop this thread's reads once ``time.monotonic()`` passes ``deadline`` (None: no
        limit; an enclosing, earlier deadline still holds): QueryTimeout."""
        outer = self.deadline
        deadline = self._deadline_within(deadline)
        self._local.deadline = deadline
        try:
            yield
        except sqlite3.OperationalError as exc:
            if deadline is not None and _interrupted(exc):
                raise QueryTimeout("the query ran past its time limit and was stopped") from None
            raise
        finally:
            self._local.deadline = outer

    def _past_deadline(self) -> int:
        deadline = getattr(self._local, "deadline", None)
        return 1 if deadline is not None and time.monotonic() > deadline else 0


class _Checkpointer:
    """Copies a database's WAL into its file from a thread of its own, after commits and at
    most every CHECKPOINT_EVERY_S seconds, so that a write does not wait for a checkpoint (at
    a million facts about 60 ms a bulk batch). PASSIVE: it copies what no reader still needs
    and never blocks readers or the writer; a failure is logged and the writer's own
    threshold (WAL_BACKSTOP_PAGES) still bounds the WAL."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._due = threading.Event()
        self._stopping = threading.Event()
        self._lock = threading.Lock()  # held during a checkpoint; ``paused`` takes it
        self._thread: threading.Thread | None = None

    def due(self) -> None:
        """A commit was made: checkpoint soon (starts the thread on first use)."""
        if self._thread is None and not self._stopping.is_set():
            self._thread = threading.Thread(
                target=self._run, name="graphmem-checkpoint", daemon=True
            )
            self._thread.start()
        self._due.set()

    @contextmanager
    def paused(self) -> Iterator[None]:
        """No background checkpoint runs inside the block (one under way is waited for)."""
        with self._lock:
            yield

    def stop(self) -> None:
        self._stopping.set()
        self._due.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    def _run(self) -> None:
        conn: SQLiteConnection | None = None
        failing = False
        try:
            while True:
                self._due.wait()
                if self._stopping.is_set():
                    return
                self._due.clear()
                try:
                    if conn is None:
                        conn = _connect(self._path)
                    with self._lock:
                        conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                except sqlite3.Error:
                    if not failing:  # once, not every second while the disk stays full
                        _log.warning(
                            "background checkpoint of %s failed", self._path, exc_info=True
                        )
                    failing = True
                else:
                    if failing:
                        _log.info("background checkpoints of %s work again", self._path)
                    failing = False
                if self._stopping.wait(CHECKPOINT_EVERY_S):
                    return
        finally:
            if conn is not None:
                conn.close()


def _connect(path: Path) -> SQLiteConnection:
    conn = sqlite3.connect(
        path,
        isolation_level=None,
        check_same_thread=False,
        timeout=BUSY_TIMEOUT_MS / 1000,
        factory=SQLiteConnection,
    )
    conn.row_factory = sqlite3.Row
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA synchronous = {_SYNCHRONOUS}")
    conn.execute(f"PRAGMA wal_autocheckpoint = {WAL_AUTOCHECKPOINT_PAGES}")
    conn.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")
    conn.execute("PRAGMA foreign_keys = ON")
    # Deleted content is overwritten with zeros, whatever the SQLite build's default: a purge
    # must leave no copy of an erased text in the file's free pages.
    conn.execute("PRAGMA secure_delete = ON")
    return conn


def storage_error(exc: sqlite3.Error, path: Path, doing: str) -> StorageError:
    """A StorageError that says what the disk did: full, read-only, failing, or a damaged file."""
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
    if code == sqlite3.SQLITE_FULL:
        reason = "the disk is full; nothing was written (free some space and retry)"
    elif code == sqlite3.SQLITE_READONLY or (code == sqlite3.SQLITE_CANTOPEN and _read_only(path)):
        reason = "the file or its directory is read-only; nothing was written"
    elif code == sqlite3.SQLITE_IOERR:
        reason = f"disk I/O error ({exc}); nothing was written"
    elif code in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB):
        reason = f"the file is damaged or not a graphmem database ({exc})"
    elif code == sqlite3.SQLITE_BUSY:
        reason = f"another process held the database lock for over {BUSY_TIMEOUT_MS // 1000} s"
    else:
        reason = str(exc)
    return StorageError(f"{doing} {path}: {reason}")


def _read_only(path: Path) -> bool:
    """Whether ``path``'s directory cannot be written (a read-only mount or permissions)."""
    directory = path.parent
    try:
        return os.statvfs(directory).f_flag & os.ST_RDONLY != 0 or not os.access(directory, os.W_OK)
    except OSError as exc:
        return exc.errno in (errno.EROFS, errno.EACCES)


def _interrupted(exc: sqlite3.OperationalError) -> bool:
    return getattr(exc, "sqlite_errorcode", 0) & 0xFF == sqlite3.SQLITE_INTERRUPT
