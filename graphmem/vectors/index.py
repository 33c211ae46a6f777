"""The LanceDB vector index: a derived, rebuildable copy of the facts' embeddings.

One table, ``facts``, per namespace: each fact's id, vector and ``live`` flag (some fact using
the vector is neither retracted nor superseded), so that current-time searches can pre-filter.
The store stays the source of truth: writes reach this index through the outbox
(:mod:`graphmem.vectors.outbox`).

1. Up to :data:`EXACT_SEARCH_MAX_ROWS` rows, a search reads every row of an in-memory copy
   (:mod:`graphmem.vectors.mirror`); up to :data:`IN_MEMORY_MAX_ROWS`, it probes the copy's
   nearest inverted lists (``Mirror.probe``, faiss); beyond, LanceDB's ANN index answers.
2. Several processes may open one namespace (``graphmem serve --workers``, a CLI beside a
   server): one writes at a time (:meth:`VectorIndex.writing`), each write is logged in the
   store's vector log, and every process follows the log (:meth:`VectorIndex.catch_up`).
3. LanceDB makes its files with the process's umask; after each write (and on opening) the
   files and folders of a local table are given the data directory's modes, 0600 and 0700
   (:func:`made_private`). Its folder is 0700 from the start, so no one else could reach
   them in between.
"""

from __future__ import annotations

import fcntl
import functools
import importlib
import logging
import math
import os
import queue
import re
import shutil
import stat
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Final, TypeVar

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from ..errors import StorageError
from ..files import PRIVATE_FILE, PRIVATE_FOLDER, private_folder, private_opener
from ..models import Vectors
from .mirror import Mirror, columns
from .remote import RemoteCalls, Unanswered

_log = logging.getLogger("graphmem")
T = TypeVar("T")

TABLE: Final = "facts"
#: Most vectors searched exactly in memory (float32: 1.5 KB each at 384 dimensions). Beyond
#: it, searches probe the in-memory copy's inverted lists (approximate). In memory because LanceDB
#: measured 12-28 ms a query with its IVF-PQ index at 100k vectors, and far more without one,
#: each query carrying a fixed overhead that batching does not remove. A full matrix product
#: over the copy is memory-bound (about 16 ms for 100k x 384 on 2 cores), so from
#: graphmem.vectors.mirror.PROJECTION_MIN_ROWS rows the copy first scores the rows'
#: principal-component coordinates and re-scores the best candidates with the full vectors.
EXACT_SEARCH_MAX_ROWS: Final = 250_000
#: Most vectors held in memory at all. Beyond it, searches use LanceDB's IVF-PQ index, which
#: ``optimize`` builds, and the write-time checks search LanceDB too (slow without that index:
#: bench/REPORT.md, "Vector search in memory").
IN_MEMORY_MAX_ROWS: Final = 2_000_000
#: Rows per batch read when loading the in-memory copy.
LOAD_BATCH_ROWS: Final = 65_536
#: Batches read ahead of the copy being loaded (``prefetched``): 65,536 rows of 384 float32
#: dimensions are 100 MB.
PREFETCH_BATCHES: Final = 2
#: Writes between automatic compactions of the table's small fragments, at least.
COMPACT_EVERY: Final = 50
#: LanceDB's compaction merges the small fragments with the last large one, which it rewrites
#: whole (below a million rows, the whole table: 1 GB at a million facts of 256 dimensions). A
#: larger table is therefore compacted less often: after rows / COMPACT_ROWS_PER_WRITE writes
#: (so that compacting costs each write about that many rows rewritten), at most every
#: COMPACT_EVERY_MAX writes (the fragments a read goes through).
COMPACT_ROWS_PER_WRITE: Final = 2_000
COMPACT_EVERY_MAX: Final = 500
#: Table versions older than this are deleted by ``optimize`` (newer ones may still be read).
OLD_VERSIONS_KEPT: Final = timedelta(minutes=1)
#: Seconds a read may go without looking for other processes' writes to the table.
FOLLOW_EVERY: Final = 0.2
#: Seconds waited between attempts to open a table that is listed but not yet openable (being
#: created by another process), before the last attempt.
OPEN_RETRY_WAITS: Final = (0.05, 0.1, 0.2, 0.4, 0.8)
#: The lock file, beside the table's directory, that one process at a time holds to write.
LOCK_FILE: Final = "vectors.lock"
#: The vector log entry that says the whole table was rebuilt.
REBUILT: Final = "*"
#: The vector log entry that says the table was compacted (its older versions may be gone).
COMPACTED: Final = "+"

