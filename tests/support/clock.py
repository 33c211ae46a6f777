"""A settable clock for ``Memory`` and the service: the tests decide what time it is."""

from __future__ import annotations

from datetime import UTC, datetime


class Clock:
    """A settable clock: ``clock()`` returns epoch seconds; ``advance`` moves it forward."""

    def __init__(self, start: str = "2026-01-01T00:00:00+00:00") -> None:
        self.now = datetime.fromisoformat(start).astimezone(UTC).timestamp()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        self.now += seconds
        return self.now

    def set(self, iso: str) -> float:
        self.now = datetime.fromisoformat(iso).astimezone(UTC).timestamp()
        return self.now
