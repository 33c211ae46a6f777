"""The time grammar: the time expressions of a text ("in 2019", "May 3, 2023", "last week", "two
years ago", "from 2006 to 2009"), each resolved to a period against a base time — one grammar for
the time a fact's text states (:mod:`graphmem.statedtime`) and the period a question names
(:mod:`graphmem.timehints`), so "last week" means the same week in both.

:func:`find` reads a text with regular expressions (no model, no date parser: a write reads
thousands of texts a second), each kind of mention tried in turn, most specific first, a stretch
of text taken by the first kind that matches it:

================================  ====================================================
absolute                          "in 2019", "May 2023", "12 March 2024", "March 12",
                                  "2024-05-01", "in the 1990s", "in early May"
ranges                            "from 2006 to 2009", "between May and July 2023",
                                  "2006-2009"
relative                          "yesterday", "today", "tomorrow", "last night", "last
                                  week", "this month", "next year", "last weekend", "two
                                  years ago", "3 days ago", "next Friday", "last Monday"
================================  ====================================================

A day is that day; a month, a year, a week (Monday to Monday) or a weekend (Saturday to Monday)
the whole of it; "N units ago" the day, week, month or year it lands in. A month or a day named
without a year is placed in the base's year, and says so (``Mention.year_named``): each reader
decides what such a mention means. Each mention carries the word that leads it ("in", "since",
"before", ...), for the readers that give "before 2020" or "since May" an open end.

What is not a date is left alone: a bare number or a year without a word that makes it a time
("room 2019", "the 2014 world cup"), numbers with separators ("2,019 users", "3.11"), a weekday
alone ("deploy Friday"), "may" the verb and "march" the verb (a month needs a capital, a day or
year, or a word like "in"), and impossible dates ("the 40th of May", year 0): ignored, never an
error, never a guess.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

#: The months' and the weekdays' names, as written in English (the names the grammar reads and
#: the words a fact's date is indexed under).
MONTHS: Final = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
WEEKDAYS: Final = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
#: Years a mention may name.
FIRST_YEAR: Final = 1800
LAST_YEAR: Final = 2199

#: Month words, lower-cased (names, three-letter abbreviations and "sept") → 1-12.
MONTH_NUMBERS: Final = {
    **{m.lower(): i for i, m in enumerate(MONTHS, 1)},
    **{m[:3].lower(): i for i, m in enumerate(MONTHS, 1)},
    "sept": 9,
}
#: Weekday names, lower-cased → 0 (Monday) to 6.
WEEKDAY_NUMBERS: Final = {d.lower(): i for i, d in enumerate(WEEKDAYS)}
#: The relative words (the words of the "ago", "last ...", "yesterday" kinds).
RELATIVE_WORDS: Final = frozenset(
    {"yesterday", "today", "tonight", "tomorrow", "night", "ago", "week", "weeks", "weekend"}
    | {"month", "months", "year", "years", "day", "days", *WEEKDAY_NUMBERS}
)
#: The words that shift a unit or a weekday ("last week", "next Friday").
SHIFTS: Final = frozenset({"last", "next", "this", "past"})

_NUMBERS: Final = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "a couple of": 2,
    "a few": 3,
    "few": 3,
    "several": 3,
}

_MONTH: Final = r"(?P<{n}>" + "|".join(sorted(MONTH_NUMBERS, key=len, reverse=True)) + r")\.?"
_YEAR_RE: Final = r"(?P<{n}>1[89]\d\d|2[01]\d\d)(?![\d,.]\d)(?!s\b)(?!\s*(?:%|percent))"
_DAY_RE: Final = r"(?P<{n}>\d{1,2})(?:st|nd|rd|th)?"
_COUNT: Final = r"(?P<count>\d{1,3}|" + "|".join(sorted(_NUMBERS, key=len, reverse=True)) + ")"
#: Words that make the year or month after them a time ("in 2019", "since May", "mid-2020",
#: "before 2020").
_PREPOSITION: Final = (
    r"(?:(?:in|during|since|until|till|by|from|around|circa|of|early|late|mid|end\s+of|"
    r"beginning\s+of|back\s+in|throughout|before|after|prior\s+to)\s+|mid-\s*)"
)


def _month(n: str) -> str:
    return _MONTH.replace("{n}", n)


def _year(n: str) -> str:
    return _YEAR_RE.replace("{n}", n)


def _day(n: str) -> str:
    return _DAY_RE.replace("{n}", n)


#: Each kind of mention, most specific first; the first to match a stretch of text takes it.
#: A ``lead`` group holds the word that makes the rest a time, where the kind needs one.
_KINDS: Final[tuple[tuple[str, re.Pattern[str]], ...]] = tuple(
    (kind, re.compile(pattern, re.IGNORECASE))
    for kind, pattern in (
        ("iso", r"(?<![\d-])(?P<y>\d{4})-(?P<m>\d{2})-(?P<d>\d{2})(?![\d-])"),
        (
            "year_range",
            rf"(?:\b(?:from|between)\s+)?(?<![\d,.]){_year('y1')}\s*(?:-|\u2013|\u2014|to|until|till|and)\s*"
            rf"{_year('y2')}",
        ),
        (
            "month_range",
            rf"\b(?:from|between)\s+{_month('m1')}\s+(?:-|\u2013|to|until|till|and)\s+"
            rf"{_month('m2')},?\s+{_year('y')}",
        ),
        ("day_month_year", rf"\b{_day('d')}\s+(?:of\s+)?{_month('m')}(?:,\s*|\s+){_year('y')}"),
        ("month_day_year", rf"\b{_month('m')}\s+{_day('d')}(?:,\s*|\s+){_year('y')}"),
        ("month_year", rf"\b{_month('m')},?\s+(?:of\s+)?{_year('y')}"),
        ("day_month", rf"\b{_day('d')}\s+(?:of\s+)?{_month('m')}\b(?!,?\s+\d)"),
        # after a number that is no year ("9999 December 31"), no date
        ("month_day", rf"(?<!\d\s)\b{_month('m')}\s+{_day('d')}\b(?![\d:,.]|\s*(?:%|am\b|pm\b))"),
        (
            "decade",
            r"\b(?P<lead>in\s+)?the\s+(?:(?:early|late|mid)[\s-]+)?(?P<y>1[89]\d0|20\d0)s\b",
        ),
        ("year", rf"\b(?P<lead>{_PREPOSITION})(?:the\s+(?:year\s+)?)?(?<![\d,.]){_year('y')}"),
        # before a number that is no year ("in December 9999"), no date
        (
            "month",
            rf"\b(?P<lead>{_PREPOSITION}|(?:last|next|this)\s+){_month('m')}\b(?!,?\s+\d)",
        ),
        ("ago", rf"\b{_COUNT}\s+(?P<unit>day|week|month|year)s?\s+ago\b"),
        ("day_before", r"\bthe\s+day\s+before\s+yesterday\b"),
        ("relative_day", r"\b(?P<word>yesterday|today|tonight|tomorrow|last\s+night)\b"),
        (
            "shifted",
            r"\b(?P<shift>last|next|this|past|earlier\s+this|later\s+this)\s+"
            r"(?P<unit>week|weekend|month|year|" + "|".join(WEEKDAY_NUMBERS) + r")\b",
        ),
    )
)

#: What a text must hold for a kind of mention to be looked for: its words, read once, decide
#: which of the patterns above run (most texts hold none of what they look for).
_WORD: Final = re.compile(r"[a-z]+")
_DIGIT: Final = re.compile(r"\d")
_MONTH_WORDS: Final = frozenset(MONTH_NUMBERS)
_NEEDS: Final = {
    "iso": "digit",
    "year_range": "digit",
    "month_range": "month",
    "day_month_year": "digit",
    "month_day_year": "digit",
    "month_year": "digit",
    "day_month": "digit",
    "month_day": "digit",
    "decade": "digit",
    "year": "digit",
    "month": "month",
    "ago": "relative",
    "day_before": "relative",
    "relative_day": "relative",
    "shifted": "relative",
}
#: The kinds that name a month or a day without its year.
_YEARLESS: Final = frozenset({"day_month", "month_day"})
_LOOK_BACK: Final = 40
#: The kinds of mention that count from the base ("last week", "two years ago", "yesterday").
RELATIVE_KINDS: Final = frozenset({"ago", "day_before", "relative_day", "shifted"})
_ORDINALS: Final = ("first", "second", "third", "fourth")
#: "the first week of", "the last week of": what may stand before a month.
_WEEK_OF: Final = re.compile(
    r"\b(?:the\s+)?(?P<which>first|second|third|fourth|last)\s+week\s+of\s+\Z", re.IGNORECASE
)
#: "the week before", "two days after", "the Monday before": what may stand before a date.
_OFFSET: Final = re.compile(
    rf"\b(?:the\s+|{_COUNT}\s+)(?P<unit>day|week|weekend|{'|'.join(WEEKDAY_NUMBERS)})s?\s+"
    r"(?P<side>before|after)\s+(?:on\s+|the\s+)?\Z",
    re.IGNORECASE,
)
_LAST_WORD: Final = re.compile(r"(prior\s+to|[a-z]+)\W*\Z", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Mention:
    """A time expression found in a text: its ``words`` as written (from ``at``, the offset in
    the text), the period ``start`` to ``end`` (end excluded) it names against the base, and
    how it reads: ``core``, the words without the one that leads them; ``lead``, that word
    lower-cased ("in", "since", "before", "prior to", or the word just before the mention; ""
    at the start); ``year_named``, False for a month or a day named without a year and without
    "last"/"next"/"this" (placed in the base's year); ``month``, 1-12 for a mention that is a
    month alone ("in June", "since May")."""

    kind: str
    at: int
    words: str
    core: str
    lead: str
    start: datetime
    end: datetime
    year_named: bool
    month: int | None


def find(text: str, base: datetime) -> list[Mention]:
    """The time expressions of ``text`` in the order they appear, resolved against ``base``."""
    present = _signals(text)
    if not present:
        return []  # most texts: no digit, month or time word, nothing to look for
    taken: list[tuple[int, int]] = []
    found: list[Mention] = []
    for kind, pattern in _KINDS:
        if _NEEDS[kind] not in present:
            continue
        for match in pattern.finditer(text):
            a, b = match.span()
            if any(a < end and start < b for start, end in taken):
                continue
            taken.append((a, b))  # an impossible date is not read again in parts
            mention = _mention(kind, match, text, base)
            if mention is not None:
                found.append(mention)
    found.sort(key=lambda m: m.at)
    found = [_offset(m, text) for m in found]
    # a mention inside a longer one ("last week" in "the last week of August 2023") is part of it
    return [
        m
        for m in found
        if not any(
            o is not m and o.at <= m.at and m.at + len(m.words) <= o.at + len(o.words)
            for o in found
        )
    ]


def _offset(mention: Mention, text: str) -> Mention:
    """``mention``, or the period a day, a weekday, a week or a weekend before or after it
    names when the text says so ("the week before 16 November 2023", "the Monday before
    July 24", "two weeks after May 3"): the period next to the date, not the date."""
    if mention.kind in RELATIVE_KINDS or mention.lead not in ("before", "after", "of"):
        return mention
    at = mention.at + max(mention.words.find(mention.core), 0)  # "before 2020": at "2020"
    window = text[max(0, at - _LOOK_BACK) : at]
    if mention.lead == "of":
        return _week_of(mention, text, at, window)
    found = _OFFSET.search(window)
    if found is None:
        return mention
    count = _count(found["count"]) if found["count"] else 1
    unit, day = found["unit"].lower(), timedelta(days=1)
    if found["side"].lower() == "after":  # from the day after the date
        edge, sign = mention.end, 1
    else:
        edge, sign = mention.start, -1
    if unit in WEEKDAY_NUMBERS or unit == "weekend":
        weekday = WEEKDAY_NUMBERS.get(unit, 5)  # a weekend from its Saturday
        if sign > 0:  # the first such day from the day after, the latest before the date
            step = (weekday - edge.weekday()) % 7
        else:
            step = -((edge.weekday() - weekday) % 7 or 7)
        start = edge + (step + 7 * (count - 1) * sign) * day
        end = start + (2 if unit == "weekend" else 1) * day
    else:
        length = day if unit == "day" else 7 * day
        near = edge + (count - 1) * length * sign
        start, end = (near, near + length) if sign > 0 else (near - length, near)
    at -= len(window) - found.start()
    words = text[at : mention.at + len(mention.words)].strip()
    lead = _word_before(text, at)
    return Mention("offset", at, words, words, lead, start, end, mention.year_named, None)


def _week_of(mention: Mention, text: str, at: int, window: str) -> Mention:
    """The week of a month the text names ("the first week of May", "the last week of August
    2023"): its first or last seven days, or ``mention`` when no week is named."""
    found = _WEEK_OF.search(window)
    if found is None or mention.end - mention.start > timedelta(days=31):
        return mention
    which = found["which"].lower()
    week = timedelta(days=7)
    first = mention.start + _ORDINALS.index(which) * week if which != "last" else None
    start = mention.end - week if first is None else first
    at -= len(window) - found.start()
    words = text[at : mention.at + len(mention.words)].strip()
    lead = _word_before(text, at)
    return Mention(
        "week_of",
        at,
        words,
        words,
        lead,
        start,
        min(start + week, mention.end),
        mention.year_named,
        None,
    )


def _word_before(text: str, at: int) -> str:
    """The word of ``text`` just before offset ``at``, lower-cased ("" if none), looked for in
    a bounded window: a long text costs no more per mention."""
    before = _LAST_WORD.search(text[max(0, at - _LOOK_BACK) : at])
    return "" if before is None else " ".join(before.group(1).lower().split())


def _count(raw: str) -> int:
    raw = " ".join(raw.lower().split())
    return int(raw) if raw.isdigit() else _NUMBERS[raw]


def month_period(year: int, month: int) -> tuple[datetime, datetime]:
    """The month ``month`` (1-12) of ``year``, start included, end excluded."""
    start = _dt(year, month, 1)
    return start, _dt(year + month // 12, month % 12 + 1, 1)


def day_start(moment: datetime) -> datetime:
    """The start of the day (UTC) of ``moment``."""
    return _dt(moment.year, moment.month, moment.day)


def _signals(text: str) -> set[str]:
    """Which kinds of signal ``text`` holds: a digit, a month's name, a relative time word."""
    words = set(_WORD.findall(text.lower()))
    present = set()
    if _DIGIT.search(text):
        present.add("digit")
    if words & _MONTH_WORDS:
        present.add("month")
    if words & RELATIVE_WORDS:
        present.add("relative")
    return present


def _mention(kind: str, m: re.Match[str], text: str, base: datetime) -> Mention | None:
    period = _resolve(kind, m, text, base)
    if period is None:
        return None
    words = m.group(0).strip()
    led = "lead" in m.re.groupindex and m["lead"] is not None
    core = text[m.end("lead") : m.end()].strip() if led else words
    if led:
        lead = " ".join(m["lead"].lower().replace("-", " ").split())
    else:
        lead = _word_before(text, m.start())
    shifted = kind == "month" and lead in ("last", "next", "this")
    month = MONTH_NUMBERS[m["m"].lower()] if kind == "month" else None
    named = kind not in _YEARLESS and (kind != "month" or shifted)
    return Mention(kind, m.start(), words, core, lead, *period, named, month)


def _resolve(
    kind: str, m: re.Match[str], text: str, base: datetime
) -> tuple[datetime, datetime] | None:
    """The period a match names, or None when it is no date (an impossible day, a month word
    that is a verb or a name)."""
    try:
        if kind == "iso":
            return _day_period(int(m["y"]), int(m["m"]), int(m["d"]))
        if kind == "year_range":
            first, last = int(m["y1"]), int(m["y2"])
            if not first < last <= first + 200:
                return None
            return _dt(first, 1, 1), _dt(last + 1, 1, 1)
        if kind == "month_range":
            first = MONTH_NUMBERS[m["m1"].lower()]
            last, year = MONTH_NUMBERS[m["m2"].lower()], int(m["y"])
            return month_period(year - (first > last), first)[0], month_period(year, last)[1]
        if kind in ("day_month_year", "month_day_year"):
            return _day_period(int(m["y"]), MONTH_NUMBERS[m["m"].lower()], int(m["d"]))
        if kind == "month_year":
            return month_period(int(m["y"]), MONTH_NUMBERS[m["m"].lower()])
        if kind in ("day_month", "month_day"):
            if not _is_month(m, dated=True):
                return None
            return _day_period(base.year, MONTH_NUMBERS[m["m"].lower()], int(m["d"]))
        if kind == "decade":
            first = int(m["y"])
            return _dt(first, 1, 1), _dt(first + 10, 1, 1)
        if kind == "year":
            year = int(m["y"])
            return _dt(year, 1, 1), _dt(year + 1, 1, 1)
        if kind == "month":
            if not _is_month(m, dated=False):
                return None
            shift = m["lead"].strip().lower()
            year = base.year + (shift == "next") - (shift == "last")
            return month_period(year, MONTH_NUMBERS[m["m"].lower()])
        return _relative(kind, m, base)
    except (ValueError, OverflowError, KeyError):
        return None


def _relative(kind: str, m: re.Match[str], base: datetime) -> tuple[datetime, datetime] | None:
    today = day_start(base)
    day = timedelta(days=1)
    if kind == "day_before":
        return today - 2 * day, today - day
    if kind == "relative_day":
        word = " ".join(m["word"].lower().split())
        offset = {"yesterday": -1, "last night": -1, "today": 0, "tonight": 0, "tomorrow": 1}[word]
        return today + offset * day, today + (offset + 1) * day
    if kind == "ago":
        count = _count(m["count"])
        unit = m["unit"].lower()
        if unit == "day":
            start = today - count * day
            return start, start + day
        if unit == "week":
            start = _week(today) - timedelta(weeks=count)
            return start, start + timedelta(weeks=1)
        if unit == "month":
            year, month = divmod(base.year * 12 + base.month - 1 - count, 12)
            return month_period(year, month + 1)
        return _dt(base.year - count, 1, 1), _dt(base.year - count + 1, 1, 1)
    shift = " ".join(m["shift"].lower().split())
    step = {"last": -1, "past": -1, "next": 1}.get(shift, 0)
    unit = m["unit"].lower()
    if unit == "week":
        start = _week(today) + timedelta(weeks=step)
        return start, start + timedelta(weeks=1)
    if unit == "weekend":
        saturday = _week(today) + timedelta(days=5) + timedelta(weeks=step)
        return saturday, saturday + 2 * day
    if unit == "month":
        year, month = divmod(base.year * 12 + base.month - 1 + step, 12)
        return month_period(year, month + 1)
    if unit == "year":
        return _dt(base.year + step, 1, 1), _dt(base.year + step + 1, 1, 1)
    weekday = WEEKDAY_NUMBERS[unit]
    if step < 0:  # the latest such day before today
        back = (today.weekday() - weekday) % 7 or 7
        start = today - back * day
    elif step > 0:  # the first such day after today
        ahead = (weekday - today.weekday()) % 7 or 7
        start = today + ahead * day
    else:  # this week's
        start = _week(today) + weekday * day
    return start, start + day


def _is_month(m: re.Match[str], *, dated: bool) -> bool:
    """Whether the month word of ``m`` names a month: "may" and "march" only where written with
    a capital, so the verbs are not read as dates; an abbreviation with a capital, or beside
    a day."""
    word = m["m"]
    lowered = word.lower()
    if lowered in ("may", "march") or (len(lowered) <= 4 and lowered not in ("june", "july")):
        return word[0].isupper() or (dated and lowered not in ("may", "march"))
    return True


def _dt(year: int, month: int, day: int) -> datetime:
    if not FIRST_YEAR <= year <= LAST_YEAR:
        raise ValueError(f"year {year} out of range")
    return datetime(year, month, day, tzinfo=UTC)


def _day_period(year: int, month: int, day: int) -> tuple[datetime, datetime]:
    start = _dt(year, month, day)
    return start, start + timedelta(days=1)


def _week(day: datetime) -> datetime:
    return day - timedelta(days=day.weekday())