#: A vector log entry's row as the write left it: deleted, stored with ``live`` false, stored
#: with ``live`` true. The other processes take a stored row's vector from the embedding cache
#: (``VectorSource``); an entry without a state (the marks above, entries of earlier versions)
#: or whose vector the cache lacks is read back from the table (a scan of its fragments, the
#: larger part of a write's time when two processes take turns).
ROW_DELETED: Final = 0
ROW_STORED: Final = 1
ROW_LIVE: Final = 2

#: Reads the vector log: ``log(after)`` → (position, fact id, state of its row or None) of
#: each entry after ``after``.
LogReader = Callable[[int], list[tuple[int, str, int | None]]]
#: The vectors the index holds for these facts, where known without reading the index (from
#: the embedding cache: ``VectorSync.expected``).
VectorSource = Callable[[list[str]], Mapping[str, Vectors]]


@dataclass(frozen=True)
class Location:
    """Where a namespace's table lives: a local directory (``path``), or an object store
    (``uri``, ``s3://bucket/prefix/namespace``, with LanceDB's ``options``: endpoint, region,
    credentials). ``lock``, if given, makes one writer at a time across machines (the
    PostgreSQL store's advisory lock); else a lock file in ``path``'s folder does, which holds
    for the processes of one machine. ``timeout``: the seconds a search or a write waits for
    the object store (the ``s3_timeout`` setting; None: a local table, waited for)."""

    path: Path
    uri: str | None = None
    options: Mapping[str, str] = field(default_factory=dict, repr=False)  # holds secrets
    lock: Callable[[], AbstractContextManager[None]] | None = None
    timeout: float | None = None

    @property
    def name(self) -> str:
        return self.uri or str(self.path)

    def connect(self) -> Any:
        import lancedb

        if self.uri is None:  # a folder of the namespace's own, as private as its database
            return lancedb.connect(str(private_folder(self.path)))
        return lancedb.connect(self.uri, storage_options=dict(self.options))

    def remove(self) -> None:
        """Delete the table (it is rebuilt from the store)."""
        if self.uri is None:
            shutil.rmtree(self.path, ignore_errors=True)
            return
        db = self.connect()
        if TABLE in db.list_tables().tables:
            db.drop_table(TABLE)


