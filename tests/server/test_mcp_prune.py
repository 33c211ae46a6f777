"""The ``memory_prune`` tool: decay's prune from an agent, counted first with ``dry_run`` (which
a read-only key may do), then done."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from graphmem import ApiKey, Memory
from resolvers.mcp import call

from ..support.clock import Clock

READER = ApiKey("k1", ("default",), read_only=True, label=None, created_at=0, revoked_at=None)


def _prune(mem: Memory, key: ApiKey | None, **arguments: Any) -> tuple[bool, Any]:
    async def run() -> Any:
        return await call(lambda _: (mem, key), None, "memory_prune", arguments)  # type: ignore[arg-type]

    result = anyio.run(run)
    return bool(result.is_error), result.structured_content


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
    failed, data = _prune(mem, READER, dry_run=True)
    assert not failed and (data["expired"], data["dry_run"]) == (1, True)
    failed, data = _prune(mem, READER)
    assert failed and data["error"]["code"] == "FORBIDDEN"
    assert mem.stats().facts == 2 and erased == []  # counting and refusing touch nothing
    failed, data = _prune(mem, None)
    assert not failed and (data["expired"], data["dry_run"]) == (1, False)
    assert mem.stats().facts == 1 and mem.get(kept.id) is not None and erased == [True]
    failed, data = _prune(mem, None, dry_run="yes please")
    assert failed and data["error"]["code"] == "INVALID_INPUT"
