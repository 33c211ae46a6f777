"""Access tracking: how often and how lately each fact was read, and refresh on access.

Reads that return facts at the current time count an access for each (search, lookup,
recall). Facts in a decay class refreshed on access (:data:`graphmem.decay.REFRESH_ON_ACCESS`)
have their TTL restarted from the access.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable

from .storage.interface import Store, Transaction


class AccessTracker:
    """Counts accesses in memory and writes them with the store's next write. Thread-safe.

    Written without an fsync (``durable=False``): an access counter lost to a power cut or a
    crash is harmless, and search latency would otherwise include a disk flush. Written at most
    once per ``interval`` seconds of the memory's clock: every write makes the readers drop
    their page caches, which costs the next search more than the write itself (4 ms at 100k
    facts). Accesses in between wait in memory and go out with the next write of any kind, the
    first read after the interval, or at close. Never waits for the writer: while another write
    holds it, they wait for the next chance.
    """

    def __init__(self, store: Store, clock: Callable[[], float], interval: float) -> None:
        self._store = store
        self._clock = clock
        self.interval = interval
        self._lock = threading.Lock()
        self._pending: dict[str, tuple[int, float]] = {}  # id -> (count, last time) to write
        self._written_at = -math.inf  # when accesses were last written (memory's clock)
        store.on_transaction(self._flush)

    def track(self, ids: Iterable[str]) -> None:
        """Count an access to each fact; write the waiting accesses if the interval is up."""
        now = self._clock()
        with self._lock:
            for fact_id in ids:
                count, _ = self._pending.get(fact_id, (0, now))
                self._pending[fact_id] = (count + 1, now)
            if not self._pending or now - self._written_at < self.interval:
                return
        transaction = self._store.try_transaction(durable=False)
        if transaction is not None:
            with transaction:
                pass  # the transaction's start hook (_flush) writes them

    def close(self) -> None:
        """Write the accesses still waiting (before the store closes)."""
        if self._pending and not self._store.closed:
            with self._store.transaction(durable=False):
                pass

    def _flush(self, tx: Transaction) -> None:
        with self._lock:
            pending, self._pending = self._pending, {}
            if not pending:
                return
            self._written_at = self._clock()
        tx.record_accesses(pending)
