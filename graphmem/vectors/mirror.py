"""The in-memory vector engine: every row of a namespace's vector table, searched by matrix
product.

``Mirror`` holds the rows in a growable float32 matrix and answers exact nearest-neighbour
queries; from PROJECTION_MIN_ROWS rows a query first scores the rows' principal-component
coordinates (``Projection``) and re-scores the best candidates exactly. Write-time checks
(near-duplicates, automatic links) ask for many queries' neighbours at once: below
PARTITION_MIN_ROWS by scanning every row in blocks, above it by probing k-means partitions of
bounded size whose rows lie in one contiguous range each (``Partitions``, an in-memory IVF),
where a check with a floor first bounds every probed row's cosine from the projection and
scores only the pairs whose bound reaches the floor. ``Best`` gathers each query's best pairs
block by block.
:class:`graphmem.vectors.index.VectorIndex` keeps a Mirror in step with its LanceDB table.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from typing import Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa
from threadpoolctl import ThreadpoolController

from .embedders import Vectors

#: Query vectors per matrix product in ``neighbours_many`` (bounds the scores matrix it allocates).
QUERY_BLOCK: Final = 128
#: Rows from which near-duplicate checks (``neighbours_many``) probe k-means partitions instead of
#: scanning every row: approximate, which is fine for skipping a redundant vector.
PARTITION_MIN_ROWS: Final = 20_000
#: Threads that score a bulk check's probed partitions, each a share of them (at most two: the
#: scan is bound by memory bandwidth, and the other cores serve requests).
SCORING_THREADS: Final = min(2, os.cpu_count() or 1)
#: Probed partitions from which a check shares them out between SCORING_THREADS.
SHARED_MIN_ITEMS: Final = 64
#: Partitions probed per near-duplicate check.
PARTITION_PROBES: Final = 4
#: Rows per partition, about: a partition is split in two when it holds twice as many, so a
#: probe costs the same whatever the table's size.
PARTITION_ROWS: Final = 512
#: Partitions read per approximate search (``Mirror.probe``): about SEARCH_PROBES x PARTITION_ROWS
#: rows, each scored exactly.
SEARCH_PROBES: Final = 48
#: A loaded copy has room for 1/LOAD_HEADROOM more rows before it grows (see ``Mirror.load``).
LOAD_HEADROOM: Final = 4
#: Partitions found by k-means when the partitions are first made (then split as they grow).
TRAINED_PARTITIONS: Final = 256
#: Rounds of 2-means when a partition is split.
SPLIT_ROUNDS: Final = 3
#: The partitions lay the rows out again (one contiguous range each) when more than this many
#: rows, or more than one TAIL_FRACTION-th of the table, were written since they last did.
TAIL_ROWS: Final = 16_384
TAIL_FRACTION: Final = 8
#: Rows from which exact search first scores a projection of the rows on their principal
#: components, then re-scores the best PROJECTION_OVERSAMPLE x k candidates with the full
#: vectors. Below it one full matrix product is cheap enough.
PROJECTION_MIN_ROWS: Final = 50_000
#: Principal components kept by that projection (MiniLM's 384 dimensions: 87% of the variance
#: of the benchmark's facts).
PROJECTED_DIMENSIONS: Final = 96
#: Candidates re-scored exactly per result wanted.
PROJECTION_OVERSAMPLE: Final = 10
#: Rows sampled to compute the principal components.
PROJECTION_SAMPLE: Final = 20_000
#: Taken off the floor of a write-time check before comparing the projection's upper bounds
#: with it: covers the float32 rounding of the bounds (the residual norms above all), so a row
#: whose exact score reaches the floor is never dropped by its bound.
BOUND_MARGIN: Final = 1e-3
#: A partition in which more pairs pass their bound than one in BOUND_FALLBACK of its rows (a
#: low floor) is scored in full: reading that many rows one pair at a time costs more than the
#: product, which reads the partition once.
BOUND_FALLBACK: Final = 8
#: Partitions bounded first, spread over those a check probes: if most of them would be scored
#: in full (a floor the bounds cannot separate, e.g. low for the embedder), so is every one.
BOUND_SAMPLE: Final = 64


class Mirror:
    """Every row of the table in memory, for exact cosine search by matrix product.

    Rows live in a growable float32 matrix; deleting swaps the last row into the hole.
    """

    def __init__(self, dimensions: int) -> None:
        self._matrix = np.empty((1024, dimensions), dtype=np.float32)
        self._live = np.zeros(1024, dtype=bool)
        self._ids: list[str] = []
        self._pos: dict[str, int] = {}
        self._ivf: Partitions | None = None
        self._projection: Projection | None = None

    def __len__(self) -> int:
        return len(self._ids)

    def similarities(self, vector: Vectors, ids: Sequence[str]) -> dict[str, float]:
        """Cosine between ``vector`` and each of ``ids`` that has a row."""
        rows = [(i, r) for i in ids if (r := self._pos.get(i)) is not None]
        if not rows:
            return {}
        scores = _matvec(self._matrix[[r for _, r in rows]], np.asarray(vector, np.float32))
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
        written = []
        for fact_id, vector, flag in zip(ids, vectors, live, strict=True):
            row = self._pos.get(fact_id)
            if row is None:
                row = len(self._ids)
                if row == len(self._matrix):
                    self._grow()
                self._ids.append(fact_id)
                self._pos[fact_id] = row
            self._matrix[row] = vector
            self._live[row] = flag
            written.append(row)
        if self._ivf is not None:
            self._ivf.label(self._matrix, np.array(written, dtype=np.int64))
        if self._projection is not None:
            self._projection.project(self._matrix, np.array(written, dtype=np.int64))

    def delete(self, ids: Iterable[str]) -> None:
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
            if self._ivf is not None:
                self._ivf.move(last, row)
            self._ids.pop()

    def nearest(self, vector: Vectors, k: int, *, live_only: bool) -> list[tuple[str, float]]:
        query = np.asarray(vector, dtype=np.float32)
        n = len(self._ids)
        projection = self._projected(n)
        if projection is None or k * PROJECTION_OVERSAMPLE * 2 >= n:
            rows = None
            scores = _matvec(self._matrix[:n], query)
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
            scores = _matvec(self._matrix[rows], query)
        k = min(k, int(np.isfinite(scores).sum()))
        if k <= 0:
            return []
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        found = top if rows is None else rows[top]
        return [(self._ids[i], float(s)) for i, s in zip(found, scores[top], strict=True)]

    def probe(self, vector: Vectors, k: int, *, live_only: bool) -> list[tuple[str, float]]:
        """Approximate nearest neighbours: the best ``k`` rows (exact scores) among the
        SEARCH_PROBES partitions nearest to ``vector``. For tables too large to scan per query
        (bench/REPORT.md has its recall against exact search); exact below PARTITION_MIN_ROWS."""
        if len(self._ids) < PARTITION_MIN_ROWS:
            return self.nearest(vector, k, live_only=live_only)
        query = np.asarray(vector, dtype=np.float32)
        rows, scores = self._partitions().search(
            self._matrix, self._live, len(self._ids), query, SEARCH_PROBES, live_only=live_only
        )
        k = min(k, int(np.isfinite(scores).sum()))
        if k <= 0:
            return []
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(self._ids[r], float(v)) for r, v in zip(rows[top], scores[top], strict=True)]

    def neighbours_many(
        self, vectors: Vectors, k: int, *, live_only: bool, floor: float = -math.inf
    ) -> list[list[tuple[str, float]]]:
        n = len(self._ids)
        if n >= PARTITION_MIN_ROWS:
            rows, scores = self._partitions().neighbours_many(
                self._matrix,
                self._live,
                n,
                vectors,
                k,
                live_only=live_only,
                floor=floor,
                projection=self._projected(n) if math.isfinite(floor) else None,
            )
        else:
            best = Best(len(vectors), k, floor)
            # A few queries (a group of single writes): a second BLAS thread would spin on the
            # core the server's other work needs; a bulk batch's products are worth two.
            few = len(vectors) < QUERY_BLOCK
            with _single_threaded_blas() if few else contextlib.nullcontext():
                for start in range(0, len(vectors), QUERY_BLOCK):
                    block = self._scores(vectors[start : start + QUERY_BLOCK], live_only)
                    best.add(np.arange(start, start + len(block)), np.arange(block.shape[1]), block)
            rows, scores = best.result()
        return self._hits(rows, scores)

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

    def _partitions(self) -> Partitions:
        """The partitions, made on first use and laid out again when their tail is long."""
        if self._ivf is None:
            self._ivf = Partitions(self._matrix, len(self._ids))
        if (order := self._ivf.arrange(self._matrix, len(self._ids))) is not None:
            self._permute(order)
        return self._ivf

    def _permute(self, order: npt.NDArray[np.int64]) -> None:
        """Lay the first ``len(order)`` rows out again: row ``i`` becomes old row ``order[i]``."""
        n = len(order)
        for start in range(0, self._matrix.shape[1], 64):  # a column block at a time: a small copy
            self._matrix[:n, start : start + 64] = self._matrix[order, start : start + 64]
        self._live[:n] = self._live[order]
        self._ids = [self._ids[i] for i in order.tolist()]
        self._pos = {fact_id: row for row, fact_id in enumerate(self._ids)}
        if self._projection is not None:
            self._projection.rows[:n] = self._projection.rows[order]

    def prepare(self, *, partitions: bool = False) -> bool:
        """Compute the projection now if the table is large enough, and the ``partitions``
        that ``probe`` reads if asked; True if the projection is in use."""
        if partitions:
            if len(self._ids) >= PARTITION_MIN_ROWS:
                self._partitions()
            return False
        return self._projected(len(self._ids)) is not None

    def _projected(self, n: int) -> Projection | None:
        if n < PROJECTION_MIN_ROWS or self._matrix.shape[1] <= PROJECTED_DIMENSIONS:
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
        if self._ivf is not None:
            self._ivf.grow(len(self._matrix))
        if self._projection is not None:
            self._projection.grow(len(self._matrix))


class Projection:
    """The rows' coordinates on their first principal components, kept up to date on writes.

    A row's centred coordinates dotted with the query's approximate its cosine up to a term
    that is the same for every row (the mean's cosine with the query), so they rank alike.

    Each row also holds the norm of its residual (the part of the centred row outside the
    components) and a 1, so that one product with :meth:`bounding` gives every row an upper
    bound of its cosine with a query: ``q·x = q·mean + q_p·x_p + q_r·x_r`` exactly, and
    ``q_r·x_r ≤ |q_r| |x_r|``. A write-time check with a floor scores the 98 columns, a quarter
    of a 384-dimensional row, and re-scores exactly only the few rows whose bound reaches it.
    """

    def __init__(self, matrix: Vectors, n: int) -> None:
        rng = np.random.default_rng(0)
        sample = matrix[np.sort(rng.choice(n, size=min(n, PROJECTION_SAMPLE), replace=False))]
        self.mean = sample.mean(axis=0)
        _, _, components = np.linalg.svd(sample - self.mean, full_matrices=False)
        self.basis = np.ascontiguousarray(components[:PROJECTED_DIMENSIONS].T, dtype=np.float32)
        self.trained_on = n
        self.rows = np.empty((len(matrix), PROJECTED_DIMENSIONS + 2), dtype=np.float32)
        self.project(matrix, np.arange(n))

    def project(self, matrix: Vectors, rows: npt.NDArray[np.int64]) -> None:
        for start in range(0, len(rows), 8192):
            chunk = rows[start : start + 8192]
            centred = matrix[chunk] - self.mean
            coordinates = centred @ self.basis
            residual = np.einsum("ij,ij->i", centred, centred) - np.einsum(
                "ij,ij->i", coordinates, coordinates
            )
            self.rows[chunk, :PROJECTED_DIMENSIONS] = coordinates
            self.rows[chunk, PROJECTED_DIMENSIONS] = np.sqrt(np.maximum(residual, 0))
            self.rows[chunk, PROJECTED_DIMENSIONS + 1] = 1.0

    def move(self, source: int, target: int) -> None:
        self.rows[target] = self.rows[source]

    def grow(self, capacity: int) -> None:
        rows = np.empty((capacity, self.rows.shape[1]), dtype=np.float32)
        rows[: len(self.rows)] = self.rows
        self.rows = rows

    def scores(self, query: Vectors, n: int) -> Vectors:
        padded = np.zeros(self.rows.shape[1], dtype=np.float32)
        padded[:PROJECTED_DIMENSIONS] = query @ self.basis
        return _matvec(self.rows[:n], padded)

    def bounding(self, queries: Vectors) -> Vectors:
        """Per query, the vector whose product with a row is that row's upper bound."""
        coordinates = queries @ self.basis
        residual = np.einsum("ij,ij->i", queries, queries) - np.einsum(
            "ij,ij->i", coordinates, coordinates
        )
        return np.ascontiguousarray(
            np.column_stack([coordinates, np.sqrt(np.maximum(residual, 0)), queries @ self.mean]),
            dtype=np.float32,
        )


class Best:
    """The best ``k`` (row, score) per query with score ≥ ``floor``, gathered block by block.

    Without a floor each block's top ``k`` per query is kept, in its own group of ``k`` columns
    (one group per ``slots``, e.g. per probed partition). With one, only the pairs that pass
    are collected (at most ``k`` per query and block), then ranked: checks such as
    near-duplicates find a handful of candidates among thousands of rows, and ranking all of
    them cost more than the products.
    """

    def __init__(self, queries: int, k: int, floor: float, *, slots: int = 1) -> None:
        self.k, self.floor, self.queries = k, floor, queries
        self._sparse = math.isfinite(floor)
        self._found: list[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], Vectors]] = []
        if not self._sparse:
            self._rows = np.full((queries, slots * k), -1, dtype=np.int64)
            self._scores = np.full((queries, slots * k), -np.inf, dtype=np.float32)

    def add(
        self,
        queries: npt.NDArray[np.int64],
        rows: npt.NDArray[np.int64],
        scores: Vectors,
        slots: npt.NDArray[np.int64] | None = None,
        live: npt.NDArray[np.bool_] | None = None,
    ) -> None:
        """``scores[i, j]`` is query ``queries[i]`` against row ``rows[j]``; each query's
        ``slots[i]`` is its group of columns (without a floor). ``live[j]`` flags whether row
        ``rows[j]`` may be returned (None: every row may)."""
        if self._sparse:
            qi, rj = np.nonzero(scores >= self.floor)
            if live is not None and len(qi):  # few pass: cheaper to drop them than to mask
                kept = live[rj]
                qi, rj = qi[kept], rj[kept]
            if len(qi) > len(queries) * self.k:  # many pass (a low floor): keep each query's k
                if live is not None:
                    scores = np.where(live, scores, np.float32(-np.inf))
                top = np.argpartition(-scores, self.k - 1, axis=1)[:, : self.k]
                best = np.take_along_axis(scores, top, 1)
                qi, cj = np.nonzero(best >= self.floor)
                self._found.append((queries[qi], rows[top[qi, cj]], best[qi, cj]))
            elif len(qi):
                self._found.append((queries[qi], rows[rj], scores[qi, rj]))
            return
        if live is not None:
            scores = np.where(live, scores, np.float32(-np.inf))
        width = min(self.k, len(rows))
        if width == 0:
            return
        if width < len(rows):
            top = np.argpartition(-scores, width - 1, axis=1)[:, :width]
        else:
            top = np.broadcast_to(np.arange(width), (len(queries), width))
        columns = (0 if slots is None else slots[:, None] * self.k) + np.arange(width)
        self._scores[queries[:, None], columns] = np.take_along_axis(scores, top, 1)
        self._rows[queries[:, None], columns] = rows[top]

    def add_pairs(
        self,
        queries: npt.NDArray[np.int64],
        rows: npt.NDArray[np.int64],
        scores: Vectors,
        live: npt.NDArray[np.bool_] | None = None,
    ) -> None:
        """Query ``queries[i]`` scored ``scores[i]`` against row ``rows[i]`` (with a floor
        only: the pairs are kept as they are, then ranked)."""
        kept = scores >= self.floor
        if live is not None:
            kept &= live
        self._found.append((queries[kept], rows[kept], scores[kept]))

    def result(self) -> tuple[npt.NDArray[np.int64], Vectors]:
        """Rows and scores, ``queries`` x ``k``, unordered; -1 and -inf where fewer were found."""
        k = self.k
        if not self._sparse:
            if self._scores.shape[1] == k:
                return self._rows, self._scores
            keep = np.argpartition(-self._scores, k - 1, axis=1)[:, :k]
            return np.take_along_axis(self._rows, keep, 1), np.take_along_axis(
                self._scores, keep, 1
            )
        rows = np.full((self.queries, k), -1, dtype=np.int64)
        scores = np.full((self.queries, k), -np.inf, dtype=np.float32)
        if not self._found:
            return rows, scores
        query = np.concatenate([q for q, _, _ in self._found])
        row = np.concatenate([r for _, r, _ in self._found])
        score = np.concatenate([s for _, _, s in self._found])
        order = np.lexsort((-score, query))  # by query, best first
        query, row, score = query[order], row[order], score[order]
        starts = np.searchsorted(query, query)  # each pair's rank within its query
        rank = np.arange(len(query)) - starts
        kept = rank < k
        rows[query[kept], rank[kept]] = row[kept]
        scores[query[kept], rank[kept]] = score[kept]
        return rows, scores


