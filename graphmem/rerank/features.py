"""The ``features`` reranker: a linear model over what search already knows of each candidate.

Each candidate becomes a row of :data:`FEATURES` (its fused place and score, each leg's score
and rank, the loans it received, its entity and time matches, how much of the query's rarer
words its text holds, its date among the candidates', its importance and confidence), and its
score is the row's dot product with the coefficients shipped in ``features.json``, which also
records the command that fitted them (``python -m bench.rerank``, on LoCoMo's tuning half). It
reads no model and makes no request: a few hundred microseconds for 50 candidates.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from ..ranking import STOPWORDS
from ..usage import Meter
from .interface import Candidate

#: What each candidate is described by, in the order of the shipped coefficients.
FEATURES: Final = (
    "fused_position",  # log(1 + its place in the fused order)
    "score",  # its final score over the best candidate's
    "fused",  # the legs' fused relevance, before loans and boosts
    "loan",  # what the episode's and the windows' loans added, over the best relevance
    "keyword",  # its bm25 over the best candidate's (0: not found by the keyword leg)
    "keyword_position",  # log(1 + its keyword rank), log(1 + candidates) when not found
    "vector",  # its cosine (0: not found by the vector leg)
    "vector_position",  # log(1 + its vector rank), log(1 + candidates) when not found
    "entity_matched",  # the query names its entity
    "entity_other",  # the query names another candidate's entity, not this one's
    "time_matched",  # its date or stated time falls in the query's period
    "time_missed",  # the query has a period this candidate is not in
    "coverage",  # share of the query's words (weighted by idf among the candidates) it holds
    "rarest",  # whether it holds the query's rarest word among the candidates
    "recency",  # its date among the candidates' dates: 0 oldest, 1 newest
    "episode_share",  # share of the candidates from its episode
    "importance",
    "confidence",
)
#: Characters of a word compared (a crude stem: "painting" and "paintings" are one word).
STEM: Final = 6

_WORD: Final = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True, slots=True)
class LinearModel:
    """Coefficients over :data:`FEATURES` and an intercept; the score is their dot product."""

    weights: tuple[float, ...]
    intercept: float
    #: How the coefficients were made (the command, the data, the figures).
    made_by: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "features": list(FEATURES),
            "weights": list(self.weights),
            "intercept": self.intercept,
            "made_by": self.made_by,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LinearModel:
        if tuple(data["features"]) != FEATURES:
            raise ValueError("the coefficients describe other features than FEATURES")
        return cls(
            tuple(float(w) for w in data["weights"]), float(data["intercept"]), data["made_by"]
        )


class FeatureReranker:
    """Scores candidates by a :class:`LinearModel` of their features."""

    name = "features"

    def __init__(self, model: LinearModel) -> None:
        self.model = model
        self._weights = np.asarray(model.weights, dtype=np.float64)
        self.meter = Meter("rerank", "features", "linear")

    @classmethod
    def shipped(cls) -> FeatureReranker:
        """The reranker of the coefficients shipped in the package (``features.json``)."""
        text = resources.files(__package__).joinpath("features.json").read_text(encoding="utf-8")
        return cls(LinearModel.from_dict(json.loads(text)))

    def rerank(self, query: str, candidates: Sequence[Candidate]) -> list[tuple[int, float]]:
        scores = features(query, candidates) @ self._weights + self.model.intercept
        self.meter.record(inputs=len(candidates))
        return [(i, float(s)) for i, s in enumerate(scores)]


def features(query: str, candidates: Sequence[Candidate]) -> npt.NDArray[np.float64]:
    """The :data:`FEATURES` of each candidate, one row each, computed among ``candidates``."""
    n = len(candidates)
    rows = np.zeros((n, len(FEATURES)), dtype=np.float64)
    if n == 0:
        return rows
    missing = math.log1p(n)
    best_score = max(max(c.score for c in candidates), 1e-12)
    best_relevance = max(max(c.relevance for c in candidates), 1e-12)
    keyword = [c.fts_score for c in candidates if c.fts_score is not None]
    best_keyword = max(max(keyword), 1e-12) if keyword else 1.0
    named = any(c.entity_matched for c in candidates)
    dates = [c.effective for c in candidates]
    oldest, span = min(dates), max(max(dates) - min(dates), 1e-9)
    episodes: dict[str | None, int] = {}
    for c in candidates:
        episodes[c.episode_id] = episodes.get(c.episode_id, 0) + 1
    coverage, rarest = _coverage(query, [c.text for c in candidates])
    for i, c in enumerate(candidates):
        rows[i] = (
            math.log1p(c.fused_rank),
            c.score / best_score,
            c.fused,
            (c.relevance - c.fused) / best_relevance,
            0.0 if c.fts_score is None else max(c.fts_score, 0.0) / best_keyword,
            missing if c.fts_rank is None else math.log1p(c.fts_rank),
            0.0 if c.vector_score is None else c.vector_score,
            missing if c.vector_rank is None else math.log1p(c.vector_rank),
            float(c.entity_matched),
            float(named and not c.entity_matched),
            float(c.time_matched is not None),
            float(c.time_hint and c.time_matched is None),
            coverage[i],
            rarest[i],
            (c.effective - oldest) / span,
            0.0 if c.episode_id is None else episodes[c.episode_id] / n,
            c.importance,
            c.confidence,
        )
    return rows


def _coverage(query: str, texts: Sequence[str]) -> tuple[list[float], list[float]]:
    """For each text: the share of the query's words it holds, each word weighted by its idf
    among ``texts``; and whether it holds the rarest of them."""
    words = list(dict.fromkeys(_stems(query, stopwords=True)))
    held = [set(_stems(text, stopwords=False)) for text in texts]
    if not words:
        return [0.0] * len(texts), [0.0] * len(texts)
    n = len(texts)
    counts = {w: sum(1 for h in held if w in h) for w in words}
    idf = {w: math.log((n + 1) / (counts[w] + 0.5)) for w in words}
    total = sum(idf.values()) or 1.0
    found = [w for w in words if counts[w]]
    rare = max(found, key=lambda w: idf[w]) if found else None
    return (
        [sum(idf[w] for w in words if w in h) / total for h in held],
        [float(rare is not None and rare in h) for h in held],
    )


def _stems(text: str, *, stopwords: bool) -> list[str]:
    """The words of ``text`` lower-cased and cut to STEM characters (stopwords dropped from a
    query, unless nothing else is left)."""
    words = [w.lower() for w in _WORD.findall(text)]
    if stopwords:
        words = [w for w in words if w not in STOPWORDS] or words
    return [w[:STEM] for w in words]
