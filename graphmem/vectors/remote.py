"""Calls to a vector index on an object store, each waited for a bounded time.

An object store that accepts connections and answers late, or never, holds LanceDB's calls
for as long as its client's timeouts and retries last (tens of seconds, even bounded). A
search or a write cannot wait that long, so:

1. each call runs on a thread of a small pool and is waited for at most ``seconds``; past it
   the caller gets :class:`Unanswered` and the call finishes (or fails) on its thread;
2. while a call that overran is still running, the next calls are not started: they get
   ``Unanswered`` at once, so a store that hangs costs one wait, not one per call.

A local index needs none of this: ``RemoteCalls(None)`` calls straight through.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, Final, TypeVar

T = TypeVar("T")

#: Threads per pool: the concurrent searches of one namespace (graphmem.search.SEARCH_THREADS)
#: and a write.
CALL_THREADS: Final = 5


class Unanswered(Exception):
    """The object store did not answer within the wait (or an earlier call still waits)."""


class RemoteCalls:
    """Runs calls that reach the object store, waiting for each at most ``seconds`` (None:
    in the caller's thread, unbounded). Thread-safe."""

    def __init__(self, seconds: float | None, name: str) -> None:
        self.seconds = seconds
        self._name = name
        self._pool: ThreadPoolExecutor | None = None
        self._overdue: Future[Any] | None = None
        self._lock = threading.Lock()

    def call(self, fn: Callable[[], T], *, wait: float | None = None) -> T:
        """``fn()``'s result, or Unanswered if it took longer than ``wait`` (default
        ``seconds``; 0 starts it and returns at once) or a call that overran is running."""
        if self.seconds is None:
            return fn()
        with self._lock:
            if self._overdue is not None:
                if not self._overdue.done():
                    raise Unanswered("the object store has not answered an earlier request yet")
                self._overdue = None
            if self._pool is None:
                self._pool = ThreadPoolExecutor(CALL_THREADS, thread_name_prefix=self._name)
            future = self._pool.submit(fn)
        limit = self.seconds if wait is None else wait
        try:
            return future.result(timeout=limit)
        except FutureTimeout:
            with self._lock:
                self._overdue = future
            raise Unanswered(f"the object store did not answer within {limit:g} s") from None

    def close(self) -> None:
        """Wait for the calls still running (each bounded by the client's own timeouts)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
