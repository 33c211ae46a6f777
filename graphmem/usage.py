"""Cost visibility: what each model provider was asked to do, counted as it happens.

Every embedder and the chat client own a ``Meter``. It counts calls (one per request that
succeeded, however many retries it took), retries, failed calls (given up after the retries),
the texts sent, and the tokens the endpoint reports in its ``usage`` block (local and hash
embedders report none). Counts live as long as the provider object: since the process started,
for every namespace sharing it. ``Memory.stats()`` (``embedding_usage``, ``llm_usage``) and
``/metrics`` show them.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Usage:
    """A meter's counts at one moment."""

    kind: str  # "embedding" or "llm"
    provider: str
    model: str
    calls: int = 0
    failed_calls: int = 0
    retries: int = 0
    inputs: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Meter:
    """Thread-safe counters of one provider (see the module docstring)."""

    def __init__(self, kind: str, provider: str, model: str) -> None:
        self._lock = threading.Lock()
        self._usage = Usage(kind, provider, model)

    def record(
        self,
        *,
        inputs: int = 0,
        retries: int = 0,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
        failed: bool = False,
    ) -> None:
        """Count one call: answered, or ``failed`` after its retries."""
        with self._lock:
            u = self._usage
            self._usage = Usage(
                u.kind,
                u.provider,
                u.model,
                calls=u.calls + (not failed),
                failed_calls=u.failed_calls + failed,
                retries=u.retries + retries,
                inputs=u.inputs + inputs,
                prompt_tokens=u.prompt_tokens + prompt_tokens,
                completion_tokens=u.completion_tokens + completion_tokens,
            )

    def snapshot(self) -> Usage:
        with self._lock:
            return self._usage


def reported_tokens(usage: Any, name: str) -> int:
    """A token count from an OpenAI-style ``usage`` block, 0 when absent or nonsensical."""
    value = usage.get(name) if isinstance(usage, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
