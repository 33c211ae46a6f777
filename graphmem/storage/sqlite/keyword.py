"""The keyword leg: FTS5 bm25 ranking whose cost stays bounded as memory grows.

FTS5 computes bm25 for every fact a query matches before it returns the best, and an OR of
everyday words matches much of a large memory. At 100k facts the full query took 53.4 ms p50,
against 9.8 ms with the budget below (bench/REPORT.md, "Keyword budget"). So, as Lucene's
common-terms query does, :class:`KeywordRanker`:

1. lets the rarest words *select* facts while their document frequencies add up to at most
   :data:`graphmem.storage.sql.keyword.RANKING_BUDGET`; the other words only *score*, adding to a selected fact's bm25;
2. ranks the selected facts by the full query's bm25, and the facts only scoring words match
   only if the caller reads past them all;
3. caches document frequencies (:data:`DF_REFRESH_SHARE`): they steer the split, never which
   facts match. Time words add a pass over their period's facts (:data:`graphmem.storage.sql.keyword.PERIOD_SELECT_MAX`).
"""

from __future__ import annotations

import threading
from collections.abc import Generator, Iterator, Mapping
from typing import Final

from ... import ranking
from ...timehints import TimeHint
from ..sql import keyword, reads
from . import bm25
from .database import SQLiteConnection

#: Cached document frequencies are recounted once the table size moved by this share.
DF_REFRESH_SHARE: Final = 0.1


#: Words whose frequency is cached at most (the cache is cleared when full).
DF_CACHE_SIZE: Final = 20_000


#: Such a period's matches are scored by graphmem.storage.sqlite.bm25, from its facts alone (the
#: idf from the cached counts), when the query's words are in more than this many facts
#: (counted once per word) for each fact of the period. FTS5 walks every match of the words
#: and keeps those of the period, 0.6 to 1.1 µs a match; graphmem.storage.sqlite.bm25 reads and
#: tokenizes each fact of the period, 48 to 61 µs a fact (100k facts, bench/REPORT.md, "Time
#: words at 100k facts"). Both give the same facts and, with fresh word counts, the same scores.
SCORE_HERE_RATIO: Final = 100


