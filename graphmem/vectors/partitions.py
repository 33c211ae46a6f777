"""Partitions of the in-memory engine, an in-memory IVF: k-means partitions of bounded size whose
rows lie in one contiguous range each, probed for many queries' neighbours at once. A check with a
floor first bounds every probed row's cosine from the projection and scores only the pairs whose
bound reaches the floor.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import numpy.typing as npt

from ..models import Vectors
from .kernels import count_rows, matvec, row_numbers, shared, single_threaded_blas
from .projection import Projection
from .topk import Best

#: Partitions probed per near-duplicate check.
PARTITION_PROBES: Final = 4


#: Rows per partition, about: a partition is split in two when it holds twice as many, so a
#: probe costs the same whatever the table's size.
PARTITION_ROWS: Final = 512


#: Partitions found by k-means when the partitions are first made (then split as they grow).
TRAINED_PARTITIONS: Final = 256


#: Rounds of 2-means when a partition is split.
SPLIT_ROUNDS: Final = 3


#: The partitions lay the rows out again (one contiguous range each) when more than this many
#: rows, or more than one TAIL_FRACTION-th of the table, were written since they last did.
TAIL_ROWS: Final = 16_384


TAIL_FRACTION: Final = 8


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
            centroids = means(sample, np.argmax(sample @ centroids.T, axis=1), centroids)
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
                pair = means(vectors, side, pair)
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
            queries, rows, parts = bounded(projection, vectors, order, parts, floor)
            scores = np.einsum("ij,ij->i", matrix[rows], vectors[queries])
            best.add_pairs(queries, rows, scores, live[rows] if live_only else None)

        def score(share: list[int]) -> None:
            # One product per part, rows x queries then viewed queries x rows: the rows are
            # read once, in order (a third faster at a million rows than queries x rows).
            for i in share:
                rows, first, last = parts[i]
                queries, slots = np.divmod(order[first:last], PARTITION_PROBES)
                scores = (matrix[rows] @ vectors[queries].T).T
                at = row_numbers(rows)
                best.add(queries, at, scores, slots, live[at] if live_only else None)

        # Small products: one BLAS thread each is faster than waking a pool (the limit is the
        # process's, so it is set here, around every thread's share).
        with single_threaded_blas():
            shared(score, list(range(len(parts))))
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
        chosen = np.argpartition(-matvec(self.centroids, query), probes - 1)[:probes].tolist()
        ranges = [(self._ranges[c], self._ranges[c + 1]) for c in chosen]
        rows = np.concatenate([*(np.arange(b, e) for b, e in ranges), *(tail[c] for c in chosen)])
        scores = np.concatenate(
            [
                *(matvec(matrix[b:e], query) for b, e in ranges),
                *(matvec(matrix[tail[c]], query) for c in chosen),
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


def bounded(
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
    lengths = np.array([count_rows(rows) for rows, _, _ in parts], dtype=np.int64)
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
    with single_threaded_blas():
        shared(bound, sample)
        passed = np.array(
            [np.count_nonzero(buffer[offsets[i] : offsets[i + 1]] >= least) for i in sample]
        )
        if 2 * np.count_nonzero(passed * BOUND_FALLBACK > lengths[sample]) > len(sample):
            return np.zeros(0, np.int64), np.zeros(0, np.int64), parts  # a bound too loose
        shared(bound, sorted(set(range(len(parts))) - set(sample)))
    passing = np.flatnonzero(buffer >= least)  # few, unless the sample was unlucky
    part = np.searchsorted(offsets, passing, side="right") - 1
    heavy = np.bincount(part, minlength=len(parts)) * BOUND_FALLBACK > lengths
    kept = ~heavy[part]
    passing, part = passing[kept], part[kept]
    row, probe = np.divmod(passing - offsets[part], widths[part])
    if len(passing):  # the row numbers of every part, end to end
        numbers = np.concatenate([row_numbers(rows) for rows, _, _ in parts])
        row = numbers[np.concatenate([[0], np.cumsum(lengths)])[part] + row]
    return (
        order[firsts[part] + probe] // PARTITION_PROBES,
        row,
        [parts[i] for i in np.nonzero(heavy)[0].tolist()],
    )


def means(vectors: Vectors, nearest: npt.NDArray[np.int64], centroids: Vectors) -> Vectors:
    """The normalised mean of each group of ``vectors`` (by ``nearest``); a group with no
    member keeps its centroid."""
    members = np.zeros((len(centroids), len(vectors)), dtype=np.float32)
    members[nearest, np.arange(len(vectors))] = 1.0
    sums = members @ vectors  # one product: far faster than summing group by group
    norms = np.linalg.norm(sums, axis=1, keepdims=True)
    return np.where(norms > 1e-12, sums / np.maximum(norms, 1e-12), centroids).astype(np.float32)
