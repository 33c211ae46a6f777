"""What a reranker is: the candidates it is handed, what it answers, how it fails (see
:mod:`graphmem.rerank`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol, runtime_checkable

from ..errors import InvalidInput
from ..models import TimeKind
from ..usage import Meter

#: The rerankers a setting or a call may name.
RERANKERS: Final = ("none", "features", "http", "llm")


class RerankFailed(Exception):
    """A reranker could not answer (timeout, HTTP error, an answer it cannot read): the search
    keeps its fused order. Its message completes "the reranker failed: …"."""


@dataclass(frozen=True, slots=True)
class Candidate:
    """One candidate of the fused order, as search knows it when the rerank stage runs."""

    id: str
    text: str
    entity: str | None
    #: Its place in the fused order, from 0, and its final score there.
    fused_rank: int
    score: float
    #: The fused relevance of the two legs, before any loan or boost, and after them (the
    #: episode's and the windows' loans, the entity boost).
    fused: float
    relevance: float
    #: Each leg's raw score (negated bm25, cosine) and rank from 0; None: not found by that leg.
    fts_score: float | None
    fts_rank: int | None
    vector_score: float | None
    vector_rank: int | None
    entity_matched: bool
    #: Which of its times fell in the period of the query's time words (None: neither, or the
    #: query has none); ``time_hint`` says whether the query has one.
    time_matched: TimeKind | None
    time_hint: bool
    importance: float
    confidence: float
    #: Its source date, else its valid_from (epoch seconds), and its episode.
    effective: float
    episode_id: str | None


@runtime_checkable
class Reranker(Protocol):
    """Scores candidates against a query. ``rerank`` returns (index into ``candidates``, score)
    for the candidates it scored, in any order; higher is better. It raises RerankFailed when it
    cannot answer. ``name`` is what ``SearchHit.reranked.by`` says; ``meter`` counts its calls."""

    name: str
    meter: Meter

    def rerank(self, query: str, candidates: Sequence[Candidate]) -> list[tuple[int, float]]: ...


def check_choice(rerank: object) -> None:
    """InvalidInput unless ``rerank`` names a reranker, is one, or is None (the setting)."""
    if rerank is None or isinstance(rerank, Reranker):
        return
    if not isinstance(rerank, str) or rerank not in RERANKERS:
        raise InvalidInput(
            f"unknown reranker {rerank!r}; use {', '.join(RERANKERS)}", field="rerank"
        )


def checked(scored: list[tuple[Any, Any]], n: int) -> list[tuple[int, float]]:
    """``scored`` as (index, score) pairs of ``n`` candidates; RerankFailed if a pair names no
    candidate, one twice, or has a score that is not a number."""
    seen: set[int] = set()
    for index, score in scored:
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < n:
            raise RerankFailed(f"a score names candidate {index!r} of {n}")
        if index in seen:
            raise RerankFailed(f"candidate {index} is scored twice")
        if isinstance(score, bool) or not isinstance(score, int | float) or score != score:
            raise RerankFailed(f"candidate {index} has the score {score!r}")
        seen.add(index)
    return [(index, float(score)) for index, score in scored]
