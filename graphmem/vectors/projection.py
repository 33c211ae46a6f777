"""The projection of the in-memory engine: each row's coordinates on the table's first
PROJECTED_DIMENSIONS principal components, so that a query scores cheap coordinates first and
re-scores only the best candidates in full.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import numpy.typing as npt

from ..models import Vectors
from .kernels import matvec

#: Principal components kept by that projection (MiniLM's 384 dimensions: 87% of the variance
#: of the benchmark's facts).
PROJECTED_DIMENSIONS: Final = 96


#: Rows sampled to compute the principal components.
PROJECTION_SAMPLE: Final = 20_000


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
        rows = np.empty((capacity, self.rows.shape[1]), dtype=np.float32)
        rows[: len(self.rows)] = self.rows
        self.rows = rows

    def scores(self, query: Vectors, n: int) -> Vectors:
        return matvec(self.rows[:n], query @ self.basis)