class Partitions:
    """k-means partitions of the mirror's rows (an in-memory IVF) whose size stays bounded.

    Rows are kept laid out by partition: after :meth:`arrange` the first ``arranged`` rows of
    the mirror's matrix hold each partition's rows in one contiguous range, so probing a
    partition reads a slice, not scattered rows. Rows written later (the tail) are labelled as
    they arrive and gathered when probed; once the tail grows past a fraction of the table,
    ``arrange`` splits the partitions that have outgrown PARTITION_ROWS x 2 (2-means on their
    members) and lays the whole table out again. A probe therefore costs about the same at
    100 thousand rows as at a million; only the centroids, one per PARTITION_ROWS rows, grow.
    """

    def __init__(self, matrix: Vectors, n: int) -> None:
        rng = np.random.default_rng(0)
        # A bounded first clustering; splitting the large partitions then brings each down to
        # size (much cheaper at a million rows than k-means with one centroid per partition).
        k = max(16, min(TRAINED_PARTITIONS, n // PARTITION_ROWS))
        sample = matrix[np.sort(rng.choice(n, size=min(n, 40 * k), replace=False))]
        centroids = sample[rng.choice(len(sample), size=k, replace=False)].copy()
        for _ in range(8):
            centroids = _means(sample, np.argmax(sample @ centroids.T, axis=1), centroids)
        self.centroids = centroids
        self.labels = np.zeros(len(matrix), dtype=np.int64)
        self.arranged = 0  # rows [0, arranged) lie in their partition's range
        # Partition c's rows: [_ranges[c], _ranges[c + 1]) (all empty until ``arrange``, which
        # sets them again whenever it adds partitions).
        self._ranges = np.zeros(k + 1, dtype=np.int64)
        self._tail: tuple[int, int, list[npt.NDArray[np.int64]]] | None = None
        self.label(matrix, np.arange(n))

    def label(self, matrix: Vectors, rows: npt.NDArray[np.int64]) -> None:
        for start in range(0, len(rows), 8192):
            chunk = rows[start : start + 8192]
            labels = np.argmax(matrix[chunk] @ self.centroids.T, axis=1)
            if ((chunk < self.arranged) & (labels != self.labels[chunk])).any():
                self.arranged = 0  # a rewritten vector left its range: lay out again when read
            self.labels[chunk] = labels
        self._tail = None

    def move(self, source: int, target: int) -> None:
        """Row ``source`` was moved to ``target`` (a delete filled its hole with the last row)."""
        if min(source, target) < self.arranged:
            self.arranged = 0
        self.labels[target] = self.labels[source]
        self._tail = None

    def grow(self, capacity: int) -> None:
        labels = np.zeros(capacity, dtype=np.int64)
        labels[: len(self.labels)] = self.labels
        self.labels = labels

    def arrange(self, matrix: Vectors, n: int) -> npt.NDArray[np.int64] | None:
        """If the tail has grown too long: split the oversized partitions and return the order
        in which the first ``n`` rows must be laid out (this object's labels already follow
        it; the caller moves the rows). None if the layout is still good."""
        if n - self.arranged <= max(TAIL_ROWS, n // TAIL_FRACTION):
            return None
        self._split(matrix, n)
        order = np.argsort(self.labels[:n], kind="stable")
        self.labels[:n] = self.labels[order]
        self._ranges = np.searchsorted(self.labels[:n], np.arange(len(self.centroids) + 1))
        self.arranged = n
        self._tail = None
        return order

    def _split(self, matrix: Vectors, n: int) -> None:
        """Split every partition of more than PARTITION_ROWS x 2 rows in two (2-means on its
        rows), again until none is."""
        counts = np.bincount(self.labels[:n], minlength=len(self.centroids))
        large = [int(c) for c in np.nonzero(counts > 2 * PARTITION_ROWS)[0]]
        if not large:
            return
        order = np.argsort(self.labels[:n], kind="stable")
        bounds = np.searchsorted(self.labels[:n][order], np.arange(len(self.centroids) + 1))
        members = {c: order[bounds[c] : bounds[c + 1]] for c in large}
        centroids = list(self.centroids)
        while large:
            c = large.pop()
            rows = members.pop(c)
            vectors = matrix[rows]
            pair = vectors[[0, len(rows) // 2]].copy()
            for _ in range(SPLIT_ROUNDS):
                side = np.argmax(vectors @ pair.T, axis=1)
                pair = _means(vectors, side, pair)
            side = np.argmax(vectors @ pair.T, axis=1)
            if side.all() or not side.any():  # identical rows: cannot split
                continue
            new = len(centroids)
            centroids[c] = pair[0]
            centroids.append(pair[1])
            self.labels[rows[side == 1]] = new
            for part, kept in ((c, rows[side == 0]), (new, rows[side == 1])):
                if len(kept) > 2 * PARTITION_ROWS:
                    large.append(part)
                    members[part] = kept
        self.centroids = np.ascontiguousarray(centroids, dtype=np.float32)

    def neighbours_many(
        self,
        matrix: Vectors,
        live: npt.NDArray[np.bool_],
        n: int,
        vectors: Vectors,
        k: int,
        *,
        live_only: bool,
        floor: float,
        projection: Projection | None = None,
    ) -> tuple[npt.NDArray[np.int64], Vectors]:
        """The best ``k`` of the first ``n`` rows of ``matrix`` (and their scores) with a score
        ≥ ``floor`` per query among the partitions it probes; -1 and -inf where fewer were
        found. ``live`` flags the rows a ``live_only`` search may return. With a
        ``projection`` (given only with a finite floor) a partition's rows are first bounded from it and
        only the pairs whose bound reaches the floor are scored: the same pairs are found,
        reading 98 numbers a row instead of all its dimensions."""
        tail = self._tail_lists(n)
        probes = np.argpartition(vectors @ self.centroids.T, -PARTITION_PROBES, axis=1)
        probes = probes[:, -PARTITION_PROBES:]
        best = Best(len(vectors), k, floor, slots=PARTITION_PROBES)
        order = np.argsort(probes, axis=None, kind="stable")
        flat = probes.ravel()[order]
        bounds = np.searchsorted(flat, np.arange(len(self.centroids) + 1))
        # Each probed partition's laid-out rows (a slice) and the rows of its tail, with the
        # range of ``order`` that lists the probes of it.
        parts: list[tuple[slice | npt.NDArray[np.int64], int, int]] = []
        for c in np.nonzero(bounds[1:] > bounds[:-1])[0].tolist():
            first, last = int(bounds[c]), int(bounds[c + 1])
            begin, end = int(self._ranges[c]), int(self._ranges[c + 1])
            if end > begin:
                parts.append((slice(begin, end), first, last))
            if len(tail[c]):
                parts.append((tail[c], first, last))
        if projection is not None:
            queries, rows, parts = _bounded(projection, vectors, order, parts, floor)
            scores = np.einsum("ij,ij->i", matrix[rows], vectors[queries])
            best.add_pairs(queries, rows, scores, live[rows] if live_only else None)

        def score(share: list[int]) -> None:
            # One product per part, rows x queries then viewed queries x rows: the rows are
            # read once, in order (a third faster at a million rows than queries x rows).
            for i in share:
                rows, first, last = parts[i]
                queries, slots = np.divmod(order[first:last], PARTITION_PROBES)
                scores = (matrix[rows] @ vectors[queries].T).T
                at = _numbers(rows)
                best.add(queries, at, scores, slots, live[at] if live_only else None)

        # Small products: one BLAS thread each is faster than waking a pool (the limit is the
        # process's, so it is set here, around every thread's share).
        with _single_threaded_blas():
            _shared(score, list(range(len(parts))))
        return best.result()

    def search(
        self,
        matrix: Vectors,
        live: npt.NDArray[np.bool_],
        n: int,
        query: Vectors,
        probes: int,
        *,
        live_only: bool,
    ) -> tuple[npt.NDArray[np.int64], Vectors]:
        """Every row of the ``probes`` partitions nearest to ``query``, with its exact score
        (-inf for a row that is not live when ``live_only``)."""
        tail = self._tail_lists(n)
        probes = min(probes, len(self.centroids))
        chosen = np.argpartition(-_matvec(self.centroids, query), probes - 1)[:probes].tolist()
        ranges = [(self._ranges[c], self._ranges[c + 1]) for c in chosen]
        rows = np.concatenate([*(np.arange(b, e) for b, e in ranges), *(tail[c] for c in chosen)])
        scores = np.concatenate(
            [
                *(_matvec(matrix[b:e], query) for b, e in ranges),
                *(_matvec(matrix[tail[c]], query) for c in chosen),
            ]
        )
        if live_only:
            scores[~live[rows]] = -np.inf
        return rows, scores

    def _tail_lists(self, n: int) -> list[npt.NDArray[np.int64]]:
        """Per partition, the rows of the tail (past ``arranged``) that it holds."""
        if self._tail is None or self._tail[:2] != (n, self.arranged):
            labels = self.labels[self.arranged : n]
            order = np.argsort(labels, kind="stable")
            bounds = np.searchsorted(labels[order], np.arange(len(self.centroids) + 1))
            lists = [
                order[bounds[c] : bounds[c + 1]] + self.arranged for c in range(len(self.centroids))
            ]
            self._tail = (n, self.arranged, lists)
        return self._tail[2]


def _bounded(
    projection: Projection,
    vectors: Vectors,
    order: npt.NDArray[np.int64],
    parts: list[tuple[slice | npt.NDArray[np.int64], int, int]],
    floor: float,
) -> tuple[
    npt.NDArray[np.int64],
    npt.NDArray[np.int64],
    list[tuple[slice | npt.NDArray[np.int64], int, int]],
]:
    """The (query, row) pairs of ``parts`` whose upper bound from ``projection`` reaches
    ``floor``, and the parts where so many do (a low floor) that they are better scored in
    full. Every part's bounds are written into one buffer and compared at once: the per-part
    work left is one small product (bound by memory bandwidth, it runs in SCORING_THREADS)."""
    bounding = projection.bounding(vectors)[order // PARTITION_PROBES]  # in probe order
    lengths = np.array([_count(rows) for rows, _, _ in parts], dtype=np.int64)
    firsts = np.array([first for _, first, _ in parts], dtype=np.int64)
    widths = np.array([last - first for _, first, last in parts], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths * widths)])  # each part's rows x probes
    buffer = np.empty(int(offsets[-1]), dtype=np.float32)

    def bound(share: list[int]) -> None:
        for i in share:
            rows, first, last = parts[i]
            out = buffer[offsets[i] : offsets[i + 1]].reshape(-1, last - first)
            np.matmul(projection.rows[rows], bounding[first:last].T, out=out)

    least = floor - BOUND_MARGIN
    sample = list(range(0, len(parts), max(1, len(parts) // BOUND_SAMPLE)))
    with _single_threaded_blas():
        _shared(bound, sample)
        passed = np.array(
            [np.count_nonzero(buffer[offsets[i] : offsets[i + 1]] >= least) for i in sample]
        )
        if 2 * np.count_nonzero(passed * BOUND_FALLBACK > lengths[sample]) > len(sample):
            return np.zeros(0, np.int64), np.zeros(0, np.int64), parts  # a bound too loose
        _shared(bound, sorted(set(range(len(parts))) - set(sample)))
    passing = np.flatnonzero(buffer >= least)  # few, unless the sample was unlucky
    part = np.searchsorted(offsets, passing, side="right") - 1
    heavy = np.bincount(part, minlength=len(parts)) * BOUND_FALLBACK > lengths
    kept = ~heavy[part]
    passing, part = passing[kept], part[kept]
    row, probe = np.divmod(passing - offsets[part], widths[part])
    if len(passing):  # the row numbers of every part, end to end
        numbers = np.concatenate([_numbers(rows) for rows, _, _ in parts])
        row = numbers[np.concatenate([[0], np.cumsum(lengths)])[part] + row]
    return (
        order[firsts[part] + probe] // PARTITION_PROBES,
        row,
        [parts[i] for i in np.nonzero(heavy)[0].tolist()],
    )


def _count(rows: slice | npt.NDArray[np.int64]) -> int:
    return rows.stop - rows.start if isinstance(rows, slice) else len(rows)


def _numbers(rows: slice | npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The row numbers of a slice of the matrix, or the given ones."""
    return np.arange(rows.start, rows.stop) if isinstance(rows, slice) else rows


def _shared(work: Callable[[list[int]], None], items: list[int]) -> None:
    """``work`` over ``items``, in SCORING_THREADS interleaved shares run at once when there are
    enough of them: the products release the GIL, and the scan of a bulk check's partitions is
    bound by one core's memory bandwidth. ``work`` must only add to thread-safe results."""
    threads = SCORING_THREADS if len(items) >= SHARED_MIN_ITEMS else 1
    if threads == 1:
        work(items)
        return
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(SCORING_THREADS - 1, thread_name_prefix="graphmem-scan")
    others = [_pool.submit(work, items[i::threads]) for i in range(1, threads)]
    try:
        work(items[::threads])
    finally:
        for future in others:
            future.result()


def _means(vectors: Vectors, nearest: npt.NDArray[np.int64], centroids: Vectors) -> Vectors:
    """The normalised mean of each group of ``vectors`` (by ``nearest``); a group with no
    member keeps its centroid."""
    members = np.zeros((len(centroids), len(vectors)), dtype=np.float32)
    members[nearest, np.arange(len(vectors))] = 1.0
    sums = members @ vectors  # one product: far faster than summing group by group
    norms = np.linalg.norm(sums, axis=1, keepdims=True)
    return np.where(norms > 1e-12, sums / np.maximum(norms, 1e-12), centroids).astype(np.float32)


def columns(batch: pa.RecordBatch) -> tuple[Vectors, npt.NDArray[np.bool_]]:
    """A batch of the vector table's rows as a vectors matrix and live flags."""
    vectors = batch.column("vector").flatten().to_numpy().reshape(batch.num_rows, -1)
    return vectors, batch.column("live").to_numpy(zero_copy_only=False)


_blas: ThreadpoolController | None = None
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _forget_pool() -> None:
    """In a forked child: the parent's pool threads do not exist there."""
    global _pool, _pool_lock
    _pool, _pool_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_pool)


def _single_threaded_blas() -> AbstractContextManager[object]:
    """Limit BLAS to one thread for the enclosed many small matrix products."""
    global _blas
    if _blas is None:
        _blas = ThreadpoolController()
    limiter: AbstractContextManager[object] = _blas.limit(limits=1, user_api="blas")
    return limiter


def _matvec(matrix: Vectors, vector: Vectors) -> Vectors:
    """``matrix @ vector`` for one query, without BLAS.

    numpy's own loop is as fast as one BLAS thread for these memory-bound products, and does not
    wake BLAS's thread pool, whose threads then spin on the cores that the keyword leg of the same
    search or other requests need (at 100k rows with the cores shared: a query's projection scan
    took 19 ms with two BLAS threads and about 5 ms without).
    """
    result: Vectors = np.einsum("ij,j->i", matrix, vector)
    return result
