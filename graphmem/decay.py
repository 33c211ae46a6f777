"""Decay classes: how long a fact stays fresh, and which heuristics pick the class.

Nine classes with fixed TTLs (seed 001). A TTL counts from when memory stored or last
confirmed the fact, never from its ``valid_from``. Recall of a fact in a refreshable class
extends its expiry; ``prune`` hard-deletes expired facts and soft-decays confidence once 75% of
a fact's TTL has passed.
"""

from __future__ import annotations

import re
from typing import Final, Literal, get_args

from .tagging import search_words

DecayClass = Literal[
    "permanent",
    "durable",
    "normal",
    "short",
    "ephemeral",
    "stable",
    "active",
    "session",
    "checkpoint",
]
DECAY_CLASSES: Final[tuple[str, ...]] = get_args(DecayClass)

HOUR: Final = 3600.0
DAY: Final = 24 * HOUR

#: Time to live per class, in seconds; None never expires.
TTL_SECONDS: Final[dict[str, float | None]] = {
    "permanent": None,
    "durable": 90 * DAY,
    "normal": 14 * DAY,
    "short": 2 * DAY,
    "ephemeral": 4 * HOUR,
    "stable": 90 * DAY,
    "active": 14 * DAY,
    "session": 24 * HOUR,
    "checkpoint": 4 * HOUR,
}

#: Classes whose expiry is pushed out again each time the fact is recalled.
REFRESH_ON_ACCESS: Final[frozenset[str]] = frozenset({"stable", "active", "durable", "normal"})

#: The class used when no heuristic matches.
DEFAULT_DECAY_CLASS: Final = "stable"

#: Soft decay: past this share of its TTL a fact's confidence is multiplied by SOFT_DECAY_FACTOR
#: on each prune; below PRUNE_CONFIDENCE it is deleted.
SOFT_DECAY_AFTER: Final = 0.75
SOFT_DECAY_FACTOR: Final = 0.5
PRUNE_CONFIDENCE: Final = 0.1

# The seed's permanent keys, plus synonyms of "location" (where someone lives changes rarely
# and must not expire after 90 days unread).
_PERMANENT_KEYS = re.compile(
    r"(?:^|[^a-z])(name|email|api_key|api_endpoint|architecture|decision|birthday|born|phone"
    r"|language|location|city|country|address|home|hometown|residence)(?:$|[^a-z])"
)
# Text patterns are lower-case and searched ignoring case (tagging.search_words).
_PERMANENT_TEXT = re.compile(r"\b(decided|architecture|always use|never use)\b")
_PERMANENT_ENTITIES = frozenset({"decision", "convention"})
_SESSION_KEYS = re.compile(
    r"(?:^|[^a-z])(current_file|temp|debug|working_on_right_now)(?:$|[^a-z])"
)
_SESSION_TEXT = re.compile(r"\b(currently debugging|right now|this session)\b")
_ACTIVE_KEYS = re.compile(r"(?:^|[^a-z])(task|todo|wip|branch|sprint|blocker)(?:$|[^a-z])")
_ACTIVE_TEXT = re.compile(r"\b(working on|need to|todo|blocker|sprint)\b")
_CHECKPOINT = re.compile(r"checkpoint|preflight")


def classify_decay(entity: str | None, key: str | None, value: str | None, text: str) -> str:
    """The decay class the seed's heuristics give a fact (no LLM), checked in priority order."""
    key_l = (key or "").lower()
    entity_l = (entity or "").lower()
    if (
        _PERMANENT_KEYS.search(key_l)
        or _PERMANENT_KEYS.search(entity_l)
        or search_words(_PERMANENT_TEXT, text)
        or entity_l in _PERMANENT_ENTITIES
    ):
        return "permanent"
    if _SESSION_KEYS.search(key_l) or search_words(_SESSION_TEXT, text):
        return "session"
    if _ACTIVE_KEYS.search(key_l) or search_words(_ACTIVE_TEXT, text):
        return "active"
    if _CHECKPOINT.search(key_l) or search_words(_CHECKPOINT, text):
        return "checkpoint"
    return DEFAULT_DECAY_CLASS


def expiry(decay_class: str, confirmed_at: float) -> float | None:
    """When a fact of ``decay_class`` confirmed at ``confirmed_at`` expires (None: never)."""
    ttl = TTL_SECONDS[decay_class]
    return None if ttl is None else round(confirmed_at + ttl, 6)


def freshness(expires_at: float | None, confirmed_at: float | None, now: float) -> float:
    """1.0 for a fact that never expires or was just confirmed, falling to 0.0 at expiry."""
    if expires_at is None:
        return 1.0
    start = confirmed_at if confirmed_at is not None else now
    span = expires_at - start
    if span <= 0:
        return 0.0
    return max(0.0, min(1.0, (expires_at - now) / span))
