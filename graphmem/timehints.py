"""Time words in questions: "what did Caroline do last week?", "in May 2023", "two years ago".

1. :func:`understand` finds the first time expression of a query with the time grammar
   (:mod:`graphmem.timewords`, the one a fact's stated time is read with) and turns it into a
   period of valid time, relative to the search's ``as_of``.
2. Failing that, :func:`event` finds a period placed before or after an event ("before she
   moved"): search dates the event by its best keyword matches, and :func:`anchored` makes the
   period.
3. Search ranks by the period, never drops by it: facts dated in it are also looked for among
   its keyword matches, and their relevance is raised (:data:`TIME_HINT_BOOST`). Each hit says
   what was understood (``SearchHit.time_hint``).

The query is searched as written: its time words also match the facts' date words and texts
that say them, and leaving them out measured worse (bench/REPORT.md, "Time words").
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from . import timewords
from .jsonform import json_fields
from .temporal import to_iso

#: How much an in-period fact's relevance is raised (multiplied by 1 + this), chosen on LoCoMo
#: conversations 0-4 and checked on 5-9 (bench/REPORT.md, "Time words"). A fact's time is its
#: source date, else its ``valid_from``; a fact outside the period or undated keeps its score.
TIME_HINT_BOOST: Final = 1.0
#: An event is dated by the earliest of its best keyword matches among the facts in scope (a
#: fact's source date, else its ``valid_from``): a conversation mentions an event again after
#: it happened ("since the tour..."), rarely before.
EVENT_MATCHES: Final = 3

_MONTH_WORDS: Final = frozenset(timewords.MONTH_NUMBERS)
_AMBIGUOUS_MONTHS: Final = frozenset({"may", "march"})
_YEAR: Final = re.compile(r"(?<!\d)(1[5-9]\d\d|2[01]\d\d)(?!\d)")
_WORD: Final = re.compile(r"[a-z]+")
#: The last word of a text, if the text does not end in whitespace: the word a cut went
#: through (tried at word starts only, so in time linear in the text).
_PARTIAL_WORD: Final = re.compile(r"(?<!\S)\S*\Z")
#: Leads that open a period: everything before it, everything after it (from its end, or for
#: "since" from its start).
_BEFORE: Final = frozenset({"before", "until", "till", "prior", "prior to"})
_AFTER: Final = frozenset({"after", "since"})
#: Leads kept in the words a hint shows ("in May 2023", "on May 3, 2023").
_SHOWN_LEADS: Final = frozenset({"in", "on"})
#: Words that make the words after "before"/"after" a time or a span, not an event.
_NOT_EVENTS: Final = (
    (timewords.RELATIVE_WORDS - {"night"})
    | timewords.SHIFTS
    | _MONTH_WORDS
    | frozenset({"date", "time", "now"})
)
#: "before"/"after" and the like, then the event: the words up to the end of the clause.
_EVENT: Final = re.compile(
    r"\b(before|prior to|until|till|after|since)\s+([^?.!,;:]+)", re.IGNORECASE
)


@dataclass(frozen=True, slots=True)
class TimeHint:
    """A time expression found in a query and the period it was understood as: ``start`` to
    ``end`` (epoch seconds, end excluded; None: open), or, with ``month`` (1-12) set, that
    month of any year (``start`` and ``end`` None)."""

    text: str
    start: float | None
    end: float | None
    month: int | None
    #: For a period before or after an event: the id of the fact that dated the event.
    event: str | None = None

    def covers(self, moment: float | None) -> bool:
        """Whether a fact dated ``moment`` falls in the period (never for an undated fact)."""
        if moment is None:
            return False
        if self.month is not None:
            return datetime.fromtimestamp(moment, tz=UTC).month == self.month
        return (self.start is None or moment >= self.start) and (
            self.end is None or moment < self.end
        )

    def overlaps(self, start: float | None, end: float | None) -> bool:
        """Whether the period ``start``-``end`` (a fact's stated time) overlaps this one; never
        for a month of any year, nor without a period."""
        if start is None or end is None or self.month is not None:
            return False
        return (self.start is None or end > self.start) and (self.end is None or start < self.end)

    def describe(self) -> str:
        """What was understood, for people: "'last week': 2023-07-03 to 2023-07-10"."""
        if self.month is not None:
            return f"{self.text!r}: {timewords.MONTHS[self.month - 1]} of any year"
        start = "the beginning" if self.start is None else to_iso(self.start)
        end = "now" if self.end is None else to_iso(self.end)
        dated = "" if self.event is None else f" (the event dated by fact {self.event})"
        return f"{self.text!r}: {start} to {end}{dated}"

    def to_dict(self) -> dict[str, Any]:
        out = json_fields(self, start=to_iso(self.start), end=to_iso(self.end))
        out["described"] = self.describe()
        return out


#: The characters of a query read for time words (:func:`understand`).
TIME_WORDS_CHARS: Final = 300


def understand(query: str, base: float) -> TimeHint | None:
    """The first time expression of ``query``, understood relative to ``base`` (epoch
    seconds), or None when the query names no time.

    The period is the one the grammar reads (:mod:`graphmem.timewords`: the day, the week
    (Monday to Monday), the month, the year or the span the expression names); after
    "before"/"until" everything earlier, after "after" everything later, after "since"
    everything from its start. A month named without a year ("in June") is that month of any
    year; after "since", "before" or "after", and a day without a year ("on Aug 15th"), the
    latest one not after ``base``. What the grammar leaves alone is no time here either: a bare
    number or ordinal ("18th"), a weekday alone ("deploy friday"), a year naming an edition
    ("wimbledon 2017"), "may" the verb and "march madness". Only the first ``TIME_WORDS_CHARS``
    characters are read (up to the last whole word): a question says its time early, and a
    search's cost stays bounded.
    """
    if len(query) > TIME_WORDS_CHARS:  # up to the last whole word: the word cut, if any, left out
        query = _PARTIAL_WORD.sub("", query[: TIME_WORDS_CHARS + 1])
    moment = datetime.fromtimestamp(base, tz=UTC)
    found = [m for m in timewords.find(query, moment) if not _names_no_period(query, m)]
    for mention in _anchored(query, found) or found:
        hint = _hint(query, mention, moment)
        if hint is not None:
            return hint
    return None


def _names_no_period(query: str, mention: timewords.Mention) -> bool:
    """Whether a mention a fact would state is, in a question, no period to rank by: a year
    after "of" ("the election of 1892", "knocked out of 2014 world cup", "as of 2016": an
    edition, as "wimbledon 2017" is, or the time the question stands at), or a relative year
    that names an edition ("this year's superbowl")."""
    if mention.kind == "year" and mention.lead == "of":
        return True
    end = mention.at + len(mention.words)
    return mention.kind in timewords.RELATIVE_KINDS and query[end : end + 2] in ("'s", "\u2019s")


def _anchored(query: str, found: list[timewords.Mention]) -> list[timewords.Mention]:
    """A relative mention read from the date the query names beside it ("last Friday on 23
    January 2022", "last week, as mentioned on November 6, 2023": a question that dates itself
    counts its relative words from that date, not from ``as_of``), or nothing."""
    relative = next((m for m in found if m.kind in timewords.RELATIVE_KINDS), None)
    dated = next(
        (m for m in found if m.kind not in timewords.RELATIVE_KINDS and m.year_named), None
    )
    if relative is None or dated is None:
        return []
    again = timewords.find(relative.words, dated.start)
    if not again:
        return []
    first, last = sorted((relative, dated), key=lambda m: m.at)
    words = query[first.at : last.at + len(last.words)].strip()
    return [replace(relative, words=words, core=words, start=again[0].start, end=again[0].end)]


def event(query: str) -> tuple[str, str, str] | None:
    """(the words as they stand, "before" or "after", the event's words) when ``query`` places
    itself before or after an event rather than a date ("before she moved" → "she moved"), or
    None. Call it when ``understand`` found no time: "before 2020" is a date."""
    found = _EVENT.search(query)
    if found is None:
        return None
    relation = "after" if found.group(1).lower() in _AFTER else "before"
    words = found.group(2).strip()
    named = _words(words)
    if not named or named & _NOT_EVENTS or _YEAR.search(words):
        return None  # "before July 24", "till date", "after a long day": no event
    return found.group(0).strip(), relation, words


def anchored(text: str, relation: str, moment: float, fact_id: str) -> TimeHint:
    """The period before (up to the end of its day) or after (from the start of its day) an
    event dated ``moment`` by the fact ``fact_id``: an event's day holds what came just before
    and just after it, since a conversation's turns share their session's date."""
    when = datetime.fromtimestamp(moment, tz=UTC)
    day = datetime(when.year, when.month, when.day, tzinfo=UTC)
    if relation == "before":
        return TimeHint(text, None, (day + timedelta(days=1)).timestamp(), None, fact_id)
    return TimeHint(text, day.timestamp(), None, None, fact_id)


def _hint(query: str, mention: timewords.Mention, moment: datetime) -> TimeHint | None:
    """The hint a mention gives: its period, opened by the word that leads it."""
    shown = mention.core
    if mention.lead in _SHOWN_LEADS:
        before = query[: mention.at + mention.words.find(mention.core)].rstrip()
        shown = f"{before.split()[-1]} {mention.core}" if before.split() else mention.core
    start, end = mention.start, mention.end
    opened = mention.lead in _BEFORE or mention.lead in _AFTER
    if not mention.year_named:
        if mention.month is not None and not opened:
            return TimeHint(shown, None, None, mention.month)  # "in June": June of any year
        if start > moment:  # the latest one not after base: "since June" in May is last June
            try:
                start, end = _year_before(start), _year_before(end)
            except ValueError:
                return None  # 29 February, or a year out of range
    low: float | None = start.timestamp()
    high: float | None = end.timestamp()
    if mention.lead in _BEFORE:
        low, high = None, low
    elif mention.lead == "after":
        low, high = high, None
    elif mention.lead == "since":
        high = None
    return TimeHint(shown, low, high, None)


def _year_before(moment: datetime) -> datetime:
    if moment.year - 1 < timewords.FIRST_YEAR:
        raise ValueError("year out of range")
    return moment.replace(year=moment.year - 1)


def _words(text: str) -> set[str]:
    """The lower-cased words of ``text``; "may" and "march" count as months only where they
    are capitalised or followed by a number ("May", "march 2020"), not as "may" the verb or
    "march madness"."""
    words = set(_WORD.findall(text.lower()))
    for word in _AMBIGUOUS_MONTHS & words:
        named = re.search(rf"\b{word.capitalize()}\b", text) or re.search(
            rf"\b{word}\s+\d", text, re.IGNORECASE
        )
        if not named:
            words.discard(word)
    return words
