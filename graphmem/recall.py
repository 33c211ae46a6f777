"""Auto-recall: the ``<memory-context>`` block an agent puts before a turn.

``Memory.recall`` gathers the candidates: the prompt's hybrid search hits (optionally with linked
facts, ``graph_depth``), adjusted for importance, confidence, freshness and decay class; and the
facts of each entity the prompt names (:func:`entity_names`). This module makes the block:

With ``profile`` (the ``recall_profile`` setting), the block leads with the profile of each
entity the prompt names (:mod:`graphmem.profiles`): one line of its current values by key,
within PROFILE_SHARE of the budget (:func:`profile_lines`).

1. candidates best first, hits far below the best one dropped (:func:`ranked`);
2. a fact capture drew from a turn that is a candidate too is shown as that turn, once, at the
   better of their places (:func:`merged`): the turn says what the fact says, and more;
3. one line per fact in the chosen format, a long text shown as a summary, a turn with its
   speaker and date (:func:`format_line`);
4. lines added while the whole block, tags included, fits ``max_tokens`` (:func:`assemble`).

Fact texts cannot break out of the block: line breaks become spaces and the block's own tags
are removed from them. With nothing to show, the context is the empty string.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final, Literal, Protocol, get_args

from .errors import InvalidInput
from .jsonform import JSONForm, json_fields
from .limits import MAX_RECALL_TOKENS
from .models import TURN_SOURCE, Fact, FactKind, SearchHit
from .profiles import Attribute, Profile

Format = Literal["full", "short", "minimal"]
FORMATS: Final[tuple[str, ...]] = get_args(Format)
Source = Literal["pinned", "keyword", "vector", "graph"]
#: The sources' names up to 0.3.0: engines' names (``sqlite``, ``lance``), wrong on PostgreSQL
#: and on vectors in S3. A service of 0.3.0 still sends them; the client reads them as the names
#: they became (until the release after next).
FORMER_SOURCES: Final[Mapping[str, Source]] = {"sqlite": "keyword", "lance": "vector"}

#: The budget when none is given, in tokens.
DEFAULT_MAX_TOKENS: Final = 800
#: Characters per token when no tokenizer is configured (a common estimate for English).
CHARS_PER_TOKEN: Final = 4
#: Texts longer than this many characters are shown as a summary.
SUMMARY_CHARS: Final = 300
#: Search hits considered for the block.
CANDIDATES: Final = 30
#: Hits scoring below this share of the best hit are left out, so that a prompt about nothing
#: memory knows brings a short block, not one filled up with the least unrelated facts.
MIN_SHARE: Final = 0.2
#: Facts taken per entity the prompt names, most confident and newest first.
ENTITY_FACTS: Final = 10
#: The score of a fact found by entity lookup only, as a share of the best search hit's: after
#: the hits at least a quarter as good as the best (at 0.5 LoCoMo lost 0.03 of its blocks'
#: evidence, its speakers being entities; bench/REPORT.md, "Recall block").
ENTITY_SCORE: Final = 0.25
#: Pinned facts put at the head of a block, the earliest pinned first (the budget still bounds
#: how many fit).
PINNED: Final = 50
#: Longest run of words tried as an entity name.
ENTITY_WORDS: Final = 3
#: Entities the prompt names whose profiles lead the block, at most (the first named).
PROFILES: Final = 2
#: The share of the budget the profile lines may take together, at most.
PROFILE_SHARE: Final = 0.25
#: Characters of one value a profile line shows at most.
PROFILE_VALUE_CHARS: Final = 80

OPEN_TAG: Final = "<memory-context>"
CLOSE_TAG: Final = "</memory-context>"
_TAGS = re.compile(r"</?\s*memory-context\s*>", re.I)
_SPACE = re.compile(r"\s+")
_WORD = re.compile(r"[\w][\w.'@+-]*", re.UNICODE)
_SENTENCE_END = re.compile(r"[.!?](?=\s)")


class TokenCounter(Protocol):
    def __call__(self, text: str) -> int: ...


@dataclass(frozen=True, slots=True)
class Candidate:
    """A fact that may go in the block, its score and how it was found."""

    fact: Fact
    score: float
    source: Source


@dataclass(frozen=True, slots=True)
class RecallItem:
    """A fact in the block: its score, how it was found, its line, and whether the line shows a
    summary instead of the full text. ``kind`` says whether it is a ``turn`` of a conversation
    or a ``fact``."""

    fact: Fact
    score: float
    source: Source
    line: str
    summarized: bool

    @property
    def kind(self) -> FactKind:
        return self.fact.kind

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, **json_fields(self)}


@dataclass(frozen=True, slots=True)
class RecallResult(JSONForm):
    """What ``Memory.recall`` gives an agent: the block to inject (``context``, empty when there
    is nothing to say), the facts in it in order, its size in tokens, how many candidates
    were left out for lack of room, and the profiles its first lines show (each with the
    attributes its line holds)."""

    context: str
    items: list[RecallItem]
    tokens: int
    omitted: int
    profiles: tuple[Profile, ...] = ()

    @property
    def facts(self) -> list[Fact]:
        return [item.fact for item in self.items]


def check(prompt: Any, max_tokens: Any, format: Any) -> None:
    """InvalidInput for an empty prompt, a budget outside 1..MAX_RECALL_TOKENS or an unknown
    format."""
    if not isinstance(prompt, str) or not prompt.strip():
        raise InvalidInput("prompt must be a non-empty string", field="prompt")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
        raise InvalidInput("max_tokens must be an integer", field="max_tokens")
    if not 1 <= max_tokens <= MAX_RECALL_TOKENS:
        raise InvalidInput(f"max_tokens must be from 1 to {MAX_RECALL_TOKENS}", field="max_tokens")
    if format not in FORMATS:
        raise InvalidInput(f"unknown format {format!r}; use full, short or minimal", field="format")


def entity_names(prompt: str) -> list[str]:
    """Lower-case words and runs of up to ENTITY_WORDS words of the prompt: the names it may
    mention (compared with fact entities case-insensitively)."""
    words = [w.strip(".'-").lower() for w in _WORD.findall(prompt)]
    words = [w for w in words if w]
    names: dict[str, None] = {}
    for size in range(1, ENTITY_WORDS + 1):
        for start in range(len(words) - size + 1):
            names[" ".join(words[start : start + size])] = None
    return list(names)


def is_cold(fact: Fact, stale_before: float | None) -> bool:
    """Whether recall leaves ``fact`` out: made cold, or (``stale_before`` given) neither read
    nor confirmed since that moment. A pinned fact never is."""
    if fact.pinned_at is not None:
        return False
    if fact.cold_at is not None:
        return True
    if stale_before is None:
        return False
    touched = [t for t in (fact.last_accessed_at, fact.last_confirmed_at, fact.recorded_at) if t]
    return max(t.timestamp() for t in touched) < stale_before


def candidates(hits: Sequence[SearchHit]) -> list[Candidate]:
    """Search hits as candidates for the block, each marked with how it was found."""
    return [
        Candidate(
            h.fact,
            h.score,
            "graph" if h.depth else "keyword" if h.fts_score is not None else "vector",
        )
        for h in hits
    ]


def ranked(
    hits: Sequence[Candidate], entity_facts: Sequence[Fact], pinned: Sequence[Fact] = ()
) -> list[Candidate]:
    """Pinned facts first, in their order, then search hits (those at least MIN_SHARE of the
    best) and entity facts merged, best first; a fact found by entity lookup only ranks at
    ENTITY_SCORE of the best hit's score, and a fact found both ways keeps its hit."""
    leading = [Candidate(f, 1.0, "pinned") for f in pinned]
    if leading:
        first = {c.fact.id for c in leading}
        rest = ranked([c for c in hits if c.fact.id not in first], entity_facts)
        return [*leading, *(c for c in rest if c.fact.id not in first)]
    top = max((c.score for c in hits), default=1.0)
    hits = [c for c in hits if c.score > 0 and c.score >= top * MIN_SHARE]
    seen = {c.fact.id for c in hits}
    extra = [Candidate(f, top * ENTITY_SCORE, "keyword") for f in entity_facts if f.id not in seen]
    # Stable: among equal scores, hits keep their order and entity facts their lookup order.
    return sorted([*hits, *{c.fact.id: c for c in extra}.values()], key=lambda c: -c.score)


