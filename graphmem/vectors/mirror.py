"""The in-memory vector engine: every row of a namespace's vector table, searched by matrix
product. :class:`graphmem.vectors.index.VectorIndex` keeps a ``Mirror`` in step with its LanceDB
table.

1. Exact search: the rows in a growable float32 matrix, scored against the query in blocks.
2. From PROJECTION_MIN_ROWS rows a query first scores the rows' principal-component coordinates
   (:mod:`.projection`) and re-scores the best candidates exactly.
3. Write-time checks (near-duplicates, automatic links) ask for many queries' neighbours at
   once: below APPROXIMATE_MIN_ROWS by scanning every row (each query's best pairs gathered
   block by block, :mod:`.topk`), above it by probing faiss's inverted lists
   (:mod:`.inverted`), as does search past graphmem.vectors.index.EXACT_SEARCH_MAX_ROWS; the
   candidates they return are re-scored from the float32 rows. Lists the table outgrows are
   trained again in a thread while they go on answering (``_Training``).
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import threading
from collections.abc import Iterable, Sequence
from typing import Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from ..models import Vectors
from . import projection
from .inverted import Inverted, row_array
from .kernels import matvec, shared, single_threaded_blas
from .projection import Projection
from .topk import Best

_log = logging.getLogger("graphmem")

#: Query vectors per matrix product in ``neighbours_many`` (bounds the scores matrix it allocates).
QUERY_BLOCK: Final = 128


#: Rows from which near-duplicate checks (``neighbours_many``) probe inverted lists instead of
#: scanning every row: approximate, which is fine for skipping a redundant vector.
APPROXIMATE_MIN_ROWS: Final = 20_000


#: Inverted lists read per approximate search (``Mirror.probe``), of about
#: graphmem.vectors.inverted.LIST_ROWS rows each: the recall@10 of the k-means tier faiss
#: replaced (0.994 at a million rows, bench/REPORT.md).
SEARCH_PROBES: Final = 80


#: Inverted lists read per query of a write-time check: at 100k to 1M rows it finds at least
#: the link candidates the k-means tier it replaced found with 4 partitions.
CHECK_PROBES: Final = 4


#: Candidates an inverted-list probe returns per result wanted, re-scored from the float32 rows:
#: the 4-bit codes rank a write's 7 nearest of 100,000 among their best 56 (bench/REPORT.md).
RESCORED: Final = 8


#: Candidates a write-time check re-scores at the least: a row of structured low-rank vectors
#: shares its code's score with dozens of others, so one near-copy (a check for duplicates
#: alone asks for one neighbour) is among the best 64 where it might not be among 8.
CHECK_RESCORED: Final = 128


#: Candidates a search re-scores at the least: among their best 800 the codes rank the best 10
#: of 200,000 hash vectors as 8-bit codes did (400 lost 0.008 of recall@10, bench/REPORT.md);
#: re-scoring them costs a fraction of reading the lists.
SEARCH_RESCORED: Final = 800


#: A loaded copy has room for 1/LOAD_HEADROOM more rows before it grows (see ``Mirror.load``).
LOAD_HEADROOM: Final = 4


#: Rows from which exact search first scores a projection of the rows on their principal
#: components, then re-scores the best PROJECTION_OVERSAMPLE x k candidates with the full
#: vectors. Below it one full matrix product is cheap enough.
PROJECTION_MIN_ROWS: Final = 50_000


#: Candidates re-scored exactly per result wanted.
PROJECTION_OVERSAMPLE: Final = 10


class Mirror:
    """Every row of the table in memory, for exact cosine search by matrix product.

    Rows live in a growable float32 matrix; deleting swaps the last row into the hole.
    """

    def __init__(self, dimensions: int) -> None:
        self._matrix = np.empty((1024, dimensions), dtype=np.float32)
        self._live = np.zeros(1024, dtype=bool)
        self._ids: list[str] = []
        self._pos: dict[str, int] = {}
        self._lists: Inverted | None = None
        self._training: _Training | None = None  # the lists that will replace ``_lists``
        self._bitmap: npt.NDArray[np.uint8] | None = None  # the live flags, packed for faiss
        self._projection: Projection | None = None

    def __len__(self) -> int:
        return len(self._ids)

    def similarities(self, vector: Vectors, ids: Sequence[str]) -> dict[str, float]:
        """Cosine between ``vector`` and each of ``ids`` that has a row."""
        rows = [(i, r) for i in ids if (r := self._pos.get(i)) is not None]
        if not rows:
            return {}
        scores = matvec(self._matrix[[r for _, r in rows]], np.asarray(vector, np.float32))
        return {i: float(v) for (i, _), v in zip(rows, scores, strict=True)}

    def has(self, fact_id: str) -> bool:
        return fact_id in self._pos

    def holds(self, fact_id: str, vector: Vectors, live: bool) -> bool:
        """Whether the row of ``fact_id`` is exactly this vector and live flag."""
        row = self._pos[fact_id]
        return bool(self._live[row]) == bool(live) and np.array_equal(self._matrix[row], vector)

    def load(self, batches: Iterable[pa.RecordBatch], rows: int) -> None:
        """Fill this new, empty copy with every row of the table (``id``, ``vector``,
        ``live``), read in ``batches`` that hold ``rows`` in all (more or fewer if the table
        changed meanwhile), each straight into place: a million rows in a few seconds. The
        matrix has room for a quarter more rows, which stays untouched (so not resident) until
        written: the first writes after opening do not copy the whole copy to grow it (1.5 GB
        at a million 384-dimensional rows, a second and as much memory again meanwhile)."""
        capacity = max(1024, rows + rows // LOAD_HEADROOM)
        self._matrix = np.empty((capacity, self._matrix.shape[1]), dtype=np.float32)
        self._live = np.zeros(len(self._matrix), dtype=bool)
        for batch in batches:
            vectors, live = columns(batch)
            n = len(self._ids)
            while n + len(vectors) > len(self._matrix):
                self._grow()
            self._matrix[n : n + len(vectors)] = vectors
            self._live[n : n + len(vectors)] = live
            ids = batch.column("id").to_pylist()
            self._ids.extend(ids)
            self._pos.update(zip(ids, range(n, n + len(ids)), strict=True))
        if len(self._pos) < len(self._ids):  # an id with two rows (`check` reports it): the last
            keep = np.array(sorted(self._pos.values()), dtype=np.int64)
            self._matrix[: len(keep)] = self._matrix[keep]
            self._live[: len(keep)] = self._live[keep]
            self._ids = [self._ids[r] for r in keep.tolist()]
            self._pos = dict(zip(self._ids, range(len(self._ids)), strict=True))

    def upsert(self, ids: Sequence[str], vectors: Vectors, live: Sequence[bool]) -> None:
        written, added, rewritten = [], set(), set()
        for fact_id, vector, flag in zip(ids, vectors, live, strict=True):
            row = self._pos.get(fact_id)
            if row is None:
                row = len(self._ids)
                if row == len(self._matrix):
                    self._grow()
                self._ids.append(fact_id)
                self._pos[fact_id] = row
                added.add(row)
            elif self._lists is not None and not np.array_equal(self._matrix[row], vector):
                rewritten.add(row)  # a live flag alone changes nothing in the lists
            self._matrix[row] = vector
            self._live[row] = flag
            written.append(row)
        self._bitmap = None
        if self._lists is not None:
            self._relist(row_array(rewritten - added), row_array(added | rewritten))
        if self._projection is not None:
            self._projection.project(self._matrix, np.array(written, dtype=np.int64))

    def delete(self, ids: Iterable[str]) -> None:
        before = len(self._ids)
        filled = set()  # rows that now hold another row's vector
        for fact_id in ids:
            row = self._pos.pop(fact_id, None)
            if row is None:
                continue
            last = len(self._ids) - 1
            if row != last:
                moved = self._ids[last]
                self._matrix[row] = self._matrix[last]
                self._live[row] = self._live[last]
                self._ids[row] = moved
                self._pos[moved] = row
                if self._projection is not None:
                    self._projection.move(last, row)
                filled.add(row)
            self._ids.pop()
        self._bitmap = None
        if self._lists is not None and len(self._ids) < before:
            n = len(self._ids)
            kept = row_array(r for r in filled if r < n)
            self._relist(np.concatenate([kept, np.arange(n, before, dtype=np.int64)]), kept)

    def _relist(self, removed: npt.NDArray[np.int64], added: npt.NDArray[np.int64]) -> None:
        """The ``removed`` rows no longer hold the vector the lists have, the ``added`` rows
        hold one they do not have yet: the lists, and the ones in training, learn it."""
        assert self._lists is not None
        training = self._current_training()
        if training is not None:
            training.note(removed, added)  # first: the matrix holds them, whatever fails below
        self._lists.remove(removed)
        self._lists.add(self._matrix, added)
        if training is not None and training.ended():
            self._take(training)  # a process that only writes puts the new lists in place too

    def nearest(self, vector: Vectors, k: int, *, live_only: bool) -> list[tuple[str, float]]:
        query = np.asarray(vector, dtype=np.float32)
        n = len(self._ids)
        projection = self._projected(n)
        if projection is None or k * PROJECTION_OVERSAMPLE * 2 >= n:
            rows = None
            scores = matvec(self._matrix[:n], query)
            if live_only:
                scores = np.where(self._live[:n], scores, np.float32(-np.inf))
        else:
            # First pass on the projection, then the best candidates exactly (their order and
            # scores are exact; a true neighbour is missed only if the projection ranks it
            # below k x PROJECTION_OVERSAMPLE others).
            coarse = projection.scores(query, n)
            if live_only:
                coarse = np.where(self._live[:n], coarse, np.float32(-np.inf))
            wanted = min(k * PROJECTION_OVERSAMPLE, int(np.isfinite(coarse).sum()))
            if wanted <= 0:
                return []
            rows = np.argpartition(-coarse, wanted - 1)[:wanted]
            rows = rows[np.isfinite(coarse[rows])]
            scores = matvec(self._matrix[rows], query)
        k = min(k, int(np.isfinite(scores).sum()))
        if k <= 0:
            return []
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        found = top if rows is None else rows[top]
        return [(self._ids[i], float(s)) for i, s in zip(found, scores[top], strict=True)]

    def probe(self, vector: Vectors, k: int, *, live_only: bool) -> list[tuple[str, float]]:
        """Approximate nearest neighbours: the best ``k`` rows (exact scores) among the
        candidates of the SEARCH_PROBES inverted lists nearest to ``vector``. For tables too
        large to scan per query (bench/REPORT.md, "Vector search in memory", has its recall
        against exact search); exact below APPROXIMATE_MIN_ROWS."""
        if len(self._ids) < APPROXIMATE_MIN_ROWS:
            return self.nearest(vector, k, live_only=live_only)
        query = np.asarray(vector, dtype=np.float32)
        wanted = max(RESCORED * k, SEARCH_RESCORED)
        rows, scores = self._probed(query[None], k, wanted, SEARCH_PROBES, live_only, -math.inf)
        return self._hits(rows, scores)[0]

    def neighbours_many(
        self, vectors: Vectors, k: int, *, live_only: bool, floor: float = -math.inf
    ) -> list[list[tuple[str, float]]]:
        n = len(self._ids)
        if n >= APPROXIMATE_MIN_ROWS:
            wanted = max(RESCORED * k, CHECK_RESCORED)
            rows, scores = self._probed(vectors, k, wanted, CHECK_PROBES, live_only, floor)
        else:
            best = Best(len(vectors), k, floor)
            # A few queries (a group of single writes): a second BLAS thread would spin on the
            # core the server's other work needs; a bulk batch's products are worth two.
            few = len(vectors) < QUERY_BLOCK
            with single_threaded_blas() if few else contextlib.nullcontext():
                for start in range(0, len(vectors), QUERY_BLOCK):
                    block = self._scores(vectors[start : start + QUERY_BLOCK], live_only)
                    best.add(np.arange(start, start + len(block)), np.arange(block.shape[1]), block)
            rows, scores = best.result()
        return self._hits(rows, scores)

    def _probed(
        self, queries: Vectors, k: int, wanted: int, probes: int, live_only: bool, floor: float
    ) -> tuple[npt.NDArray[np.int64], Vectors]:
        """Per query, its best ``k`` rows (-1 where fewer) and their exact scores (-inf below
        ``floor``) among the ``wanted`` candidates of ``probes`` inverted lists."""
        lists = self._inverted()
        live = self._live_bitmap() if live_only else None
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        found = np.full((len(queries), k), -1, dtype=np.int64)
        best = np.full((len(queries), k), -np.inf, dtype=np.float32)

        def score(blocks: list[int]) -> None:
            for start in blocks:
                block = queries[start : start + QUERY_BLOCK]
                candidates = lists.candidates(block, wanted, probes, live)
                scores = np.einsum("qcd,qd->qc", self._matrix[np.maximum(candidates, 0)], block)
                scores[(candidates < 0) | (scores < floor)] = -np.inf
                width = min(k, scores.shape[1])
                top = np.argpartition(-scores, width - 1, axis=1)[:, :width]
                found[start : start + len(block), :width] = np.take_along_axis(candidates, top, 1)
                best[start : start + len(block), :width] = np.take_along_axis(scores, top, 1)

        # A bulk check's blocks shared between threads (faiss releases the GIL), each block's
        # rows written by one thread only.
        shared(score, list(range(0, len(queries), QUERY_BLOCK)))
        return found, best

    def _inverted(self) -> Inverted:
        """The inverted lists, made on first use. Once the table outgrows them they are trained
        again in a thread (seconds at a million rows, which no write or search waits for) and
        go on answering until the new ones take over, at a call after the training ends."""
        n = len(self._ids)
        if self._lists is None:
            self._lists = Inverted(self._matrix, n)
        training = self._current_training()
        if training is None:
            if self._lists.stale(n):
                self._training = _Training(self, n)
        elif training.ended():
            self._take(training)
        return self._lists

    def _current_training(self) -> _Training | None:
        """The lists in training, if this process trains them: a forked child forgets the
        parent's (its thread is not in the child, and its lock may have been held at the fork)
        and trains its own at its next search or check."""
        if self._training is not None and self._training.pid != os.getpid():
            self._training = None
        return self._training

    def retrained(self, timeout: float | None = None) -> bool:
        """Wait for lists in training (at most ``timeout`` seconds) and put them in place: True
        when none is left in training (tests and benches wait for it)."""
        training = self._current_training()
        if training is not None and training.ended(timeout):
            self._take(training)
        return self._training is None

    def _take(self, training: _Training) -> None:
        """The lists ``training`` made take over, told first of the rows changed meanwhile."""
        assert self._lists is not None
        self._training = None
        if training.lists is None:
            # The old lists stay, and are trained again only once the table doubles again.
            _log.warning(
                "inverted lists not trained again (%s): the old ones answer",
                training.failure,
                exc_info=training.failure,
            )
            self._lists.trained_on = len(self._ids)
            return
        training.catch_up(training.lists, self)
        self._lists = training.lists

    def _live_bitmap(self) -> npt.NDArray[np.uint8]:
        if self._bitmap is None:
            self._bitmap = np.packbits(self._live[: len(self._ids)], bitorder="little")
        return self._bitmap

    def _hits(self, rows: npt.NDArray[np.int64], scores: Vectors) -> list[list[tuple[str, float]]]:
        order = np.argsort(-scores, axis=1, kind="stable")
        rows = np.take_along_axis(rows, order, 1)
        scores = np.take_along_axis(scores, order, 1)
        ids = self._ids
        return [
            [(ids[r], v) for r, v in zip(rs, vs, strict=True) if r >= 0 and math.isfinite(v)]
            for rs, vs in zip(rows.tolist(), scores.tolist(), strict=True)
        ]

    def _scores(self, queries: Vectors, live_only: bool) -> Vectors:
        n = len(self._ids)
        scores: Vectors = (self._matrix[:n] @ queries.T).T  # row-major matrix first: faster
        if live_only:
            scores = np.where(self._live[:n], scores, np.float32(-np.inf))
        return scores

    def prepare(self, *, projection: bool) -> bool:
        """Make now the inverted lists (from APPROXIMATE_MIN_ROWS rows: the write-time checks
        read them, and ``probe``), and the projection exact search reads if ``projection``;
        True if the projection is in use."""
        if len(self._ids) >= APPROXIMATE_MIN_ROWS:
            self._inverted()
        return projection and self._projected(len(self._ids)) is not None

    def _projected(self, n: int) -> Projection | None:
        if n < PROJECTION_MIN_ROWS or self._matrix.shape[1] <= projection.PROJECTED_DIMENSIONS:
            return None
        if self._projection is None or n > 2 * self._projection.trained_on:
            self._projection = Projection(self._matrix, n)
        return self._projection

    def _grow(self) -> None:
        # Twice the capacity, of which only the rows written are touched (and so resident).
        matrix = np.empty((2 * len(self._matrix), self._matrix.shape[1]), dtype=np.float32)
        matrix[: len(self._ids)] = self._matrix[: len(self._ids)]
        self._matrix = matrix
        self._live = np.concatenate([self._live, np.zeros_like(self._live)])
        if self._projection is not None:
            self._projection.grow(len(self._matrix))


#: Rows written meanwhile that new lists learn in their own thread before they take over, until
#: at most this many are left for the call that puts them in place: a million rows train in
#: about 15 s, in which a bulk load writes some 100,000 more (seconds to add).
CAUGHT_UP: Final = 2_000


class _Training:
    """Inverted lists trained in a thread of their own on the first ``n`` rows of ``mirror``
    (read as they are while it goes on changing), then told of the rows the mirror changed
    meanwhile (``note``) until few are left, which ``Mirror._take`` puts right as they take
    over. The old lists and the new are held at once until then: 0.1 KB a row."""

    def __init__(self, mirror: Mirror, n: int) -> None:
        self.lists: Inverted | None = None
        self.failure: Exception | None = None
        self.pid = os.getpid()
        self._changed: set[int] = set()
        self._lock = threading.Lock()
        self._thread = threading.Thread(
            target=self._train, args=(mirror, n), name="graphmem-lists", daemon=True
        )
        self._thread.start()

    def note(self, *rows: npt.NDArray[np.int64]) -> None:
        """Rows whose vector changed after the training read them (or may have)."""
        with self._lock:
            for some in rows:
                self._changed.update(some.tolist())

    def catch_up(self, lists: Inverted, mirror: Mirror) -> int:
        """Put right in ``lists`` the rows noted so far; how many there were. A row changed
        while this reads it is noted again after the change, and put right at a later call."""
        with self._lock:
            changed, self._changed = row_array(self._changed), set()
        n = len(mirror)  # before the matrix: a matrix read after holds these rows
        lists.remove(changed)
        lists.add(mirror._matrix, changed[changed < n])
        return len(changed)

    def _train(self, mirror: Mirror, n: int) -> None:
        try:
            lists = Inverted(mirror._matrix, n)
            while self.catch_up(lists, mirror) > CAUGHT_UP:
                pass
            self.lists = lists
        except Exception as error:  # out of memory, most likely: the mirror says so and goes on
            self.failure = error

    def ended(self, timeout: float | None = 0) -> bool:
        """Whether the training is over (after waiting up to ``timeout`` seconds)."""
        self._thread.join(timeout)
        return not self._thread.is_alive()


def columns(batch: pa.RecordBatch) -> tuple[Vectors, npt.NDArray[np.bool_]]:
    """A batch of the vector table's rows as a vectors matrix and live flags."""
    vectors = batch.column("vector").flatten().to_numpy().reshape(batch.num_rows, -1)
    return vectors, batch.column("live").to_numpy(zero_copy_only=False)
