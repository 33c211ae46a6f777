"""Stated time: the dates and periods a fact's text mentions ("I moved to Lisbon in 2019", "we
shipped it yesterday", "from 2006 to 2009"), read at write time, resolved against the fact's
reference time.

1. :func:`mentions` finds the time expressions of a text with the time grammar
   (:mod:`graphmem.timewords`, the one the questions' time words are read with), each resolved
   against the reference time — the fact's episode time, else its ``source_date``, else its
   ``valid_from``, else the write's time — to a period, start included, end excluded. A month
   or a day without a year is in the reference time's year; "since X" runs from X to the end of
   the reference day; a year or a month alone after "before" or "after" ("before 2020") names
   no period of its own and is left out.
2. :func:`stated_time` keeps the first ``MAX_MENTIONS`` mentions and returns the span that covers
   them, with their words joined by "; " — one period per fact, so that a query's period meets
   it by overlap, as valid time does.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from . import timewords
from .jsonform import JSONForm

#: Mentions of one text that count (the first ones).
MAX_MENTIONS: Final = 8
#: Facts a backfill writes per transaction.
BACKFILL_BATCH: Final = 5_000
#: Longest text read (the rest is not searched for dates).
MAX_READ: Final = 20_000
#: Leads after which a year or a month alone names no period of its own ("before 2020").
_OPEN: Final = frozenset({"before", "after", "prior to"})


@dataclass(frozen=True, slots=True)
class StatedTime(JSONForm):
    """The time a fact's text states: the period ``start`` to ``end`` (end excluded) that covers
    its mentions, and the words that gave it."""

    start: datetime
    end: datetime
    text: str


def mentions(text: str, reference: float) -> list[tuple[str, datetime, datetime]]:
    """The time expressions of ``text`` as (words, start, end), in the order they appear,
    resolved against ``reference`` (epoch seconds); at most MAX_MENTIONS."""
    if not isinstance(text, str) or not text:
        return []
    base = datetime.fromtimestamp(reference, tz=UTC)
    found: list[tuple[str, datetime, datetime]] = []
    for mention in timewords.find(text[:MAX_READ], base):
        if mention.kind in ("year", "month") and mention.lead in _OPEN:
            continue
        end = mention.end
        if mention.words.lower().startswith("since"):  # from then until the reference time
            end = max(end, timewords.day_start(base) + timedelta(days=1))
        found.append((mention.words, mention.start, end))
    return found[:MAX_MENTIONS]


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
