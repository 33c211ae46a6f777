"""The ``memory_prune`` tool: decay's prune from an agent, counted first with ``dry_run`` (which
a read-only key may do), then done."""

from __future__ import annotations

import pytest

from graphmem import Memory

from ..support.clock import Clock
from ..support.mcp_clients import READ_ONLY_KEY, call_in_process

pytestmark = pytest.mark.engines


def test_prune_counts_then_removes_what_expired_and_a_read_only_key_may_only_count(
    mem: Memory, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    erased: list[bool] = []
    erase = mem._writer.erase

    def counted() -> None:
        erased.append(True)
        erase()

    monkeypatch.setattr(mem._writer, "erase", counted)
    gone = mem.store("temporary note", expires_at=clock.now + 60).fact
    kept = mem.store("Alice lives in Lisbon").fact
    assert gone is not None and kept is not None
    clock.advance(120)
    failed, data = call_in_process(mem, READ_ONLY_KEY, "memory_prune", dry_run=True)
    assert not failed and (data["expired"], data["dry_run"]) == (1, True)
    failed, data = call_in_process(mem, READ_ONLY_KEY, "memory_prune")
    assert failed and data["error"]["code"] == "FORBIDDEN"
    assert mem.stats().facts == 2 and erased == []  # counting and refusing touch nothing
    failed, data = call_in_process(mem, None, "memory_prune")
    assert not failed and (data["expired"], data["dry_run"]) == (1, False)
    assert mem.stats().facts == 1 and mem.get(kept.id) is not None and erased == [True]
    failed, data = call_in_process(mem, None, "memory_prune", dry_run="yes please")
    assert failed and data["error"]["code"] == "INVALID_INPUT"
