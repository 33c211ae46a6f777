"""The keyword leg's plan, the same in both engines: which of a query's words *select* facts
(the rarest, within :data:`RANKING_BUDGET`) and which only score, which words rank windows of
turns, and how small a period of time words is ranked on its own (:data:`PERIOD_SELECT_MAX`).
Each engine runs the plan in its own index: FTS5 (graphmem.storage.sqlite.keyword), the postings
(graphmem.storage.postgres.keyword).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from .windows import WINDOW_TURNS

#: Matches ranked in full before the most common query words stop selecting facts
#: (bench/REPORT.md, "Keyword budget": at 100k facts, 2,500 finds the answers the full query
#: finds, 9.8 ms p50 against 14.6 ms with 5,000 and 53.4 ms for the full query).
RANKING_BUDGET: Final = 2_500

#: A period of a query's time words that holds at most this many facts is ranked on its own: its
#: facts are selected by date (the ``facts_dated`` index; a month of any year as that month of each
#: year, see graphmem.storage.sql.reads.dated_in) and only the query's matches among them are
#: scored. A larger period is read from the ranked matches of the whole memory, where its facts are
#: common enough to come soon. At 100k facts a search with a day took 338 ms p50 the second way and
#: 28 ms this one (bench/REPORT.md, "Time words at 100k facts").
PERIOD_SELECT_MAX: Final = 20_000


def rarest(terms: list[str], frequency: Mapping[str, int]) -> list[str]:
    """The rarest of ``terms`` while their frequencies add up to at most :data:`RANKING_BUDGET`. A word
    that matched nothing when counted selects for free, but does not count as the one word that
    always selects: the rarest that matches anything."""
    chosen: list[str] = []
    total = 0
    for term in sorted(terms, key=lambda t: frequency[t]):
        if total > 0 and total + frequency[term] > RANKING_BUDGET:
            break
        chosen.append(term)
        total += frequency[term]
    return chosen


def window_words(terms: list[str], frequency: Mapping[str, int]) -> list[str]:
    """The words of a query that rank windows of turns: its rarest, as for facts (a window
    holds up to WINDOW_TURNS facts, so a word's windows are counted as that many times its
    facts), and never a word over the budget alone: a query of everyday words ranks no window
    by keywords, rather than every window of a large memory."""
    scaled = {t: f * WINDOW_TURNS for t, f in frequency.items()}
    return [t for t in rarest(terms, scaled) if scaled[t] <= RANKING_BUDGET]
