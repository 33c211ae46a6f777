"""Decay classes: how long a fact stays fresh, and which heuristics pick the class.

Ten classes with fixed TTLs, described in ``DECAY_RULES``: the decay table of docs/concepts.md
and the GraphQL, MCP and CLI descriptions of a decay class are built from it. A TTL counts from
when memory stored or last confirmed the fact, never from its ``valid_from``. Recall of a fact in
a refreshable class extends its expiry; ``prune`` hard-deletes expired facts and soft-decays
confidence once 75% of a fact's TTL has passed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
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
    "turn",
]
DECAY_CLASSES: Final[tuple[str, ...]] = get_args(DecayClass)

HOUR: Final = 3600.0
DAY: Final = 24 * HOUR

#: The class used when no heuristic matches.
DEFAULT_DECAY_CLASS: Final = "stable"

#: Soft decay: past this share of its TTL a fact's confidence is multiplied by SOFT_DECAY_FACTOR
#: on each prune; below PRUNE_CONFIDENCE it is deleted.
SOFT_DECAY_AFTER: Final = 0.75
SOFT_DECAY_FACTOR: Final = 0.5
PRUNE_CONFIDENCE: Final = 0.1

# The words of the heuristics, checked in this order: permanent, session, active, checkpoint.
# Location words are permanent too: where someone lives changes rarely and must not expire after
# 90 days unread. Key words match whole words of the key (``home_city`` is a city); text words
# and phrases match whole words of the text, ignoring case.
PERMANENT_KEYS: Final = (
    "name",
    "email",
    "api_key",
    "api_endpoint",
    "architecture",
    "decision",
    "birthday",
    "born",
    "phone",
    "language",
    "location",
    "city",
    "country",
    "address",
    "home",
    "hometown",
    "residence",
)
PERMANENT_TEXT: Final = ("decided", "architecture", "always use", "never use")
PERMANENT_ENTITIES: Final = ("decision", "convention")
SESSION_KEYS: Final = ("current_file", "temp", "debug", "working_on_right_now")
SESSION_TEXT: Final = ("currently debugging", "right now", "this session")
ACTIVE_KEYS: Final = ("task", "todo", "wip", "branch", "sprint", "blocker")
ACTIVE_TEXT: Final = ("working on", "need to", "todo", "blocker", "sprint")
#: Found anywhere in the key or the text, even inside a word.
CHECKPOINT_WORDS: Final = ("checkpoint", "preflight")


@dataclass(frozen=True, slots=True)
class DecayRule:
    """A decay class: its time to live in seconds (None: never expires), whether recall
    refreshes it, and when the heuristics choose it (Markdown)."""

    name: str
    ttl: float | None
    refreshed: bool
    chosen_when: str


def _listed(words: tuple[str, ...]) -> str:
    return ", ".join(f"`{w}`" for w in words)


#: Every decay class, in the order of ``DECAY_CLASSES``.
DECAY_RULES: Final = (
    DecayRule(
        "permanent",
        None,
        False,
        f"the key or entity names {_listed(PERMANENT_KEYS)}; the text says "
        f"{_listed(PERMANENT_TEXT)}; the entity is {_listed(PERMANENT_ENTITIES)}",
    ),
    DecayRule("durable", 90 * DAY, True, "only explicitly"),
    DecayRule("normal", 14 * DAY, True, "only explicitly"),
    DecayRule("short", 2 * DAY, False, "only explicitly"),
    DecayRule("ephemeral", 4 * HOUR, False, "only explicitly"),
    DecayRule("stable", 90 * DAY, True, "when no heuristic matches (the default)"),
    DecayRule(
        "active",
        14 * DAY,
        True,
        f"the key names {_listed(ACTIVE_KEYS)}; the text says {_listed(ACTIVE_TEXT)}",
    ),
    DecayRule(
        "session",
        24 * HOUR,
        False,
        f"the key names {_listed(SESSION_KEYS)}; the text says {_listed(SESSION_TEXT)}",
    ),
    DecayRule(
        "checkpoint",
        4 * HOUR,
        False,
        f"the key or the text contains {_listed(CHECKPOINT_WORDS)}",
    ),
    DecayRule(
        "turn",
        180 * DAY,
        True,
        "for the turns `capture` keeps of a conversation (the `turn_decay_class` setting's "
        "default); never by the heuristics",
    ),
)

#: Time to live per class, in seconds; None never expires.
TTL_SECONDS: Final[dict[str, float | None]] = {r.name: r.ttl for r in DECAY_RULES}

#: Classes whose expiry is pushed out again each time the fact is recalled.
REFRESH_ON_ACCESS: Final[frozenset[str]] = frozenset(r.name for r in DECAY_RULES if r.refreshed)


def _in_key(words: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile(r"(?:^|[^a-z])(" + "|".join(map(re.escape, words)) + r")(?:$|[^a-z])")


def _in_text(words: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile(r"\b(" + "|".join(map(re.escape, words)) + r")\b")


_PERMANENT_KEYS = _in_key(PERMANENT_KEYS)
# Text patterns are lower-case and searched ignoring case (tagging.search_words).
_PERMANENT_TEXT = _in_text(PERMANENT_TEXT)
_SESSION_KEYS = _in_key(SESSION_KEYS)
_SESSION_TEXT = _in_text(SESSION_TEXT)
_ACTIVE_KEYS = _in_key(ACTIVE_KEYS)
_ACTIVE_TEXT = _in_text(ACTIVE_TEXT)
_CHECKPOINT = re.compile("|".join(CHECKPOINT_WORDS))


def classify_decay(entity: str | None, key: str | None, value: str | None, text: str) -> str:
    """The decay class the heuristics give a fact (no LLM), checked in priority order."""
    key_l = (key or "").lower()
    entity_l = (entity or "").lower()
    if (
        _PERMANENT_KEYS.search(key_l)
        or _PERMANENT_KEYS.search(entity_l)
        or search_words(_PERMANENT_TEXT, text)
        or entity_l in PERMANENT_ENTITIES
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


def ttl_in_words(ttl: float | None) -> str:
    """A time to live in words: ``never expires``, ``90 days``, ``4 hours``."""
    if ttl is None:
        return "never expires"
    hours = round(ttl / HOUR)
    days = hours // 24
    return f"{days} day{'s' * (days != 1)}" if hours % 24 == 0 else f"{hours} hours"


def freshness(expires_at: float | None, confirmed_at: float | None, now: float) -> float:
    """1.0 for a fact that never expires or was just confirmed, falling to 0.0 at expiry."""
    if expires_at is None:
        return 1.0
    start = confirmed_at if confirmed_at is not None else now
    span = expires_at - start
    if span <= 0:
        return 0.0
    return max(0.0, min(1.0, (expires_at - now) / span))
