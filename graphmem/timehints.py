"""Time words in questions: "what did Caroline do last week?", "in May 2023", "two years ago".

1. :func:`understand` finds the first time expression of a query with dateparser (English, over
   free text) and turns it into a period of valid time, relative to the search's ``as_of``.
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

import calendar
import re
from dataclasses import dataclass
from datetime import MAXYEAR, UTC, datetime, timedelta
from typing import Any, Final

from .temporal import to_iso

#: How much an in-period fact's relevance is raised (multiplied by 1 + this), chosen on LoCoMo
#: conversations 0-4 and checked on 5-9 (bench/REPORT.md, "Time words"). A fact's time is its
#: source date, else its ``valid_from``; a fact outside the period or undated keeps its score.
TIME_HINT_BOOST: Final = 1.0
#: An event is dated by the earliest of its best keyword matches among the facts in scope (a
#: fact's source date, else its ``valid_from``): a conversation mentions an event again after
#: it happened ("since the tour..."), rarely before.
EVENT_MATCHES: Final = 3

_MONTHS: Final = tuple(m.lower() for m in calendar.month_name[1:])
_MONTH_ABBR: Final = tuple(m.lower() for m in calendar.month_abbr[1:])
_WEEKDAYS: Final = tuple(d.lower() for d in calendar.day_name)
#: Month names and abbreviations; "may" only where written "May" (see ``_words``).
_MONTH_WORDS: Final = frozenset(_MONTHS) | frozenset(_MONTH_ABBR)
_DAYS: Final = frozenset({"yesterday", "today", "tonight", "tomorrow", "ago"})
_SHIFTS: Final = frozenset({"last", "next", "this", "past"})
_UNITS: Final = frozenset(
    {"week", "weeks", "month", "months", "year", "years", "day", "days", "weekend"}
)
_SHIFTED: Final = _UNITS | frozenset(_WEEKDAYS) | _MONTH_WORDS
_YEAR_PREPOSITIONS: Final = frozenset(
    {"in", "during", "since", "before", "after", "until", "till", "by", "from", "around"}
)
_AMBIGUOUS_MONTHS: Final = frozenset({"may", "march"})
_RELATIVE: Final = _DAYS | _SHIFTS | _UNITS
#: Words that make a query worth handing to the parser.
_TRIGGERS: Final = _RELATIVE | _MONTH_WORDS
_DECADE: Final = re.compile(r"(?<![\w'])(?:the )?(1[5-9]\d0|2[01]\d0)s\b", re.IGNORECASE)
_YEAR: Final = re.compile(r"(?<!\d)(1[5-9]\d\d|2[01]\d\d)(?!\d)")
_WORD: Final = re.compile(r"[a-z]+")
#: The last word of a text, if the text does not end in whitespace: the word a cut went
#: through (tried at word starts only, so in time linear in the text).
_PARTIAL_WORD: Final = re.compile(r"(?<!\S)\S*\Z")
_BEFORE: Final = frozenset({"before", "until", "till", "prior"})
_AFTER: Final = frozenset({"after", "since"})
_SETTINGS: Final = {"PREFER_DATES_FROM": "past", "RETURN_AS_TIMEZONE_AWARE": False}
#: Words that make the words after "before"/"after" a time or a span, not an event.
_NOT_EVENTS: Final = _RELATIVE | _MONTH_WORDS | frozenset(_WEEKDAYS) | {"date", "time", "now"}
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
            return f"{self.text!r}: {calendar.month_name[self.month]} of any year"
        start = "the beginning" if self.start is None else to_iso(self.start)
        end = "now" if self.end is None else to_iso(self.end)
        dated = "" if self.event is None else f" (the event dated by fact {self.event})"
        return f"{self.text!r}: {start} to {end}{dated}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "start": to_iso(self.start),
            "end": to_iso(self.end),
            "month": self.month,
            "event": self.event,
            "described": self.describe(),
        }


#: The characters of a query read for time words (:func:`understand`).
TIME_WORDS_CHARS: Final = 300


def understand(query: str, base: float) -> TimeHint | None:
    """The first time expression of ``query``, understood relative to ``base`` (epoch
    seconds), or None when the query names no time.

    The period is the day, the week (Monday to Monday), the month or the year the expression
    names; after "before"/"until" everything earlier, after "after"/"since" everything later.
    A month named without a year ("in June") is that month of any year. Only expressions that
    say a time are taken (:func:`_says_a_time`): a bare number or ordinal ("18th"), a weekday
    alone ("deploy friday"), a year naming an edition ("wimbledon 2017"), "may" the verb and
    "march madness" are not dates. Only the first ``TIME_WORDS_CHARS`` characters are read
    (up to the last whole word): the parser's time grows with the text, and a question says its
    time early.
    """
    if len(query) > TIME_WORDS_CHARS:  # up to the last whole word: the word cut, if any, left out
        query = _PARTIAL_WORD.sub("", query[: TIME_WORDS_CHARS + 1])
    if not _YEAR.search(query) and not _words(query) & _TRIGGERS:
        return None  # most queries: no need to ask the parser
    decade = _DECADE.search(query)
    if decade is not None:
        first = int(decade.group(1))
        start = datetime(first, 1, 1, tzinfo=UTC).timestamp()
        end = datetime(first + 10, 1, 1, tzinfo=UTC).timestamp()
        return _bounded(query, decade.group(0), start, end, None)
    moment = datetime.fromtimestamp(base, tz=UTC).replace(tzinfo=None)
    settings = {**_SETTINGS, "RELATIVE_BASE": moment}
    # dateparser is imported on first use: it takes a fifth of a second, and loading its
    # English data about half a second more on the first search with time words.
    from dateparser.date import DateDataParser
    from dateparser.search import search_dates

    found = search_dates(query, languages=["en"], settings=settings) or []
    parser = DateDataParser(languages=["en"], settings=settings)
    for text in _merged(query, [text for text, _ in found]):
        if not _says_a_time(text, query):
            continue
        parsed = parser.get_date_data(text)
        if parsed.date_obj is None or parsed.date_obj.year >= MAXYEAR:
            continue  # nothing, or a date in year 9999, whose period may end past the last one
        if (
            abs(parsed.date_obj - moment) < timedelta(days=1)
            and not _words(text) & _RELATIVE
            and not _YEAR.search(text)
        ):
            continue  # nothing, or the parser's fallback to the base moment
        return _hint(query, text, parsed.date_obj, parsed.period or "day")
    return None


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


def _merged(query: str, found: list[str]) -> list[str]:
    """The expressions found, with neighbours separated only by spaces and commas joined
    ("April", "10", "2023" → "April 10, 2023")."""
    spans: list[tuple[int, int]] = []
    cursor = 0
    for text in found:
        at = query.find(text, cursor)
        if at < 0:
            continue
        cursor = at + len(text)
        if spans and not query[spans[-1][1] : at].strip(" ,"):
            spans[-1] = (spans[-1][0], cursor)
        else:
            spans.append((at, cursor))
    return [query[a:b].strip(" ,") for a, b in spans]


def _says_a_time(text: str, query: str) -> bool:
    """Whether ``text`` (found in ``query``) names a time: a month, a relative day
    ("yesterday", "3 days ago"), "last"/"next"/"this"/"past" with a unit or a weekday ("last
    week", "next Friday"), or a year after a word like "in", "since" or "before" ("in 2016").
    A weekday or a unit alone ("Friday lunch", "what day") is not taken, nor a year that names
    an edition of something ("wimbledon 2017", "the 2014 world cup")."""
    words = _words(text)
    if words & _MONTH_WORDS or words & _DAYS or (words & _SHIFTS and words & _SHIFTED):
        return True
    if not _YEAR.search(text):
        return False
    first = _WORD.findall(text.lower())[:1]
    return bool({*first, _word_before(query, text)} & _YEAR_PREPOSITIONS)


def _hint(query: str, text: str, when: datetime, period: str) -> TimeHint:
    day = datetime(when.year, when.month, when.day, tzinfo=UTC)
    month: int | None = None
    if period == "year":
        start, end = datetime(day.year, 1, 1, tzinfo=UTC), datetime(day.year + 1, 1, 1, tzinfo=UTC)
    elif period == "month":
        start = datetime(day.year, day.month, 1, tzinfo=UTC)
        end = datetime(day.year + (day.month == 12), day.month % 12 + 1, 1, tzinfo=UTC)
        if not _YEAR.search(text) and not _words(text) & _RELATIVE:
            month = day.month  # "in June": June of any year
    elif period == "week":
        start = day - timedelta(days=day.weekday())
        end = start + timedelta(days=7)
    else:
        start, end = day, day + timedelta(days=1)
    return _bounded(query, text, start.timestamp(), end.timestamp(), month)


def _bounded(query: str, text: str, start: float, end: float, month: int | None) -> TimeHint:
    """The hint for ``text`` naming ``start``-``end``, open-ended after "before"/"until"
    (everything earlier) or "after"/"since" (everything later)."""
    previous = _word_before(query, text)
    low: float | None = start
    high: float | None = end
    if previous in _BEFORE:
        low, high, month = None, start, None
    elif previous in _AFTER:
        low, high, month = (end if previous == "after" else start), None, None
    elif month is not None:
        low = high = None  # "in June": June of any year, whichever year the parser guessed
    return TimeHint(text, low, high, month)


def _word_before(query: str, text: str) -> str:
    """The word of ``query`` just before ``text`` in it, lower-cased ("" if none)."""
    words = query[: max(query.find(text), 0)].lower().split()
    return words[-1] if words else ""


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