class VectorIndex:
    """A namespace's LanceDB table of fact vectors."""

    def __init__(self, where: Path | Location, dimensions: int) -> None:
        self.location = where if isinstance(where, Location) else Location(where)
        path = self.location.name
        self.dimensions = dimensions
        #: Held by a write for its whole course (the table, the vector log's position): on an
        #: object store that is seconds when a compaction is due.
        self._lock = threading.RLock()
        #: Held only while the in-memory copy is read or changed, so that searches and
        #: write-time checks answer from it while a write waits on the object store. Taken
        #: after ``_lock`` when both are.
        self._copy = threading.RLock()
        self._table: Any  # lancedb's query builders are only partly typed
        self._commits = 0
        #: The table's entries given private modes already (``made_private``).
        self._private: dict[str, set[tuple[str, int]]] = {}
        self._schema = pa.schema(
            [
                pa.field("id", pa.string(), nullable=False),
                pa.field("vector", pa.list_(pa.float32(), dimensions), nullable=False),
                pa.field("live", pa.bool_(), nullable=False),
            ]
        )
        self._mirror: Mirror | None = None
        self._log: LogReader | None = None
        self._source: VectorSource | None = None
        self._position = 0  # of the last vector log entry the in-memory copy holds
        self._looked = 0.0  # time.monotonic() of the last look at the log
        #: Searches' and write-time checks' reads, waited for at most the location's timeout.
        self._reads = RemoteCalls(
            None if self.location.uri is None else self.location.timeout, "graphmem-index"
        )
        #: Why the last read of the object store went unanswered (None once one answers).
        self.unanswered: str | None = None
        self._lock_path = self.location.path.parent / LOCK_FILE
        try:
            # The first request, waited for at most the timeout: an object store that is down
            # or hangs refuses the open in seconds (the client's own timeouts and retries held
            # it for over a minute). Once it has answered, loading the table may take as long
            # as its size needs.
            # Imported before the wait starts: that takes seconds on a busy machine.
            importlib.import_module("lancedb")
            self._db, self.missing = opening_calls(self.location).call(self._listed)
            self._table = (
                self._db.create_table(TABLE, schema=self._schema)
                if self.missing
                else self._opened()
            )
            stored = self._table.schema.field("vector").type
            if self.count() <= IN_MEMORY_MAX_ROWS:
                self._mirror = self._loaded()  # reads every row: finds damaged files
        except Unanswered as exc:
            raise StorageError(
                f"cannot reach the vector store at {path}: {exc}", unreachable=True
            ) from exc
        except (OSError, ValueError, RuntimeError, KeyError, pa.ArrowException) as exc:
            raise StorageError(f"cannot read the vector index at {path} ({exc})") from exc
        if getattr(stored, "list_size", dimensions) != dimensions:
            raise StorageError(
                f"the vector index at {path} holds {stored.list_size}-dimensional vectors, "
                f"the embedder makes {dimensions}"
            )
        self._made_private()  # what it made, and what an older graphmem left

    def _listed(self) -> tuple[Any, bool]:
        """The connection to the table's database (connecting lists it), and whether the
        table is missing from it."""
        db = self.location.connect()
        return db, TABLE not in db.list_tables().tables

    def _opened(self) -> Any:
        """The table, opened. It may be listed before it can be opened: another process (in
        the scale-out mode, another machine) that is creating it has written some of its
        files on the object store, not yet its first version. That is waited for, briefly."""
        for wait in OPEN_RETRY_WAITS:
            try:
                return self._db.open_table(TABLE)
            except ValueError as exc:
                if "not found" not in str(exc):
                    raise
            time.sleep(wait)
        return self._db.open_table(TABLE)

    def _loaded(self) -> Mirror:
        """A new in-memory copy of every row of the table."""
        mirror = Mirror(self.dimensions)
        rows = int(self._table.count_rows())
        mirror.load(self._batches(rows), rows)
        return mirror

    def _batches(self, rows: int) -> Iterator[pa.RecordBatch]:
        """Every row of the table (``id``, ``vector``, ``live``), streamed in batches: no
        whole-table copy in memory."""
        if rows:
            query = self._table.search().select(["id", "vector", "live"]).limit(rows)
            yield from prefetched(query.to_batches(LOAD_BATCH_ROWS))

    def scan(self) -> Iterator[tuple[list[str], Vectors, npt.NDArray[np.bool_]]]:
        """Every row of the table as (ids, vectors, live flags), a batch at a time."""
        with self._lock:
            rows = int(self._table.count_rows())
        for batch in self._batches(rows):
            vectors, live = columns(batch)
            yield batch.column("id").to_pylist(), vectors, live

    def follow(self, log: LogReader, position: int) -> None:
        """Follow the vector log through ``log`` from ``position`` (read before the table was
        loaded: entries after it may already be in the copy; re-reading them is harmless)."""
        self._log, self._position = log, position

    def vectors_from(self, source: VectorSource) -> None:
        """Take the vectors of rows other processes stored (as the vector log says) from
        ``source``, reading from the table only those it lacks."""
        self._source = source

    @contextmanager
    def writing(self) -> Iterator[None]:
        """Inside the block, this process alone writes the table, and the in-memory copy has
        caught up with every write another process made. A write made inside it must be
        logged (``logged``) before the block ends."""
        with self._lock:
            if self.location.lock is not None:
                with self.location.lock():
                    self.catch_up(force=True)
                    yield
                return
            private_folder(self._lock_path.parent)
            fd = private_opener(str(self._lock_path), os.O_RDWR | os.O_CREAT)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                self.catch_up(force=True)
                yield
            finally:
                os.close(fd)  # releases the lock

    def logged(self, position: int, count: int) -> None:
        """This process's write was logged as the ``count`` entries ending at ``position``."""
        with self._lock:
            if self._position == position - count:  # nothing of another process in between
                self._position = position

    def unseen(self) -> list[str]:
        """The facts whose rows other processes wrote since this copy last read the vector
        log (a search scores them from the embedding cache meanwhile: see VectorSync.pending)."""
        log = self._log
        if log is None:
            return []
        return [i for _, i, _ in log(self._position) if i not in (COMPACTED, REBUILT)]

    def catch_up(self, *, force: bool = False) -> None:
        """Bring the copy's rows that other processes changed since the last look at the
        vector log up to date, so that the copy holds what the table holds (unless ``force``,
        at most every FOLLOW_EVERY seconds: before a read; ``writing`` forces it).

        A read does not wait for a write this process is making (that write catches up as it
        starts): it answers from the copy as it is, and ``unseen`` names what it lacks.
        """
        log = self._log
        if log is None or (not force and time.monotonic() - self._looked < FOLLOW_EVERY):
            return
        if not self._lock.acquire(blocking=force):
            return
        try:
            self._looked = time.monotonic()
            entries = log(self._position)
            if not entries:
                return
            states = {fact_id: state for _, fact_id, state in entries}  # each row's last
            states.pop(COMPACTED, None)
            if REBUILT in states:  # dropped and created again: a new table
                self._table = self._db.open_table(TABLE)
            else:
                self._table.checkout_latest()
            if self._mirror is not None:
                if REBUILT in states or entries[0][0] != self._position + 1:  # or pruned
                    self._replace(self._loaded())
                else:
                    self._follow(self._mirror, states)
            self._position = entries[-1][0]
        finally:
            self._lock.release()

    def _replace(self, mirror: Mirror | None) -> None:
        """Make ``mirror`` the in-memory copy (none if it is too large to hold)."""
        with self._copy:
            self._mirror = mirror if mirror is None or len(mirror) <= IN_MEMORY_MAX_ROWS else None

    def reread(self, ids: Iterable[str]) -> None:
        """Bring the copy's rows of ``ids`` to what the table holds, read back from it. A
        process that died between writing the table and logging the write left rows that no
        log entry names: whoever writes those facts' vectors next must see them, or it would
        append a second row."""
        with self._lock:
            if self._mirror is not None:
                self._table.checkout_latest()  # no log entry moved it there
                self._follow(self._mirror, dict.fromkeys(ids))

    def _follow(self, mirror: Mirror, states: dict[str, int | None]) -> None:
        """Bring the copy's rows of ``states`` (fact id → state of its row, as logged) to what
        the table holds: a deleted row deleted, a stored row's vector from the source (the
        embedding cache: reading it back from the table costs a scan of its fragments), the
        rest read from the table."""
        stored = [i for i, state in states.items() if state in (ROW_STORED, ROW_LIVE)]
        known = self._source(stored) if self._source is not None and stored else {}
        rows = {i: (known[i], states[i] == ROW_LIVE) for i in stored if i in known}
        unknown = [i for i, state in states.items() if state != ROW_DELETED and i not in rows]
        rows.update(self.rows(unknown))
        present = list(rows)
        with self._copy:
            mirror.delete([i for i in states if i not in rows])
            if present:
                mirror.upsert(
                    present, np.stack([rows[i][0] for i in present]), [rows[i][1] for i in present]
                )
        if len(mirror) > IN_MEMORY_MAX_ROWS:
            self._replace(None)

    def upsert(self, ids: Sequence[str], vectors: Vectors, live: Sequence[bool]) -> None:
        """Write (or replace) the vectors of ``ids``. Idempotent, so outbox replays are safe."""
        if not ids:
            return
        with self._lock:
            with self._copy:
                mirror = self._mirror
                # Rows the table lacks are appended; only rows it has need merge_insert's join,
                # and not those it already holds as given (a replay, or an owner whose state is
                # unchanged): each LanceDB write is a commit costing tens of milliseconds.
                fresh = [n for n, i in enumerate(ids) if mirror is not None and not mirror.has(i)]
                known = [
                    n
                    for n in range(len(ids))
                    if mirror is None
                    or (mirror.has(ids[n]) and not mirror.holds(ids[n], vectors[n], live[n]))
                ]
            # The mirror follows each LanceDB commit at once: a retry after a failure between
            # the two would otherwise append a second row for the same id.
            if fresh:
                self._table.add(self._arrow(ids, vectors, live, fresh))
                self._mirrored(ids, vectors, live, fresh)
            if known:
                (
                    self._table.merge_insert("id")
                    .when_matched_update_all()
                    .when_not_matched_insert_all()
                    .execute(self._arrow(ids, vectors, live, known))
                )
                self._mirrored(ids, vectors, live, known)
            self._committed()

    def _mirrored(
        self, ids: Sequence[str], vectors: Vectors, live: Sequence[bool], rows: list[int]
    ) -> None:
        with self._copy:
            mirror = self._mirror
            if mirror is None:
                return
            mirror.upsert(
                [ids[n] for n in rows], np.asarray(vectors)[rows], [live[n] for n in rows]
            )
        if len(mirror) > IN_MEMORY_MAX_ROWS:
            self._replace(None)  # too large to hold: LanceDB answers everything

    def _arrow(
        self, ids: Sequence[str], vectors: Vectors, live: Sequence[bool], rows: list[int]
    ) -> pa.Table:
        picked = np.ascontiguousarray(np.asarray(vectors, dtype=np.float32)[rows])
        return pa.table(
            {
                "id": pa.array([ids[n] for n in rows], pa.string()),
                "vector": pa.FixedSizeListArray.from_arrays(
                    pa.array(picked.ravel()), self.dimensions
                ),
                "live": pa.array([bool(live[n]) for n in rows], pa.bool_()),
            },
            schema=self._schema,
        )

    def delete(self, ids: Sequence[str]) -> None:
        with self._lock:
            with self._copy:
                if self._mirror is not None:  # it has every row of the table: skip a no-op
                    ids = [i for i in ids if self._mirror.has(i)]
            if ids:
                self._table.delete(_id_filter(ids))
                with self._copy:
                    if self._mirror is not None:
                        self._mirror.delete(ids)
                self._committed()

    @property
    def degraded(self) -> str | None:
        """Why searches could not read this index on the object store just now, or None."""
        if self.unanswered is None:
            return None
        return (
            f"the vector index on the object store cannot be read ({self.unanswered}); the "
            "vector leg scored only the writes still waiting in the outbox, the keyword leg "
            "is complete"
        )

    def close(self) -> None:
        """Wait for the reads of the object store still running (bounded by its timeouts)."""
        self._reads.close()

    def nearest(self, vector: Vectors, k: int, *, live_only: bool) -> list[tuple[str, float]]:
        """Up to ``k`` (id, cosine similarity) pairs, most similar first. On an object store
        that does not answer in time (or fails), none: see ``degraded``."""
        if k <= 0:
            return []
        return self._answered(functools.partial(self._nearest, vector, k, live_only), [])

    def _nearest(self, vector: Vectors, k: int, live_only: bool) -> list[tuple[str, float]]:
        self.catch_up()
        with self._copy:
            if (mirror := self._mirror) is not None:
                if len(mirror) <= EXACT_SEARCH_MAX_ROWS:
                    return mirror.nearest(vector, k, live_only=live_only)
                return mirror.probe(vector, k, live_only=live_only)
        query = self._table.search(np.asarray(vector, dtype=np.float32)).distance_type("cosine")
        query = query.select(["id", "_distance"])
        if live_only:
            query = query.where("live = true", prefilter=True)
        result = query.limit(k).to_arrow()
        ids = result.column("id").to_pylist()
        distances = result.column("_distance").to_pylist()
        return [(i, 1.0 - float(d)) for i, d in zip(ids, distances, strict=True)]

    def neighbours_many(
        self, vectors: Vectors, k: int, *, live_only: bool, floor: float = -math.inf
    ) -> list[list[tuple[str, float]]]:
        """For each query vector, up to ``k`` (id, cosine) pairs with cosine ≥ ``floor``, most
        similar first. Above APPROXIMATE_MIN_ROWS the in-memory search probes inverted lists:
        approximate, made for write-time checks (near-duplicates, automatic links), not for
        search. A ``floor`` makes it cheaper: few pairs pass it, so no ranking of the rest. On
        an object store that does not answer in time, none (the checks are skipped)."""
        if len(vectors) == 0 or k <= 0:
            return [[] for _ in range(len(vectors))]
        return self._answered(
            functools.partial(self._neighbours_many, vectors, k, live_only, floor),
            [[] for _ in range(len(vectors))],
        )

    def _neighbours_many(
        self, vectors: Vectors, k: int, live_only: bool, floor: float
    ) -> list[list[tuple[str, float]]]:
        if self.count() == 0:
            return [[] for _ in range(len(vectors))]
        with self._copy:
            if self._mirror is not None:
                return self._mirror.neighbours_many(vectors, k, live_only=live_only, floor=floor)
        query = self._table.search(np.asarray(vectors, dtype=np.float32)).distance_type("cosine")
        query = query.select(["id", "_distance"])
        if live_only:
            query = query.where("live = true", prefilter=True)
        result = query.limit(k).to_arrow()
        out: list[list[tuple[str, float]]] = [[] for _ in range(len(vectors))]
        qi = result.column("query_index").to_pylist() if len(vectors) > 1 else [0] * result.num_rows
        for q, i, d in zip(
            qi, result.column("id").to_pylist(), result.column("_distance").to_pylist(), strict=True
        ):
            out[q].append((i, 1.0 - float(d)))
        for hits in out:
            hits.sort(key=lambda hit: -hit[1])
            hits[:] = [hit for hit in hits if hit[1] >= floor]
        return out

    def rows(self, ids: Iterable[str]) -> dict[str, tuple[Vectors, bool]]:
        """Stored (vector, live) by id, for the rows of ``ids``."""
        wanted = list(ids)
        if not wanted:
            return {}
        table = self._table.search().where(_id_filter(wanted)).limit(len(wanted) * 2 + 10)
        table = table.to_arrow()
        out: dict[str, tuple[Vectors, bool]] = {}
        vectors = table.column("vector").combine_chunks().flatten().to_numpy()
        matrix = vectors.reshape(-1, self.dimensions) if table.num_rows else vectors
        for n, (i, live) in enumerate(
            zip(table.column("id").to_pylist(), table.column("live").to_pylist(), strict=True)
        ):
            out[i] = (matrix[n], bool(live))
        return out

    def similarities(self, vector: Vectors, ids: Sequence[str]) -> dict[str, float]:
        """Cosine between ``vector`` and each of ``ids`` that has a row in the in-memory copy
        (empty above IN_MEMORY_MAX_ROWS, where there is none, and from an object store that
        does not answer in time)."""
        return self._answered(functools.partial(self._similarities, vector, ids), {})

    def _similarities(self, vector: Vectors, ids: Sequence[str]) -> dict[str, float]:
        self.catch_up()
        with self._copy:
            if self._mirror is None:
                return {}
            return self._mirror.similarities(vector, ids)

    def _answered(self, read: Callable[[], T], fallback: T) -> T:
        """``read()``; on an object store, waited for at most the location's timeout: if it
        does not answer by then, or fails, ``fallback``, and ``unanswered`` says why until a
        read answers again (logged once each way)."""
        if self.location.uri is None:
            return read()
        try:
            result = self._reads.call(read)
        except (Unanswered, OSError, RuntimeError, ValueError, pa.ArrowException) as exc:
            if self.unanswered is None:
                _log.error(
                    "the vector index at %s did not answer (%s); searches answer from the "
                    "keyword leg and the writes still waiting",
                    self.location.uri,
                    exc,
                )
            # What API clients read (Memory.degraded): no endpoint or message of the client.
            self.unanswered = (
                "no answer in time" if isinstance(exc, Unanswered) else "the request failed"
            )
            return fallback
        if self.unanswered is not None:
            _log.warning("the vector index at %s answers again", self.location.uri)
            self.unanswered = None
        return result

    def count_if_answered(self) -> int | None:
        """``count``; on an object store, None if it does not answer within the location's
        timeout (``degraded`` says why)."""
        counted: int | None = self._answered(self.count, None)
        return counted

    def stored_rows(self) -> int | None:
        """The rows the table holds, read from the table itself once the copy has caught up
        with the vector log; on an object store, None if it does not answer within the
        location's timeout (``degraded`` says why): what a check asks first, so that a
        store that is down costs it one wait."""

        def read() -> int:
            self.catch_up(force=True)
            with self._lock:
                self._table.checkout_latest()  # a request, where the count may be cached
                return int(self._table.count_rows())

        counted: int | None = self._answered(read, None)
        return counted

    def count(self) -> int:
        self.catch_up()
        with self._copy:
            if self._mirror is not None:
                return len(self._mirror)
        return int(self._table.count_rows())

    def clear(self) -> None:
        """Drop every row (reindex starts from an empty table)."""
        with self._lock:
            self._db.drop_table(TABLE)
            self._table = self._db.create_table(TABLE, schema=self._schema)
            self._private.clear()  # its files are new, perhaps with freed inode numbers
            self._made_private()
            self._replace(Mirror(self.dimensions))

    def compact(self, *, erase: bool = False) -> None:
        """Merge small fragments and delete table versions older than OLD_VERSIONS_KEPT.

        ``erase`` deletes every older version at once, so a purged vector leaves no copy on
        disk; another process reading the table at that moment may see its read fail.
        """
        with self._lock, warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # lancedb warns about erase's risk
            self._table.optimize(cleanup_older_than=timedelta(0) if erase else OLD_VERSIONS_KEPT)
            self._made_private()
            self._commits = 0

    def optimize(self) -> dict[str, Any]:
        """Compact; prepare what in-memory searches at this size use (the projection, the
        inverted lists); build LanceDB's ANN index once the table is too large to hold in memory.

        Building IVF-PQ takes minutes at a few hundred thousand rows: run it deliberately
        (`graphmem optimize`), not on a request path.
        """
        from lancedb.index import IvfPq

        self.compact()
        with self._lock:
            rows = int(self._table.count_rows())
            indexed = bool(self._table.list_indices())
            if self._mirror is None and not indexed:
                with warnings.catch_warnings(), native_output_logged():
                    warnings.simplefilter("ignore", DeprecationWarning)
                    self._table.create_index("vector", config=IvfPq(distance_type="cosine"))
                self._made_private()
                indexed = True
            return {"rows": rows, "ann_index": indexed, **self.prepare()}

    def prepare(self) -> dict[str, bool]:
        """Make now what the in-memory copy's searches read at this size, which the first
        search would make otherwise: the inverted lists from 20,000 rows (about 30 s at a
        million rows, during which searches and writes wait), the projection up to
        EXACT_SEARCH_MAX_ROWS."""
        with self._copy:
            mirror = self._mirror
            exact = mirror is not None and len(mirror) <= EXACT_SEARCH_MAX_ROWS
            projected = mirror is not None and mirror.prepare(projection=exact)
            return {
                "exact_in_memory": exact,
                "approximate_in_memory": mirror is not None and not exact,
                "projected": projected,
            }

    def _committed(self) -> None:
        """Count a write; every COMPACT_EVERY writes or more (the larger the table, the more),
        merge the small fragments they left.

        Each LanceDB write adds a fragment and a version, and queries slow down with their
        number (a 1k-row table: 8 ms per query compacted, 40 ms after 150 small writes).
        """
        self._commits += 1
        rows = len(self._mirror) if self._mirror is not None else IN_MEMORY_MAX_ROWS
        due = min(COMPACT_EVERY_MAX, max(COMPACT_EVERY, rows // COMPACT_ROWS_PER_WRITE))
        if self._commits >= due:
            self.compact()
        else:
            self._made_private()

    def _made_private(self) -> None:
        """Give what LanceDB wrote of a local table the data directory's modes."""
        if self.location.uri is None:
            made_private(self.location.path, self._private)


#: The calls that open each table on an object store (by its URI): while one is overdue, the
#: next opens of that table are refused at once instead of each waiting again.
_OPENING: Final[dict[str, RemoteCalls]] = {}
_OPENING_LOCK: Final = threading.Lock()


def opening_calls(location: Location) -> RemoteCalls:
    """What opening ``location``'s table waits through (straight through for a local one)."""
    if location.uri is None:
        return RemoteCalls(None, "graphmem-open")
    with _OPENING_LOCK:
        calls = _OPENING.get(location.uri)
        if calls is None or calls.seconds != location.timeout:
            calls = _OPENING[location.uri] = RemoteCalls(location.timeout, "graphmem-open")
        return calls


def made_private(folder: Path, seen: dict[str, set[tuple[str, int]]] | None = None) -> None:
    """Every file under ``folder`` PRIVATE_FILE and every folder PRIVATE_FOLDER, as graphmem's
    own files are (graphmem.files), where LanceDB's umask-given modes differ. ``seen`` holds,
    per folder, the files (name and inode) made private before: only new ones are looked at,
    so that a write to a table of thousands of files costs a listing of its folders, not a
    stat of each (a file replaced under its name has a new inode). A file removed meanwhile
    (another process's compaction) is passed over; a link is left alone (LanceDB makes
    none)."""
    try:
        entries = list(os.scandir(folder))
    except FileNotFoundError:
        return
    before = set() if seen is None else seen.get(str(folder), set())
    for entry in entries:
        try:
            folder_entry = entry.is_dir(follow_symlinks=False)
            # Folders are few and looked at every time (one made anew may get a freed inode
            # number back); a file is looked at once.
            if folder_entry or (entry.name, entry.inode()) not in before:
                mode = entry.stat(follow_symlinks=False).st_mode
                if stat.S_ISDIR(mode) and stat.S_IMODE(mode) != PRIVATE_FOLDER:
                    os.chmod(entry.path, PRIVATE_FOLDER)
                elif stat.S_ISREG(mode) and stat.S_IMODE(mode) != PRIVATE_FILE:
                    os.chmod(entry.path, PRIVATE_FILE)
            if folder_entry:
                made_private(Path(entry.path), seen)
        except FileNotFoundError:
            continue
    if seen is not None:
        seen[str(folder)] = {(entry.name, entry.inode()) for entry in entries}


@contextmanager
def native_output_logged() -> Iterator[None]:
    """Route what LanceDB's native code prints on stderr meanwhile to the ``graphmem`` logger.

    Building an index, its Rust k-means prints warnings such as "more than 10% of clusters are
    empty" by the hundred, which read as a failure. Each of its lines is logged at DEBUG, with
    one INFO line counting them; anything else written to stderr meanwhile (another thread's
    output) is written back to stderr.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            lines = sink.read().decode("utf-8", "replace").splitlines()
    ours = [line for line in lines if _LANCE_LINE.search(line)]
    others = [line for line in lines if not _LANCE_LINE.search(line)]
    if others:
        sys.stderr.write("\n".join(others) + "\n")
    for line in ours:
        _log.debug("lancedb: %s", line)
    if ours:
        _log.info("lancedb printed %d lines while building the index (logged at DEBUG)", len(ours))


#: A line of LanceDB's native log (env_logger: ``[time LEVEL lance_index::…] message``).
_LANCE_LINE: Final = re.compile(r"\b(lance\w*|KMeans)\b")


def prefetched(items: Iterator[T], depth: int = PREFETCH_BATCHES) -> Generator[T, None, None]:
    """``items``, read on a thread of their own up to ``depth`` ahead of the caller: LanceDB
    decodes the next batch (without the GIL) while the caller copies this one, which at a million
    rows halves the time a load takes. An exception of the reader is raised to the caller in
    its turn; a caller that stops early stops the reader after the batch it is reading."""
    ready: queue.Queue[tuple[bool, Any]] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def hand(done: bool, item: Any) -> bool:
        while not stop.is_set():
            try:
                ready.put((done, item), timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def read() -> None:
        try:
            for item in items:
                if not hand(False, item):
                    return
        except BaseException as exc:  # raised by the caller in its turn
            hand(True, exc)
            return
        hand(True, None)

    reader = threading.Thread(target=read, name="graphmem-prefetch", daemon=True)
    reader.start()
    try:
        while True:
            done, item = ready.get()
            if done:
                if item is not None:
                    raise item
                return
            yield item
    finally:
        stop.set()
        reader.join()


def _id_filter(ids: Iterable[str]) -> str:
    quoted = ",".join("'" + i.replace("'", "''") + "'" for i in ids)
    return f"id IN ({quoted})"
