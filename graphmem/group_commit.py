"""Group commit: concurrent writes to one namespace share one transaction, one durable commit and
one vector write.

Each caller's write waits in a queue as a :class:`Pending`. The first caller to arrive while no
group is being written becomes the leader: it takes everything waiting (up to ``max_items``),
has it written as one group (the ``write`` callable: see ``Writer._write_group``), which sets
each write's own result or error, then hands the lead to the first write that queued meanwhile
and returns its own outcome. Everyone else sleeps until its write is done or it is handed the
lead. A write is answered only once its group has committed (and its vectors are written), so
durability is what it was with one transaction per write; what is shared is the cost of the
commit's flush to disk and of the vector index's write, which under load is most of a write's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from . import tracing

T = TypeVar("T")


class Pending(Generic[T]):
    """One caller's write: queued, then written with its group, then answered."""

    def __init__(self, items: int = 1) -> None:
        #: What the write weighs against the group's ``max_items`` (facts, links).
        self.items = items
        self.result: T | None = None
        self.error: BaseException | None = None
        #: The transaction time of the group that wrote it.
        self.at = 0.0
        #: The span it was queued in, which its group's span links to (None: tracing off).
        self.caller = tracing.link()
        self._done = False
        self._lead = False
        self._wake = threading.Event()

    def outcome(self) -> T:
        if self.error is not None:
            raise self.error
        return self.result  # type: ignore[return-value]  # set by the group's write


class GroupCommit(Generic[T]):
    """A queue of writes to one namespace, written a group at a time by one of their callers."""

    def __init__(self, write: Callable[[Sequence[Pending[T]]], None], *, max_items: int) -> None:
        self._write = write
        self._max_items = max_items
        self._lock = threading.Lock()
        self._waiting: list[Pending[T]] = []
        self._busy = False

    def submit(self, pending: Pending[T]) -> T:
        """Queue ``pending``, wait until its group has been written, return its result (or raise
        its error)."""
        with self._lock:
            self._waiting.append(pending)
            if not self._busy:
                self._busy = pending._lead = True
        while not pending._done:
            if pending._lead:
                self._lead()
            else:
                pending._wake.wait()
                pending._wake.clear()
        return pending.outcome()

    def _lead(self) -> None:
        with self._lock:
            group = self._take()
        try:
            self._write(group)
        except BaseException as exc:  # the group failed as a whole: each write says so
            for pending in group:
                if pending.error is None:
                    pending.error, pending.result = exc, None
        finally:
            with self._lock:
                for pending in group:
                    pending._done = True
                    pending._lead = False
                    pending._wake.set()
                if self._waiting:
                    successor = self._waiting[0]
                    successor._lead = True
                    successor._wake.set()
                else:
                    self._busy = False

    def _take(self) -> list[Pending[T]]:
        """The writes waiting, oldest first, up to ``max_items`` (always at least one)."""
        taken, items = 0, 0
        for pending in self._waiting:
            if taken and items + pending.items > self._max_items:
                break
            taken += 1
            items += pending.items
        group, self._waiting = self._waiting[:taken], self._waiting[taken:]
        return group
