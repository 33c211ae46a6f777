"""Stated time: the dates and periods a fact's text mentions ("I moved to Lisbon in 2019", "we
shipped it yesterday", "from 2006 to 2009"), read at write time, resolved against the fact's
reference time.

1. :func:`mentions` finds the time expressions of a text with regular expressions (no model,
   no parser: a write reads thousands of texts a second), each resolved against the reference
   time — the fact's episode time, else its ``source_date``, else its ``valid_from``, else the
   write's time — to a period, start included, end excluded:

   ================================  ====================================================
   absolute                          "in 2019", "May 2023", "12 March 2024", "March 12",
                                     "2024-05-01", "in the 1990s", "in early May"
   ranges                            "from 2006 to 2009", "between May and July 2023",
                                     "2006-2009"
   relative                          "yesterday", "today", "tomorrow", "last night", "last
                                     week", "this month", "next year", "last weekend", "two
                                     years ago", "3 days ago", "next Friday", "last Monday"
   ================================  ====================================================

   A day is that day; a month, a year, a week (Monday to Monday) or a weekend (Saturday to
   Monday) the whole of it; "N units ago" the day, week, month or year it lands in; "since X"
   from X to the end of the reference day. A month or a day without a year is in the reference
   time's year.
2. :func:`stated_time` keeps the first ``MAX_MENTIONS`` mentions and returns the span that covers
   them, with their words joined by "; " — one period per fact, so that a query's period meets
   it by overlap, as valid time does.

What is not a date is left alone: a bare number or a year without a word that makes it a time
("room 2019", "the 2014 world cup"), numbers with separators ("2,019 users", "3.11"), a weekday
alone ("deploy Friday"), "may" the verb and "march" the verb (a month needs a capital, a day or
year, or a word like "in"), and impossible dates ("the 40th of May", year 0): ignored, never an
error, never a guess.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from .temporal import to_iso

#: Mentions of one text that count (the first ones).
MAX_MENTIONS: Final = 8
#: Years a mention may name.
FIRST_YEAR: Final = 1800
LAST_YEAR: Final = 2199
#: Facts a backfill writes per transaction.
BACKFILL_BATCH: Final = 5_000
#: Longest text read (the rest is not searched for dates).
MAX_READ: Final = 20_000

_MONTHS: Final = {m.lower(): i for i, m in enumerate(calendar.month_name) if m}
_MONTHS.update({m.lower(): i for i, m in enumerate(calendar.month_abbr) if m})
_MONTHS["sept"] = 9
_WEEKDAYS: Final = {d.lower(): i for i, d in enumerate(calendar.day_name)}
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

_MONTH: Final = r"(?P<{n}>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_YEAR_RE: Final = r"(?P<{n}>1[89]\d\d|2[01]\d\d)(?![\d,.]\d)(?!\s*(?:%|percent))"
_DAY_RE: Final = r"(?P<{n}>\d{1,2})(?:st|nd|rd|th)?"
_COUNT: Final = r"(?P<count>\d{1,3}|" + "|".join(sorted(_NUMBERS, key=len, reverse=True)) + ")"
#: Words that make the year or month after them a time ("in 2019", "since May", "mid-2020").
_PREPOSITION: Final = (
    r"(?:(?:in|during|since|until|till|by|from|around|circa|of|early|late|mid|end\s+of|"
    r"beginning\s+of|back\s+in|throughout)\s+|mid-\s*)"
)


def _month(n: str) -> str:
    return _MONTH.replace("{n}", n)


def _year(n: str) -> str:
    return _YEAR_RE.replace("{n}", n)


def _day(n: str) -> str:
    return _DAY_RE.replace("{n}", n)


#: Each kind of mention, most specific first; the first to match a stretch of text takes it.
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
        ("day_month_year", rf"\b{_day('d')}\s+(?:of\s+)?{_month('m')},?\s+{_year('y')}"),
        ("month_day_year", rf"\b{_month('m')}\s+{_day('d')},?\s+{_year('y')}"),
        ("month_year", rf"\b{_month('m')},?\s+(?:of\s+)?{_year('y')}"),
        ("day_month", rf"\b{_day('d')}\s+(?:of\s+)?{_month('m')}\b(?!,?\s+\d)"),
        ("month_day", rf"\b{_month('m')}\s+{_day('d')}\b(?![\d:,.]|\s*(?:%|am\b|pm\b))"),
        ("decade", r"\b(?:in\s+)?the\s+(?P<y>1[89]\d0|20\d0)s\b"),
        ("year", rf"\b{_PREPOSITION}(?:the\s+(?:year\s+)?)?(?<![\d,.]){_year('y')}"),
        ("month", rf"\b(?P<p>{_PREPOSITION}|(?:last|next|this)\s+){_month('m')}\b"),
        ("ago", rf"\b{_COUNT}\s+(?P<unit>day|week|month|year)s?\s+ago\b"),
        ("day_before", r"\bthe\s+day\s+before\s+yesterday\b"),
        ("relative_day", r"\b(?P<word>yesterday|today|tonight|tomorrow|last\s+night)\b"),
        (
            "shifted",
            r"\b(?P<shift>last|next|this|past|earlier\s+this|later\s+this)\s+"
            r"(?P<unit>week|weekend|month|year|" + "|".join(_WEEKDAYS) + r")\b",
        ),
    )
)


#: What a text must hold for a kind of mention to be looked for: its words, read once, decide
#: which of the patterns above run (most texts hold none of what they look for).
_WORD: Final = re.compile(r"[a-z]+")
_MONTH_WORDS: Final = frozenset(_MONTHS)
_RELATIVE_WORDS: Final = frozenset(
    {"yesterday", "today", "tonight", "tomorrow", "night", "ago", "week", "weeks", "weekend"}
    | {"month", "months", "year", "years", "day", "days", *_WEEKDAYS}
)
_DIGIT: Final = re.compile(r"\d")


def _signals(text: str) -> set[str]:
    """Which kinds of signal ``text`` holds: a digit, a month's name, a relative time word."""
    words = set(_WORD.findall(text.lower()))
    present = set()
    if _DIGIT.search(text):
        present.add("digit")
    if words & _MONTH_WORDS:
        present.add("month")
    if words & _RELATIVE_WORDS:
        present.add("relative")
    return present


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


