"""The rerank stage of a search: the reranker chosen, run, and the fused order kept when it
fails (see :mod:`graphmem.rerank`)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Final

from ..models import Reranked
from ..settings import Settings
from ..usage import Usage
from .features import FeatureReranker
from .http import HttpReranker
from .interface import Candidate, Reranker, RerankFailed, check_choice, checked
from .llm import LLMReranker

logger = logging.getLogger("graphmem")


#: The settings each reranker is built from: another value of one builds another reranker.
_REACHED_BY: Final = {
    "features": (),
    "http": (
        "rerank_url",
        "rerank_api",
        "rerank_model",
        "rerank_api_key",
        "rerank_timeout",
        "rerank_max_retries",
    ),
    "llm": ("llm_base_url", "llm_api_key", "llm_model", "rerank_timeout", "rerank_max_retries"),
}


class Reranking:
    """The rerankers of one search, each built on first use from the settings that say how to
    reach it (built again when one of those changes). Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._built: dict[tuple[object, ...], Reranker] = {}
        self._logged: set[str] = set()

    def chosen(self, rerank: str | Reranker | None, settings: Settings) -> Reranker | None:
        """The reranker a call names (None: the ``reranker`` setting), or None for ``none``.
        InvalidInput when it names none, or one its settings do not say how to reach."""
        check_choice(rerank)
        if isinstance(rerank, Reranker):
            return rerank
        name = settings.reranker if rerank is None else rerank
        if name == "none":
            return None
        key = (name, *(getattr(settings, field) for field in _REACHED_BY[name]))
        with self._lock:
            found = self._built.get(key)
            if found is None:
                found = self._built[key] = _build(name, settings)
            return found

    def close(self) -> None:
        """Close the connections of the rerankers built (a search closing)."""
        with self._lock:
            built, self._built = list(self._built.values()), {}
        for reranker in built:
            close = getattr(reranker, "close", None)
            if close is not None:
                close()

    def usage(self) -> list[Usage]:
        """The meters of the rerankers built so far: ``calls`` reranked searches,
        ``failed_calls`` searches left in the fused order, ``inputs`` candidates read."""
        with self._lock:
            return [r.meter.snapshot() for r in self._built.values()]

    def apply(
        self, reranker: Reranker, query: str, candidates: Sequence[Candidate]
    ) -> tuple[list[int], list[Reranked]]:
        """The new order of ``candidates`` (indexes) and how each was placed, in that order: the
        fused order, each with the reason, when the reranker fails."""
        try:
            scored = reranker.rerank(query, candidates)
            order = _ordered(scored, len(candidates))
        except RerankFailed as exc:
            reranker.meter.record(inputs=len(candidates), failed=True)
            self._log_once(reranker.name, str(exc))
            return list(range(len(candidates))), [
                Reranked(reranker.name, i + 1, None, str(exc)) for i in range(len(candidates))
            ]
        scores = dict(scored)
        return order, [Reranked(reranker.name, i + 1, scores.get(i)) for i in order]

    def _log_once(self, name: str, reason: str) -> None:
        with self._lock:
            if name in self._logged:
                return
            self._logged.add(name)
        logger.warning(
            "the %s reranker failed (%s); searches keep the fused order when it fails "
            "(counted in its failed_calls, logged only this once)",
            name,
            reason,
        )


def _ordered(scored: list[tuple[int, float]], n: int) -> list[int]:
    """Indexes 0..n-1, the scored ones first (best first, ties in fused order), the others after
    in fused order; RerankFailed if the scores are not ``checked``."""
    first = sorted(checked(scored, n), key=lambda pair: (-pair[1], pair[0]))
    seen = {i for i, _ in first}
    return [i for i, _ in first] + [i for i in range(n) if i not in seen]


def _build(name: str, settings: Settings) -> Reranker:
    if name == "features":
        return FeatureReranker.shipped()
    if name == "http":
        return HttpReranker.from_settings(settings)
    return LLMReranker.from_settings(settings)