def merged(candidates: Sequence[Candidate], drawn: Mapping[str, Sequence[str]]) -> list[Candidate]:
    """``candidates`` with each fact drawn from a turn that is a candidate too (``drawn``: fact
    id to the ids of the turns that say it) replaced by that turn (the best, if several), at
    the better of their two places and with the better score, so that the budget is never
    spent twice on one message."""
    at = {c.fact.id: c for c in candidates}
    out: list[Candidate] = []
    placed: set[str] = set()
    for c in candidates:
        turns = [at[t] for t in drawn.get(c.fact.id, ()) if t in at]
        turn = max(turns, key=lambda t: t.score, default=None)
        shown = c if turn is None else Candidate(turn.fact, max(c.score, turn.score), turn.source)
        if shown.fact.id not in placed:
            placed.add(shown.fact.id)
            out.append(shown)
    return out


def assemble(
    candidates: Sequence[Candidate],
    max_tokens: int,
    format: Format,
    count: TokenCounter,
    profiles: Sequence[Profile] = (),
) -> RecallResult:
    """The block of as many candidates as fit ``max_tokens``, in order, after the lines of
    ``profiles`` (:func:`profile_lines`): a line is added while the whole block, tags
    included, fits; a line that does not fit is left out, and shorter ones after it may still
    go in. ``count`` counts tokens: one per CHARS_PER_TOKEN characters (rounded up,
    :func:`chars_counter`) unless ``recall_tokenizer`` names a tokenizer file."""
    items: list[RecallItem] = []
    lines, shown = profile_lines(profiles, max_tokens, format, count)
    omitted = 0
    tokens = count(_block(lines)) if lines else 0
    for c in candidates:
        line, summarized = format_line(c.fact, c.source, format)
        size = count(_block([*lines, line]))
        if size > max_tokens:
            omitted += 1
            continue
        lines.append(line)
        items.append(RecallItem(c.fact, c.score, c.source, line, summarized))
        tokens = size
    return RecallResult(_block(lines) if lines else "", items, tokens, omitted, tuple(shown))


