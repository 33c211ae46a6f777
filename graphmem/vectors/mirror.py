"""The in-memory vector engine: every row of a namespace's vector table, searched by matrix
product. :class:`graphmem.vectors.index.VectorIndex` keeps a ``Mirror`` in step with its LanceDB
table.

1. Exact search: the rows in a growable float32 matrix, scored against the query in blocks.
2. From PROJECTION_MIN_ROWS rows a query first scores the rows' principal-component coordinates
   (:mod:`.projection`) and re-scores the best candidates exactly.
3. Write-time checks (near-duplicates, automatic links) ask for many queries' neighbours at
   once: below PARTITION_MIN_ROWS by scanning every row, above it by probing k-means partitions
   (:mod:`.partitions`).
4. Each query's best pairs are gathered block by block (:mod:`.topk`).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable, Sequence
from typing import Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from ..models import Vectors
from . import projection
from .kernels import matvec, single_threaded_blas
from .partitions import Partitions
from .projection import Projection
from .topk import Best

#: Query vectors per matrix product in ``neighbours_many`` (bounds the scores matrix it allocates).
QUERY_BLOCK: Final = 128


#: Rows from which near-duplicate checks (``neighbours_many``) probe k-means partitions instead of
#: scanning every row: approximate, which is fine for skipping a redundant vector.
PARTITION_MIN_ROWS: Final = 20_000


#: Partitions read per approximate search (``Mirror.probe``): about SEARCH_PROBES x PARTITION_ROWS
#: rows, each scored exactly.
SEARCH_PROBES: Final = 48


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
        self._ivf: Partitions | None = None
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
        SEARCH_PROBES partitions nearest to ``vector``. For tables too large to scan per query
        (bench/REPORT.md, "Vector search in memory", has its recall against exact search); exact below PARTITION_MIN_ROWS."""
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
            with single_threaded_blas() if few else contextlib.nullcontext():
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
        if self._ivf is not None:
            self._ivf.grow(len(self._matrix))
        if self._projection is not None:
            self._projection.grow(len(self._matrix))


def columns(batch: pa.RecordBatch) -> tuple[Vectors, npt.NDArray[np.bool_]]:
    """A batch of the vector table's rows as a vectors matrix and live flags."""
    vectors = batch.column("vector").flatten().to_numpy().reshape(batch.num_rows, -1)
    return vectors, batch.column("live").to_numpy(zero_copy_only=False)