@dataclass(frozen=True, slots=True)
class StatedTime:
    """The time a fact's text states: the period ``start`` to ``end`` (end excluded) that covers
    its mentions, and the words that gave it."""

    start: datetime
    end: datetime
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "start": to_iso(self.start.timestamp()),
            "end": to_iso(self.end.timestamp()),
            "text": self.text,
        }


def mentions(text: str, reference: float) -> list[tuple[str, datetime, datetime]]:
    """The time expressions of ``text`` as (words, start, end), in the order they appear,
    resolved against ``reference`` (epoch seconds); at most MAX_MENTIONS."""
    if not isinstance(text, str) or not text:
        return []
    text = text[:MAX_READ]
    present = _signals(text)
    if not present:
        return []  # most texts: no digit, month or time word, nothing to look for
    base = datetime.fromtimestamp(reference, tz=UTC)
    taken: list[tuple[int, int]] = []
    found: list[tuple[int, str, datetime, datetime]] = []
    for kind, pattern in _KINDS:
        if _NEEDS[kind] not in present:
            continue
        for match in pattern.finditer(text):
            a, b = match.span()
            if any(a < end and start < b for start, end in taken):
                continue
            period = _resolve(kind, match, text, base)
            taken.append((a, b))  # an impossible date is not read again in parts
            if period is None:
                continue
            words = match.group(0).strip()
            start, end = period
            if words.lower().startswith("since"):  # from then until the reference time
                end = max(end, _dt(base.year, base.month, base.day) + timedelta(days=1))
            found.append((a, words, start, end))
    found.sort(key=lambda item: item[0])
    return [(words, start, end) for _, words, start, end in found[:MAX_MENTIONS]]


def stated_time(text: str, reference: float) -> StatedTime | None:
    """The span covering the time expressions of ``text`` (see :func:`mentions`), or None."""
    found = mentions(text, reference)
    if not found:
        return None
    return StatedTime(
        min(start for _, start, _ in found),
        max(end for _, _, end in found),
        "; ".join(words for words, _, _ in found),
    )


