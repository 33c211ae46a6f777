"""Top-k by blocks: each query's best (row, score) pairs kept as blocks of scores arrive."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from ..models import Vectors


class Best:
    """The best ``k`` (row, score) per query with score ≥ ``floor``, gathered block by block.

    Without a floor each query's top ``k`` is kept. With one, only the pairs that pass
    are collected (at most ``k`` per query and block), then ranked: checks such as
    near-duplicates find a handful of candidates among thousands of rows, and ranking all of
    them cost more than the products.
    """

    def __init__(self, queries: int, k: int, floor: float) -> None:
        self.k, self.floor, self.queries = k, floor, queries
        self._sparse = math.isfinite(floor)
        self._found: list[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], Vectors]] = []
        if not self._sparse:
            self._rows = np.full((queries, k), -1, dtype=np.int64)
            self._scores = np.full((queries, k), -np.inf, dtype=np.float32)

    def add(
        self, queries: npt.NDArray[np.int64], rows: npt.NDArray[np.int64], scores: Vectors
    ) -> None:
        """``scores[i, j]`` is query ``queries[i]`` against row ``rows[j]`` (-inf: a row it may
        not return); without a floor, each query comes in one block."""
        if self._sparse:
            qi, rj = np.nonzero(scores >= self.floor)
            if len(qi) > len(queries) * self.k:  # many pass (a low floor): keep each query's k
                top = np.argpartition(-scores, self.k - 1, axis=1)[:, : self.k]
                best = np.take_along_axis(scores, top, 1)
                qi, cj = np.nonzero(best >= self.floor)
                self._found.append((queries[qi], rows[top[qi, cj]], best[qi, cj]))
            elif len(qi):
                self._found.append((queries[qi], rows[rj], scores[qi, rj]))
            return
        width = min(self.k, len(rows))
        if width == 0:
            return
        if width < len(rows):
            top = np.argpartition(-scores, width - 1, axis=1)[:, :width]
        else:
            top = np.broadcast_to(np.arange(width), (len(queries), width))
        self._scores[queries[:, None], np.arange(width)] = np.take_along_axis(scores, top, 1)
        self._rows[queries[:, None], np.arange(width)] = rows[top]

    def result(self) -> tuple[npt.NDArray[np.int64], Vectors]:
        """Rows and scores, ``queries`` x ``k``, unordered; -1 and -inf where fewer were found."""
        k = self.k
        if not self._sparse:
            return self._rows, self._scores
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
