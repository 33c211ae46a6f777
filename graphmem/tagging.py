"""Tags and categories: normalisation and the offline heuristics that fill them in."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final, Literal, get_args

from .limits import MAX_TAG_LENGTH, MAX_TAGS

Category = Literal["preference", "fact", "decision", "entity", "other", "pattern", "rule"]
#: The built-in categories; a namespace may also have categories discovered in its facts
#: (graphmem.categorize).
CATEGORIES: Final[tuple[str, ...]] = get_args(Category)
#: What each built-in category holds (the auto-classify prompt and the docs read this).
CATEGORY_MEANINGS: Final[dict[str, str]] = {
    "preference": "what someone likes, wants, prefers or avoids",
    "fact": "a statement about the world or the work that holds true",
    "decision": "something decided or chosen, and why",
    "entity": "a person, place, organisation or thing and its details",
    "other": "none of the others",
    "pattern": "a pattern drawn from several facts (reflection only)",
    "rule": "a rule to follow, drawn from patterns (reflection only)",
}
#: The categories as a sentence names them, with "or a discovered one".
CATEGORY_LIST: Final = f"{', '.join(CATEGORIES)} or one discovered in the namespace"
#: The longest name a category may have.
MAX_CATEGORY_LENGTH: Final = 32
#: What a discovered category's name looks like: a lower-case word, hyphens and underscores
#: allowed.
CATEGORY_NAME: Final = re.compile(rf"[a-z][a-z0-9_-]{{1,{MAX_CATEGORY_LENGTH - 1}}}")


def check_category(value: str) -> str:
    """``value`` lower-cased if it can name a category (built-in, or shaped like a discovered
    one: whether the namespace has it is checked by the writer); ValueError if not."""
    v = value.strip().lower()
    if v not in CATEGORIES and not CATEGORY_NAME.fullmatch(v):
        raise ValueError(f"unknown category {value!r}; use one of {CATEGORY_LIST}")
    return v


#: Built-in auto-tags, applied when a write gives no tags: each tag and the lower-case
#: words (or word prefixes, ending in "*") that bring it. "homeassistant" also matches the two
#: words "home assistant"; "ha" only the upper-case abbreviation "HA".
TAG_WORDS: Final[dict[str, tuple[str, ...]]] = {
    "nibe": ("nibe",),
    "zigbee": ("zigbee",),
    "z-wave": ("z-wave", "zwave"),
    "auth": ("auth*", "oauth*", "login", "jwt", "sso"),
    "homeassistant": ("homeassistant",),
    "openclaw": ("openclaw",),
    "postgres": ("postgres", "postgresql"),
    "sqlite": ("sqlite", "sqlite3"),
    "lancedb": ("lancedb",),
    "api": ("api", "apis"),
    "docker": ("docker*",),
    "kubernetes": ("kubernetes", "k8s", "kubectl"),
    "ha": (),
}
_WORDS = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_EXACT: Final = {w: tag for tag, ws in TAG_WORDS.items() for w in ws if not w.endswith("*")}
_PREFIX_TAGS: Final = tuple(
    (w[:-1], tag) for tag, ws in TAG_WORDS.items() for w in ws if w.endswith("*")
)
_PREFIXES: Final = tuple(p for p, _ in _PREFIX_TAGS)
#: Any tag word or prefix anywhere: text without one (most) needs no word-by-word look.
_ANY_TAG_WORD: Final = re.compile(
    "|".join(re.escape(w.rstrip("*")) for ws in TAG_WORDS.values() for w in ws)
)
_HOME_ASSISTANT = re.compile(r"\bhome\s+assistant\b")
_HA = re.compile(r"\bHA\b")

_TAG_CHARS = re.compile(r"^[a-z0-9][a-z0-9_.:/+-]*$")

#: Words that give a category, in priority order, matched case-insensitively (see
#: :func:`search_words`). An email address or a phone number also makes an entity.
_CATEGORY_RULES: Final[tuple[tuple[str, re.Pattern[str]], ...]] = (
    ("decision", re.compile(r"\b(decided|decision|chose|chosen|will use|going with|agreed to)\b")),
    (
        "preference",
        re.compile(r"\b(prefers?|preferred|likes?|loves?|hates?|dislikes?|favou?rite|wants?)\b"),
    ),
    ("entity", re.compile(r"\b(is called|named|'s (email|phone|address))\b")),
    (
        "fact",
        re.compile(
            r"\b(is|are|was|were|has|have|had|lives?|lived|works?|worked|born|uses?|runs?)\b"
        ),
    ),
)
#: Anchored after a character an address cannot hold, and bounded as addresses are (64 for the
#: local part): unanchored, a long run of word characters costs its length squared.
_EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]{1,64}@[\w-]{1,63}\.[\w.]{1,253}")
_PHONE = re.compile(r"\+?\d[\d\s().-]{7,}\d")


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
    """Auto-tags for a fact: every built-in tag whose words occur in the text or the entity."""
    found: set[str] = set()
    for haystack in (text, entity or ""):
        lower = haystack.lower()
        for word in set(_WORDS.findall(lower)) if _ANY_TAG_WORD.search(lower) else ():
            tag = _EXACT.get(word)
            if tag is None and word.startswith(_PREFIXES):
                tag = next(t for p, t in _PREFIX_TAGS if word.startswith(p))
            if tag is not None:
                found.add(tag)
        if "home" in lower and _HOME_ASSISTANT.search(lower):
            found.add("homeassistant")
        if "HA" in haystack and _HA.search(haystack):
            found.add("ha")
    return [tag for tag in TAG_WORDS if tag in found]


def detect_category(text: str) -> str:
    """A category from fast regexes (no LLM): decision, preference, entity, fact, else other."""
    for category, pattern in _CATEGORY_RULES:
        if search_words(pattern, text):
            return category
        if category == "entity" and (("@" in text and _EMAIL.search(text)) or _PHONE.search(text)):
            return category
    return "other"


def search_words(pattern: re.Pattern[str], text: str) -> bool:
    """Whether the lower-case ``pattern`` occurs in ``text``, ignoring case.

    ASCII text (nearly all) is lower-cased and searched plainly, which gives the same answer as
    ``re.IGNORECASE`` in half the time; other text is searched with the flag, since
    lower-casing differs from its case folding there (the long s, the dotted capital I).
    """
    if text.isascii():
        return pattern.search(text.lower()) is not None
    return re.search(pattern.pattern, text, re.IGNORECASE) is not None