def backfill(
    rows: Iterable[Any],
) -> tuple[dict[str, int], list[tuple[float | None, float | None, str | None, str]]]:
    """For facts' rows (id, text, source_date, valid_from and their stated time): how many were
    read and state a time, and the (start, end, words, id) of those whose stated time, read
    against their source date (else valid_from), differs from the one stored."""
    read = stating = 0
    changes: list[tuple[float | None, float | None, str | None, str]] = []
    for row in rows:
        read += 1
        reference = row["source_date"] if row["source_date"] is not None else row["valid_from"]
        found = stated_time(row["text"], reference)
        stating += found is not None
        new = (
            (None, None, None)
            if found is None
            else (found.start.timestamp(), found.end.timestamp(), found.text)
        )
        if new != (row["stated_start"], row["stated_end"], row["stated_text"]):
            changes.append((*new, row["id"]))
    return {"facts": read, "stating": stating, "changed": len(changes)}, changes


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
            first, last, year = _MONTHS[m["m1"].lower()], _MONTHS[m["m2"].lower()], int(m["y"])
            return _month_period(year - (first > last), first)[0], _month_period(year, last)[1]
        if kind in ("day_month_year", "month_day_year"):
            return _day_period(int(m["y"]), _MONTHS[m["m"].lower()], int(m["d"]))
        if kind == "month_year":
            return _month_period(int(m["y"]), _MONTHS[m["m"].lower()])
        if kind in ("day_month", "month_day"):
            if not _is_month(m, text, dated=True):
                return None
            return _day_period(base.year, _MONTHS[m["m"].lower()], int(m["d"]))
        if kind == "decade":
            first = int(m["y"])
            return _dt(first, 1, 1), _dt(first + 10, 1, 1)
        if kind == "year":
            year = int(m["y"])
            return _dt(year, 1, 1), _dt(year + 1, 1, 1)
        if kind == "month":
            if not _is_month(m, text, dated=False):
                return None
            month = _MONTHS[m["m"].lower()]
            shift = m["p"].strip().lower()
            year = base.year + (shift == "next") - (shift == "last")
            return _month_period(year, month)
        return _relative(kind, m, base)
    except (ValueError, OverflowError, KeyError):
        return None


def _relative(kind: str, m: re.Match[str], base: datetime) -> tuple[datetime, datetime] | None:
    today = _dt(base.year, base.month, base.day)
    day = timedelta(days=1)
    if kind == "day_before":
        return today - 2 * day, today - day
    if kind == "relative_day":
        word = " ".join(m["word"].lower().split())
        offset = {"yesterday": -1, "last night": -1, "today": 0, "tonight": 0, "tomorrow": 1}[word]
        return today + offset * day, today + (offset + 1) * day
    if kind == "ago":
        raw = " ".join(m["count"].lower().split())
        count = int(raw) if raw.isdigit() else _NUMBERS[raw]
        unit = m["unit"].lower()
        if unit == "day":
            start = today - count * day
            return start, start + day
        if unit == "week":
            start = _week(today) - timedelta(weeks=count)
            return start, start + timedelta(weeks=1)
        if unit == "month":
            year, month = divmod(base.year * 12 + base.month - 1 - count, 12)
            return _month_period(year, month + 1)
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
        return _month_period(year, month + 1)
    if unit == "year":
        return _dt(base.year + step, 1, 1), _dt(base.year + step + 1, 1, 1)
    weekday = _WEEKDAYS[unit]
    if step < 0:  # the latest such day before today
        back = (today.weekday() - weekday) % 7 or 7
        start = today - back * day
    elif step > 0:  # the first such day after today
        ahead = (weekday - today.weekday()) % 7 or 7
        start = today + ahead * day
    else:  # this week's
        start = _week(today) + weekday * day
    return start, start + day


def _is_month(m: re.Match[str], text: str, *, dated: bool) -> bool:
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


def _month_period(year: int, month: int) -> tuple[datetime, datetime]:
    start = _dt(year, month, 1)
    end = _dt(year + month // 12, month % 12 + 1, 1)
    return start, end


def _week(day: datetime) -> datetime:
    return day - timedelta(days=day.weekday())
