"""Ranking: the keyword query, score fusion and the adjustments applied after it.

Hybrid search fuses two candidate lists, FTS5 bm25 and cosine similarity, by a convex combination
of per-query min-max normalised scores (``Settings.fts_weight`` on the keyword side). bench/
holds the measurements behind the choice and the weight (docs/search.md explains them). The fused
relevance is then scaled by the fact's importance, confidence, freshness and decay class.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final, Literal

from .limits import MAX_QUERY_TERMS

Mode = Literal["hybrid", "fts", "vector"]
MODES: Final = ("hybrid", "fts", "vector")

#: bm25 weight per FTS column: text, category, entity, key, value, tags, context, date_terms.
FTS_COLUMN_WEIGHTS: Final = (1.0, 0.2, 0.6, 0.6, 0.6, 0.4, 0.3, 0.3)
#: Share of the final score that comes from importance, confidence and freshness.
QUALITY_WEIGHT: Final = 0.3
#: Multipliers favouring long-lived knowledge: permanent facts first, then durable and stable.
#: A turn is boosted as a stable fact is: a conversation stored whole (its turns in the default
#: class) and the same conversation captured rank its turns alike.
CLASS_BOOST: Final[Mapping[str, float]] = {
    "permanent": 1.1,
    "durable": 1.05,
    "stable": 1.05,
    "turn": 1.05,
}

STOPWORDS: Final = frozenset(
    [
        "a",
        "about",
        "above",
        "after",
        "again",
        "against",
        "all",
        "am",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "down",
        "during",
        "each",
        "few",
        "for",
        "from",
        "further",
        "had",
        "has",
        "have",
        "having",
        "he",
        "her",
        "here",
        "hers",
        "herself",
        "him",
        "himself",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "itself",
        "just",
        "me",
        "more",
        "most",
        "my",
        "myself",
        "no",
        "nor",
        "not",
        "now",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "our",
        "ours",
        "ourselves",
        "out",
        "over",
        "own",
        "same",
        "she",
        "should",
        "so",
        "some",
        "such",
        "than",
        "that",
        "the",
        "their",
        "theirs",
        "them",
        "themselves",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "very",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "yours",
        "yourself",
        "yourselves",
    ]
)

_WORD = re.compile(r"\w+", re.UNICODE)


def fts_terms(text: str) -> list[str]:
    """The query's words as quoted FTS5 phrases, stopwords dropped (unless nothing else is left).

    Quoting makes any user text safe: no FTS5 syntax survives. Empty when no word remains.
    """
    words = list(dict.fromkeys(w.lower() for w in _WORD.findall(text)))
    content = [w for w in words if w not in STOPWORDS] or words
    return ['"' + w.replace('"', '""') + '"' for w in content[:MAX_QUERY_TERMS]]


def min_max(scores: Mapping[str, float], *, equal: float = 1.0) -> dict[str, float]:
    """Scores rescaled to 0..1 within this candidate list (all ``equal`` when they are equal)."""
    if not scores:
        return {}
    low, high = min(scores.values()), max(scores.values())
    if high - low <= 1e-12:
        return dict.fromkeys(scores, equal)
    return {k: (v - low) / (high - low) for k, v in scores.items()}


def fuse(
    fts: Mapping[str, float], vector: Mapping[str, float], fts_weight: float
) -> dict[str, float]:
    """Convex combination of normalised leg scores; a fact missing from a leg scores 0 there."""
    a, b = min_max(fts), min_max(vector)
    return {
        k: fts_weight * a.get(k, 0.0) + (1.0 - fts_weight) * b.get(k, 0.0)
        for k in a.keys() | b.keys()
    }


def adjust(
    relevance: float, *, importance: float, confidence: float, freshness: float, decay_class: str
) -> float:
    """The final score: relevance scaled by how important, trusted, fresh and lasting a fact is."""
    quality = 0.4 * importance + 0.3 * confidence + 0.3 * freshness
    factor = (1.0 - QUALITY_WEIGHT) + QUALITY_WEIGHT * quality
    return relevance * factor * CLASS_BOOST.get(decay_class, 1.0)