class KeywordRanker:
    """Ranked FTS5 matches for queries, with per-word document frequencies cached."""

    def __init__(self) -> None:
        self._scorer = bm25.Scorer()
        self._df: dict[str, int] = {}
        self._counted_at = 0  # table size when the cache was last cleared
        #: Counts being taken, each by one thread: another asking for it waits for that one
        #: (a search's two keyword legs ask for the same words at the same time).
        self._counting: dict[str, threading.Event] = {}
        self._lock = threading.Lock()

    def ranked(
        self, conn: SQLiteConnection, query: str, period: TimeHint | None = None
    ) -> Generator[tuple[int, float], None, None]:
        """``(seq, bm25)`` of the facts matching ``query``, best (lowest bm25) first; with
        ``period``, at least those dated in it (see :data:`graphmem.storage.sql.keyword.PERIOD_SELECT_MAX`), scored alike.

        The rarest word that matches anything always selects, even past the budget. When all
        the words together match at most the budget, the plain OR query runs (a small memory
        is ranked by the full query alone); when even the rarest matching word is over it (a
        million facts, a query of everyday words), :meth:`_all_common` selects instead.

        Lazy: later queries of the plan run only if the caller reads that far.
        """
        terms = ranking.fts_terms(query)
        if not terms:
            return
        among = None if period is None else reads.dated_in(conn, period, keyword.PERIOD_SELECT_MAX)
        if among is not None:
            sql, params, held = among
            if held:  # else nothing to rank: the walk of every match would find none of them
                yield from self._among(conn, terms, sql, params, held)
            return
        frequency, size = self._frequencies(conn, terms)
        ordered = sorted(terms, key=lambda t: frequency[t])
        matching = [t for t in ordered if frequency[t] > 0]
        if len(matching) > 1 and frequency[matching[0]] > keyword.RANKING_BUDGET:
            yield from self._all_common(conn, terms, matching, frequency, size)
            return
        selecting = keyword.rarest(terms, frequency)
        scoring = [t for t in terms if t not in selecting]
        if not scoring:
            yield from _rank(conn, _RANKED, {"match": _any(terms)})
            return
        chosen, rest = _any(selecting), _any(scoring)
        useful = _useful(scoring, frequency, size)
        if useful:
            both = f"{chosen} AND {_any(useful)}"
            yield from _rank(conn, _RANKED_SPLIT, {"both": both, "chosen": chosen})
        else:
            yield from _rank(conn, _RANKED, {"match": chosen})
        yield from _rank(conn, _RANKED, {"match": f"{rest} NOT {chosen}"})

    def windows(
        self, conn: SQLiteConnection, query: str, n: int
    ) -> dict[int, tuple[float, tuple[str, ...]]]:
        """The ``n`` best windows of turns matching ``query`` (graphmem.windows), ranked by its
        rarest words (:func:`graphmem.storage.sql.keyword.window_words`): window -> (bm25, higher is better; its facts)."""
        terms = ranking.fts_terms(query)
        if not terms:
            return {}
        frequency, _ = self._frequencies(conn, terms)
        selecting = keyword.window_words(terms, frequency)
        if not selecting:
            return {}
        rows = conn.execute(_WINDOWS_RANKED, [_any(selecting), n])
        return {int(seq): (-float(score), tuple(ids.split())) for seq, score, ids in rows}

    def _among(
        self,
        conn: SQLiteConnection,
        terms: list[str],
        among: str,
        params: Mapping[str, object],
        held: int,
    ) -> Iterator[tuple[int, float]]:
        """The matches among the ``held`` facts that ``among`` selects, ranked: by
        graphmem.storage.sqlite.bm25 from those facts alone when the words' lists are long
        against them (:data:`SCORE_HERE_RATIO`), else by FTS5 from a walk of every match."""
        frequency, _ = self._frequencies(conn, terms)
        if sum(frequency.values()) > SCORE_HERE_RATIO * held:
            scored = self._scorer.ranked(conn, among, params, terms, frequency)
            if scored is not None:
                yield from scored
                return
        match = {**params, "match": _any(terms)}
        yield from _rank(conn, _RANKED_AMONG.format(among=among), match)

    def _all_common(
        self,
        conn: SQLiteConnection,
        terms: list[str],
        ordered: list[str],
        frequency: dict[str, int],
        size: int,
    ) -> Iterator[tuple[int, float]]:
        """Every word matches more than the budget (a large memory, a query of everyday words):
        select the facts that have all of the rarest words, adding words (rarest first) until
        they match at most the budget together or none is left, as a common-terms query does
        when only frequent words are left. Each stage ranks by the full query's bm25, as above,
        and runs only if the caller reads past the one before: the facts with those words
        together; then the rarest word's other facts (selecting as it would alone: the words
        together may match fewer facts than the caller wants); then every other match."""
        first = ordered[0]
        together = [first]
        for term in ordered[1:]:
            together.append(term)
            # Counted, not estimated: words of one phrase ("office move") always come together.
            if self._count(conn, _all(together), size) <= keyword.RANKING_BUDGET:
                break
        chosen = _all(together)
        rest = _useful([t for t in terms if t not in together], frequency, size)
        if rest:
            both = f"{chosen} AND {_any(rest)}"
            yield from _rank(conn, _RANKED_SPLIT, {"both": both, "chosen": chosen})
        else:
            yield from _rank(conn, _RANKED, {"match": chosen})
        rest = _useful([t for t in terms if t != first], frequency, size)
        if rest:
            both = f"{first} AND {_any(rest)}"
            params = {"both": both, "chosen": first, "before": chosen}
            yield from _rank(conn, _RANKED_SPLIT_AFTER, params)
        else:
            yield from _rank(conn, _RANKED_OTHERS, {"match": first, "chosen": chosen})
        yield from _rank(conn, _RANKED_OTHERS, {"match": _any(terms), "chosen": first})

    def _frequencies(self, conn: SQLiteConnection, terms: list[str]) -> tuple[dict[str, int], int]:
        """Each term's number of matching facts, and the number of facts in the keyword index."""
        size, _ = bm25.averages(conn)
        return {t: self._count(conn, t, size) for t in terms}, size

    def _count(self, conn: SQLiteConnection, match: str, size: int) -> int:
        """The number of facts matching ``match`` (a word, or words that must come together),
        cached while the number of facts in the index (``size``) stays within
        :data:`DF_REFRESH_SHARE` of what it was when the cache was last cleared, whether facts
        were added or deleted. A count another thread is taking is waited for, not taken
        again."""
        while True:
            with self._lock:
                moved = abs(size - self._counted_at) > DF_REFRESH_SHARE * max(self._counted_at, 1)
                if moved or len(self._df) > DF_CACHE_SIZE:
                    self._df.clear()
                    self._counted_at = size
                known = self._df.get(match)
                if known is not None:
                    return known
                taking = self._counting.get(match)
                if taking is None:  # this thread counts
                    taking = self._counting[match] = threading.Event()
                    break
            # Another thread is counting: its count, once taken, is in the cache; if it failed
            # (its time limit) or the cache was cleared meanwhile, this thread counts.
            taking.wait()
        try:
            known = _count(conn, match)
            with self._lock:
                self._df[match] = known
            return known
        finally:
            with self._lock:
                del self._counting[match]
            taking.set()


