"""Matrix work shared by the in-memory engine: work split between SCORING_THREADS, BLAS held to
one thread, and a matrix-vector product.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from typing import Final

import numpy as np
from threadpoolctl import ThreadpoolController

from ..models import Vectors

#: Threads that score a bulk check's queries, each a share of their blocks (at most two: the
#: scan is bound by memory bandwidth, and the other cores serve requests).
SCORING_THREADS: Final = min(2, os.cpu_count() or 1)


#: Blocks of queries from which a check shares them out between SCORING_THREADS (one block, a
#: few single writes' checks: a second thread costs more than it saves).
SHARED_MIN_ITEMS: Final = 2


def shared(work: Callable[[list[int]], None], items: list[int]) -> None:
    """``work`` over ``items``, in SCORING_THREADS interleaved shares run at once when there are
    enough of them: faiss's probes and numpy's products release the GIL. ``work`` must write
    only its own items' results."""
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


_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()
_blas: ThreadpoolController | None = None


def _forget_pool() -> None:
    """In a forked child: the parent's pool threads do not exist there."""
    global _pool, _pool_lock
    _pool, _pool_lock = None, threading.Lock()


def single_threaded_blas() -> AbstractContextManager[object]:
    """Limit BLAS to one thread for the enclosed many small matrix products."""
    global _blas
    if _blas is None:
        _blas = ThreadpoolController()
    limiter: AbstractContextManager[object] = _blas.limit(limits=1, user_api="blas")
    return limiter


def matvec(matrix: Vectors, vector: Vectors) -> Vectors:
    """``matrix @ vector`` for one query, without BLAS.

    numpy's own loop is as fast as one BLAS thread for these memory-bound products, and does not
    wake BLAS's thread pool, whose threads then spin on the cores that the keyword leg of the same
    search or other requests need (at 100k rows with the cores shared: a query's projection scan
    took 19 ms with two BLAS threads and about 5 ms without).
    """
    result: Vectors = np.einsum("ij,j->i", matrix, vector)
    return result


os.register_at_fork(after_in_child=_forget_pool)
