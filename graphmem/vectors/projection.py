"""The projection of the in-memory engine: each row's coordinates on the table's first
PROJECTED_DIMENSIONS principal components, plus its residual norm, so that a query scores cheap
coordinates first and re-scores only the best candidates in full (and a check bounds a cosine
from above).
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
        return matvec(self.rows[:n], padded)

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
