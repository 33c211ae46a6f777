"""The service's background work ends before the namespaces close: a store closed while an
outbox drain or a maintenance job still reads it in a thread crashes the process (SQLite
frees the connection under the thread's feet)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from typing import Any

from graphmem.server.http import app


class SlowMemory:
    """What the background loops call, each call taking a while in its thread."""

    namespace = "default"

    def __init__(self) -> None:
        self.started = threading.Event()
        self.finished: list[str] = []

    def _work(self, what: str) -> None:
        self.started.set()
        time.sleep(0.3)
        self.finished.append(what)

    def drain_outbox(self) -> None:
        self._work("drain")

    def maintain(self, *_: Any) -> None:
        self._work("maintain")


class OneNamespace:
    def __init__(self, memory: SlowMemory) -> None:
        self.memory = memory

    def opened(self) -> dict[str, SlowMemory]:
        return {"default": self.memory}


async def _cancelled_midway(loop: Any, memory: SlowMemory) -> list[str]:
    task = asyncio.create_task(loop(OneNamespace(memory), 0.0))
    await asyncio.to_thread(memory.started.wait, 5)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return list(memory.finished)  # what had ended when the task's cancellation was over


def test_a_cancelled_outbox_drain_ends_before_its_task_does() -> None:
    memory = SlowMemory()
    assert asyncio.run(_cancelled_midway(app._drain_every, memory)) == ["drain"]


def test_a_cancelled_maintenance_pass_ends_before_its_task_does() -> None:
    memory = SlowMemory()
    assert asyncio.run(_cancelled_midway(app._maintain_every, memory)) == ["maintain"]