def _any(terms: list[str]) -> str:
    return "(" + " OR ".join(terms) + ")"


def _useful(terms: list[str], frequency: dict[str, int], size: int) -> list[str]:
    """The scoring words worth adding to the selected facts' scores: a word in more than half
    the facts adds nothing (FTS5 floors its idf at 1e-6) but costs a walk of its long list, so
    it only counts in the last, full query."""
    return [t for t in terms if 2 * frequency[t] <= size]


def _all(terms: list[str]) -> str:
    return "(" + " AND ".join(terms) + ")"


def _count(conn: SQLiteConnection, match: str) -> int:
    """The number of facts matching an FTS5 expression."""
    return int(
        conn.execute("SELECT count(*) FROM facts_fts WHERE facts_fts MATCH ?", [match]).fetchone()[
            0
        ]
    )


def _rank(
    conn: SQLiteConnection, sql: str, params: Mapping[str, object]
) -> Iterator[tuple[int, float]]:
    cursor = conn.execute(sql, params)
    try:
        while rows := cursor.fetchmany(256):
            yield from rows
    finally:
        cursor.close()


#: The best windows of turns matching ``?`` (at most ``?``), with their facts: ranked first,
#: then joined, so that only those read their row.
_WINDOWS_RANKED: Final = """
SELECT s.seq, s.score, w.fact_ids FROM (
    SELECT rowid AS seq, bm25(windows_fts) AS score FROM windows_fts
    WHERE windows_fts MATCH ? ORDER BY 2 LIMIT ?
) s JOIN windows w ON w.seq = s.seq ORDER BY s.score
"""
_BM25: Final = f"bm25(facts_fts, {', '.join(str(w) for w in ranking.FTS_COLUMN_WEIGHTS)})"


#: ``(seq, bm25)`` of the facts matching ``:match``, best first.
_RANKED: Final = f"SELECT rowid, {_BM25} FROM facts_fts WHERE facts_fts MATCH :match ORDER BY 2"


#: The same for the facts matching ``:chosen``, scored as by ``:chosen OR (scoring words)``:
#: those matching ``:both`` (the chosen AND the scoring words) with its bm25, the rest with that
#: of ``:chosen`` alone. Both are the full query's bm25: each phrase of an expression counts
#: once, a phrase a fact lacks adds nothing, and the idf and length terms do not depend on the
#: expression. (``:chosen NOT (scoring words)`` for the rest would cost twice as much: FTS5
#: walks the common words' long lists for every fact.)
_RANKED_SPLIT: Final = f"""
    WITH also AS MATERIALIZED (
        SELECT rowid AS seq, {_BM25} AS score FROM facts_fts WHERE facts_fts MATCH :both
    )
    SELECT seq, score FROM also
    UNION ALL
    SELECT rowid, {_BM25} FROM facts_fts
    WHERE facts_fts MATCH :chosen AND rowid NOT IN (SELECT seq FROM also)
    ORDER BY 2
"""


#: ``_RANKED_SPLIT`` leaving out the facts matching ``:before`` (ranked already).
_RANKED_SPLIT_AFTER: Final = f"""
    WITH seen AS MATERIALIZED (
        SELECT rowid AS seq FROM facts_fts WHERE facts_fts MATCH :before
    ), also AS MATERIALIZED (
        SELECT rowid AS seq, {_BM25} AS score FROM facts_fts
        WHERE facts_fts MATCH :both AND rowid NOT IN (SELECT seq FROM seen)
    )
    SELECT seq, score FROM also
    UNION ALL
    SELECT rowid, {_BM25} FROM facts_fts
    WHERE facts_fts MATCH :chosen AND rowid NOT IN (SELECT seq FROM also)
    AND rowid NOT IN (SELECT seq FROM seen)
    ORDER BY 2
"""


#: The facts matching ``:match`` among those a query selects (``{among}``), by bm25. The unary
#: ``+`` keeps SQLite from looking each selected fact up in the keyword index (a seek in every
#: word's list, 0.4 ms a fact for common words): the matches are walked once and kept when
#: selected.
_RANKED_AMONG: Final = f"""
    WITH among AS MATERIALIZED ({{among}})
    SELECT rowid, {_BM25} FROM facts_fts WHERE facts_fts MATCH :match AND +rowid IN among
    ORDER BY 2
"""


#: The facts matching ``:match`` but not ``:chosen``, by the bm25 of ``:match``.
_RANKED_OTHERS: Final = f"""
    SELECT rowid, {_BM25} FROM facts_fts WHERE facts_fts MATCH :match
    AND rowid NOT IN (SELECT rowid FROM facts_fts WHERE facts_fts MATCH :chosen)
    ORDER BY 2
"""
