"""The in-memory vector engine: every row of a namespace's vector table, searched by matrix
product.

``Mirror`` holds the rows in a growable float32 matrix and answers exact nearest-neighbour
queries; from PROJECTION_MIN_ROWS rows a query first scores the rows' principal-component
coordinates (``Projection``) and re-scores the best candidates exactly. Write-time checks
(near-duplicates, automatic links) ask for many queries' neighbours at once: below
PARTITION_MIN_ROWS by scanning every row in blocks, above it by probing k-means partitions
(``Partitions``, an in-memory IVF). ``Best`` gathers each query's best pairs block by block.
:class:`graphmem.vectors.VectorIndex` keeps a Mirror in step with its LanceDB table.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable, Sequence
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
#: Partitions probed per near-duplicate check.
PARTITION_PROBES: Final = 4
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

    def load(self, table: pa.Table) -> None:
        ids = table.column("id").to_pylist()
        if not ids:
            return
        flat = table.column("vector").combine_chunks().flatten().to_numpy()
        self.upsert(ids, flat.reshape(len(ids), -1), table.column("live").to_pylist())

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
                if self._ivf is not None:
                    self._ivf.move(last, row)
                if self._projection is not None:
                    self._projection.move(last, row)
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

    def neighbours_many(
        self, vectors: Vectors, k: int, *, live_only: bool, floor: float = -math.inf
    ) -> list[list[tuple[str, float]]]:
        if len(self._ids) >= PARTITION_MIN_ROWS:
            rows, scores = self._partitions().neighbours_many(
                self._matrix,
                self._live,
                len(self._ids),
                vectors,
                k,
                live_only=live_only,
                floor=floor,
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
        n = len(self._ids)
        if self._ivf is None or n > 2 * self._ivf.trained_on:  # (re)train as the table grows
            self._ivf = Partitions(self._matrix, n)
        return self._ivf

    def prepare(self) -> bool:
        """Compute the projection now if the table is large enough; True if it is in use."""
        return self._projected(len(self._ids)) is not None

    def _projected(self, n: int) -> Projection | None:
        if n < PROJECTION_MIN_ROWS or self._matrix.shape[1] <= PROJECTED_DIMENSIONS:
            return None
        if self._projection is None or n > 2 * self._projection.trained_on:
            self._projection = Projection(self._matrix, n)
        return self._projection

    def _grow(self) -> None:
        self._matrix = np.concatenate([self._matrix, np.empty_like(self._matrix)])
        self._live = np.concatenate([self._live, np.zeros_like(self._live)])
        if self._ivf is not None:
            self._ivf.grow(len(self._matrix))
        if self._projection is not None:
            self._projection.grow(len(self._matrix))


class Projection:
    """The rows' coordinates on their first principal components, kept up to date on writes.

    A row's centred coordinates dotted with the query's approximate its cosine up to a term
    that is the same for every row (the mean's cosine with the query), so they rank alike.
    """

    def __init__(self, matrix: Vectors, n: int) -> None:
        rng = np.random.default_rng(0)
        sample = matrix[np.sort(rng.choice(n, size=min(n, PROJECTION_SAMPLE), replace=False))]
        self.mean = sample.mean(axis=0)
        _, _, components = np.linalg.svd(sample - self.mean, full_matrices=False)
        self.basis = np.ascontiguousarray(components[:PROJECTED_DIMENSIONS].T, dtype=np.float32)
        self.trained_on = n
        self.rows = np.empty((len(matrix), PROJECTED_DIMENSIONS), dtype=np.float32)
        self.project(matrix, np.arange(n))

    def project(self, matrix: Vectors, rows: npt.NDArray[np.int64]) -> None:
        for start in range(0, len(rows), 8192):
            chunk = rows[start : start + 8192]
            self.rows[chunk] = (matrix[chunk] - self.mean) @ self.basis

    def move(self, source: int, target: int) -> None:
        self.rows[target] = self.rows[source]

    def grow(self, capacity: int) -> None:
        extra = np.empty((capacity - len(self.rows), self.rows.shape[1]), dtype=np.float32)
        self.rows = np.concatenate([self.rows, extra])

    def scores(self, query: Vectors, n: int) -> Vectors:
        return _matvec(self.rows[:n], query @ self.basis)


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
    ) -> None:
        """``scores[i, j]`` is query ``queries[i]`` against row ``rows[j]``; each query's
        ``slots[i]`` is its group of columns (without a floor)."""
        if self._sparse:
            qi, rj = np.nonzero(scores >= self.floor)
            if len(qi) > len(queries) * self.k:  # many pass (a low floor): keep each query's k
                top = np.argpartition(-scores, self.k - 1, axis=1)[:, : self.k]
                best = np.take_along_axis(scores, top, 1)
                qi, cj = np.nonzero(best >= self.floor)
                self._found.append((queries[qi], rows[top[qi, cj]], best[qi, cj]))
            else:
                self._found.append((queries[qi], rows[rj], scores[qi, rj]))
            return
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
    """k-means partitions of the mirror's rows (an in-memory IVF) for near-duplicate checks.

    Each row's partition is kept up to date as rows are written or moved; the member lists are
    rebuilt from those labels only when a query needs them.
    """

    def __init__(self, matrix: Vectors, n: int) -> None:
        rng = np.random.default_rng(0)
        k = max(16, int(np.sqrt(n)))
        sample = matrix[rng.choice(n, size=min(n, 50 * k), replace=False)]
        centroids = sample[rng.choice(len(sample), size=k, replace=False)].copy()
        for _ in range(8):
            nearest = np.argmax(sample @ centroids.T, axis=1)
            for c in range(k):
                members = sample[nearest == c]
                if len(members):
                    mean = members.mean(axis=0)
                    centroids[c] = mean / max(float(np.linalg.norm(mean)), 1e-12)
        self.centroids = centroids
        self.trained_on = n
        self.labels = np.zeros(len(matrix), dtype=np.int64)
        self.label(matrix, np.arange(n))
        self._n = n

    def label(self, matrix: Vectors, rows: npt.NDArray[np.int64]) -> None:
        for start in range(0, len(rows), 8192):
            chunk = rows[start : start + 8192]
            self.labels[chunk] = np.argmax(matrix[chunk] @ self.centroids.T, axis=1)
        self._members: list[npt.NDArray[np.int64]] | None = None

    def move(self, source: int, target: int) -> None:
        self.labels[target] = self.labels[source]
        self._members = None

    def grow(self, capacity: int) -> None:
        self.labels = np.concatenate([self.labels, np.zeros(capacity - len(self.labels), np.int64)])

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
    ) -> tuple[npt.NDArray[np.int64], Vectors]:
        """The best ``k`` of the first ``n`` rows of ``matrix`` (and their scores) with a score
        ≥ ``floor`` per query among the partitions it probes; -1 and -inf where fewer were
        found. ``live`` flags the rows a ``live_only`` search may return."""
        members = self._member_lists(n)
        probes = np.argpartition(-(vectors @ self.centroids.T), PARTITION_PROBES - 1, axis=1)
        probes = probes[:, :PARTITION_PROBES]
        best = Best(len(vectors), k, floor, slots=PARTITION_PROBES)
        order = np.argsort(probes, axis=None, kind="stable")
        flat = probes.ravel()[order]
        bounds = np.searchsorted(flat, np.arange(len(self.centroids) + 1))
        # One pass per probed partition, scoring all the queries that probe it: each row is
        # gathered once per call, not once per query. Small products: one BLAS thread each is
        # faster than waking a pool (and far faster when the cores are busy).
        with _single_threaded_blas():
            for c in np.nonzero(bounds[1:] > bounds[:-1])[0]:
                queries, slots = np.divmod(order[bounds[c] : bounds[c + 1]], PARTITION_PROBES)
                rows = members[c]
                if live_only:
                    rows = rows[live[rows]]
                if len(rows) == 0:
                    continue
                best.add(queries, rows, vectors[queries] @ matrix[rows].T, slots)
        return best.result()

    def _member_lists(self, n: int) -> list[npt.NDArray[np.int64]]:
        if self._members is None or self._n != n:
            labels = self.labels[:n]
            order = np.argsort(labels, kind="stable")
            bounds = np.searchsorted(labels[order], np.arange(len(self.centroids) + 1))
            self._members = [order[bounds[c] : bounds[c + 1]] for c in range(len(self.centroids))]
            self._n = n
        return self._members


_blas: ThreadpoolController | None = None


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
