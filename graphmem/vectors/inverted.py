"""The approximate tier of the in-memory engine: faiss's inverted lists with 4-bit product
codes read by its fast scan (``IndexIVFPQFastScan``, two dimensions a code) over the mirror's rows,
ids = row numbers. A probe returns candidates by their codes; the mirror re-scores them from its
float32 rows, so the order and scores it answers with are exact. bench/REPORT.md, "Vector search in
memory", has the head to head that chose faiss over a k-means tier of graphmem's own, the codes
against 8-bit scalar ones, and the recall against exact search.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from ..models import Vectors

#: Rows per inverted list, about, when the lists are trained: a probe costs about the same at
#: 100 thousand rows as at a million.
LIST_ROWS: Final = 512


#: Lists of a small table (from graphmem.vectors.mirror.APPROXIMATE_MIN_ROWS rows) at least.
MIN_LISTS: Final = 64


#: Vectors k-means trains the lists on, per list (at least faiss's minimum, 39), and its rounds
#: (faiss's default 25 costs a minute more at a million rows and found the same recall).
TRAIN_PER_LIST: Final = 40
TRAIN_ROUNDS: Final = 10


#: The lists are trained again on the whole table once it holds this many times the rows they
#: were trained on: rows written later join the list of their nearest centroid, which grows.
RETRAIN_GROWTH: Final = 2


#: Bits of a product code (faiss's fast scan reads 4-bit codes only).
CODE_BITS: Final = 4


#: Rows added per call while building (bounds the temporary codes faiss allocates).
ADD_CHUNK: Final = 65_536


def _faiss() -> Any:
    """faiss, imported on first use (a process that never holds 20,000 vectors never loads it)
    and held to one OpenMP thread in the calling thread (the setting is a thread's own: each
    call on the lists asks for it): a call with more threads would spin on the cores the
    server's other requests need, and an OpenMP pool does not survive ``fork``. Bulk calls are
    shared between Python threads instead (faiss releases the GIL)."""
    import faiss

    faiss.omp_set_num_threads(1)
    return faiss


class Inverted:
    """faiss's inverted lists over the first ``n`` rows of ``matrix``, trained on a sample."""

    def __init__(self, matrix: Vectors, n: int) -> None:
        faiss = _faiss()
        dimensions = matrix.shape[1]
        lists = max(1, min(max(MIN_LISTS, round(n / LIST_ROWS)), n // TRAIN_PER_LIST))
        self._quantiser = faiss.IndexFlatIP(dimensions)
        # Two dimensions a sub-quantiser (one where the dimensions are odd): with the larger
        # pool the mirror re-scores (mirror.RESCORED), 16 codes for a pair of coordinates find
        # what 8-bit scalar codes found, in a quarter of the bytes, and faiss scans them with
        # SIMD table lookups, 2-5 times faster (bench/REPORT.md has both).
        subquantisers = dimensions // 2 if dimensions % 2 == 0 else dimensions
        index = faiss.IndexIVFPQFastScan(
            self._quantiser,
            dimensions,
            lists,
            subquantisers,
            CODE_BITS,
            faiss.METRIC_INNER_PRODUCT,
        )
        index.cp.niter = TRAIN_ROUNDS
        rng = np.random.default_rng(0)
        sample = np.sort(rng.choice(n, size=min(n, TRAIN_PER_LIST * lists), replace=False))
        index.train(np.ascontiguousarray(matrix[sample]))
        self._index = index
        self.trained_on = n
        for start in range(0, n, ADD_CHUNK):
            self.add(matrix, np.arange(start, min(n, start + ADD_CHUNK), dtype=np.int64))

    @property
    def lists(self) -> int:
        return int(self._index.nlist)

    def stale(self, n: int) -> bool:
        """Whether a table of ``n`` rows has outgrown the lists."""
        return n > RETRAIN_GROWTH * self.trained_on

    def add(self, matrix: Vectors, rows: npt.NDArray[np.int64]) -> None:
        """Rows that hold a vector the lists do not have yet."""
        if len(rows):
            _faiss()  # this thread held to one OpenMP thread
            self._index.add_with_ids(np.ascontiguousarray(matrix[rows]), rows)

    def remove(self, rows: npt.NDArray[np.int64]) -> None:
        """Rows that no longer hold the vector the lists have (one scan of every list, however
        many: a delete's rows are removed at once)."""
        if not len(rows):
            return
        faiss = _faiss()
        invlists = faiss.downcast_InvertedLists(self._index.invlists)
        sizes = [invlists.list_size(c) for c in range(invlists.nlist)]
        self._index.remove_ids(rows)
        # faiss (1.15) leaves the codes of the removed rows in the places past a shortened
        # list's end, and a later add ORs the new rows' 4-bit codes into them: without this
        # a row added after a removal answered to codes no vector had.
        blank = np.zeros(invlists.packer.code_size, dtype=np.uint8)
        per_block = invlists.n_per_block
        for c, before in enumerate(sizes):
            after = invlists.list_size(c)
            if after < before:
                codes = invlists.get_codes(c)
                for place in range(after, min(before, -(-after // per_block) * per_block)):
                    invlists.packer.pack_1_c(faiss.swig_ptr(blank), place, codes)

    def candidates(
        self,
        queries: Vectors,
        wanted: int,
        probes: int,
        live: npt.NDArray[np.uint8] | None = None,
    ) -> npt.NDArray[np.int64]:
        """Per query, the ``wanted`` rows whose codes score best in the ``probes`` lists nearest
        to it, -1 where fewer were found; with ``live`` (a bitmap of the rows, least
        significant bit first, as ``numpy.packbits(..., bitorder="little")``) only its rows."""
        faiss = _faiss()
        selector = (
            None if live is None else faiss.IDSelectorBitmap(len(live) * 8, faiss.swig_ptr(live))
        )
        params = faiss.SearchParametersIVF(nprobe=min(probes, self.lists), sel=selector)
        _, rows = self._index.search(
            np.ascontiguousarray(queries, np.float32), wanted, params=params
        )
        found: npt.NDArray[np.int64] = rows
        return found

    def nbytes(self) -> int:
        """Bytes the lists hold: the codes in their blocks, each row's id, and the centroids."""
        invlists = _faiss().downcast_InvertedLists(self._index.invlists)
        blocks = ids = 0
        for c in range(invlists.nlist):
            size = invlists.list_size(c)
            blocks += -(-size // invlists.n_per_block)
            ids += size
        centroids = self._quantiser.ntotal * self._index.d * 4
        return int(blocks * invlists.block_size + ids * 8 + centroids)


def row_array(numbers: Iterable[int]) -> npt.NDArray[np.int64]:
    """Row numbers, each once, in order."""
    return np.asarray(sorted(set(numbers)), dtype=np.int64)