def profile_lines(
    profiles: Sequence[Profile], max_tokens: int, format: Format, count: TokenCounter
) -> tuple[list[str], list[Profile]]:
    """A line per profile with as many of its attributes as fit, all the lines together in
    PROFILE_SHARE of ``max_tokens``, and each profile cut to the attributes its line shows (a
    profile none of whose attributes fits has no line)::

        full     [profile/Ana] city: Paris; pets: dog, cat
        short    profile Ana — city: Paris; pets: dog, cat
        minimal  Ana — city: Paris; pets: dog, cat
    """
    budget = int(max_tokens * PROFILE_SHARE)
    lines: list[str] = []
    shown: list[Profile] = []
    for profile in profiles:
        parts: list[str] = []
        kept: list[Attribute] = []
        for attribute in profile.attributes:
            values = ", ".join(
                shorten(_clean(v.value or v.fact.text), PROFILE_VALUE_CHARS)
                for v in attribute.values
            )
            part = f"{_clean(attribute.key)}: {values}"
            if count("\n".join([*lines, _profile_line(profile, [*parts, part], format)])) > budget:
                break
            parts.append(part)
            kept.append(attribute)
        if kept:
            lines.append(_profile_line(profile, parts, format))
            shown.append(replace(profile, attributes=tuple(kept), facts=(), linked=()))
    return lines, shown


