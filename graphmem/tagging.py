"""Tags and categories: normalisation and the offline heuristics that fill them in."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final, Literal, get_args

Category = Literal["preference", "fact", "decision", "entity", "other"]
CATEGORIES: Final[tuple[str, ...]] = get_args(Category)

#: Built-in auto-tag patterns (seed 000), applied when a write gives no tags.
TAG_PATTERNS: Final[dict[str, re.Pattern[str]]] = {
    "nibe": re.compile(r"\bnibe\b", re.I),
    "zigbee": re.compile(r"\bzigbee\b", re.I),
    "z-wave": re.compile(r"\bz-?wave\b", re.I),
    "auth": re.compile(r"\b(o?auth\w*|login|jwt|sso)\b", re.I),
    "homeassistant": re.compile(r"\bhome\s*assistant\b", re.I),
    "openclaw": re.compile(r"\bopenclaw\b", re.I),
    "postgres": re.compile(r"\bpostgres(ql)?\b", re.I),
    "sqlite": re.compile(r"\bsqlite3?\b", re.I),
    "lancedb": re.compile(r"\blancedb\b", re.I),
    "api": re.compile(r"\bapis?\b", re.I),
    "docker": re.compile(r"\bdocker\w*\b", re.I),
    "kubernetes": re.compile(r"\b(kubernetes|k8s|kubectl)\b", re.I),
    "ha": re.compile(r"\bHA\b"),  # Home Assistant's usual abbreviation; upper case only
}

# All patterns in one alternation: a single scan of the text instead of one per tag.
_GROUP_TAGS: Final = {f"t{n}": tag for n, tag in enumerate(TAG_PATTERNS)}
_ANY_TAG: Final = re.compile(
    "|".join(
        f"(?P<t{n}>{'(?i:' if p.flags & re.I else '(?:'}{p.pattern}))"
        for n, p in enumerate(TAG_PATTERNS.values())
    )
)
MAX_TAGS: Final = 32
MAX_TAG_LENGTH: Final = 64
_TAG_CHARS = re.compile(r"^[a-z0-9][a-z0-9_.:/+-]*$")

_CATEGORY_RULES: Final[tuple[tuple[str, re.Pattern[str]], ...]] = (
    ("decision", re.compile(r"\b(decided|decision|chose|chosen|will use|going with|agreed to)\b", re.I)),
    ("preference", re.compile(r"\b(prefers?|preferred|likes?|loves?|hates?|dislikes?|favou?rite|wants?)\b", re.I)),
    ("entity", re.compile(r"[\w.+-]+@[\w-]+\.[\w.]+|\+?\d[\d\s().-]{7,}\d|\b(is called|named|'s (email|phone|address))\b", re.I)),
    ("fact", re.compile(r"\b(is|are|was|were|has|have|had|lives?|lived|works?|worked|born|uses?|runs?)\b", re.I)),
)  # fmt: skip


def normalize_tags(tags: Iterable[str] | str | None) -> list[str]:
    """Lower-case, trimmed, de-duplicated tags in first-seen order.

    Raises ValueError for a tag that cannot be stored in the comma list.
    """
    if tags is None:
        return []
    items = tags.split(",") if isinstance(tags, str) else list(tags)
    out: list[str] = []
    for raw in items:
        if not isinstance(raw, str):
            raise ValueError(f"tags must be strings, got {type(raw).__name__}")
        tag = raw.strip().lower()
        if not tag:
            continue
        if len(tag) > MAX_TAG_LENGTH or not _TAG_CHARS.match(tag):
            raise ValueError(
                f"invalid tag {raw!r}: use letters, digits and _ . : / + - "
                f"(at most {MAX_TAG_LENGTH} characters)"
            )
        if tag not in out:
            out.append(tag)
    if len(out) > MAX_TAGS:
        raise ValueError(f"at most {MAX_TAGS} tags per fact, got {len(out)}")
    return out


def extract_tags(text: str, entity: str | None = None) -> list[str]:
    """Auto-tags for a fact: every built-in pattern found in the text or the entity."""
    found: set[str] = set()
    for haystack in (text, entity or ""):
        for match in _ANY_TAG.finditer(haystack):
            found.add(_GROUP_TAGS[str(match.lastgroup)])
    return [tag for tag in TAG_PATTERNS if tag in found]


def detect_category(text: str) -> str:
    """A category from fast regexes (no LLM): decision, preference, entity, fact, else other."""
    for category, pattern in _CATEGORY_RULES:
        if pattern.search(text):
            return category
    return "other"