def _profile_line(profile: Profile, parts: Sequence[str], format: Format) -> str:
    name, said = _clean(profile.entity.name), "; ".join(parts)
    if format == "full":
        return f"[profile/{name}] {said}"
    return f"profile {name} — {said}" if format == "short" else f"{name} — {said}"


def format_line(fact: Fact, source: Source, format: Format) -> tuple[str, bool]:
    """The fact's line in ``format``, and whether it shows a summary::

        full     [keyword/preference] User prefers dark mode
        short    preference: User prefers dark mode
        minimal  User prefers dark mode

    where the source says how the fact was found: ``sqlite`` by keywords or by entity lookup,
    ``lance`` by meaning alone, ``graph`` through a link; a pinned fact reads ``[pinned/…]``,
    ``pinned …:`` and ``pinned:`` in the three formats. A text longer than SUMMARY_CHARS is
    replaced by the fact's stored summary, or else by its opening (:func:`shorten`); a summary
    that long is cut too."""
    text = _clean(fact.text)
    summarized = len(text) > SUMMARY_CHARS
    if summarized:
        text = shorten(_clean(fact.summary or "") or text, SUMMARY_CHARS)
    if fact.kind == "turn":
        return _turn_line(fact, source, format, text), summarized
    if format == "full":
        return f"[{source}/{fact.category}] {text}", summarized
    pinned = "pinned " if source == "pinned" else ""
    if format == "short":
        return f"{pinned}{fact.category}: {text}", summarized
    return (f"pinned: {text}" if pinned else text), summarized


def _turn_line(fact: Fact, source: Source, format: Format, text: str) -> str:
    """A turn's line: its date and speaker before what was said::

    full     [sqlite/turn] 2023-05-08 user: I moved to Lisbon last week
    short    turn 2023-05-08 user: I moved to Lisbon last week
    minimal  2023-05-08 user: I moved to Lisbon last week
    """
    when = (fact.source_date or fact.valid_from).strftime("%Y-%m-%d")
    said = f"{when} {_clean((fact.source or '').removeprefix(TURN_SOURCE))}: {text}"
    pinned = "pinned " if source == "pinned" else ""
    if format == "full":
        return f"[{source}/turn] {said}"
    if format == "short":
        return f"{pinned}turn {said}"
    return f"pinned: {said}" if pinned else said


def shorten(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters: at its last sentence end that keeps at
    least half, else at a word boundary, marked with "…"."""
    if len(text) <= limit:
        return text
    head = text[: limit - 2]
    ends = [m.end() for m in _SENTENCE_END.finditer(head + " ")]
    if ends and ends[-1] >= limit // 2:
        return head[: ends[-1]] + " …"
    space = head.rfind(" ", limit // 2)
    return (head[:space] if space > 0 else head).rstrip(" ,;:") + "…"


def chars_counter(text: str) -> int:
    """Tokens estimated from length: one per CHARS_PER_TOKEN characters, rounded up."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def tokenizer_counter(path: Path) -> TokenCounter:
    """A counter with the tokenizer in ``path`` (a tokenizers JSON file); InvalidInput if it
    cannot be loaded."""
    from tokenizers import Tokenizer

    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises a bare Exception for missing or bad files
        raise InvalidInput(
            f"cannot load the tokenizer {path}: {exc}", field="recall_tokenizer"
        ) from None
    tokenizer.no_truncation()
    tokenizer.no_padding()

    def count(text: str) -> int:
        return len(tokenizer.encode(text, add_special_tokens=False).ids)

    return count


def _block(lines: Sequence[str]) -> str:
    return "\n".join([OPEN_TAG, *lines, CLOSE_TAG])


def _clean(text: str) -> str:
    return _SPACE.sub(" ", _TAGS.sub(" ", text)).strip()
